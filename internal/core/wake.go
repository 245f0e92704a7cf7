package core

import (
	"container/heap"
	"context"
	"sync"
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
// Nothing of a wake is stored: whether M is to be woken is read from the
// team each time, so a restart (StartWaking looks at every team) finds
// every wake that was pending. Wakes come from the events of committed
// changes, the same bus that wakes held reads, which carries the other
// replicas' changes too; there is no polling. On replicas every process
// may try the same wake: the turn's claim (its lease, in one unit of
// work) lets exactly one run it, and the others see the member busy.

// WakeBuilder makes what a woken turn of member runs: the model its
// turns use and the agent loop with its tools. The door that knows
// models and tools (the HTTP server) gives it, since core knows neither.
type WakeBuilder func(ctx context.Context, team, member string) (ModelRef, TurnFunc, error)

// WakeObserver is told of wakes, for metrics. Its methods must not block.
type WakeObserver interface {
	// Woken is called when a woken turn has begun.
	Woken()
	// WakeDelay is the time from the letter that opened the wake to the
	// woken turn's first model request.
	WakeDelay(d time.Duration)
	// WakesQueued is how many wakes wait for a free slot now.
	WakesQueued(n int)
}

// WakeConfig configures StartWaking.
type WakeConfig struct {
	// Stopping ends waking when it is done: queued and pending wakes are
	// dropped (the next start finds them again) and woken turns that run
	// are cancelled, ending as any interrupted turn does. Nil never stops.
	Stopping context.Context
	// Build makes a woken turn's model and loop. It must not be nil.
	Build WakeBuilder
	// Observer, when not nil, is told of wakes.
	Observer WakeObserver
}

// DefaultMaxRunningTurns bounds the woken turns running at once when
// Options.MaxRunningTurns is 0.
const DefaultMaxRunningTurns = 32

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

// wakeState is where one member's wake is.
type wakeState int

const (
	wakeChecking wakeState = iota // its team is being read
	wakeWaiting                   // its window is open
	wakeQueued                    // waiting for a free slot
	wakeRunning                   // its woken turn runs here
)

// wakeEntry is one member's wake in this process.
type wakeEntry struct {
	key inboxKey
	// opened is when the window opened: the letter that made the member
	// wakeable, or the end of its previous turn.
	opened time.Time
	// since is when the first letter of this wake was seen: the queue's
	// order and the start of the delay metric.
	since time.Time
	state wakeState
	// again is set by an event seen while the team was being read or the
	// turn ran: the member is looked at again afterwards. later is the
	// first letter seen while the turn ran.
	again bool
	later time.Time
	timer stopper
	index int
	// inc is the incarnation of the team the member was found wakeable
	// in: the woken turn is claimed only on that one (deletion.go). gone
	// is set when that team was deleted.
	inc  string
	gone bool
}

// wakeQueue orders queued wakes by their first letter, oldest first.
type wakeQueue []*wakeEntry

func (q wakeQueue) Len() int { return len(q) }
func (q wakeQueue) Less(i, j int) bool {
	if !q[i].since.Equal(q[j].since) {
		return q[i].since.Before(q[j].since)
	}
	if q[i].key.team != q[j].key.team {
		return q[i].key.team < q[j].key.team
	}
	return q[i].key.member < q[j].key.member
}
func (q wakeQueue) Swap(i, j int) {
	q[i], q[j] = q[j], q[i]
	q[i].index, q[j].index = i, j
}
func (q *wakeQueue) Push(x any) {
	e := x.(*wakeEntry)
	e.index = len(*q)
	*q = append(*q, e)
}
func (q *wakeQueue) Pop() any {
	old := *q
	e := old[len(old)-1]
	old[len(old)-1] = nil
	*q = old[:len(old)-1]
	e.index = -1
	return e
}

// waker keeps this process's wakes: the members known to have wake set
// (so that a letter to any other member costs one map lookup), the wakes
// in progress, and the queue of wakes waiting for one of max slots.
type waker struct {
	mu       sync.Mutex
	on       bool
	build    WakeBuilder
	obs      WakeObserver
	stopping context.Context
	max      int
	known    map[inboxKey]bool
	entries  map[inboxKey]*wakeEntry
	queue    wakeQueue
	running  int
	cancel   func()
	// after starts a window's timer (time.AfterFunc unless a test of
	// core replaces it); checked, when set, is told of every look at a
	// member (tests of core).
	after   func(d time.Duration, f func()) stopper
	checked func(team, member string, wakeable bool)
}

// stopper is a window's timer.
type stopper interface{ Stop() bool }

// StartWaking makes the server wake members on mail from now on: it
// subscribes to the bus and looks at every team once, so that a wake
// pending when the server last stopped (or died) is found. It is called
// once, by the door that builds turns, after Open.
func (s *Service) StartWaking(cfg WakeConfig) {
	w := &s.wake
	w.mu.Lock()
	if w.on || cfg.Build == nil {
		w.mu.Unlock()
		return
	}
	w.on, w.build, w.obs, w.stopping = true, cfg.Build, cfg.Observer, cfg.Stopping
	if w.stopping == nil {
		w.stopping = context.Background()
	}
	w.known = map[inboxKey]bool{}
	w.entries = map[inboxKey]*wakeEntry{}
	w.mu.Unlock()
	unsubscribe := s.bus.Subscribe(s.wakeObserve)
	unlink := context.AfterFunc(w.stopping, func() { s.stopWaking() })
	w.mu.Lock()
	w.cancel = func() { unsubscribe(); unlink() }
	w.mu.Unlock()
	go s.wakeScan()
}

// stopWaking drops every wake not running: the server is stopping.
func (s *Service) stopWaking() {
	w := &s.wake
	w.mu.Lock()
	w.stopLocked()
	w.mu.Unlock()
	s.wakeQueued(0)
}

// live reports whether wakes may start; the first call that finds the
// server stopping drops every wake not running, so that nothing queued
// starts between the stop and its AfterFunc. w.mu is held.
func (w *waker) live() bool {
	if w.on && w.stopping.Err() != nil {
		w.stopLocked()
	}
	return w.on
}

// stopLocked ends waking. w.mu is held.
func (w *waker) stopLocked() {
	if !w.on {
		return
	}
	w.on = false
	for key, e := range w.entries {
		if e.timer != nil {
			e.timer.Stop()
		}
		if e.state != wakeRunning {
			delete(w.entries, key)
		}
	}
	w.queue = nil
	if w.cancel != nil {
		w.cancel()
	}
	if w.obs != nil {
		w.obs.WakesQueued(0)
	}
}

// QueuedWakes is how many wakes wait for a free slot now.
func (s *Service) QueuedWakes() int {
	s.wake.mu.Lock()
	defer s.wake.mu.Unlock()
	s.wake.live()
	return s.wake.queue.Len()
}

func (s *Service) wakeQueued(n int) {
	if o := s.wake.obs; o != nil {
		o.WakesQueued(n)
	}
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

// wakeMembers returns every member with wake set.
func (s *Service) wakeMembers(ctx context.Context) ([]MemberRef, error) {
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

// wakeScan looks at every member with wake set: each becomes known, and
// is looked at for a wake. It runs at start and after a resync.
func (s *Service) wakeScan() {
	refs, err := s.wakeMembers(context.Background())
	if err != nil {
		s.log.Warn("looking for members to wake failed", "err", err)
		return
	}
	for _, r := range refs {
		key := inboxKey{r.Team, r.Member}
		s.wake.mu.Lock()
		if s.wake.known != nil {
			s.wake.known[key] = true
		}
		s.wake.mu.Unlock()
		s.poke(key, s.now())
	}
}

// wakeObserve is subscribed to the bus: a letter to a member known to
// have wake set, a pending task assigned to such a member, and a member (or a team's members) announced idle with
// wake set, may make a member wakeable. It never blocks: a member is
// looked at from a goroutine of its own.
func (s *Service) wakeObserve(ev Event) {
	switch ev.Type {
	case EventMessage:
		m, ok := ev.Data.(Message)
		if !ok {
			return
		}
		s.pokeKnown(inboxKey{ev.Team, m.Recipient})
	case EventTask:
		// A task announced pending with an assignee may have become
		// claimable for it: created so, assigned, or its last blocker
		// completed or deleted (its dependents are announced then too).
		t, ok := ev.Data.(Task)
		if !ok || t.Status != TaskPending || t.Assignee == nil {
			return
		}
		s.pokeKnown(inboxKey{ev.Team, *t.Assignee})
	case EventMember:
		switch v := ev.Data.(type) {
		case MemberView:
			s.wakeMember(ev.Team, v)
		case []MemberView:
			for _, m := range v {
				s.wakeMember(ev.Team, m)
			}
		}
	case EventTeam:
		if v, ok := ev.Data.(TeamView); ok {
			for _, m := range v.Members {
				s.wakeMember(v.Name, m)
			}
		}
	case EventResync:
		go s.wakeScan()
	}
}

// pokeKnown pokes key's member when it is known to have wake set, so
// that a change for any other member costs one map lookup.
func (s *Service) pokeKnown(key inboxKey) {
	s.wake.mu.Lock()
	known := s.wake.known[key]
	s.wake.mu.Unlock()
	if known {
		s.poke(key, s.now())
	}
}

// wakeMember notes whether a member announced has wake set, and looks at
// it for a wake when it may be woken.
func (s *Service) wakeMember(team string, m MemberView) {
	key := inboxKey{team, m.Name}
	s.wake.mu.Lock()
	if s.wake.known != nil {
		if m.Wake {
			s.wake.known[key] = true
		} else {
			delete(s.wake.known, key)
		}
	}
	s.wake.mu.Unlock()
	if m.Wake && !m.WakeHeld && m.Status == StatusIdle && !m.Active {
		s.poke(key, s.now())
	}
}

// poke says that key's member may have become wakeable at at. A member
// whose wake is in progress is left to it: the window a letter opened is
// fixed, never restarted by later letters.
func (s *Service) poke(key inboxKey, at time.Time) { s.pokeSince(key, at, at) }

func (s *Service) pokeSince(key inboxKey, at, since time.Time) {
	w := &s.wake
	w.mu.Lock()
	if !w.live() {
		w.mu.Unlock()
		return
	}
	if e := w.entries[key]; e != nil {
		switch e.state {
		case wakeChecking:
			e.again = true
		case wakeRunning:
			if !e.again {
				e.later = since
			}
			e.again = true
		}
		w.mu.Unlock()
		return
	}
	e := &wakeEntry{key: key, opened: at, since: since, state: wakeChecking, index: -1}
	w.entries[key] = e
	w.mu.Unlock()
	go s.wakeCheck(e)
}

// wakeCheck reads e's member and team: a member that can be woken gets
// its window, ending wake_delay_ms after it opened; any other is dropped.
func (s *Service) wakeCheck(e *wakeEntry) {
	w := &s.wake
	for {
		var delay time.Duration
		var inc string
		err := s.view(context.Background(), e.key.team, true, func(u *unit) error {
			m := u.member(e.key.member)
			if m == nil {
				return u.noSuchMember()
			}
			inc = teamIncarnation(u.st)
			delay = time.Duration(u.st.Limits.WakeDelayMS) * time.Millisecond
			_, err := u.wakeTrigger(m)
			return err
		})
		w.mu.Lock()
		if w.entries[e.key] != e || !w.live() {
			w.mu.Unlock()
			return
		}
		if e.inc != "" && inc != e.inc {
			// The team was deleted and made again since the wake began:
			// nothing of that wake carries over to the new one.
			delete(w.entries, e.key)
			w.mu.Unlock()
			return
		}
		e.inc = inc
		if err != nil && e.again {
			// Something changed while the team was read: look again.
			e.again = false
			w.mu.Unlock()
			continue
		}
		now := false
		if err != nil {
			delete(w.entries, e.key)
		} else {
			e.state = wakeWaiting
			after := w.after
			if after == nil {
				after = func(d time.Duration, f func()) stopper { return time.AfterFunc(d, f) }
			}
			if delay > 0 {
				e.timer = after(time.Until(e.opened.Add(delay)), func() { s.wakeEnqueue(e) })
			} else {
				now = true // no window: no timer's goroutine in the way
			}
		}
		checked := w.checked
		w.mu.Unlock()
		if now {
			s.wakeEnqueue(e)
		}
		if checked != nil {
			checked(e.key.team, e.key.member, err == nil)
		}
		return
	}
}

// wakeEnqueue puts e in the queue once its window has ended.
func (s *Service) wakeEnqueue(e *wakeEntry) {
	w := &s.wake
	w.mu.Lock()
	if w.entries[e.key] != e || !w.live() || e.state != wakeWaiting {
		w.mu.Unlock()
		return
	}
	e.state = wakeQueued
	heap.Push(&w.queue, e)
	s.wakeDispatchLocked()
	n := w.queue.Len()
	w.mu.Unlock()
	s.wakeQueued(n)
}

// wakeDispatchLocked starts queued wakes while slots are free. w.mu is
// held.
func (s *Service) wakeDispatchLocked() {
	w := &s.wake
	for w.live() && w.running < w.max && w.queue.Len() > 0 {
		e := heap.Pop(&w.queue).(*wakeEntry)
		e.state = wakeRunning
		w.running++
		go s.wakeRun(e)
	}
}

// wakeRun runs e's woken turn: the claim checks every condition again in
// its unit of work, so a wake whose member changed while it waited
// (closed, out of turns, its team deleted, claimed by another replica) is
// dropped. After the turn the member is looked at again: a letter still
// unattended wakes it once more, wake_delay_ms after the turn's end.
func (s *Service) wakeRun(e *wakeEntry) {
	w := &s.wake
	ran := false
	defer func() {
		w.mu.Lock()
		w.running--
		if w.entries[e.key] == e {
			delete(w.entries, e.key)
			if (ran || e.again) && !e.gone && w.live() {
				// Looked at again in the same step, so that the member
				// never seems to have no wake in progress in between.
				since := s.now()
				if e.again && !e.later.IsZero() {
					since = e.later
				}
				next := &wakeEntry{key: e.key, opened: s.now(), since: since, state: wakeChecking, index: -1, inc: e.inc}
				w.entries[e.key] = next
				go s.wakeCheck(next)
			}
		}
		s.wakeDispatchLocked()
		n := w.queue.Len()
		w.mu.Unlock()
		s.wakeQueued(n)
	}()
	ctx, cancel := context.WithCancel(AsAdmin(context.Background()))
	defer cancel()
	unlink := context.AfterFunc(w.stopping, cancel)
	defer unlink()
	team, member := e.key.team, e.key.member
	ref, fn, err := w.build(ctx, team, member)
	if err != nil {
		s.log.Warn("a member could not be woken: its turn cannot be built", "team", team, "member", member, "err", err)
		return
	}
	tr, err := s.beginTurn(ctx, team, member, ref, e.inc)
	if err != nil {
		if ErrorCode(err) != CodeMemberUnavailable && ErrorCode(err) != CodeNotFound && ErrorCode(err) != CodeBudgetExhausted && ErrorCode(err) != CodeHistoryFull {
			s.log.Warn("a member could not be woken", "team", team, "member", member, "err", err)
		}
		return
	}
	ran = true
	if w.obs != nil {
		w.obs.Woken()
		since := e.since
		tr.mu.Lock()
		tr.firstRequest = func(at time.Time) { w.obs.WakeDelay(at.Sub(since)) }
		tr.mu.Unlock()
	}
	if _, err := tr.Run(ctx, fn); err != nil {
		s.log.Warn("a woken turn could not record its end", "team", team, "member", member, "turn", tr.ID(), "err", err)
	}
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
