package agent

import (
	"encoding/json"
	"strings"
	"testing"

	"mailroom/internal/core"
)

// In a model's turn, archive_inbox and read_archive act on the turn's
// member's own inbox; refusals are error results naming core's code.
func TestArchiveToolsInATurn(t *testing.T) {
	svc := newService(t)
	ctx := t.Context()
	for _, body := range []string{"one", "two", "three"} {
		if _, err := svc.Send(core.AsMember(ctx, testTeam, core.LeadName), core.SendInput{Team: testTeam, To: "reader", Body: body}); err != nil {
			t.Fatal(err)
		}
	}
	reader := host{svc: svc, team: testTeam, member: "reader", set: DefaultTools("reader")}
	for _, tt := range []struct{ input, want string }{
		{`{"through":"reader-1"}`, "not_read: "},
		{`{}`, "archive_inbox: through is required"},
		{`{"through":"lead-1"}`, "validation_failed: "},
		{`{"through":"reader-1","member":"lead"}`, "archive_inbox: "},
	} {
		if got := reader.call(ctx, ToolArchiveInbox, json.RawMessage(tt.input)); !got.isError || !strings.HasPrefix(got.content, tt.want) {
			t.Errorf("archive_inbox %s = %+v, want an error beginning %q", tt.input, got, tt.want)
		}
	}
	for _, tt := range []struct{ input, want string }{
		{`{"limit":0}`, "validation_failed: "},
		{`{"limit":1001}`, "validation_failed: "},
		{`{"after":"lead-1"}`, "validation_failed: "},
	} {
		if got := reader.call(ctx, ToolReadArchive, json.RawMessage(tt.input)); !got.isError || !strings.HasPrefix(got.content, tt.want) {
			t.Errorf("read_archive %s = %+v, want an error beginning %q", tt.input, got, tt.want)
		}
	}
	if _, err := svc.MarkRead(core.AsMember(ctx, testTeam, "reader"), testTeam, "reader", "reader-2"); err != nil {
		t.Fatal(err)
	}
	got := reader.call(ctx, ToolArchiveInbox, json.RawMessage(`{"through":"reader-2"}`))
	var res core.ArchiveResult
	if got.isError || json.Unmarshal([]byte(got.content), &res) != nil || res.Archived != 2 || res.InboxLength != 1 {
		t.Fatalf("archive_inbox through reader-2 = %+v, want 2 archived, 1 left", got)
	}
	for _, tt := range []struct{ input, want string }{
		{`{}`, "reader-1,reader-2"},
		{`{"after":"reader-1","limit":5}`, "reader-2"},
		{`{"limit":1}`, "reader-1"},
	} {
		got := reader.call(ctx, ToolReadArchive, json.RawMessage(tt.input))
		var out archiveOutput
		if got.isError || json.Unmarshal([]byte(got.content), &out) != nil {
			t.Fatalf("read_archive %s = %+v, want the letters", tt.input, got)
		}
		var ids []string
		for _, l := range out.Letters {
			ids = append(ids, l.ID)
		}
		if strings.Join(ids, ",") != tt.want {
			t.Errorf("read_archive %s = %v, want %s", tt.input, ids, tt.want)
		}
	}
}
