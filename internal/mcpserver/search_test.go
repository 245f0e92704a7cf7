package mcpserver_test

import (
	"testing"

	"mailroom/internal/core"
)

// TestSearchMailTool: search_mail through the official SDK client finds a
// letter right after its send, only the caller's letters, with core's
// refusals.
func TestSearchMailTool(t *testing.T) {
	e := newEnv(t)
	lead, reader, reviewer := e.member("demo", "lead"), e.member("demo", "reader"), e.member("demo", "reviewer")
	mustCall(t, lead, "send_message", map[string]any{"to": "reader", "body": "The walrus report is due Friday."}, nil)
	mustCall(t, reviewer, "send_message", map[string]any{"to": "lead", "body": "A walrus was seen."}, nil)

	var found struct {
		Results []core.SearchResult `json:"results"`
	}
	mustCall(t, reader, "search_mail", map[string]any{"q": `"walrus REPORT"`}, &found)
	if len(found.Results) != 1 || found.Results[0].Letter.ID != "reader-1" || found.Results[0].Snippet == "" {
		t.Fatalf("reader's search = %+v, want reader-1 with a snippet", found.Results)
	}
	mustCall(t, reader, "search_mail", map[string]any{"q": "walrus"}, &found)
	if len(found.Results) != 1 {
		t.Fatalf("reader sees %d walrus letters, want 1 (the other is between reviewer and lead)", len(found.Results))
	}
	mustCall(t, lead, "search_mail", map[string]any{"q": "walrus", "from": "reviewer"}, &found)
	if len(found.Results) != 1 || found.Results[0].Letter.ID != "lead-1" {
		t.Fatalf("lead's search from reviewer = %+v, want lead-1", found.Results)
	}
	wantRefusal(t, reader, "search_mail", map[string]any{"q": `"open`}, "validation_failed")
	wantRefusal(t, reader, "search_mail", map[string]any{"q": "  "}, "validation_failed")
}
