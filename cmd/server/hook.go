package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"
	"unicode/utf8"

	"mailroom/client"
	"mailroom/internal/core"
)

// `mailroom hook` is a command hook of Claude Code (docs/hooks.md): it
// reads one hook event on standard input and answers with the member's
// unread letters in the JSON shape that event takes, so that mail lands
// in the agent's context where it works. A hook must never break the
// session it runs in: whatever fails is one line on standard error and
// exit 0 with nothing on standard output.

// Bounds of one hook output: the rest of the unread letters stays unread
// and comes with the next event.
const (
	hookMaxLetters = 20
	hookMaxBytes   = 16 << 10
	// hookMaxWait bounds --wait.
	hookMaxWait = 600
	// hookMaxInput bounds the event read from standard input.
	hookMaxInput = 1 << 20
	// pollWait is one long-poll's wait, the server's bound (core.MaxWait).
	pollWait = int(core.MaxWait / time.Second)
	// hookRequestTimeout bounds a request that does not wait for mail.
	hookRequestTimeout = 10 * time.Second
)

// hookEvent is the part of Claude Code's hook input the hook reads: the
// event's name and, for Stop and SubagentStop, whether Claude is already
// continuing because a Stop hook blocked.
type hookEvent struct {
	HookEventName  string `json:"hook_event_name"`
	StopHookActive bool   `json:"stop_hook_active"`
}

// hookContextOutput is the answer of SessionStart, UserPromptSubmit and
// PostToolUse: text added to the model's context.
type hookContextOutput struct {
	HookSpecificOutput hookSpecific `json:"hookSpecificOutput"`
}

type hookSpecific struct {
	HookEventName     string `json:"hookEventName"`
	AdditionalContext string `json:"additionalContext"`
}

// hookBlockOutput is the answer of Stop and SubagentStop that keeps the
// agent going, reason being what it is told.
type hookBlockOutput struct {
	Decision string `json:"decision"`
	Reason   string `json:"reason"`
}

// runHook is `mailroom hook`. Its error is always nil: a failure is
// reported on stderr and the exit code stays 0.
func runHook(ctx context.Context, args []string, getenv func(string) string, stdin io.Reader, stdout, stderr io.Writer) error {
	out, err := hook(ctx, args, getenv, stdin)
	if err != nil {
		fmt.Fprintf(stderr, "mailroom hook: %s\n", oneLine(err.Error()))
		return nil
	}
	if out != nil {
		data, err := json.Marshal(out)
		if err != nil {
			fmt.Fprintf(stderr, "mailroom hook: %s\n", oneLine(err.Error()))
			return nil
		}
		_, _ = stdout.Write(append(data, '\n'))
	}
	return nil
}

// oneLine keeps an error on one line of standard error.
func oneLine(s string) string { return strings.Join(strings.Fields(s), " ") }

