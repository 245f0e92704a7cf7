package pgstore_test

import (
	"sync"
	"testing"

	"mailroom/internal/core"
	"mailroom/internal/pgtest"
	"mailroom/internal/storetest"
)

// TestStoreContract runs the backend-independent store suite on
// PostgreSQL, each subtest on a fresh database of the test binary's
// cluster; a reopen closes the store and opens a new one on its database.
func TestStoreContract(t *testing.T) {
	var mu sync.Mutex
	urls := map[core.Store]string{}
	storetest.Run(t, func(t *testing.T) core.Store {
		url := pgtest.New(t)
		s := open(t, url)
		mu.Lock()
		urls[s] = url
		mu.Unlock()
		return s
	}, storetest.WithReopen(func(t *testing.T, s core.Store) core.Store {
		mu.Lock()
		url := urls[s]
		mu.Unlock()
		if err := s.(interface{ Close() error }).Close(); err != nil {
			t.Fatal(err)
		}
		next := open(t, url)
		mu.Lock()
		urls[next] = url
		mu.Unlock()
		return next
	}))
}
