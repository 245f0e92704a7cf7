package mail

import "mailroom/internal/core"

// loggedLimits returns st's limits widened by those of every state the
// log holds for the same team. A team's limits may change after its
// creation (core.Service.UpdateLimits), and the inbox files are written
// as letters commit while state.json waits for a checkpoint: at start the
// files may hold letters that only the log's newer limits allow. The
// inboxes are validated against the widest limits the team has had since
// its state was saved; the log's replay then sets its latest ones.
func loggedLimits(st *core.TeamState, records []walRecord) core.Limits {
	l := st.Limits
	for _, r := range records {
		if r.State == nil || r.Team != st.Name || !r.Created.Equal(st.CreatedAt) {
			continue
		}
		n := r.State.Limits
		l.InboxMessages = max(l.InboxMessages, n.InboxMessages)
		l.InboxBytes = max(l.InboxBytes, n.InboxBytes)
		l.BodyChars = max(l.BodyChars, n.BodyChars)
	}
	return l
}
