package live

import (
	"context"
	"sync"

	"mailroom/internal/core"
)

// MaxHeldReadsPerToken bounds the reads for mail one token holds waiting
// at once, REST reads with `wait` and MCP wait_for_mail together: each
// holds a connection (a file descriptor) and memory for up to
// core.MaxWait, so one token must not be able to take the server's share
// of them.
const MaxHeldReadsPerToken = 8

// heldReads counts the waiting reads of each token. The zero value is
// ready.
type heldReads struct {
	mu  sync.Mutex
	n   map[string]int
	max int // Options.MaxHeldReadsPerToken
}

// heldKey names the token of the caller of ctx: a member's token by its
// hash where the door handed it over (core.Principal.TokenHash), else the
// member (one token each), or the admin's.
func heldKey(p core.Principal) string {
	switch {
	case p.Admin:
		return "admin"
	case p.TokenHash() != "":
		return "token\x00" + p.TokenHash()
	default:
		return "member\x00" + p.Team + "\x00" + p.Member
	}
}

// HoldRead takes one of the caller's places for a read that is about to
// wait for mail, or refuses it with too_many_streams when the caller's
// token already holds MaxHeldReadsPerToken waiting reads. release gives
// the place back (once, however often it is called). A door whose reads
// wait outside WaitInbox (the REST API's held reads) calls it itself;
// WaitInbox takes its place by itself.
//
// The in-process host (a context without a principal) holds no token and
// is not bounded.
func (h *Hub) HoldRead(ctx context.Context) (release func(), err error) {
	p, ok := core.PrincipalFrom(ctx)
	if !ok {
		return func() {}, nil
	}
	key := heldKey(p)
	c := &h.holds
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.n[key] >= c.max {
		return nil, core.Errorf(core.CodeTooManyStreams, "This token already holds %d waiting reads; let one answer first.", c.max)
	}
	if c.n == nil {
		c.n = map[string]int{}
	}
	c.n[key]++
	var once sync.Once
	return func() {
		once.Do(func() {
			c.mu.Lock()
			defer c.mu.Unlock()
			if c.n[key]--; c.n[key] <= 0 {
				delete(c.n, key)
			}
		})
	}, nil
}
