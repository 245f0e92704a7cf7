package mail

import (
	"context"
	"time"
)

// SetClock sets the clock a store checks file signatures against, so a
// test can treat files as settled without waiting for the racy window.
func SetClock(s *Store, now func() time.Time) { s.now = now }

// WALQueued is the seq of the last record queued in the store's log.
func WALQueued(s *Store) uint64 {
	s.wal.mu.Lock()
	defer s.wal.mu.Unlock()
	return s.wal.next - 1
}

// WALBytes is how many bytes of records the store's log holds in its
// current segment, written or queued.
func WALBytes(s *Store) int64 {
	s.wal.mu.Lock()
	defer s.wal.mu.Unlock()
	return s.wal.segBytes + int64(len(s.wal.buf))
}

// SetSearchPace sets how long the search index waits for quiet and how
// many letters its tail holds before it indexes anyway; call it before
// Start.
func SetSearchPace(s *Store, quiet time.Duration, bound int) {
	s.search.quiet, s.search.bound = quiet, bound
}

// SetSearchHard sets the tail's hard bound and the pace of batches
// between its bound and the hard one; call it before Start.
func SetSearchHard(s *Store, hard, pace int) {
	s.search.hard, s.search.pace = hard, pace
}

// SetSearchBytes sets the tail's bounds in bytes: the one past which it
// is indexed at the pace of SetSearchHard while sends go on, and the hard
// one; call it before Start.
func SetSearchBytes(s *Store, bound, hard int) {
	s.search.boundBytes, s.search.hardBytes = bound, hard
}

// SetSearchWindow sets how many of the newest matches of a query the
// index ranks at a time; call it before Start.
func SetSearchWindow(s *Store, n int) { s.search.window = n }

// SearchTailLen is how many committed letters the search index has not
// yet taken in.
func SearchTailLen(s *Store) int {
	n, _ := s.search.tailSize()
	return n
}

// SetSearchBeforePass makes the search index's start run f just before its
// pass over the teams; call it before Start.
func SetSearchBeforePass(s *Store, f func()) { s.search.beforePass = f }

// SearchIndexHeld is how many letters of the team the search index holds.
func SearchIndexHeld(s *Store, team string) (int, error) {
	u, err := s.Begin(context.Background(), team, false)
	if err != nil {
		return 0, err
	}
	key := teamKey(u.State())
	if err := u.Close(); err != nil {
		return 0, err
	}
	return countTeamLetters(context.Background(), s.search.db, key)
}

// SearchIndexRows is how many letters of every team the search index
// holds.
func SearchIndexRows(s *Store) (int, error) {
	var n int
	err := s.search.db.QueryRow(`SELECT count(*) FROM words`).Scan(&n)
	return n, err
}

// SetWALYield replaces what a leader of a crowded log calls before it
// writes (runtime.Gosched); call it while no unit of work runs.
func SetWALYield(s *Store, f func()) {
	s.wal.mu.Lock()
	defer s.wal.mu.Unlock()
	s.wal.yield = f
}
