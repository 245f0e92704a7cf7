package scenario

import (
	"context"
	"fmt"
	"strconv"
	"strings"

	"mailroom/internal/core"
)

// lettersValid checks what holds of every letter in the lesson team,
// whoever wrote it, the script or a model: each inbox numbers its letters
// <member>-1, -2, ... in order; each letter is addressed to the inbox's
// owner by another member of the team; and each protocol letter belongs to
// a request of the team, a request letter travelling from the request's
// sender to its target, a response letter back, of the request's kind.
func (x *run) lettersValid(ctx context.Context) {
	members := map[string]bool{}
	for _, m := range lessonTeam(x.team).Members {
		members[m.Name] = true
	}
	reqs, err := x.svc.Requests(ctx, x.team)
	if err != nil {
		x.check("letters_valid", false, "the requests of team %s could not be read: %s", x.team, core.ErrorMessage(err))
		return
	}
	byID := map[string]core.Request{}
	for _, r := range reqs {
		byID[r.ID] = r
	}
	var problems []string
	total, protocol := 0, 0
	for _, owner := range []string{core.LeadName, "reader", "reviewer"} {
		box, err := x.svc.Inbox(ctx, x.team, owner)
		if err != nil {
			problems = append(problems, fmt.Sprintf("the inbox of %s could not be read", owner))
			continue
		}
		for i, l := range box {
			total++
			if want := owner + "-" + strconv.Itoa(i+1); l.ID != want {
				problems = append(problems, fmt.Sprintf("%s is letter %d of %s's inbox (want id %s)", l.ID, i+1, owner, want))
			}
			if l.Recipient != owner || !members[l.Sender] || l.Sender == owner {
				problems = append(problems, fmt.Sprintf("%s: from %q to %q in %s's inbox", l.ID, l.Sender, l.Recipient, owner))
			}
			data, ok := protocolData(l.Body)
			if !ok {
				continue
			}
			protocol++
			if p := letterProblem(l, data, byID); p != "" {
				problems = append(problems, l.ID+": "+p)
			}
		}
	}
	x.check("letters_valid", len(problems) == 0,
		"%d letter(s), %d of them protocol letters, in team %s: %s", total, protocol, x.team, orNone(strings.Join(problems, "; ")))
}

// letterProblem says what is wrong with protocol letter l (its decoded
// body data) against the team's requests, or "".
func letterProblem(l core.Message, data map[string]any, byID map[string]core.Request) string {
	typ, _ := data["type"].(string)
	id, _ := data["request_id"].(string)
	r, ok := byID[id]
	if !ok {
		return fmt.Sprintf("%s names request %q, which the team does not have", orNone(typ), id)
	}
	kind, dir, found := strings.Cut(typ, "_")
	if !found || kind != r.Kind {
		return fmt.Sprintf("type %q does not fit %s, a %s request", typ, id, r.Kind)
	}
	switch dir {
	case "request":
		if l.Sender != r.Sender || l.Recipient != r.Target {
			return fmt.Sprintf("the request letter of %s travels %s → %s, the request %s → %s", id, l.Sender, l.Recipient, r.Sender, r.Target)
		}
	case "response":
		if l.Sender != r.Target || l.Recipient != r.Sender {
			return fmt.Sprintf("the response letter of %s travels %s → %s, the request %s → %s", id, l.Sender, l.Recipient, r.Sender, r.Target)
		}
		if r.Reply == nil {
			return fmt.Sprintf("a response letter of %s, which has no reply", id)
		}
	default:
		return fmt.Sprintf("type %q is neither a request nor a response", typ)
	}
	return ""
}

// repliesMatched checks that every request of the lesson team that got a
// reply was matched by its sender: no reply is left pending at the end.
func (x *run) repliesMatched(ctx context.Context) {
	reqs, err := x.svc.Requests(ctx, x.team)
	if err != nil {
		x.check("replies_matched", false, "the requests of team %s could not be read: %s", x.team, core.ErrorMessage(err))
		return
	}
	ok := true
	var parts []string
	for _, r := range reqs {
		replied := r.Reply != nil
		if replied && r.Status == core.RequestPending {
			ok = false
		}
		parts = append(parts, fmt.Sprintf("%s %s %s (replied %t)", r.ID, r.Kind, r.Status, replied))
	}
	x.check("replies_matched", ok, "every reply was matched by the request's sender: %s", orNone(strings.Join(parts, ", ")))
}
