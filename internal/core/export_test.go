package core

import (
	"context"
	"time"
)

// HoldTeamLock starts a unit of work on the named team, as a long write
// does, and returns its release, so a test can check what proceeds
// meanwhile.
func HoldTeamLock(s *Service, name string) (release func()) {
	held, done := make(chan struct{}), make(chan struct{})
	go func() {
		_ = View(context.Background(), s.store, name, func(TeamTx) error {
			close(held)
			<-done
			return nil
		})
	}()
	<-held
	return func() { close(done) }
}

// Fingerprint is fingerprint, for tests that write records by hand.
var Fingerprint = fingerprint

// SetWakeHooks replaces the waker's timer (after) and is told of every
// look at a member (checked); call it before StartWaking.
func SetWakeHooks(s *Service, after func(d time.Duration, f func()) interface{ Stop() bool }, checked func(team, member string, wakeable bool)) {
	s.wake.mu.Lock()
	defer s.wake.mu.Unlock()
	if after != nil {
		s.wake.after = func(d time.Duration, f func()) stopper { return after(d, f) }
	}
	s.wake.checked = checked
}

// WakeEntries is how many members have a wake in progress here.
func WakeEntries(s *Service) int {
	s.wake.mu.Lock()
	defer s.wake.mu.Unlock()
	return len(s.wake.entries)
}

// WakeInProgress reports whether member of team has a wake in progress.
func WakeInProgress(s *Service, team, member string) bool {
	s.wake.mu.Lock()
	defer s.wake.mu.Unlock()
	return s.wake.entries[inboxKey{team, member}] != nil
}
