package mail

import "time"

// SetClock sets the clock a store checks file signatures against, so a
// test can treat files as settled without waiting for the racy window.
func SetClock(s *Store, now func() time.Time) { s.now = now }
