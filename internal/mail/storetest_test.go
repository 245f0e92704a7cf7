package mail_test

import (
	"sync"
	"testing"

	"mailroom/internal/core"
	"mailroom/internal/mail"
	"mailroom/internal/storetest"
)

// TestStoreContract runs the backend-independent store suite on the file
// store; a reopen closes the store and opens its data directory again.
func TestStoreContract(t *testing.T) {
	var mu sync.Mutex
	dirs := map[core.Store]string{}
	open := func(t *testing.T, dir string) core.Store {
		s, err := mail.Open(dir)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = s.Close() })
		mu.Lock()
		dirs[s] = dir
		mu.Unlock()
		return s
	}
	storetest.Run(t, func(t *testing.T) core.Store { return open(t, t.TempDir()) },
		storetest.WithReopen(func(t *testing.T, s core.Store) core.Store {
			mu.Lock()
			dir := dirs[s]
			mu.Unlock()
			if err := s.(*mail.Store).Close(); err != nil {
				t.Fatal(err)
			}
			return open(t, dir)
		}))
}
