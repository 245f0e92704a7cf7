package live

import (
	"sync"

	"mailroom/internal/core"
)

// Bus is an in-process publisher of events to subscribers. The zero value
// is ready.
//
// Subscribers are called in the order they subscribed. The Hub subscribes
// its own waiters first (New), so that every later subscriber, such as the
// REST door that rings the reads it holds, finds an inbox's channel
// already closed when it sees the letter's event; called in another order,
// a held read that looked at its channel between the two would wait on to
// its deadline.
type Bus struct {
	mu   sync.RWMutex
	next int
	subs []subscriber
}

// subscriber is one registered function and the id cancel removes.
type subscriber struct {
	id int
	fn func(core.Event)
}

// Publish calls every subscriber with ev, in the order they subscribed.
func (b *Bus) Publish(ev core.Event) {
	b.mu.RLock()
	subs := b.subs // never modified in place: Subscribe and cancel copy
	b.mu.RUnlock()
	for _, s := range subs {
		s.fn(ev)
	}
}

// Subscribe registers fn after every subscriber so far; cancel unregisters
// it.
func (b *Bus) Subscribe(fn func(core.Event)) (cancel func()) {
	b.mu.Lock()
	defer b.mu.Unlock()
	id := b.next
	b.next++
	b.subs = append(b.subs[:len(b.subs):len(b.subs)], subscriber{id, fn})
	return func() {
		b.mu.Lock()
		defer b.mu.Unlock()
		for i, s := range b.subs {
			if s.id == id {
				b.subs = append(b.subs[:i:i], b.subs[i+1:]...)
				return
			}
		}
	}
}
