// Package runtime is what one Mailroom process runs beside the domain:
// the goroutines, timers and in-memory bookkeeping that act on the rules
// core keeps, never a rule of their own. Core decides whether a member can
// be woken (core.Service.Wakeable) and claims its turn (BeginWokenTurn);
// the Waker here decides when to look, keeps the windows and the queue,
// and runs the woken turns. Every goroutine it starts is waited for by
// Wait, so that the process closes its store only after them.
package runtime

import (
	"container/heap"
	"context"
	"errors"
	"log/slog"
	"sync"
	"time"

	"mailroom/internal/core"
)

// Teammates that wake on mail (docs/api.md, "Teammates that wake on
// mail"). Whether a member is woken is core's rule (core/wake.go); what
// runs here is when it is looked at. Nothing of a wake is stored: whether
// M is to be woken is read from the team each time, so a restart (Start
// looks at every team) finds every wake that was pending. Wakes come from
// the events of committed changes, the same bus that wakes held reads,
// which carries the other replicas' changes too; there is no polling. On
// replicas every process may try the same wake: the turn's claim (its
// lease, in one unit of work) lets exactly one run it, and the others see
// the member busy.

// WakeBuilder makes what a woken turn of member runs: the model its
// turns use and the agent loop with its tools. The composition root
// gives it, since neither core nor the runtime knows models and tools.
type WakeBuilder func(ctx context.Context, team, member string) (core.ModelRef, core.TurnFunc, error)

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

// WakeConfig configures a Waker.
type WakeConfig struct {
	// Stopping ends waking when it is done: queued and pending wakes are
	// dropped (the next start finds them again) and woken turns that run
	// are cancelled, ending as any interrupted turn does. Nil never stops.
	Stopping context.Context
	// Build makes a woken turn's model and loop. It must not be nil.
	Build WakeBuilder
	// Observer, when not nil, is told of wakes.
	Observer WakeObserver
	// MaxRunning bounds the woken turns running at once; 0 means
	// DefaultMaxRunningTurns.
	MaxRunning int
	// Logger receives what could not be done; nil discards it.
	Logger *slog.Logger
}

// DefaultMaxRunningTurns bounds the woken turns running at once when
// WakeConfig.MaxRunning is 0.
const DefaultMaxRunningTurns = 32

// memberKey names one member of one team.
type memberKey struct{ team, member string }

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
	key memberKey
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
	// in: the woken turn is claimed only on that one (core/deletion.go).
	// gone is set when that team was deleted.
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

// stopper is a window's timer.
type stopper interface{ Stop() bool }

// Waker keeps this process's wakes: the members known to have wake set
// (so that a letter to any other member costs one map lookup), the wakes
// in progress, and the queue of wakes waiting for one of max slots.
type Waker struct {
	svc *core.Service
	log *slog.Logger

	mu       sync.Mutex
	on       bool
	started  bool
	build    WakeBuilder
	obs      WakeObserver
	stopping context.Context
	max      int
	known    map[memberKey]bool
	entries  map[memberKey]*wakeEntry
	queue    wakeQueue
	running  int
	cancel   func()
	// after starts a window's timer (time.AfterFunc unless a test
	// replaces it); checked, when set, is told of every look at a member
	// (tests).
	after   func(d time.Duration, f func()) stopper
	checked func(team, member string, wakeable bool)

	// wg counts the goroutines the Waker started (Wait).
	wg sync.WaitGroup
}

// NewWaker returns a Waker over svc that does nothing until Start.
func NewWaker(svc *core.Service, cfg WakeConfig) *Waker {
	w := &Waker{svc: svc, log: cfg.Logger, build: cfg.Build, obs: cfg.Observer, stopping: cfg.Stopping, max: cfg.MaxRunning}
	if w.log == nil {
		w.log = slog.New(slog.DiscardHandler)
	}
	if w.stopping == nil {
		w.stopping = context.Background()
	}
	if w.max <= 0 {
		w.max = DefaultMaxRunningTurns
	}
	return w
}

// Start makes the process wake members on mail from now on: it
// subscribes to svc's events and looks at every team once, so that a wake
// pending when the server last stopped (or died) is found. It is called
// once, after svc.Open; later calls do nothing.
func (w *Waker) Start() {
	w.mu.Lock()
	if w.started || w.build == nil {
		w.mu.Unlock()
		return
	}
	w.started, w.on = true, true
	w.known = map[memberKey]bool{}
	w.entries = map[memberKey]*wakeEntry{}
	w.mu.Unlock()
	unsubscribe := w.svc.Subscribe(w.observe)
	unhook := w.svc.OnTeamWorkEnds(w.dropWakes)
	unlink := context.AfterFunc(w.stopping, w.stop)
	w.mu.Lock()
	w.cancel = func() { unsubscribe(); unhook(); unlink() }
	w.mu.Unlock()
	w.spawn(w.scan)
}

