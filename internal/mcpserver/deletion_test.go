package mcpserver_test

import (
	"net/http"
	"runtime"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"mailroom/internal/core"
	"mailroom/internal/mcpserver"
)

// TestDeletingATeamEndsItsSessions: deleting a team ends its MCP sessions
// at once: a wait_for_mail in progress returns the error result not_found,
// nothing of a new team of the same name reaches the old session, and the
// new team's members count no session.
func TestDeletingATeamEndsItsSessions(t *testing.T) {
	e := newEnv(t)
	reader := e.member("demo", "reader")
	type answer struct {
		res *mcp.CallToolResult
		err error
	}
	done := make(chan answer, 1)
	go func() {
		res, err := reader.CallTool(t.Context(), &mcp.CallToolParams{Name: "wait_for_mail", Arguments: map[string]any{"timeout_seconds": 60}})
		done <- answer{res, err}
	}()
	untilWaiting(t, e.svc, "demo", "reader", 1, done)

	admin := core.AsAdmin(t.Context())
	if err := e.svc.DeleteTeam(admin, "demo", nil); err != nil {
		t.Fatal(err)
	}
	e.newTeam("demo", nil)
	if _, err := e.svc.Send(core.AsMember(t.Context(), "demo", "lead"), core.SendInput{Team: "demo", To: "reader", Body: "for the new team"}); err != nil {
		t.Fatal(err)
	}

	a := <-done
	if a.err != nil {
		t.Fatalf("wait_for_mail of the deleted team: %v, want an error result not_found", a.err)
	}
	if !a.res.IsError {
		t.Fatalf("wait_for_mail of the deleted team answered %v, want the error result not_found", a.res.StructuredContent)
	}
	var r mcpserver.Refusal
	decodeContent(t, a.res, &r)
	if r.Code != "not_found" {
		t.Fatalf("wait_for_mail of the deleted team: refusal %+v, want not_found", r)
	}
	for e.h.Sessions() != 0 {
		runtime.Gosched() // the session ends right after its call is answered
	}
	if res, err := reader.CallTool(t.Context(), &mcp.CallToolParams{Name: "read_inbox", Arguments: map[string]any{}}); err == nil && !res.IsError {
		t.Fatalf("the old session read an inbox after its team was deleted: %v", res.StructuredContent)
	}
	view, err := e.svc.Team(admin, "demo")
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range view.Members {
		if m.MCPSessions != 0 {
			t.Errorf("new team's %s: mcp_sessions = %d, want 0", m.Name, m.MCPSessions)
		}
	}
	// The new team's reader connects and reads its own letter.
	var box inbox
	mustCall(t, e.member("demo", "reader"), "read_inbox", map[string]any{}, &box)
	if len(box.Messages) != 1 || box.Messages[0].Body != "for the new team" {
		t.Fatalf("new reader's inbox = %+v, want its one letter", box.Messages)
	}
}

// TestHeldReadsPerTokenAcrossDoors: REST reads with wait and MCP
// wait_for_mail share one token's 8 places; the ninth wait is refused with
// too_many_streams on either door.
func TestHeldReadsPerTokenAcrossDoors(t *testing.T) {
	e := newFullEnv(t)
	tok := e.tokens["demo"]["reader"]
	results := make(chan int, 8)
	for range 8 {
		req, err := http.NewRequestWithContext(t.Context(), http.MethodGet, e.srv.URL+"/api/v1/teams/demo/members/reader/inbox?wait=60", nil)
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Authorization", "Bearer "+tok)
		go func() {
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				results <- 0
				return
			}
			resp.Body.Close()
			results <- resp.StatusCode
		}()
	}
	untilWaiting(t, e.svc, "demo", "reader", 8, results)
	reader := e.member("demo", "reader")
	wantRefusal(t, reader, "wait_for_mail", map[string]any{"timeout_seconds": 30}, "too_many_streams")
	// A read that does not wait is no held read.
	mustCall(t, reader, "read_inbox", map[string]any{}, nil)
	if _, err := e.svc.Send(core.AsMember(t.Context(), "demo", "lead"), core.SendInput{Team: "demo", To: "reader", Body: "wake"}); err != nil {
		t.Fatal(err)
	}
	for range 8 {
		if status := <-results; status != http.StatusOK {
			t.Fatalf("held REST read: status %d, want 200", status)
		}
	}
}
