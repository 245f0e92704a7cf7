package core

import (
	"context"
	"sync"
)

// counter counts work in progress so that a stopping process can wait
// until there is none. (Not a sync.WaitGroup: work may begin after a wait
// has returned, when a request arrives over the network, which a
// WaitGroup forbids.) The zero value is ready.
type counter struct {
	mu   sync.Mutex
	n    int
	idle chan struct{}
}

func (c *counter) add() {
	c.mu.Lock()
	c.n++
	c.mu.Unlock()
}

func (c *counter) done() {
	c.mu.Lock()
	c.n--
	if c.n == 0 && c.idle != nil {
		close(c.idle)
		c.idle = nil
	}
	c.mu.Unlock()
}

// wait returns once nothing is counted, or with ctx's error.
func (c *counter) wait(ctx context.Context) error {
	c.mu.Lock()
	if c.n == 0 {
		c.mu.Unlock()
		return nil
	}
	if c.idle == nil {
		c.idle = make(chan struct{})
	}
	idle := c.idle
	c.mu.Unlock()
	select {
	case <-idle:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// goBackground runs f on a goroutine of the Service's own, which
// WaitBackground waits for.
func (s *Service) goBackground(f func()) {
	s.bg.add()
	go func() {
		defer s.bg.done()
		f()
	}()
}

// WaitBackground returns once every goroutine the Service started itself
// (the lease renewals of turns and runs) has returned, or with ctx's
// error. A stopping server calls it after the turns have ended
// (WaitTurns) and the runs have released their leases, before it closes
// the store a renewal writes to.
func (s *Service) WaitBackground(ctx context.Context) error { return s.bg.wait(ctx) }
