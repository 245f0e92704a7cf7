package core

import (
	"context"
	"sync"
	"time"
)

// Scenario run documents (RunStore), kept by the store so that every
// replica answers for every run. These are the scenario runner's calls:
// they check no rights (the HTTP layer lets only the admin run scenarios
// and read runs). A store error that is no domain error is
// storage_failed.

// PutRun stores run, replacing the one with the same id: with its result
// when it ends (a run is claimed with ClaimRun).
func (s *Service) PutRun(ctx context.Context, run RunDoc) error {
	return asStoreError(s.store.PutRun(ctx, run))
}

// GetRun returns one run document; CodeNotFound when there is none.
func (s *Service) GetRun(ctx context.Context, id string) (RunDoc, error) {
	doc, err := s.store.GetRun(ctx, id)
	return doc, asStoreError(err)
}

// RunIDs returns the ids of every stored run, in any order.
func (s *Service) RunIDs(ctx context.Context) ([]string, error) {
	ids, err := s.store.ListRuns(ctx)
	return ids, asStoreError(err)
}

// DeleteRun removes a run's document; a missing one is no error.
func (s *Service) DeleteRun(ctx context.Context, id string) error {
	return asStoreError(s.store.DeleteRun(ctx, id))
}

// runLeases is the runs this process holds leases for, each with the
// channel that ends its renewal.
type runLeases struct {
	mu   sync.Mutex
	held map[string]chan struct{}
}

// ClaimRun stores run id as claimed (no result) under this process's
// lease and renews the lease every third of the lease duration until
// release is called, so that every replica sees the run in progress
// (RunInProgress) while this process runs it, and sees it interrupted
// once the lease has expired after this process died. The caller stores
// the run's result (PutRun) and then calls release; a result drops the
// lease anyway. Claiming an id this process holds already is refused
// with CodeTeamExists, as a run id is claimed once.
func (s *Service) ClaimRun(ctx context.Context, id string) (release func(), err error) {
	stop := make(chan struct{})
	s.runLeases.mu.Lock()
	if _, taken := s.runLeases.held[id]; taken {
		s.runLeases.mu.Unlock()
		return nil, Errorf(CodeTeamExists, "The run is claimed already.")
	}
	if s.runLeases.held == nil {
		s.runLeases.held = map[string]chan struct{}{}
	}
	// Registered before the lease is stored, so that a read of this
	// process never takes the fresh lease for another's.
	s.runLeases.held[id] = stop
	s.runLeases.mu.Unlock()
	var once sync.Once
	release = func() {
		once.Do(func() {
			s.runLeases.mu.Lock()
			if s.runLeases.held[id] == stop {
				delete(s.runLeases.held, id)
			}
			s.runLeases.mu.Unlock()
			close(stop)
		})
	}
	lease := Lease{Holder: s.holder, Expires: s.now().Add(s.leaseDur)}
	if err := s.store.PutRun(ctx, RunDoc{ID: id, Lease: &lease}); err != nil {
		release()
		return nil, asStoreError(err)
	}
	s.goBackground(func() { s.renewRun(id, stop) })
	return release, nil
}

// renewRun extends run id's lease every third of the lease duration until
// stop is closed. A renewal the store refuses (the run got a result, or
// was deleted) ends it; one that fails is tried again at the next tick,
// while the lease may still hold.
func (s *Service) renewRun(id string, stop <-chan struct{}) {
	tick := time.NewTicker(s.leaseDur / 3)
	defer tick.Stop()
	for {
		select {
		case <-stop:
			return
		case <-tick.C:
		}
		ctx, cancel := context.WithTimeout(context.Background(), s.leaseDur/3)
		ok, err := s.store.RenewRun(ctx, id, Lease{Holder: s.holder, Expires: s.now().Add(s.leaseDur)})
		cancel()
		switch {
		case err != nil:
			s.log.Warn("renewing a run's lease failed", "run", id, "err", err)
		case !ok:
			s.log.Warn("a run's lease is no longer this process's; renewal stops", "run", id)
			return
		}
	}
}

// RunInProgress reports whether stored run doc is in progress somewhere:
// it has no result and its lease is held, by this process for a run it
// still holds (ClaimRun), or by another process and unexpired. A run
// without a result that is not in progress was left by a process that
// died (or ended) while it ran.
func (s *Service) RunInProgress(doc RunDoc) bool {
	if doc.Result != nil || doc.Lease == nil {
		return false
	}
	if doc.Lease.Holder == s.holder {
		s.runLeases.mu.Lock()
		defer s.runLeases.mu.Unlock()
		_, held := s.runLeases.held[doc.ID]
		return held
	}
	return doc.Lease.Live(s.now())
}
