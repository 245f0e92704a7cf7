package core

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"runtime/debug"
	"time"
)

// TurnFunc runs one model turn over a copy of the member's committed
// history and returns the full new history. It runs outside the team lock,
// so a slow model never blocks mail or other members.
type TurnFunc func(ctx context.Context, history []Entry) (TurnOutcome, error)

// ErrTurnOutcome is the cause when a turn returns an unbounded history or
// an unknown status (E-TURN, docs/spec.md §4.6 step 4, §13.7).
var ErrTurnOutcome = errors.New("the turn did not return a bounded history and a known status")

// ErrTurnInterrupted is the cause logged when a turn's context ended
// before the turn did (the server is stopping, or its caller gave up).
var ErrTurnInterrupted = errors.New("the turn was interrupted")

// InterruptedText is the text of the result of an interrupted turn.
const InterruptedText = "interrupted"

// Bounds of what a member's history may hold. The lessons bound a history
// only by its number of entries; these bound it in bytes and in JSON
// nesting as well, so that whatever a turn stores can be loaded again:
// the team's state is one JSON document, and a decoder refuses nesting
// beyond 10,000 levels, which a tool input alone could otherwise reach.
// They are constants rather than team limits because they protect the
// storage, not a lesson rule: a team has no reason to raise them.
const (
	// MaxEntryBytes bounds one history entry, as JSON. It leaves room
	// for the largest tool result the tools produce (64 KiB of file or
	// program output, even when every byte must be escaped).
	MaxEntryBytes = 512 << 10
	// MaxHistoryBytes bounds a member's whole history, as JSON.
	MaxHistoryBytes = 4 << 20
	// MaxInputDepth bounds the nesting of a tool input kept in history.
	// The tools take flat objects; anything deeper was refused by them.
	MaxInputDepth = 32
)

// RunTurn runs one turn of member (run_teammate, docs/spec.md §4.6): it is
// BeginTurn followed by Run, with the document's model left as scripted.
func (s *Service) RunTurn(ctx context.Context, teamName, member string, fn TurnFunc) (TurnResult, error) {
	tr, err := s.BeginTurn(ctx, teamName, member, ModelRef{})
	if err != nil {
		return TurnResult{}, err
	}
	doc, err := tr.Run(ctx, fn)
	if err != nil {
		return TurnResult{}, err
	}
	return TurnResult{Member: doc.Member, Status: doc.Status, Text: doc.Text}, nil
}

