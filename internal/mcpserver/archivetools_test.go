package mcpserver_test

import (
	"testing"

	"mailroom/internal/core"
)

// TestArchiveTools: archive_inbox moves the caller's read letters into its
// archive and read_archive reads them back, with the codes REST answers.
func TestArchiveTools(t *testing.T) {
	e := newEnv(t)
	lead, reader := e.member("demo", "lead"), e.member("demo", "reader")
	for _, body := range []string{"one", "two", "three"} {
		mustCall(t, lead, "send_message", map[string]any{"to": "reader", "body": body}, nil)
	}
	wantRefusal(t, reader, "archive_inbox", map[string]any{"through": "reader-1"}, "not_read")
	mustCall(t, reader, "mark_read", map[string]any{"through": "reader-2"}, nil)
	wantRefusal(t, reader, "archive_inbox", map[string]any{"through": "reader-3"}, "not_read")
	wantRefusal(t, reader, "archive_inbox", map[string]any{}, "validation_failed")
	wantRefusal(t, reader, "archive_inbox", map[string]any{"through": "lead-1"}, "validation_failed")
	wantRefusal(t, reader, "archive_inbox", map[string]any{"through": "reader-1", "member": "lead"}, "validation_failed")
	wantRefusal(t, reader, "read_archive", map[string]any{"limit": 0}, "validation_failed")
	wantRefusal(t, reader, "read_archive", map[string]any{"after": "lead-1"}, "validation_failed")

	var res core.ArchiveResult
	mustCall(t, reader, "archive_inbox", map[string]any{"through": "reader-2"}, &res)
	if res.Archived != 2 || res.InboxLength != 1 {
		t.Fatalf("archive_inbox = %+v, want 2 archived, 1 left", res)
	}
	var archive struct {
		Letters []core.Message `json:"letters"`
	}
	mustCall(t, reader, "read_archive", map[string]any{"after": "reader-1"}, &archive)
	if len(archive.Letters) != 1 || archive.Letters[0].ID != "reader-2" || archive.Letters[0].Body != "two" {
		t.Fatalf("read_archive after reader-1 = %+v, want reader-2", archive.Letters)
	}
	var inbox struct {
		Messages []core.Message `json:"messages"`
	}
	mustCall(t, reader, "read_inbox", map[string]any{}, &inbox)
	if len(inbox.Messages) != 1 || inbox.Messages[0].ID != "reader-3" {
		t.Fatalf("read_inbox after the archive = %+v, want reader-3 alone", inbox.Messages)
	}
}
