package mcpserver_test

import (
	"context"
	"testing"
	"time"

	"mailroom/internal/core"
)

// TestCloseEndsSessions: Close, which the server calls when it stops,
// ends every open session and returns once each has been counted off its
// member, so that nothing of a session reads the store after it closes;
// a session that opens afterwards ends at once.
func TestCloseEndsSessions(t *testing.T) {
	e := newEnv(t)
	e.member("demo", "reader")
	e.member("demo", "reviewer")
	if n := e.h.Sessions(); n != 2 {
		t.Fatalf("open sessions = %d, want 2", n)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	if err := e.h.Close(ctx); err != nil {
		t.Fatalf("Close = %v, want nil (every session's end seen)", err)
	}
	if n := e.h.Sessions(); n != 0 {
		t.Errorf("open sessions after Close = %d, want 0", n)
	}
	view, err := e.svc.Team(core.AsAdmin(t.Context()), "demo")
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range view.Members {
		if m.MCPSessions != 0 {
			t.Errorf("%s: mcp_sessions after Close = %d, want 0", m.Name, m.MCPSessions)
		}
	}
	// A session opened after Close is not kept.
	if cs, err := e.tryConnect(e.tokens["demo"]["reader"], nil); err == nil {
		_ = cs.Close()
	}
	if n := e.h.Sessions(); n != 0 {
		t.Errorf("open sessions after a connection made after Close = %d, want 0", n)
	}
}