// Run runs a claimed turn (BeginTurn) once. The member was claimed in a
// unit of work (its lease taken, running, turns+1); fn runs outside any,
// with the turn reachable through TurnFrom(ctx), and the outcome is
// committed in another, which releases the lease:
//
//   - answered → idle with the new history; call_limit → stopped with the
//     new history; budget_exhausted (the loop stopped before a model
//     request because the team's tokens were spent) → idle with the new
//     history, which ends at the same boundary as call_limit's;
//   - an error, a failed outcome, or an outcome whose history is out of
//     bounds (entries, bytes, nesting: see checkHistory) → failed with the
//     old history (E-TURN);
//   - a model request that failed after the provider's retries (a
//     ModelError) → failed with its text, the old history kept and the
//     member idle: the provider failed, not the member;
//   - a panic in fn → failed with PanicText and the old history, as an
//     error is: the panic is recovered and logged with its stack, so
//     that no turn, wherever it runs, ends the process;
//   - an interrupted turn (ctx ended and fn returned an error) → failed
//     with text "interrupted", or cancelled when the admin cancelled it
//     (CancelTurn); the old history is kept and the member is idle again,
//     since the host cut the turn, not the member; the attempt still
//     counts against the turn limit, as every attempt does, and its side
//     effects (mail sent) are not undone.
//
// When the outcome cannot be committed nothing of it is stored (see
// rollbackTurn) and the call fails with storage_failed; the document
// still records the turn, as failed.
//
// A member that is busy, not idle, or out of turns is refused by
// BeginTurn with member_unavailable and fn never runs (docs/spec.md
// §13.7); lead is never refused for its turn count (§13.9).
func (tr *Turn) Run(ctx context.Context, fn TurnFunc) (doc TurnDoc, runFailure error) {
	s := tr.s
	member := tr.doc.Member
	runCtx, cancel := context.WithCancelCause(context.WithValue(ctx, turnKey{}, tr))
	defer cancel(nil)

	tr.mu.Lock()
	if tr.ran {
		tr.mu.Unlock()
		return TurnDoc{}, Errorf(CodeValidation, "The turn has already run.")
	}
	tr.ran, tr.cancel = true, cancel
	if tr.cancelRequested {
		cancel(errTurnCancelled)
	}
	tr.mu.Unlock()

	var history []Entry
	var limits Limits
	viewErr := s.view(ctx, tr.team, true, func(u *unit) error {
		if teamIncarnation(u.st) != tr.inc {
			return teamReplaced()
		}
		m := u.member(member)
		if m == nil {
			return u.noSuchMember()
		}
		history, limits = cloneEntries(m.History), u.st.Limits
		return nil
	})
	// The commits are not cancelled with the turn: an interrupted turn
	// must still record that the member is no longer running.
	saveCtx := context.WithoutCancel(ctx)

	committed := false
	defer func() {
		if committed {
			return
		}
		// Only a panic outside the turn function gets here (fn's own is
		// recovered by call), for example in an observer of the turn's
		// end. The process stays up: the lease is released, a member
		// still running is failed with its previous history, as after
		// a panic in fn, and the turn ends failed.
		if v := recover(); v != nil {
			s.log.ErrorContext(saveCtx, "ending a turn panicked; it ends failed and the member keeps its previous history", "team", tr.team, "member", member, "panic", v, "stack", string(debug.Stack()))
		}
		_ = tr.update(saveCtx, func(u *unit) error {
			if m := u.member(member); m != nil {
				m.Lease = nil
				if m.Status == StatusRunning {
					m.Status = StatusFailed
				}
				holdWake(m, TurnFailed)
			}
			return u.tx.PutTurn(tr.ended(TurnFailed, PanicText, u.now))
		})
		tr.finish(TurnFailed, PanicText)
		doc, runFailure = tr.Document(), nil
	}()

	var outcome TurnOutcome
	runErr := viewErr
	if runErr == nil {
		outcome, runErr = tr.call(runCtx, fn, history)
	}
	interrupted := runErr != nil && runCtx.Err() != nil
	cancelled := interrupted && errors.Is(context.Cause(runCtx), errTurnCancelled)
	if runErr == nil {
		if err := checkOutcome(outcome, limits); err != nil {
			runErr = &Error{Code: CodeValidation, Message: "The turn did not return a bounded history.", Err: err}
		}
	}
	var modelErr *ModelError
	var panicked *turnPanic

	status, text := "", ""
	var final TurnDoc
	err := tr.update(saveCtx, func(u *unit) error {
		m := u.member(member)
		if m == nil {
			return u.noSuchMember()
		}
		switch {
		case cancelled:
			m.Status = StatusIdle
			status, text = TurnCancelled, CancelledText
		case interrupted:
			m.Status = StatusIdle
			status, text = TurnFailed, InterruptedText
		case errors.As(runErr, &modelErr):
			m.Status = StatusIdle
			status, text = TurnFailed, truncate(modelErr.Text, limits.BodyChars)
		case errors.As(runErr, &panicked):
			// A panic is the exception of the lesson's run_teammate
			// (docs/spec.md §4.6 step 6): failed, the old history kept.
			m.Status = StatusFailed
			status, text = TurnFailed, PanicText
		case runErr != nil:
			m.Status = StatusFailed
			status, text = TurnFailed, failureText(runErr)
		case outcome.Status == TurnFailed:
			m.Status = StatusFailed
			status, text = TurnFailed, truncate(outcome.Text, limits.BodyChars)
		default:
			m.History = cloneEntries(outcome.Messages)
			m.Status = StatusStopped
			if outcome.Status == TurnAnswered || outcome.Status == TurnBudgetExhausted {
				m.Status = StatusIdle
			}
			status, text = outcome.Status, truncate(outcome.Text, limits.BodyChars)
			// The letters the turn was shown are read (cursors.go).
			if err := u.markAttended(member, m.History); err != nil {
				return err
			}
		}
		holdWake(m, status)
		tr.commitEnd(u, m, status, text)
		final = tr.ended(status, text, u.now)
		return nil
	})
	committed = true
	if err != nil && ErrorCode(err) == CodeNotFound {
		// The team was deleted while the turn ran (a deletion cancels
		// its turns, and one that ended late finds it gone): there is
		// nothing to store the end in, and nothing to roll back.
		status, text = TurnFailed, "the team was deleted"
		if cancelled {
			status, text = TurnCancelled, CancelledText
		}
		s.log.InfoContext(ctx, "a turn ended after its team was deleted", "team", tr.team, "member", member, "status", status)
		tr.finish(status, text)
		return tr.Document(), nil
	}
	if err != nil {
		s.rollbackTurn(saveCtx, tr, member)
		tr.finish(TurnFailed, string(CodeStorageFailed))
		return TurnDoc{}, StorageError(err)
	}
	switch {
	case cancelled:
		s.log.InfoContext(ctx, "turn cancelled; the member keeps its previous history", "team", tr.team, "member", member, "turn", final.TurnID)
	case interrupted:
		s.log.WarnContext(ctx, "turn interrupted; the member keeps its previous history", "team", tr.team, "member", member, "err", fmt.Errorf("%w: %w", ErrTurnInterrupted, runErr))
	case errors.As(runErr, &modelErr):
		s.log.WarnContext(ctx, "turn failed: the model request failed; the member keeps its previous history", "team", tr.team, "member", member, "err", runErr)
	case runErr != nil:
		s.log.WarnContext(ctx, "turn failed", "team", tr.team, "member", member, "err", runErr)
	}
	tr.finish(status, text)
	return final, nil
}

