package live

import (
	"context"
	"sync"
	"time"

	"mailroom/internal/core"
)

// inboxKey names one inbox, or one permission (permissionKey).
type inboxKey struct{ team, member string }

// permissionKey is the waiters' key of one permission. A member name
// never holds a colon, so it cannot collide with an inbox.
func permissionKey(team, id string) inboxKey {
	return inboxKey{team: team, member: "permission:" + id}
}

// inboxSignal is the wake-up of one inbox: ch is closed at its next letter.
// refs counts the waiters holding ch, so the entry goes away with the last
// of them and the registry never outgrows the inboxes being waited on.
type inboxSignal struct {
	ch   chan struct{}
	refs int
}

// waiters lets readers sleep until a letter arrives. Waking costs one map
// lookup and one close per letter, whatever the number of waiters on that
// inbox; a waiter costs one shared channel reference and no goroutine of
// its own. The zero value is ready to use.
//
// A reader registers before it reads the inbox, and every letter wakes
// after its unit of work committed (the hub's bus, which also carries
// other replicas' letters with a Notifier store), so a letter stored after
// the reader looked at the inbox always wakes it; one stored before wakes
// it for nothing, and it reads again.
type waiters struct {
	mu      sync.Mutex
	inboxes map[inboxKey]*inboxSignal
	// stop is closed by StopWaiting; every wait then returns at once.
	stop    chan struct{}
	stopped bool
}

// watch returns the channel closed at the next letter of key's inbox and a
// release function the caller must call when it stops waiting.
func (w *waiters) watch(key inboxKey) (<-chan struct{}, func()) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.inboxes == nil {
		w.inboxes = map[inboxKey]*inboxSignal{}
	}
	sig := w.inboxes[key]
	if sig == nil {
		sig = &inboxSignal{ch: make(chan struct{})}
		w.inboxes[key] = sig
	}
	sig.refs++
	return sig.ch, func() {
		w.mu.Lock()
		defer w.mu.Unlock()
		// After a wake the entry is gone (or replaced); only a signal that
		// is still current is counted down.
		if cur := w.inboxes[key]; cur == sig {
			sig.refs--
			if sig.refs == 0 {
				delete(w.inboxes, key)
			}
		}
	}
}

// wake releases everyone waiting on key's inbox. It never blocks.
func (w *waiters) wake(key inboxKey) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if sig := w.inboxes[key]; sig != nil {
		close(sig.ch)
		delete(w.inboxes, key)
	}
}

// wakeAll releases every waiter, of every inbox and every permission, so
// that each looks at the store again. It never blocks.
func (w *waiters) wakeAll() {
	w.mu.Lock()
	defer w.mu.Unlock()
	for key, sig := range w.inboxes {
		close(sig.ch)
		delete(w.inboxes, key)
	}
}

// stopCh returns the channel closed by StopWaiting.
func (w *waiters) stopCh() <-chan struct{} {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.stop == nil {
		w.stop = make(chan struct{})
	}
	return w.stop
}

// WatchPermission returns a channel closed when permission id of team may
// have been decided (its decision's event, or a resync) and its release
// (core.Live): a turn waiting for a person registers it before it reads
// the permission.
func (h *Hub) WatchPermission(team, id string) (decided <-chan struct{}, release func()) {
	return h.waiters.watch(permissionKey(team, id))
}

// StopWaiting ends every wait for mail, now and later: the server calls it
// when it shuts down, so that held reads answer at once instead of holding
// the shutdown up for up to core.MaxWait.
func (h *Hub) StopWaiting() {
	w := &h.waiters
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.stop == nil {
		w.stop = make(chan struct{})
	}
	if !w.stopped {
		w.stopped = true
		close(w.stop)
	}
}

