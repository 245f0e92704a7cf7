package pgstore

import "time"

// SetRefusedFor sets how long a refused team is not remembered, until
// the returned restore is called.
func SetRefusedFor(d time.Duration) (restore func()) {
	old := refusedFor
	refusedFor = d
	return func() { refusedFor = old }
}

// CachedTokens is how many token lookups s remembers.
func CachedTokens(s *Store) int { return s.tokens.size() }
