package httpapi

import "time"

// waitOf turns the inbox read's `wait` parameter (whole seconds, 0–60 by
// the schema) into the duration core waits for a letter.
func waitOf(seconds *int) time.Duration {
	if seconds == nil || *seconds <= 0 {
		return 0
	}
	return time.Duration(*seconds) * time.Second
}
