package core

// HoldTeamLock takes the named team's lock, as a long write does, and
// returns its release, so a test can check what proceeds meanwhile.
func HoldTeamLock(s *Service, name string) (release func()) {
	s.mu.RLock()
	t := s.teams[name]
	s.mu.RUnlock()
	t.mu.Lock()
	return t.mu.Unlock
}

// Fingerprint is fingerprint, for tests that write records by hand.
var Fingerprint = fingerprint
