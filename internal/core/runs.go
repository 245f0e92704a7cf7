package core

import (
	"context"
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

// RenewRun extends the lease of run id to lease when the stored run has
// no result and its lease is lease.Holder's; ok is false when the store
// refused (the run got a result, or was deleted). The process's run
// leases (internal/runtime) renew through it.
func (s *Service) RenewRun(ctx context.Context, id string, lease Lease) (ok bool, err error) {
	return s.store.RenewRun(ctx, id, lease)
}
