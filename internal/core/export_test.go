package core

import (
	"context"
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
