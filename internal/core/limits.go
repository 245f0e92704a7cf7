package core

import (
	"context"
	"fmt"
	"slices"
)

// LimitsUpdate names the limits of a team to change; a nil field keeps
// its limit. Every limit may be raised. What is stored was written within
// the limits and is checked against them again when it is read back
// (docs/spec.md §4.2, §13.3), so a limit that bounds what the team holds
// (its inboxes, bodies, payloads, feedback, histories, requests, live
// reservations and tasks) may be lowered only as far as what it holds
// now (limit_below_usage); the limits that bound what comes next (turns,
// budgets, tool calls, waits, the workspace quota) may be lowered freely.
type LimitsUpdate struct {
	InboxMessages      *int
	InboxBytes         *int
	BodyChars          *int
	PayloadChars       *int
	FeedbackChars      *int
	HistoryEntries     *int
	Requests           *int
	Turns              *int
	ModelTokens        *int64
	PermissionTimeoutS *int
	Tasks              *int
	ToolCalls          *int
	WakeDelayMS        *int
	ModelRequests      *int
	WorkspaceBytes     *int64
	WorkspaceFiles     *int
	Reservations       *int
}

// UpdateLimits changes a team's limits (the admin only) and, when
// something changed, announces the team with a team event, so that
// whoever built something from the old limits (an MCP session's tool
// schemas, the page) builds it again.
func (s *Service) UpdateLimits(ctx context.Context, team string, upd LimitsUpdate) (TeamView, error) {
	if err := CheckAdmin(ctx); err != nil {
		return TeamView{}, err
	}
	var v TeamView
	err := s.update(ctx, team, func(u *unit) error {
		old := u.st.Limits
		l := old
		for _, f := range []struct{ dst, src *int }{
			{&l.Requests, upd.Requests}, {&l.Turns, upd.Turns}, {&l.PermissionTimeoutS, upd.PermissionTimeoutS}, {&l.Tasks, upd.Tasks}, {&l.ToolCalls, upd.ToolCalls}, {&l.WakeDelayMS, upd.WakeDelayMS},
			{&l.ModelRequests, upd.ModelRequests}, {&l.Reservations, upd.Reservations},
			{&l.InboxMessages, upd.InboxMessages}, {&l.InboxBytes, upd.InboxBytes}, {&l.BodyChars, upd.BodyChars},
			{&l.PayloadChars, upd.PayloadChars}, {&l.FeedbackChars, upd.FeedbackChars}, {&l.HistoryEntries, upd.HistoryEntries},
		} {
			if f.src != nil {
				*f.dst = *f.src
			}
		}
		if upd.ModelTokens != nil {
			l.ModelTokens = *upd.ModelTokens
		}
		// The workspace quota bounds what is written next; a workspace
		// already past a lowered one keeps its files and runs nothing
		// until it is within it again.
		if upd.WorkspaceBytes != nil {
			l.WorkspaceBytes = *upd.WorkspaceBytes
		}
		if upd.WorkspaceFiles != nil {
			l.WorkspaceFiles = *upd.WorkspaceFiles
		}
		if err := l.validate(); err != nil {
			return err
		}
		if err := u.checkLowered(old, l); err != nil {
			return err
		}
		u.st.Limits = l
		v = u.teamView(nil)
		if l != old {
			u.emit(EventTeam, v)
		}
		return nil
	})
	if err != nil {
		return TeamView{}, err
	}
	return v, nil
}

// checkLowered refuses, with limit_below_usage naming the first such
// limit, limits lowered from old to l below what the team holds now: a
// team whose stored data broke its own limits would fail validation when
// read back. Raising, and lowering the limits of what comes next, are
// never refused.
func (u *unit) checkLowered(old, l Limits) error {
	type held struct {
		name      string
		old, next int
		usage     func() (int, error)
	}
	checks := []held{
		{"inbox_messages", old.InboxMessages, l.InboxMessages, func() (int, error) { return u.maxInbox(func(n, _ int, _ []Message) int { return n }) }},
		{"inbox_bytes", old.InboxBytes, l.InboxBytes, func() (int, error) { return u.maxInbox(func(_, b int, _ []Message) int { return b }) }},
		{"body_chars", old.BodyChars, l.BodyChars, func() (int, error) {
			return u.maxInbox(func(_, _ int, items []Message) int {
				most := 0
				for _, m := range items {
					most = max(most, Length(m.Body))
				}
				return most
			})
		}},
		{"payload_chars", old.PayloadChars, l.PayloadChars, func() (int, error) {
			most := 0
			for _, r := range u.st.Requests {
				most = max(most, Length(r.Payload))
			}
			return most, nil
		}},
		{"feedback_chars", old.FeedbackChars, l.FeedbackChars, func() (int, error) {
			most := 0
			for _, r := range u.st.Requests {
				if r.Reply != nil {
					most = max(most, Length(r.Reply.Feedback))
				}
			}
			return most, nil
		}},
		{"history_entries", old.HistoryEntries, l.HistoryEntries, func() (int, error) {
			most := 0
			for _, m := range u.st.Members {
				most = max(most, len(m.History))
			}
			return most, nil
		}},
		{"requests", old.Requests, l.Requests, func() (int, error) { return len(u.st.Requests), nil }},
		{"reservations", old.Reservations, l.Reservations, func() (int, error) { return len(u.liveReservations()), nil }},
		{"tasks", old.Tasks, l.Tasks, func() (int, error) {
			tasks, err := u.tx.Tasks()
			return len(tasks), asStoreError(err)
		}},
	}
	for _, c := range checks {
		if c.next >= c.old {
			continue
		}
		n, err := c.usage()
		if err != nil {
			return err
		}
		if c.next < n {
			return Errorf(CodeLimitBelowUsage, "limits.%s cannot be lowered below what the team holds now (%d); nothing was changed.", c.name, n)
		}
	}
	return nil
}

// maxInbox is the largest of measure over the members' inboxes, given
// each inbox's number of letters, its size in the lesson's bytes and its
// letters.
func (u *unit) maxInbox(measure func(letters, bytes int, items []Message) int) (int, error) {
	most := 0
	for _, m := range u.st.Members {
		items, err := u.tx.LoadInbox(m.Name)
		if err != nil {
			return 0, asStoreError(err)
		}
		data, err := u.tx.InboxBytes(m.Name)
		if err != nil {
			return 0, asStoreError(err)
		}
		most = max(most, measure(len(items), len(data), slices.Clip(items)))
	}
	return most, nil
}

// inboxFull is the refusal of a letter that does not fit its recipient's
// inbox: it names the limit it hit and the way out (docs/api.md, "Mail
// that stays useful"): the admin raises the limit after creation.
func inboxFull(limit string, value int) *Error {
	cause := ErrInboxCount
	what := fmt.Sprintf("it holds limits.%s (%d) letters", limit, value)
	if limit == "inbox_bytes" {
		cause = ErrInboxTooLarge
		what = fmt.Sprintf("the letter would take it past limits.%s (%d bytes)", limit, value)
	}
	return &Error{Code: CodeInboxFull, Err: cause, Message: fmt.Sprintf("The recipient's inbox is full: %s; old messages are not overwritten and nothing was written. "+
		"The admin may raise the limit: PATCH /api/v1/teams/{team} with {\"limits\": {\"%s\": N}}.", what, limit)}
}