// WaitInbox returns the letters of member's inbox that come after the one
// whose id is after (every letter when after is empty), as
// core.Service.LettersAfter reads them. When there are none and wait is
// positive, it waits until a letter arrives, wait has passed, ctx ends or
// the hub stops waiting, and then answers what the inbox holds after after
// (possibly nothing). Reading deletes nothing.
func (h *Hub) WaitInbox(ctx context.Context, teamName, member, after string, wait time.Duration) ([]core.Message, error) {
	if err := core.CheckSelfOrAdmin(ctx, teamName, member); err != nil {
		return nil, err
	}
	if wait > core.MaxWait {
		wait = core.MaxWait
	}
	var deadline <-chan time.Time
	if wait > 0 {
		timer := time.NewTimer(wait)
		defer timer.Stop()
		deadline = timer.C
	}
	stop := h.waiters.stopCh()
	// gone is the life of the caller's team (an MCP session's): once it is
	// deleted the wait ends, and no look is taken at a new team of the
	// same name.
	gone := teamGoneOf(ctx)
	// A read that may wait takes one of its token's places first, before
	// it is registered as waiting; refused one, it answers the letters
	// there are, since a read that finds some never waits.
	if wait > 0 {
		unhold, err := h.HoldRead(ctx)
		if err != nil {
			msgs, _, _, lerr := h.lettersAfter(ctx, teamName, member, after, false)
			if lerr != nil || len(msgs) > 0 {
				return msgs, lerr
			}
			return nil, err
		}
		defer unhold()
	}
	for {
		msgs, woken, release, err := h.lettersAfter(ctx, teamName, member, after, wait > 0)
		if closed(gone) {
			// Asked after the look: a look that saw a new team of the
			// same name came after the deletion, which it then reports.
			if release != nil {
				release()
			}
			return nil, teamDeletedError()
		}
		if err != nil || len(msgs) > 0 || woken == nil {
			return msgs, err
		}
		select {
		case <-woken:
			release()
			continue
		case <-gone:
			release()
			return nil, teamDeletedError()
		case <-deadline:
		case <-ctx.Done():
		case <-stop:
		}
		release()
		// One last look: a letter may have come with the deadline.
		msgs, _, _, err = h.lettersAfter(ctx, teamName, member, after, false)
		if closed(gone) {
			return nil, teamDeletedError()
		}
		return msgs, err
	}
}

// lettersAfter reads member's letters after after. When there are none and
// watch is set, it also returns the channel closed at the next letter,
// registered before the read, and its release function.
func (h *Hub) lettersAfter(ctx context.Context, teamName, member, after string, watch bool) ([]core.Message, <-chan struct{}, func(), error) {
	var ch <-chan struct{}
	release := func() {}
	if watch {
		ch, release = h.waiters.watch(inboxKey{team: teamName, member: member})
	}
	msgs, err := h.svc.LettersAfter(ctx, teamName, member, after)
	if err != nil || len(msgs) > 0 || !watch {
		release()
		return msgs, nil, nil, err
	}
	return msgs, ch, release, nil
}

// WatchInbox returns how many letters member has been sent (its inbox's
// and its archive's: a count that only grows) and a channel
// closed at its next letter (or when the hub stops waiting); the
// channel is registered before the inbox is read, so that no letter falls
// between them. The caller must call release when it no longer waits on
// the channel. It serves subscriptions that are told of every new letter.
func (h *Hub) WatchInbox(ctx context.Context, teamName, member string) (n int, changed <-chan struct{}, stop <-chan struct{}, release func(), err error) {
	if err := core.CheckSelfOrAdmin(ctx, teamName, member); err != nil {
		return 0, nil, nil, nil, err
	}
	ch, release := h.waiters.watch(inboxKey{team: teamName, member: member})
	n, err = h.svc.LettersSent(ctx, teamName, member)
	if err != nil {
		release()
		return 0, nil, nil, nil, err
	}
	return n, ch, h.waiters.stopCh(), release, nil
}

// Waiting reports how many reads (or permission waits, by the key
// "permission:<id>") wait on member's inbox right now; tests use it to
// send only once a reader really waits.
func (h *Hub) Waiting(teamName, member string) int {
	h.waiters.mu.Lock()
	defer h.waiters.mu.Unlock()
	if sig := h.waiters.inboxes[inboxKey{team: teamName, member: member}]; sig != nil {
		return sig.refs
	}
	return 0
}