// hook returns what to print (nil: nothing) for the event on stdin.
func hook(ctx context.Context, args []string, getenv func(string) string, stdin io.Reader) (any, error) {
	fs := flag.NewFlagSet("hook", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	wait := fs.Int("wait", 0, "for Stop and SubagentStop: seconds (0–600) to wait for a letter when none is unread")
	if err := fs.Parse(args); err != nil {
		return nil, fmt.Errorf("bad arguments: %w", err)
	}
	if fs.NArg() > 0 || *wait < 0 || *wait > hookMaxWait {
		return nil, fmt.Errorf("usage: hook [--wait SECONDS], SECONDS 0 to %d", hookMaxWait)
	}
	data, err := io.ReadAll(io.LimitReader(stdin, hookMaxInput+1))
	if err != nil {
		return nil, fmt.Errorf("read the hook event: %w", err)
	}
	if len(data) > hookMaxInput {
		return nil, errors.New("the hook event on standard input is over 1 MiB")
	}
	var ev hookEvent
	if err := json.Unmarshal(data, &ev); err != nil {
		return nil, errors.New("standard input is not a hook event (a JSON object)")
	}
	block := false
	switch ev.HookEventName {
	case "SessionStart", "UserPromptSubmit", "PostToolUse":
	case "Stop", "SubagentStop":
		block = true
	default:
		return nil, nil // no mail for other events
	}
	mc, err := dialMember(ctx, getenv)
	if err != nil {
		return nil, err
	}
	letters, err := mc.unread(ctx, 0)
	if err != nil {
		return nil, err
	}
	if len(letters) == 0 && block && !ev.StopHookActive && *wait > 0 {
		deadline := time.Now().Add(time.Duration(*wait) * time.Second)
		for len(letters) == 0 {
			left := int(time.Until(deadline).Round(time.Second) / time.Second)
			if left <= 0 {
				break
			}
			if letters, err = mc.unread(ctx, min(left, pollWait)); err != nil {
				return nil, err
			}
		}
	}
	if len(letters) == 0 {
		return nil, nil
	}
	text, shown := renderLetters(letters, hookMaxLetters, hookMaxBytes)
	// Marked read before the answer is written: a failure then leaves
	// standard output empty, and the letters stay unread.
	if err := mc.markRead(ctx, letters[shown-1].ID); err != nil {
		return nil, err
	}
	if block {
		return hookBlockOutput{Decision: "block", Reason: text}, nil
	}
	return hookContextOutput{HookSpecificOutput: hookSpecific{HookEventName: ev.HookEventName, AdditionalContext: text}}, nil
}

// memberClient is the generated client as one member.
type memberClient struct {
	c            *client.ClientWithResponses
	team, member string
}

// dialMember makes a client from MAILROOM_URL and MAILROOM_TOKEN and asks
// the server whose token it is.
func dialMember(ctx context.Context, getenv func(string) string) (*memberClient, error) {
	base, token := strings.TrimRight(getenv("MAILROOM_URL"), "/"), getenv("MAILROOM_TOKEN")
	if base == "" || token == "" {
		return nil, errors.New("MAILROOM_URL and MAILROOM_TOKEN must be set (the server's URL and a member token)")
	}
	// No overall client timeout: a held read lasts up to its wait. Each
	// call bounds itself (request).
	c, err := client.NewClientWithResponses(base+"/api/v1", client.Bearer(token), client.WithHTTPClient(&http.Client{}))
	if err != nil {
		return nil, fmt.Errorf("MAILROOM_URL: %w", err)
	}
	rctx, cancel := context.WithTimeout(ctx, hookRequestTimeout)
	defer cancel()
	res, err := c.GetMeWithResponse(rctx)
	if err != nil {
		return nil, fmt.Errorf("ask the server who the token is: %w", err)
	}
	if res.JSON200 == nil {
		return nil, apiError("who the token is", res.StatusCode(), res.Body)
	}
	if res.JSON200.Member == nil || res.JSON200.Team == nil {
		return nil, errors.New("MAILROOM_TOKEN is the admin token; a member token is needed")
	}
	return &memberClient{c: c, team: *res.JSON200.Team, member: *res.JSON200.Member}, nil
}

// apiError names a refused call by its problem document's code and detail.
func apiError(what string, status int, body []byte) error {
	var p struct {
		Code   string `json:"code"`
		Detail string `json:"detail"`
	}
	if json.Unmarshal(body, &p) == nil && p.Code != "" {
		return fmt.Errorf("%s: %d %s: %s", what, status, p.Code, p.Detail)
	}
	return fmt.Errorf("%s: HTTP %d", what, status)
}

// unread returns the letters after the member's read cursor, held by the
// server up to wait seconds when there are none.
func (m *memberClient) unread(ctx context.Context, wait int) ([]client.Message, error) {
	yes := true
	params := &client.GetInboxParams{Unread: &yes}
	if wait > 0 {
		params.Wait = &wait
	}
	return m.inbox(ctx, params, wait)
}

// inbox is one GET of the member's inbox with params, which may hold it
// up to wait seconds.
func (m *memberClient) inbox(ctx context.Context, params *client.GetInboxParams, wait int) ([]client.Message, error) {
	rctx, cancel := context.WithTimeout(ctx, hookRequestTimeout+time.Duration(wait)*time.Second)
	defer cancel()
	res, err := m.c.GetInboxWithResponse(rctx, m.team, m.member, params)
	if err != nil {
		return nil, fmt.Errorf("read the inbox: %w", err)
	}
	if res.JSON200 == nil {
		return nil, apiError("read the inbox", res.StatusCode(), res.Body)
	}
	return res.JSON200.Messages, nil
}

// markRead moves the member's cursor through letter id.
func (m *memberClient) markRead(ctx context.Context, id string) error {
	rctx, cancel := context.WithTimeout(ctx, hookRequestTimeout)
	defer cancel()
	res, err := m.c.MarkReadWithResponse(rctx, m.team, m.member, client.MarkReadJSONRequestBody{Through: id})
	if err != nil {
		return fmt.Errorf("mark letters read: %w", err)
	}
	if res.JSON200 == nil {
		return apiError("mark letters read", res.StatusCode(), res.Body)
	}
	return nil
}

// renderLetters writes letters for a model, one paragraph each, oldest
// first: at most maxLetters, and at most maxBytes once encoded as a JSON
// string (the whole output keeps within it, its envelope included). The
// first letter always comes, cut to fit. It returns the text and how many
// letters it shows; a last paragraph says how many more are waiting.
func renderLetters(letters []client.Message, maxLetters, maxBytes int) (string, int) {
	// Room kept for the output's envelope and the closing note.
	const reserve = 400
	budget := maxBytes - reserve
	var b strings.Builder
	used, shown := 0, 0
	for _, l := range letters {
		if shown == maxLetters {
			break
		}
		p := letterParagraph(l)
		if shown > 0 {
			p = "\n\n" + p
		}
		n := jsonLen(p)
		if used+n > budget {
			if shown > 0 {
				break
			}
			// Shortened in proportion to its encoding, until it fits.
			for n > budget {
				p = cut(p, len(p)*budget/n-1)
				n = jsonLen(p)
			}
		}
		b.WriteString(p)
		used += n
		shown++
	}
	if rest := len(letters) - shown; rest > 0 {
		fmt.Fprintf(&b, "\n\n(%d more unread letters are waiting; they come with the next event, or read them with the read_inbox tool.)", rest)
	}
	return b.String(), shown
}

// jsonLen is the length of s encoded as a JSON string, quotes left out.
func jsonLen(s string) int {
	data, _ := json.Marshal(s) // a string always encodes
	return len(data) - 2
}

// cut shortens s to at most n bytes at a character boundary, marking the cut.
func cut(s string, n int) string {
	if len(s) <= n {
		return s
	}
	n = max(n-len("…"), 0)
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n] + "…"
}

