package core

import (
	"context"
	"time"
)

// Teammates that wake on mail (docs/api.md, "Teammates that wake on
// mail"). A letter is unattended by member M while the line the lesson's
// prepare_inbox adds for it ([team-message] + the letter with sorted
// keys) is not in M's committed history: the key the agent loop already
// attaches and deduplicates mail by (PrepareInbox). M is woken, a turn
// started by the server with no prompt, when it has wake set, holds an
// unattended letter, is idle and not running a turn, has turns left (lead
// always has), its team's model tokens are not spent, its wake is not held
// and the server is not stopping.
//
// This file is the rule (Wakeable, and the claim BeginWokenTurn); when a
// member is looked at, its window, the queue of wakes and the woken turns
// are the process's runtime (internal/runtime, Waker). Nothing of a wake
// is stored: whether M is to be woken is read from the team each time, so
// a restart finds every wake that was pending. On replicas every process
// may try the same wake: the turn's claim (its lease, in one unit of
// work) lets exactly one run it, and the others see the member busy.

// scriptedWakeText is why a member whose model is the scripted one
// cannot be woken.
const scriptedWakeText = "wake needs a real model: a scripted model has nothing to answer with unless a turn request brings its responses."

// attended returns the texts of history's plain user entries: what
// prepare_inbox deduplicates a [team-message] or [team-task] line by.
func attended(history []Entry) map[string]bool {
	present := make(map[string]bool, len(history))
	for _, e := range history {
		if e.Role == "user" && e.Blocks == nil {
			present[e.Text] = true
		}
	}
	return present
}

// attendedBy is what m has attended with history as its history: the
// lines of history and those kept when its history was cleared.
func attendedBy(m *MemberState, history []Entry) map[string]bool {
	present := attended(history)
	for _, line := range m.Attended {
		present[line] = true
	}
	return present
}

// unattended returns the letters of items whose [team-message] line is
// not in present (attendedBy), in inbox order.
func unattended(items []Message, present map[string]bool) []Message {
	var out []Message
	for _, m := range items {
		if !present[HistoryText(m)] {
			out = append(out, m)
		}
	}
	return out
}

// unattendedTasks returns the tasks of the board assigned to m that it
// could claim now (ClaimableTasks) and whose [team-task] line is not a
// user entry of history, in id order. A task's line is its whole
// document: a task changed since the member saw it (another title, a
// release) is unattended again.
func unattendedTasks(tasks []Task, m *MemberState, present map[string]bool) []Task {
	var out []Task
	for _, t := range ClaimableTasks(tasks, m.Name, m.Skills) {
		if !present[TaskHistoryText(t)] {
			out = append(out, t)
		}
	}
	return out
}

// wakeTrigger returns what m would be woken for now: its unattended
// letters (kind mail) or, when it has none, the first task assigned to
// it that became claimable and is unattended (kind task); or a
// member_unavailable error saying why m cannot be woken (a store error
// when its inbox or board cannot be read). The server's stopping is the
// waker's.
func (u *unit) wakeTrigger(m *MemberState) (Trigger, error) {
	no := func(why string) (Trigger, error) {
		return Trigger{}, Errorf(CodeMemberUnavailable, "The member cannot be woken: %s", why)
	}
	switch {
	case !m.Wake:
		return no("wake is off.")
	case m.WakeHeld:
		return no(u.wakeHeldText(m))
	}
	if err := u.cannotTurn(m); err != nil {
		return Trigger{}, err
	}
	if u.st.MemberModel(m).Provider == ScriptedModel().Provider {
		return no(scriptedWakeText)
	}
	if err := u.budget(); err != nil {
		return Trigger{}, err
	}
	items, err := u.tx.LoadInbox(m.Name)
	if err != nil {
		return Trigger{}, asStoreError(err)
	}
	if letters := unattended(items, attendedBy(m, m.History)); len(letters) > 0 {
		t := Trigger{Kind: TriggerMail, Letters: make([]string, len(letters))}
		for i, l := range letters {
			t.Letters[i] = l.ID
		}
		return t, nil
	}
	tasks, err := u.tx.Tasks()
	if err != nil {
		return Trigger{}, asStoreError(err)
	}
	if open := unattendedTasks(tasks, m, attendedBy(m, m.History)); len(open) > 0 {
		return Trigger{Kind: TriggerTask, TaskID: open[0].ID}, nil
	}
	return no("no letter and no claimable task assigned to it is unattended.")
}

// holdWake holds m's wake after a turn of it ended status: any end but
// answered, so that a turn whose side effects stay is never rerun by the
// server on its own (docs/spec.md §4.6).
func holdWake(m *MemberState, status string) {
	if m.Wake && status != TurnAnswered {
		m.WakeHeld, m.WakeHeldReason = true, status
	}
}

// WakeHeldHistoryFull is the reason of a wake held because none of the
// member's unattended letters fits in its history.
const WakeHeldHistoryFull = "history_full"

