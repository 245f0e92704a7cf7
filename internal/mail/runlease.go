package mail

import (
	"context"
	"errors"
	"io/fs"
	"path/filepath"
	"sync"

	"mailroom/internal/core"
)

// runLeases keeps the leases of the runs in progress in memory. The file
// store is the only process on its data directory, so a run's lease can
// only be its own process's: kept in memory it ends with that process,
// and after a restart every run found without a result is one that was
// interrupted, as before runs had leases (docs/storage.md). mu also
// orders the run calls (PutRun, GetRun, RenewRun, DeleteRun), so that a
// renewal never revives the lease of a run whose result was just stored.
type runLeases struct {
	mu   sync.Mutex
	held map[string]core.Lease
}

// set records id's lease, or forgets it when l is nil. mu is held.
func (r *runLeases) set(id string, l *core.Lease) {
	if l == nil {
		delete(r.held, id)
		return
	}
	if r.held == nil {
		r.held = map[string]core.Lease{}
	}
	r.held[id] = *l
}

// get returns id's lease, nil when it has none. mu is held.
func (r *runLeases) get(id string) *core.Lease {
	l, ok := r.held[id]
	if !ok {
		return nil
	}
	return &l
}

// RenewRun implements core.RunStore: the lease of a run with no result
// yet, held by lease.Holder, becomes lease.
func (s *Store) RenewRun(_ context.Context, id string, lease core.Lease) (bool, error) {
	if !core.ValidName(id) {
		return false, nil
	}
	s.runLeases.mu.Lock()
	defer s.runLeases.mu.Unlock()
	cur := s.runLeases.get(id)
	if cur == nil || cur.Holder != lease.Holder {
		return false, nil
	}
	if fi, err := s.fs.Lstat(s.runDir(id)); err != nil || !fi.IsDir() {
		// Deleted: nothing to hold.
		s.runLeases.set(id, nil)
		return false, nil
	}
	_, err := s.fs.Lstat(filepath.Join(s.runDir(id), resultFile))
	switch {
	case err == nil:
		// Finished: a result holds no lease.
		s.runLeases.set(id, nil)
		return false, nil
	case !errors.Is(err, fs.ErrNotExist):
		return false, err
	}
	s.runLeases.set(id, &lease)
	return true, nil
}
