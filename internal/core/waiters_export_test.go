package core

// WaitingOn reports how many readers wait on member's inbox, so tests can
// wait until a reader is really waiting before they send.
func WaitingOn(s *Service, team, member string) int {
	s.waiters.mu.Lock()
	defer s.waiters.mu.Unlock()
	if sig := s.waiters.inboxes[inboxKey{team: team, member: member}]; sig != nil {
		return sig.refs
	}
	return 0
}
