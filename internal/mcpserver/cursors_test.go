package mcpserver_test

import (
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// readState is mark_read's structured result.
type readState struct {
	ReadThrough *string `json:"read_through"`
	Unread      int     `json:"unread"`
}

func letterIDs(in inbox) []string {
	out := []string{}
	for _, m := range in.Messages {
		out = append(out, m.ID)
	}
	return out
}

// TestReadCursorTools: read_inbox and wait_for_mail with unread_only and
// mark_read, and mark_read itself, through the SDK's client.
func TestReadCursorTools(t *testing.T) {
	e := newEnv(t)
	lead, reader := e.member("demo", "lead"), e.member("demo", "reader")
	for _, b := range []string{"one", "two", "three"} {
		mustCall(t, lead, "send_message", map[string]any{"to": "reader", "body": b}, nil)
	}
	var in inbox
	mustCall(t, reader, "read_inbox", map[string]any{"unread_only": true}, &in)
	if got := letterIDs(in); len(got) != 3 {
		t.Fatalf("unread_only before any read = %v, want 3 letters", got)
	}
	// Reading without mark_read moves nothing.
	mustCall(t, reader, "read_inbox", map[string]any{"unread_only": true}, &in)
	if got := letterIDs(in); len(got) != 3 {
		t.Fatalf("unread_only again = %v, want the same 3 letters", got)
	}

	var rs readState
	mustCall(t, reader, "mark_read", map[string]any{"through": "reader-1"}, &rs)
	if rs.ReadThrough == nil || *rs.ReadThrough != "reader-1" || rs.Unread != 2 {
		t.Fatalf("mark_read reader-1 = %+v, want reader-1 with 2 unread", rs)
	}
	mustCall(t, reader, "read_inbox", map[string]any{"unread_only": true, "mark_read": true}, &in)
	if got := letterIDs(in); len(got) != 2 || got[0] != "reader-2" || got[1] != "reader-3" {
		t.Fatalf("unread_only with mark_read = %v, want reader-2, reader-3", got)
	}
	mustCall(t, reader, "read_inbox", map[string]any{"unread_only": true}, &in)
	if got := letterIDs(in); len(got) != 0 {
		t.Fatalf("unread_only after mark_read = %v, want none", got)
	}
	// An older letter leaves the cursor where it is.
	mustCall(t, reader, "mark_read", map[string]any{"through": "reader-2"}, &rs)
	if rs.ReadThrough == nil || *rs.ReadThrough != "reader-3" || rs.Unread != 0 {
		t.Fatalf("mark_read of an older letter = %+v, want reader-3 unchanged", rs)
	}

	wantRefusal(t, reader, "mark_read", map[string]any{"through": "reader-9"}, "validation_failed")
	wantRefusal(t, reader, "mark_read", map[string]any{"through": "lead-1"}, "validation_failed")
	wantRefusal(t, reader, "mark_read", map[string]any{}, "validation_failed")
	wantRefusal(t, reader, "read_inbox", map[string]any{"unread_only": true, "after": "reader-1"}, "validation_failed")
	wantRefusal(t, reader, "wait_for_mail", map[string]any{"unread_only": true, "after": "reader-1"}, "validation_failed")

	// wait_for_mail held on the unread letters, woken by a send, marks
	// what it returns read.
	type answer struct {
		res *mcp.CallToolResult
		err error
	}
	done := make(chan answer, 1)
	go func() {
		res, err := reader.CallTool(t.Context(), &mcp.CallToolParams{Name: "wait_for_mail", Arguments: map[string]any{"unread_only": true, "mark_read": true, "timeout_seconds": 60}})
		done <- answer{res, err}
	}()
	untilWaiting(t, e.svc, "demo", "reader", 1, done)
	mustCall(t, lead, "send_message", map[string]any{"to": "reader", "body": "four"}, nil)
	a := <-done
	if a.err != nil || a.res.IsError {
		t.Fatalf("wait_for_mail: %v %+v", a.err, a.res)
	}
	decodeContent(t, a.res, &in)
	if got := letterIDs(in); len(got) != 1 || got[0] != "reader-4" {
		t.Fatalf("wait_for_mail unread_only = %v, want reader-4 only", got)
	}
	rsNow, err := e.svc.ReadState(t.Context(), "demo", "reader")
	if err != nil || rsNow.ReadThrough == nil || *rsNow.ReadThrough != "reader-4" || rsNow.Unread != 0 {
		t.Fatalf("cursor after wait_for_mail with mark_read = %+v, %v; want reader-4", rsNow, err)
	}
	// A cursor is one's own: lead's inbox holds no lead-1.
	wantRefusal(t, lead, "mark_read", map[string]any{"through": "reader-4"}, "validation_failed")
}
