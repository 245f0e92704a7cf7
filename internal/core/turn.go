package core

import (
	"context"
	"errors"
)

// TurnFunc runs one model turn over a copy of the member's committed
// history and returns the full new history. It runs outside the team lock,
// so a slow model never blocks mail or other members.
type TurnFunc func(ctx context.Context, history []Entry) (TurnOutcome, error)

// ErrTurnOutcome is the cause when a turn returns an unbounded history or
// an unknown status (E-TURN, SPEC §4.6 step 4, §13.7).
var ErrTurnOutcome = errors.New("the turn did not return a bounded history and a known status")

// RunTurn runs one turn of member (run_teammate, SPEC §4.6). The member is
// claimed under the lock (active, running, turns+1), fn runs outside it,
// and the outcome is committed under it: answered → idle with the new
// history; call_limit → stopped with the new history; an error or a
// failed outcome → failed with the old history. A member that is busy, not
// idle, or out of turns is refused with member_unavailable and fn never
// runs (SPEC §13.7); lead is never refused for its turn count (§13.9).
func (s *Service) RunTurn(ctx context.Context, teamName, member string, fn TurnFunc) (TurnResult, error) {
	t, err := s.lockTeam(teamName)
	if err != nil {
		return TurnResult{}, err
	}
	m := t.member(member)
	if m == nil {
		t.mu.Unlock()
		return TurnResult{}, Errorf(CodeNotFound, "No such member.")
	}
	if t.active[member] || m.Status != StatusIdle || (member != LeadName && m.Turns >= t.st.Limits.Turns) {
		t.mu.Unlock()
		return TurnResult{}, Errorf(CodeMemberUnavailable, "The member is busy, not idle, closed or out of turns.")
	}
	if err := s.clearStaleIntent(ctx, t); err != nil {
		t.mu.Unlock()
		return TurnResult{}, err
	}
	history := cloneEntries(m.History)
	m.Status, m.Turns = StatusRunning, m.Turns+1
	if err := s.store.SaveTeam(ctx, t.st); err != nil {
		m.Status, m.Turns = StatusIdle, m.Turns-1
		t.mu.Unlock()
		return TurnResult{}, StorageError(err)
	}
	t.active[member] = true
	s.emit("member", t.st.Name, s.memberViewLocked(ctx, t, m))
	limits := t.st.Limits
	t.mu.Unlock()

	committed := false
	defer func() {
		if committed {
			return
		}
		// Only a panic gets here: release occupancy, mark the member
		// stopped as the lesson's finally clause does, and re-panic.
		t.mu.Lock()
		t.active[member] = false
		if m := t.member(member); m.Status == StatusRunning {
			m.Status = StatusStopped
			_ = s.store.SaveTeam(context.WithoutCancel(ctx), t.st)
		}
		t.mu.Unlock()
	}()

	outcome, runErr := fn(ctx, history)
	if runErr == nil && (len(outcome.Messages) > limits.HistoryEntries || !knownTurnStatus(outcome.Status)) {
		runErr = &Error{Code: CodeValidation, Message: "The turn did not return a bounded history.", Err: ErrTurnOutcome}
	}

	t.mu.Lock()
	defer t.mu.Unlock()
	committed = true
	m = t.member(member)
	result := TurnResult{Member: member}
	switch {
	case runErr != nil:
		m.Status = StatusFailed
		result.Status, result.Text = TurnFailed, failureText(runErr)
		s.log.WarnContext(ctx, "turn failed", "team", t.st.Name, "member", member, "err", runErr)
	case outcome.Status == TurnFailed:
		m.Status = StatusFailed
		result.Status, result.Text = TurnFailed, truncate(outcome.Text, limits.BodyChars)
	default:
		m.History = cloneEntries(outcome.Messages)
		m.Status = StatusStopped
		if outcome.Status == TurnAnswered {
			m.Status = StatusIdle
		}
		result.Status, result.Text = outcome.Status, truncate(outcome.Text, limits.BodyChars)
	}
	t.active[member] = false
	saveErr := s.store.SaveTeam(context.WithoutCancel(ctx), t.st)
	s.emit("turn", t.st.Name, result)
	s.emit("member", t.st.Name, s.memberViewLocked(ctx, t, m))
	if saveErr != nil {
		return TurnResult{}, StorageError(saveErr)
	}
	return result, nil
}

func knownTurnStatus(s string) bool {
	return s == TurnAnswered || s == TurnCallLimit || s == TurnFailed
}

// failureText names what failed, as the lesson names the exception class:
// the domain error code, or "error" for anything else. Internal error text
// is never returned.
func failureText(err error) string {
	if code := ErrorCode(err); code != CodeInternal {
		return string(code)
	}
	return "error"
}

func truncate(s string, n int) string {
	i := 0
	for pos := range s {
		if i == n {
			return s[:pos]
		}
		i++
	}
	return s
}