// Wait returns once every goroutine the Waker started has returned, or
// with ctx's error. It is called once Stopping is done: the woken turns
// end only then (they are cancelled), and every goroutine is started
// under w.mu while waking is live, so none starts after the look here.
func (w *Waker) Wait(ctx context.Context) error {
	w.mu.Lock()
	live := w.live()
	w.mu.Unlock()
	if live {
		return errors.New("runtime: Waker.Wait before its Stopping is done")
	}
	return waitGroup(ctx, &w.wg)
}

// spawn runs f on a goroutine Wait waits for; w.mu is held and waking is
// live, except for the first look Start takes.
func (w *Waker) spawn(f func()) {
	w.wg.Add(1)
	go func() {
		defer w.wg.Done()
		f()
	}()
}

// stop drops every wake not running: the server is stopping.
func (w *Waker) stop() {
	w.mu.Lock()
	w.stopLocked()
	w.mu.Unlock()
	w.queued(0)
}

// live reports whether wakes may start; the first call that finds the
// server stopping drops every wake not running, so that nothing queued
// starts between the stop and its AfterFunc. w.mu is held.
func (w *Waker) live() bool {
	if w.on && w.stopping.Err() != nil {
		w.stopLocked()
	}
	return w.on
}

// stopLocked ends waking. w.mu is held.
func (w *Waker) stopLocked() {
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

// Queued is how many wakes wait for a free slot now.
func (w *Waker) Queued() int {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.live()
	return w.queue.Len()
}

func (w *Waker) queued(n int) {
	if w.obs != nil {
		w.obs.WakesQueued(n)
	}
}

// scan looks at every member with wake set: each becomes known, and is
// looked at for a wake. It runs at start and after a resync.
func (w *Waker) scan() {
	refs, err := w.svc.WakeMembers(context.Background())
	if err != nil {
		w.log.Warn("looking for members to wake failed", "err", err)
		return
	}
	for _, r := range refs {
		key := memberKey{r.Team, r.Member}
		w.mu.Lock()
		if w.known != nil {
			w.known[key] = true
		}
		w.mu.Unlock()
		w.poke(key, w.svc.Now())
	}
}

// observe is subscribed to the events: a letter to a member known to
// have wake set, a pending task assigned to such a member, and a member
// (or a team's members) announced idle with wake set, may make a member
// wakeable. It never blocks: a member is looked at from a goroutine of
// its own.
func (w *Waker) observe(ev core.Event) {
	switch ev.Type {
	case core.EventMessage:
		m, ok := ev.Data.(core.Message)
		if !ok {
			return
		}
		w.pokeKnown(memberKey{ev.Team, m.Recipient})
	case core.EventTask:
		// A task announced pending with an assignee may have become
		// claimable for it: created so, assigned, or its last blocker
		// completed or deleted (its dependents are announced then too).
		t, ok := ev.Data.(core.Task)
		if !ok || t.Status != core.TaskPending || t.Assignee == nil {
			return
		}
		w.pokeKnown(memberKey{ev.Team, *t.Assignee})
	case core.EventMember:
		switch v := ev.Data.(type) {
		case core.MemberView:
			w.member(ev.Team, v)
		case []core.MemberView:
			for _, m := range v {
				w.member(ev.Team, m)
			}
		}
	case core.EventTeam:
		if v, ok := ev.Data.(core.TeamView); ok {
			for _, m := range v.Members {
				w.member(v.Name, m)
			}
		}
	case core.EventResync:
		w.mu.Lock()
		if w.live() {
			w.spawn(w.scan)
		}
		w.mu.Unlock()
	}
}

// pokeKnown pokes key's member when it is known to have wake set, so
// that a change for any other member costs one map lookup.
func (w *Waker) pokeKnown(key memberKey) {
	w.mu.Lock()
	known := w.known[key]
	w.mu.Unlock()
	if known {
		w.poke(key, w.svc.Now())
	}
}

// member notes whether a member announced has wake set, and looks at it
// for a wake when it may be woken.
func (w *Waker) member(team string, m core.MemberView) {
	key := memberKey{team, m.Name}
	w.mu.Lock()
	if w.known != nil {
		if m.Wake {
			w.known[key] = true
		} else {
			delete(w.known, key)
		}
	}
	w.mu.Unlock()
	if m.Wake && !m.WakeHeld && m.Status == core.StatusIdle && !m.Active {
		w.poke(key, w.svc.Now())
	}
}

// poke says that key's member may have become wakeable at at. A member
// whose wake is in progress is left to it: the window a letter opened is
// fixed, never restarted by later letters.
func (w *Waker) poke(key memberKey, at time.Time) {
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
				e.later = at
			}
			e.again = true
		}
		w.mu.Unlock()
		return
	}
	e := &wakeEntry{key: key, opened: at, since: at, state: wakeChecking, index: -1}
	w.entries[key] = e
	w.spawn(func() { w.check(e) })
	w.mu.Unlock()
}