// PanicText is the text of a turn that stopped on a panic, which was
// logged with its stack.
const PanicText = "error: the turn stopped on an internal error"

// turnPanic is the error of a turn function that panicked.
type turnPanic struct{ value any }

func (e *turnPanic) Error() string { return fmt.Sprintf("the turn panicked: %v", e.value) }

// call runs fn and turns a panic in it into an error, so that whatever
// a turn meets (a provider's answer no one foresaw, a bug of a tool)
// ends that turn as failed rather than the process: a turn started with
// Prefer: respond-async, by a scenario or by the wake loop runs in a
// goroutine no handler protects.
func (tr *Turn) call(ctx context.Context, fn TurnFunc, history []Entry) (out TurnOutcome, err error) {
	defer func() {
		if v := recover(); v != nil {
			tr.s.log.ErrorContext(ctx, "a turn panicked; it ends failed and the member keeps its previous history",
				"team", tr.team, "member", tr.doc.Member, "panic", v, "stack", string(debug.Stack()))
			out, err = TurnOutcome{}, &turnPanic{value: v}
		}
	}()
	return fn(ctx, history)
}

// ended is the turn's document ended with status and text at now.
func (tr *Turn) ended(status, text string, now time.Time) TurnDoc {
	tr.mu.Lock()
	defer tr.mu.Unlock()
	d := tr.doc.clone()
	at := now.UTC()
	d.Status, d.Text, d.EndedAt = status, text, &at
	return d
}

// commitEnd ends the turn in the unit of work u: the lease released, the
// usage not yet committed added, the document stored, the end announced.
func (tr *Turn) commitEnd(u *unit, m *MemberState, status, text string) {
	m.Lease = nil
	tr.mu.Lock()
	pending := tr.pending
	tr.mu.Unlock()
	m.Usage = m.Usage.Add(pending)
	d := tr.ended(status, text, u.now)
	_ = u.tx.PutTurn(d)
	u.after = append(u.after, func() {
		tr.mu.Lock()
		tr.pending = Usage{}
		tr.mu.Unlock()
	})
	u.emit(EventMember, u.memberView(m))
	u.emit(EventTurn, TurnEvent{TurnID: d.TurnID, Member: d.Member, Status: status, Text: text, Usage: d.Usage, Provider: d.Model.Provider, Trigger: &d.Trigger})
}

// finish ends the turn in this process: its document final, its lease
// no longer renewed, whoever waits for it released.
func (tr *Turn) finish(status, text string) {
	s := tr.s
	now := s.now().UTC()
	tr.mu.Lock()
	tr.doc.Status, tr.doc.Text, tr.doc.EndedAt = status, text, &now
	tr.mu.Unlock()
	s.work.TurnEnded(tr)
	close(tr.done)
}