// MemberUpdate names what to change of a member; a nil field keeps it.
// Setting Wake (to true or false) also releases a held wake. Skills
// replaces the member's labels (an empty list clears them).
type MemberUpdate struct {
	Wake   *bool
	Model  *ModelSettings
	Skills *[]string
}

// UpdateMember changes a member's wake, model and skills (the admin only)
// and announces the member. wake on a member whose model is the scripted one
// is validation_failed. The model itself is validated by whoever knows
// the providers.
func (s *Service) UpdateMember(ctx context.Context, teamName, member string, upd MemberUpdate) (MemberView, error) {
	if err := CheckAdmin(ctx); err != nil {
		return MemberView{}, err
	}
	if upd.Model != nil && upd.Model.Provider == "" {
		return MemberView{}, Errorf(CodeValidation, "The model needs a provider.")
	}
	var skills []string
	if upd.Skills != nil {
		var err error
		if skills, err = CheckLabels(*upd.Skills, "skills"); err != nil {
			return MemberView{}, err
		}
	}
	var view MemberView
	err := s.update(ctx, teamName, func(u *unit) error {
		m := u.member(member)
		if m == nil {
			return u.noSuchMember()
		}
		if upd.Skills != nil {
			m.Skills = nil
			if len(skills) > 0 {
				m.Skills = skills
			}
		}
		if upd.Model != nil {
			model := *upd.Model
			m.Model = &model
		}
		if upd.Wake != nil {
			m.Wake, m.WakeHeld, m.WakeHeldReason = *upd.Wake, false, ""
		}
		if m.Wake && u.st.MemberModel(m).Provider == ScriptedModel().Provider {
			return Errorf(CodeValidation, "%s", scriptedWakeText)
		}
		view = u.memberView(m)
		u.emit(EventMember, view)
		return nil
	})
	return view, err
}

// MemberRef names one member of one team.
type MemberRef struct {
	Team   string
	Member string
}

// WakeLister is implemented by a store that can list the members with
// wake set without reading every team (a database keeps them indexed);
// without it, start-up reads every team.
type WakeLister interface {
	WakeMembers(ctx context.Context) ([]MemberRef, error)
}

// WakeMembers returns every member with wake set, for the waker's look
// at every team at start and after a resync.
func (s *Service) WakeMembers(ctx context.Context) ([]MemberRef, error) {
	if l, ok := s.store.(WakeLister); ok {
		return l.WakeMembers(ctx)
	}
	teams, err := s.store.ListTeams(ctx)
	if err != nil {
		return nil, err
	}
	var out []MemberRef
	for _, t := range teams {
		_ = s.view(ctx, t.Name, true, func(u *unit) error {
			for _, m := range u.st.Members {
				if m.Wake {
					out = append(out, MemberRef{t.Name, m.Name})
				}
			}
			return nil
		})
	}
	return out, nil
}

// WakeWindow is what the waker needs of a member it looks at: the
// incarnation of the team it was read in (a woken turn is claimed only on
// that one, deletion.go) and how long the team's window holds mail
// before the wake (wake_delay_ms).
type WakeWindow struct {
	Incarnation string
	Delay       time.Duration
}

// Wakeable applies the wake rule (wakeTrigger) to member of team as it
// is now: nil when it can be woken, else why not (member_unavailable, or
// the error of reading it). The window is filled whenever the team could
// be read, so that the waker sees a team deleted and made again even when
// the member cannot be woken. It changes nothing.
func (s *Service) Wakeable(ctx context.Context, team, member string) (WakeWindow, error) {
	var w WakeWindow
	err := s.view(ctx, team, true, func(u *unit) error {
		m := u.member(member)
		if m == nil {
			return u.noSuchMember()
		}
		w.Incarnation = teamIncarnation(u.st)
		w.Delay = time.Duration(u.st.Limits.WakeDelayMS) * time.Millisecond
		_, err := u.wakeTrigger(m)
		return err
	})
	return w, err
}

// BeginWokenTurn claims member for a turn the server starts by itself:
// only in incarnation inc of its team (Wakeable's), only while the wake
// rule holds in the claim's own unit of work, and with what woke it (the
// letters unattended at its start, or the task) as its trigger. The
// caller is the process itself (the admin).
func (s *Service) BeginWokenTurn(ctx context.Context, team, member string, model ModelRef, inc string) (*Turn, error) {
	if err := CheckAdmin(ctx); err != nil {
		return nil, err
	}
	if inc == "" {
		return nil, Errorf(CodeNotFound, "The team was deleted.")
	}
	return s.beginTurn(ctx, team, member, model, inc)
}

// OnFirstRequest sets f, called once as the turn prepares its first model
// request: a woken turn's delay ends there.
func (tr *Turn) OnFirstRequest(f func(at time.Time)) {
	tr.mu.Lock()
	tr.firstRequest = f
	tr.mu.Unlock()
}

// requestStarts is called by PrepareInbox as the turn prepares a model
// request: the first one ends a wake's delay.
func (tr *Turn) requestStarts(at time.Time) {
	tr.mu.Lock()
	f := tr.firstRequest
	tr.firstRequest = nil
	tr.mu.Unlock()
	if f != nil {
		f(at)
	}
}
