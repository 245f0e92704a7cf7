package mail

import "mailroom/internal/core"

// A team's limits may change after its creation (core.Service.UpdateLimits),
// and the inbox files are written as letters commit while state.json waits
// for a checkpoint: at start the files may hold letters that only the
// log's newer limits allow. So start-up checks and repairs the inboxes
// against the widest limits the team has had since its state was saved:
// its state's, widened by those of every state the log holds for it. The
// log's replay then sets its latest ones.

// loggedKey names one team: its name and creation time, so that a record
// of an earlier team of the same name does not count.
type loggedKey struct {
	team    string
	created int64
}

// loggedLimits are the widest inbox limits of the states the log holds,
// by team.
type loggedLimits map[loggedKey]core.Limits

// widestLogged reads records once, oldest first.
func widestLogged(records []walRecord) loggedLimits {
	out := loggedLimits{}
	for _, r := range records {
		if r.State == nil {
			continue
		}
		k := loggedKey{r.Team, r.Created.UnixNano()}
		l, ok := out[k]
		if !ok {
			l = r.State.Limits
		}
		out[k] = widen(l, r.State.Limits)
	}
	return out
}

// of returns st's limits widened by the log's for the same team.
func (w loggedLimits) of(st *core.TeamState) core.Limits {
	if l, ok := w[loggedKey{st.Name, st.CreatedAt.UnixNano()}]; ok {
		return widen(st.Limits, l)
	}
	return st.Limits
}

// widen returns l with each inbox limit at least n's.
func widen(l, n core.Limits) core.Limits {
	l.InboxMessages = max(l.InboxMessages, n.InboxMessages)
	l.InboxBytes = max(l.InboxBytes, n.InboxBytes)
	l.BodyChars = max(l.BodyChars, n.BodyChars)
	return l
}
