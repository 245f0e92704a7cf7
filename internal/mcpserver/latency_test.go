package mcpserver_test

import (
	"os"
	"slices"
	"strconv"
	"testing"
	"time"
)

// TestReadInboxCallLatency: a read_inbox tools/call under 2026-07-28 (no
// session: each call carries its own version and identity) and the same
// call in a 2025-11-25 session answer the same letters; with
// MAILROOM_MCP_CALLS=n set it makes n calls each way, alternating so both
// see the same load, and logs p50/p99 per protocol for BENCHMARKS.md. It
// asserts no timing.
func TestReadInboxCallLatency(t *testing.T) {
	e := newEnv(t)
	n, measure := 5, false
	if s := os.Getenv("MAILROOM_MCP_CALLS"); s != "" {
		v, err := strconv.Atoi(s)
		if err != nil || v < 1 {
			t.Fatalf("MAILROOM_MCP_CALLS = %q, want a positive count", s)
		}
		n, measure = v, true
	}
	lead := e.member("demo", "lead")
	var sent struct{ ID string }
	mustCall(t, lead, "send_message", map[string]any{"to": "reader", "body": "hello"}, &sent)

	modern, err := e.connectVersion(e.tokens["demo"]["reader"], modernVersion, nil)
	if err != nil {
		t.Fatalf("connect with %s: %v", modernVersion, err)
	}
	t.Cleanup(func() { _ = modern.Close() })
	session := e.connect(e.tokens["demo"]["reader"], nil)
	if session.ID() == "" || modern.ID() != "" {
		t.Fatalf("session ids: %s %q, %s %q; want one and none", legacyVersion, session.ID(), modernVersion, modern.ID())
	}

	clients := []struct {
		version string
		call    func() inbox
		lat     []time.Duration
	}{
		{version: modernVersion, call: func() (in inbox) { mustCall(t, modern, "read_inbox", map[string]any{}, &in); return }},
		{version: legacyVersion, call: func() (in inbox) { mustCall(t, session, "read_inbox", map[string]any{}, &in); return }},
	}
	for i := range n {
		for j := range clients {
			c := &clients[(i+j)%len(clients)]
			start := time.Now()
			in := c.call()
			c.lat = append(c.lat, time.Since(start))
			if len(in.Messages) != 1 || in.Messages[0].ID != sent.ID {
				t.Fatalf("%s call %d: read_inbox = %+v, want the letter %s", c.version, i, in.Messages, sent.ID)
			}
		}
	}
	if !measure {
		return
	}
	for _, c := range clients {
		slices.Sort(c.lat)
		p := func(q float64) time.Duration { return c.lat[int(q*float64(len(c.lat)-1))] }
		t.Logf("read_inbox tools/call, %s, %d calls: p50 %v, p99 %v, max %v", c.version, n, p(0.5), p(0.99), c.lat[len(c.lat)-1])
	}
}
