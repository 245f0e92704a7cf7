package runtime

import (
	"context"
	"log/slog"
	"sync"
	"time"

	"mailroom/internal/core"
)

// Work is core's core.Work in this process: it keeps which turns run here
// and which teams are being deleted here (core.TurnTable), renews the lease of
// every turn core claims here until the turn ends, counts the turns until
// they end (WaitTurns) and the renewing goroutines until they return
// (Wait), and tells the waker when a team's work here ends
// (OnTeamWorkEnds). The rule of a renewal (whose lease, for how long) is
// core's (core.Turn.RenewLease); when to renew is decided here.
type Work struct {
	log *slog.Logger
	// TurnTable is the turns running here and the deletions in progress
	// (core.Work's TurnClaimed, TurnEnded, TurnRunning, TeamTurns,
	// DeletionBegan).
	core.TurnTable
	// turns counts the running turns; renewals the goroutines that renew
	// their leases.
	turns    counter
	renewals counter

	mu   sync.Mutex
	next int
	ends map[int]func(team, inc string)
}

// NewWork returns the runtime's work of one process; log receives failed
// renewals (nil discards them).
func NewWork(log *slog.Logger) *Work {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &Work{log: log, ends: map[int]func(team, inc string){}}
}

// TurnBegan counts tr until it is Done and renews its lease every third
// of its lease duration meanwhile (core.Work).
func (w *Work) TurnBegan(tr *core.Turn) {
	w.turns.add()
	w.renewals.add()
	go func() {
		defer w.renewals.done()
		w.renew(tr)
	}()
}

// renew extends tr's lease every third of the lease duration until the
// turn is done, so that other replicas keep the member busy; then it
// counts the turn off.
func (w *Work) renew(tr *core.Turn) {
	defer w.turns.done()
	every := tr.LeaseDuration() / 3
	tick := time.NewTicker(every)
	defer tick.Stop()
	for {
		select {
		case <-tr.Done():
			return
		case <-tick.C:
		}
		// The turn's own context, not a request's: a turn may outlive the
		// request that began it (Prefer: respond-async). A renewal that
		// takes longer than the next one's tick is given up.
		ctx, cancel := context.WithTimeout(context.Background(), every)
		err := tr.RenewLease(ctx)
		cancel()
		if err != nil {
			w.log.Warn("renewing a turn's lease failed", "team", tr.Team(), "member", tr.Member(), "err", err)
		}
	}
}

// TeamWorkEnds tells every function registered with OnTeamWorkEnds that
// the work of incarnation inc of team ("" any) ends here (core.Work).
func (w *Work) TeamWorkEnds(team, inc string) {
	w.mu.Lock()
	fns := make([]func(team, inc string), 0, len(w.ends))
	for _, fn := range w.ends {
		fns = append(fns, fn)
	}
	w.mu.Unlock()
	for _, fn := range fns {
		fn(team, inc)
	}
}

// OnTeamWorkEnds registers fn, called when what this process does for
// incarnation inc of team ("" any) must end: the team is being deleted
// here, or was deleted on another replica. It is called before the team's
// turns are cancelled. fn must not block and must not call back into the
// Service. cancel ends the calls.
func (w *Work) OnTeamWorkEnds(fn func(team, inc string)) (cancel func()) {
	w.mu.Lock()
	defer w.mu.Unlock()
	id := w.next
	w.next++
	w.ends[id] = fn
	return func() {
		w.mu.Lock()
		defer w.mu.Unlock()
		delete(w.ends, id)
	}
}

// WaitTurns returns once every turn this process runs has ended, or with
// ctx's error. A stopping server calls it after it cancelled them, before
// it closes the store their ends are recorded in.
func (w *Work) WaitTurns(ctx context.Context) error { return w.turns.wait(ctx) }

// Wait returns once every lease renewal has returned, or with ctx's
// error. A stopping server calls it after the turns have ended
// (WaitTurns), before it closes the store a renewal writes to.
func (w *Work) Wait(ctx context.Context) error { return w.renewals.wait(ctx) }

// counter counts work in progress so that a stopping process can wait
// until there is none. (Not a sync.WaitGroup: work may begin after a wait
// has returned, when a request arrives over the network, which a
// WaitGroup forbids.) The zero value is ready.
type counter struct {
	mu   sync.Mutex
	n    int
	idle chan struct{}
}

func (c *counter) add() {
	c.mu.Lock()
	c.n++
	c.mu.Unlock()
}

func (c *counter) done() {
	c.mu.Lock()
	c.n--
	if c.n == 0 && c.idle != nil {
		close(c.idle)
		c.idle = nil
	}
	c.mu.Unlock()
}

// wait returns once nothing is counted, or with ctx's error.
func (c *counter) wait(ctx context.Context) error {
	c.mu.Lock()
	if c.n == 0 {
		c.mu.Unlock()
		return nil
	}
	if c.idle == nil {
		c.idle = make(chan struct{})
	}
	idle := c.idle
	c.mu.Unlock()
	select {
	case <-idle:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}
