package core

import (
	"context"
	"time"
)

// Runs is the scenario run documents (RunStore), kept by the store so
// that every replica answers for every run, with the terms of this
// process's leases on them. It is the scenario runner's and the run
// leases' (internal/runtime), not a rule's: it checks no rights (the HTTP
// layer lets only the admin run scenarios and read runs). A store error
// that is no domain error is storage_failed.
type Runs struct {
	store RunStore
	// holder names this process in leases; dur is how long a lease holds
	// without renewal; now is the Service's clock.
	holder string
	dur    time.Duration
	now    func() time.Time
}

// Runs returns the run documents of the Service's store, under the
// Service's lease terms (Options.Holder, LeaseDuration, Now).
func (s *Service) Runs() *Runs {
	return &Runs{store: s.store, holder: s.holder, dur: s.leaseDur, now: s.now}
}

// Put stores run, replacing the one with the same id: with its result
// when it ends (a run is claimed by the runtime's run leases).
func (r *Runs) Put(ctx context.Context, run RunDoc) error {
	return asStoreError(r.store.PutRun(ctx, run))
}

// Get returns one run document; CodeNotFound when there is none.
func (r *Runs) Get(ctx context.Context, id string) (RunDoc, error) {
	doc, err := r.store.GetRun(ctx, id)
	return doc, asStoreError(err)
}

// IDs returns the ids of every stored run, in any order.
func (r *Runs) IDs(ctx context.Context) ([]string, error) {
	ids, err := r.store.ListRuns(ctx)
	return ids, asStoreError(err)
}

// Delete removes a run's document; a missing one is no error.
func (r *Runs) Delete(ctx context.Context, id string) error {
	return asStoreError(r.store.DeleteRun(ctx, id))
}

// Renew extends run id's lease to a fresh one of this process (Lease)
// when the stored run has no result and its lease is this process's; ok
// is false when the store refused (the run got a result, or was deleted).
func (r *Runs) Renew(ctx context.Context, id string) (ok bool, err error) {
	ok, err = r.store.RenewRun(ctx, id, r.Lease())
	return ok, asStoreError(err)
}

// Lease is a lease of this process that holds for the lease duration
// from now.
func (r *Runs) Lease() Lease { return Lease{Holder: r.holder, Expires: r.now().Add(r.dur)} }

// Holder is the name of this process in leases.
func (r *Runs) Holder() string { return r.holder }

// LeaseDuration is how long a lease holds without renewal.
func (r *Runs) LeaseDuration() time.Duration { return r.dur }

// Now is the Service's clock.
func (r *Runs) Now() time.Time { return r.now() }