// check asks core whether e's member can be woken: one that can gets its
// window, ending wake_delay_ms after it opened; any other is dropped.
func (w *Waker) check(e *wakeEntry) {
	for {
		win, err := w.svc.Wakeable(context.Background(), e.key.team, e.key.member)
		inc := win.Incarnation
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
			if win.Delay > 0 {
				e.timer = after(time.Until(e.opened.Add(win.Delay)), func() { w.enqueue(e) })
			} else {
				now = true // no window: no timer's goroutine in the way
			}
		}
		checked := w.checked
		w.mu.Unlock()
		if now {
			w.enqueue(e)
		}
		if checked != nil {
			checked(e.key.team, e.key.member, err == nil)
		}
		return
	}
}

// enqueue puts e in the queue once its window has ended.
func (w *Waker) enqueue(e *wakeEntry) {
	w.mu.Lock()
	if w.entries[e.key] != e || !w.live() || e.state != wakeWaiting {
		w.mu.Unlock()
		return
	}
	e.state = wakeQueued
	heap.Push(&w.queue, e)
	w.dispatchLocked()
	n := w.queue.Len()
	w.mu.Unlock()
	w.queued(n)
}

// dispatchLocked starts queued wakes while slots are free. w.mu is held.
func (w *Waker) dispatchLocked() {
	for w.live() && w.running < w.max && w.queue.Len() > 0 {
		e := heap.Pop(&w.queue).(*wakeEntry)
		e.state = wakeRunning
		w.running++
		w.spawn(func() { w.run(e) })
	}
}

// run runs e's woken turn: the claim checks every condition again in its
// unit of work, so a wake whose member changed while it waited (closed,
// out of turns, its team deleted, claimed by another replica) is dropped.
// After the turn the member is looked at again: a letter still
// unattended wakes it once more, wake_delay_ms after the turn's end.
func (w *Waker) run(e *wakeEntry) {
	ran := false
	defer func() {
		w.mu.Lock()
		w.running--
		if w.entries[e.key] == e {
			delete(w.entries, e.key)
			if (ran || e.again) && !e.gone && w.live() {
				// Looked at again in the same step, so that the member
				// never seems to have no wake in progress in between.
				since := w.svc.Now()
				if e.again && !e.later.IsZero() {
					since = e.later
				}
				next := &wakeEntry{key: e.key, opened: w.svc.Now(), since: since, state: wakeChecking, index: -1, inc: e.inc}
				w.entries[e.key] = next
				w.spawn(func() { w.check(next) })
			}
		}
		w.dispatchLocked()
		n := w.queue.Len()
		w.mu.Unlock()
		w.queued(n)
	}()
	ctx, cancel := context.WithCancel(core.AsAdmin(context.Background()))
	defer cancel()
	unlink := context.AfterFunc(w.stopping, cancel)
	defer unlink()
	team, member := e.key.team, e.key.member
	ref, fn, err := w.build(ctx, team, member)
	if err != nil {
		w.log.Warn("a member could not be woken: its turn cannot be built", "team", team, "member", member, "err", err)
		return
	}
	tr, err := w.svc.BeginWokenTurn(ctx, team, member, ref, e.inc)
	if err != nil {
		switch core.ErrorCode(err) {
		case core.CodeMemberUnavailable, core.CodeNotFound, core.CodeBudgetExhausted, core.CodeHistoryFull:
		default:
			w.log.Warn("a member could not be woken", "team", team, "member", member, "err", err)
		}
		return
	}
	ran = true
	if w.obs != nil {
		w.obs.Woken()
		since := e.since
		tr.OnFirstRequest(func(at time.Time) { w.obs.WakeDelay(at.Sub(since)) })
	}
	if _, err := tr.Run(ctx, fn); err != nil {
		w.log.Warn("a woken turn could not record its end", "team", team, "member", member, "turn", tr.ID(), "err", err)
	}
}

// dropWakes drops every wake of incarnation inc of team in this process
// (inc "": any; a wake whose team is still being read has none yet) that
// has not begun its turn: its window's timer stopped, out of the queue. A
// woken turn that runs is cancelled by core with the team's other turns;
// it is not looked at again when it ends. Core calls it when the team's
// work ends here (core.Service.OnTeamWorkEnds).
func (w *Waker) dropWakes(team, inc string) {
	w.mu.Lock()
	for key, e := range w.entries {
		if key.team != team || (inc != "" && e.inc != "" && e.inc != inc) {
			continue
		}
		e.gone = true
		if e.timer != nil {
			e.timer.Stop()
		}
		if e.state == wakeRunning {
			continue
		}
		if e.state == wakeQueued && e.index >= 0 {
			heap.Remove(&w.queue, e.index)
		}
		delete(w.entries, key)
	}
	n := w.queue.Len()
	w.mu.Unlock()
	w.queued(n)
}
