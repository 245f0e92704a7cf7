package mcpserver_test

import "testing"

// TestLetterIDsCanonicalMCP: mark_read and read_inbox refuse another
// spelling of an existing letter's id ("reader-+1") as validation_failed.
func TestLetterIDsCanonicalMCP(t *testing.T) {
	e := newEnv(t)
	lead, reader := e.member("demo", "lead"), e.member("demo", "reader")
	mustCall(t, lead, "send_message", map[string]any{"to": "reader", "body": "one"}, nil)
	for _, id := range []string{"reader-+1", "reader-01"} {
		wantRefusal(t, reader, "mark_read", map[string]any{"through": id}, "validation_failed")
		wantRefusal(t, reader, "read_inbox", map[string]any{"after": id}, "validation_failed")
	}
	mustCall(t, reader, "mark_read", map[string]any{"through": "reader-1"}, nil)
}
