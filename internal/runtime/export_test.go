package runtime

import "time"

// SetWakeHooks replaces the waker's timer (after) and is told of every
// look at a member (checked); call it before Start.
func SetWakeHooks(w *Waker, after func(d time.Duration, f func()) interface{ Stop() bool }, checked func(team, member string, wakeable bool)) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if after != nil {
		w.after = func(d time.Duration, f func()) stopper { return after(d, f) }
	}
	w.checked = checked
}

// WakeEntries is how many members have a wake in progress here.
func WakeEntries(w *Waker) int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return len(w.entries)
}

// WakeInProgress reports whether member of team has a wake in progress.
func WakeInProgress(w *Waker, team, member string) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.entries[memberKey{team, member}] != nil
}