// protocolLetter is the JSON of a protocol letter's body after its prefix
// (core.EncodeRequestLetter, core.EncodeReplyLetter).
type protocolLetter struct {
	Type      string `json:"type"`
	RequestID string `json:"request_id"`
	Payload   string `json:"payload"`
	Approve   *bool  `json:"approve"`
	Feedback  string `json:"feedback"`
}

// letterParagraph is one letter for a model: who, id, body; a protocol
// letter says what it is, its payload and which tool answers it.
func letterParagraph(l client.Message) string {
	head := fmt.Sprintf("Mail from %s (%s): ", l.Sender, l.ID)
	rest, ok := strings.CutPrefix(l.Body, core.ProtocolPrefix)
	var p protocolLetter
	if !ok || json.Unmarshal([]byte(rest), &p) != nil || p.RequestID == "" {
		return head + l.Body
	}
	switch {
	case p.Type == "plan_request":
		return head + fmt.Sprintf("a plan request (request id %s): %s asks you to approve this plan: %q. Answer it with the reply_request tool (request_id %q, approve true or false, optional feedback).",
			p.RequestID, l.Sender, p.Payload, p.RequestID)
	case p.Type == "shutdown_request":
		return head + fmt.Sprintf("a shutdown request (request id %s): %s asks you to shut down: %q. Answer it with the reply_request tool (request_id %q, approve true to shut down, false to keep working, optional feedback).",
			p.RequestID, l.Sender, p.Payload, p.RequestID)
	case strings.HasSuffix(p.Type, "_response") && p.Approve != nil:
		verdict := "rejected"
		if *p.Approve {
			verdict = "approved"
		}
		kind := strings.TrimSuffix(p.Type, "_response")
		fb := ""
		if p.Feedback != "" {
			fb = fmt.Sprintf(" Feedback: %q.", p.Feedback)
		}
		return head + fmt.Sprintf("the reply to your %s request (request id %s): %s.%s Call the check_replies tool to record it.", kind, p.RequestID, verdict, fb)
	}
	return head + l.Body
}
