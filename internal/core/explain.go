package core

import (
	"fmt"
	"strings"
)

// Refusals that say what to do (docs/api.md, "A first hour without dead
// ends"): each names the cause that holds and the call that fixes it.
// They are built here, where the rules are, so every door (REST, MCP, an
// agent's tool) says the same words.

// NameRule says in words what a team or member name may be; it is the
// regular expression of ValidName, for people.
const NameRule = "a name is 1 to 24 characters: lowercase letters a-z, digits and hyphens, starting with a letter (e.g. reader)"

// NoSuchMember is the not_found refusal of a member the team does not
// have: it lists the members it has, so a misspelling can be corrected.
// The name asked for is not repeated (messages never carry input).
func NoSuchMember(members []string) *Error {
	if len(members) == 0 {
		return Errorf(CodeNotFound, "No such member.")
	}
	return Errorf(CodeNotFound, "No such member in this team; its members are %s.", strings.Join(members, ", "))
}

// noSuchMember is NoSuchMember for the team u works on.
func (u *unit) noSuchMember() *Error {
	names := make([]string, 0, len(u.st.Members))
	for _, m := range u.st.Members {
		names = append(names, m.Name)
	}
	return NoSuchMember(names)
}

// cannotTurn returns the member_unavailable refusal of a turn of m, naming
// the first cause that holds (running, closed, stopped, failed, out of
// turns) and its fix, or nil when m can take a turn.
func (u *unit) cannotTurn(m *MemberState) *Error {
	team := u.st.Name
	switch {
	case u.s.busy(team, m, u.now) || m.Status == StatusRunning:
		return Errorf(CodeMemberUnavailable,
			"%s is running a turn; wait for it to end (GET /api/v1/teams/%s/turns) or cancel it (POST /api/v1/teams/%s/turns/{turn_id}/cancel).",
			m.Name, team, team)
	case m.Status == StatusClosed:
		return Errorf(CodeMemberUnavailable,
			"%s is closed: it approved a shutdown request and takes no more turns; create a new team to work with it again.", m.Name)
	case m.Status == StatusStopped:
		return Errorf(CodeMemberUnavailable,
			"%s is stopped: its last turn was cut short (a shutdown or a turn that ended without an answer); look at it (GET /api/v1/teams/%s/turns), then reset it (POST /api/v1/teams/%s/members/%s/reset).",
			m.Name, team, team, m.Name)
	case m.Status == StatusFailed:
		return Errorf(CodeMemberUnavailable,
			"%s is failed: its last turn failed%s; reset it (POST /api/v1/teams/%s/members/%s/reset).",
			m.Name, u.lastFailure(m.Name), team, m.Name)
	case m.Status != StatusIdle:
		return Errorf(CodeMemberUnavailable, "%s is %s, not idle.", m.Name, m.Status)
	case m.Name != LeadName && m.Turns >= u.st.Limits.Turns:
		return Errorf(CodeMemberUnavailable,
			"%s is out of turns: it has taken %d of the team's %d (limits.turns); raise the limit (PATCH /api/v1/teams/%s with {\"limits\":{\"turns\":%d}}).",
			m.Name, m.Turns, u.st.Limits.Turns, team, u.st.Limits.Turns+1)
	}
	return nil
}

// wakeHeldText says why m's wake is held (its last turn's end and failure
// reason) and how to release it.
func (u *unit) wakeHeldText(m *MemberState) string {
	return fmt.Sprintf("its wake is held because its last turn did not end answered%s; look at the turn, then reset the member (POST /api/v1/teams/%s/members/%s/reset) or set wake again (PATCH .../members/%s).",
		u.lastFailure(m.Name), u.st.Name, m.Name, m.Name)
}

// lastFailure describes how member's newest turn document ended, as
// " (turn reader-t2 ended failed: the reason)", or "" when there is
// none to show or it cannot be read. The reason is the turn's own text,
// cut short; it is shown to whoever may see the team's turns.
func (u *unit) lastFailure(member string) string {
	docs, err := u.tx.Turns()
	if err != nil {
		return ""
	}
	for i := len(docs) - 1; i >= 0; i-- {
		d := docs[i]
		if d.Member != member {
			continue
		}
		if d.Status == TurnRunning || d.Status == TurnAnswered {
			return ""
		}
		why := ""
		if d.Status == TurnFailed && d.Text != "" {
			why = ": " + truncate(d.Text, 200)
		}
		return fmt.Sprintf(" (turn %s ended %s%s)", d.TurnID, d.Status, why)
	}
	return ""
}
