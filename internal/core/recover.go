package core

import (
	"runtime"
	"sync"
	"sync/atomic"
	"time"
)

// Start-up repairs belong to the store that needs them: the file store
// completes or drops its intents and releases the leases of the process
// that died (internal/mail). The domain rules it applies are here.

// ReleaseAtStart is what a store that is the only process on its data
// does with a team it loads (docs/durability.md): a turn that was running
// when the process died is stopped, as the lesson's finally clause stops
// an interrupted turn (its lease is released and the member stopped), and
// a permission still pending expires, since the turn that waited for it
// died with the process. It reports whether st changed.
func ReleaseAtStart(st *TeamState, now time.Time) bool {
	changed := false
	for i := range st.Members {
		m := &st.Members[i]
		if m.Status == StatusRunning {
			m.Status = StatusStopped
			// A turn found interrupted is never rerun on its own.
			holdWake(m, TurnFailed)
			changed = true
		}
		if m.Lease != nil {
			m.Lease = nil
			changed = true
		}
	}
	if st.Requests == nil {
		st.Requests = []Request{}
	}
	if expirePendingPermissions(st, now) {
		changed = true
	}
	return changed
}

// InterruptTurnDoc ends a document still running whose turn died with its
// process: failed, with RestartInterruptedText. It reports whether it did.
func InterruptTurnDoc(d *TurnDoc, now time.Time) bool {
	if d.Status != TurnRunning {
		return false
	}
	at := now.UTC()
	d.Status, d.Text, d.EndedAt = TurnFailed, RestartInterruptedText, &at
	return true
}

// ForEach calls f(0) … f(n-1) from a bounded pool of goroutines and
// returns when all calls have. Start-up is many small system calls per
// team, one team after another; a few teams at once keep every CPU busy,
// and more would only queue. Storage backends load teams with it.
func ForEach(n int, f func(i int)) {
	workers := min(n, 2*runtime.GOMAXPROCS(0))
	var next atomic.Int64
	var wg sync.WaitGroup
	for range workers {
		wg.Go(func() {
			for {
				i := int(next.Add(1)) - 1
				if i >= n {
					return
				}
				f(i)
			}
		})
	}
	wg.Wait()
}