// rollbackTurn handles a turn whose outcome could not be committed, as a
// failed reply or consume is: nothing of the outcome was stored. On disk
// the member is as the claim left it: the old history, the turn counted,
// status running. The outcome is dropped as an interrupted turn's is: the
// old history stays, the attempt stays counted, and the member is made
// idle so that it can be used again rather than stay running with no turn
// behind it. If that commit fails too, the lease is dead once this
// process no longer runs the turn, and the next unit of work of the team
// releases it with the member stopped, as a restart would find it.
func (s *Service) rollbackTurn(ctx context.Context, tr *Turn, member string) {
	err := tr.update(ctx, func(u *unit) error {
		m := u.member(member)
		if m == nil {
			return nil
		}
		if m.Status == StatusRunning {
			m.Status = StatusIdle
		}
		holdWake(m, TurnFailed)
		tr.commitEnd(u, m, TurnFailed, string(CodeStorageFailed))
		return nil
	})
	if err != nil {
		s.log.ErrorContext(ctx, "saving a turn's outcome failed; the member is stopped as a restart would find it", "team", tr.team, "member", member, "err", err)
		return
	}
	s.log.WarnContext(ctx, "saving a turn's outcome failed; the outcome was dropped and the member is idle", "team", tr.team, "member", member)
}

// checkOutcome is step 4 of run_teammate (docs/spec.md §4.6): a known
// status and a history within the team's entry limit and within the
// storage bounds of checkHistory.
func checkOutcome(o TurnOutcome, limits Limits) error {
	if !knownTurnStatus(o.Status) {
		return fmt.Errorf("%w: unknown status", ErrTurnOutcome)
	}
	if len(o.Messages) > limits.HistoryEntries {
		return fmt.Errorf("%w: %d entries, the limit is %d", ErrTurnOutcome, len(o.Messages), limits.HistoryEntries)
	}
	if o.Status == TurnFailed {
		return nil // the history of a failed outcome is never stored
	}
	return checkHistory(o.Messages)
}

// checkHistory reports whether history can be stored and loaded again:
// every tool input is valid JSON nested at most MaxInputDepth levels,
// every entry encodes to at most MaxEntryBytes and all of them together
// to at most MaxHistoryBytes. Tool inputs are the only nested values an
// entry holds; everything else is a string.
func checkHistory(history []Entry) error {
	total := 0
	for i, e := range history {
		for _, b := range e.Blocks {
			if len(b.Input) == 0 {
				continue
			}
			if d := jsonDepth(b.Input); d > MaxInputDepth {
				return fmt.Errorf("%w: entry %d holds a tool input nested %d levels deep, the bound is %d", ErrTurnOutcome, i+1, d, MaxInputDepth)
			}
		}
		data, err := json.Marshal(e)
		if err != nil {
			return fmt.Errorf("%w: entry %d cannot be encoded: %w", ErrTurnOutcome, i+1, err)
		}
		if len(data) > MaxEntryBytes {
			return fmt.Errorf("%w: entry %d takes %d bytes, the bound is %d", ErrTurnOutcome, i+1, len(data), MaxEntryBytes)
		}
		total += len(data) + 1
		if total > MaxHistoryBytes {
			return fmt.Errorf("%w: the history takes more than %d bytes", ErrTurnOutcome, MaxHistoryBytes)
		}
	}
	return nil
}

// jsonDepth returns the deepest nesting of objects and arrays in data,
// counting brackets outside strings. It does not validate data; encoding
// it does that. It never recurses, so any input is safe to measure.
func jsonDepth(data []byte) int {
	depth, deepest := 0, 0
	inString, escaped := false, false
	for _, c := range data {
		switch {
		case inString:
			switch {
			case escaped:
				escaped = false
			case c == '\\':
				escaped = true
			case c == '"':
				inString = false
			}
		case c == '"':
			inString = true
		case c == '{' || c == '[':
			depth++
			deepest = max(deepest, depth)
		case c == '}' || c == ']':
			depth--
		}
	}
	return deepest
}

func knownTurnStatus(s string) bool {
	return s == TurnAnswered || s == TurnCallLimit || s == TurnFailed || s == TurnBudgetExhausted
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
