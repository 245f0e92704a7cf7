package runtime

import (
	"context"
	"log/slog"
	"sync"
	"time"

	"mailroom/internal/core"
)

// RunLeases holds the leases of the scenario runs this process runs, so
// that every replica sees a run in progress while this process runs it,
// and sees it interrupted once its lease has expired after this process
// died. The run documents and the terms of a lease are core's
// (core.Runs); what is kept here is which runs this process holds and the
// goroutines that renew their leases.
type RunLeases struct {
	runs *core.Runs
	log  *slog.Logger

	mu   sync.Mutex
	held map[string]chan struct{}
	// renewals counts the renewing goroutines (Wait).
	renewals sync.WaitGroup
}

// NewRunLeases returns the run leases of this process over runs
// (core.Service.Runs); log receives failed renewals (nil discards them).
func NewRunLeases(runs *core.Runs, log *slog.Logger) *RunLeases {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &RunLeases{runs: runs, log: log, held: map[string]chan struct{}{}}
}

// ClaimRun stores run id as claimed (no result) under this process's
// lease and renews the lease every third of the lease duration until
// release is called (RunInProgress). The caller stores the run's result
// (core.Runs.Put) and then calls release; a result drops the lease
// anyway. Claiming an id this process holds already is refused with
// CodeTeamExists, as a run id is claimed once.
func (l *RunLeases) ClaimRun(ctx context.Context, id string) (release func(), err error) {
	stop := make(chan struct{})
	l.mu.Lock()
	if _, taken := l.held[id]; taken {
		l.mu.Unlock()
		return nil, core.Errorf(core.CodeTeamExists, "The run is claimed already.")
	}
	// Registered before the lease is stored, so that a read of this
	// process never takes the fresh lease for another's.
	l.held[id] = stop
	l.mu.Unlock()
	var once sync.Once
	release = func() {
		once.Do(func() {
			l.mu.Lock()
			if l.held[id] == stop {
				delete(l.held, id)
			}
			l.mu.Unlock()
			close(stop)
		})
	}
	lease := l.runs.Lease()
	if err := l.runs.Put(ctx, core.RunDoc{ID: id, Lease: &lease}); err != nil {
		release()
		return nil, err
	}
	l.renewals.Go(func() { l.renew(id, stop) })
	return release, nil
}

// renew extends run id's lease every third of the lease duration until
// stop is closed. A renewal the store refuses (the run got a result, or
// was deleted) ends it; one that fails is tried again at the next tick,
// while the lease may still hold.
func (l *RunLeases) renew(id string, stop <-chan struct{}) {
	every := l.runs.LeaseDuration() / 3
	tick := time.NewTicker(every)
	defer tick.Stop()
	for {
		select {
		case <-stop:
			return
		case <-tick.C:
		}
		ctx, cancel := context.WithTimeout(context.Background(), every)
		ok, err := l.runs.Renew(ctx, id)
		cancel()
		switch {
		case err != nil:
			l.log.Warn("renewing a run's lease failed", "run", id, "err", err)
		case !ok:
			l.log.Warn("a run's lease is no longer this process's; renewal stops", "run", id)
			return
		}
	}
}

// RunInProgress reports whether stored run doc is in progress somewhere:
// it has no result and its lease is held, by this process for a run it
// still holds (ClaimRun), or by another process and unexpired. A run
// without a result that is not in progress was left by a process that
// died (or ended) while it ran.
func (l *RunLeases) RunInProgress(doc core.RunDoc) bool {
	if doc.Result != nil || doc.Lease == nil {
		return false
	}
	if doc.Lease.Holder == l.runs.Holder() {
		l.mu.Lock()
		defer l.mu.Unlock()
		_, held := l.held[doc.ID]
		return held
	}
	return doc.Lease.Live(l.runs.Now())
}

// Wait returns once every renewal has ended, or with ctx's error. A
// stopping process calls it after its runs have ended and released their
// leases, before it closes the store a renewal writes to.
func (l *RunLeases) Wait(ctx context.Context) error { return waitGroup(ctx, &l.renewals) }

// waitGroup waits for wg, or returns ctx's error when ctx ends first.
func waitGroup(ctx context.Context, wg *sync.WaitGroup) error {
	done := make(chan struct{})
	go func() {
		wg.Wait()
		close(done)
	}()
	select {
	case <-done:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}
