package main

import (
	"encoding/json"
	"strings"
	"testing"
)

// TestArchiveCommand: `archive` moves what the member has read (through
// its read cursor by default, or through an id), `archive --list` reads
// the archive back in pages; each refusal is one line on stderr, exit 1.
func TestArchiveCommand(t *testing.T) {
	t.Parallel()
	base, admin := cliServer(t)
	tok := memberTokens(t, base, admin, "shelf")
	lead := []string{"MAILROOM_URL=" + base, "MAILROOM_TOKEN=" + tok["lead"]}
	reader := []string{"MAILROOM_URL=" + base, "MAILROOM_TOKEN=" + tok["reader"]}

	if r := runBin(t, nil, "", "archive", "-h"); r.code != 0 || !strings.Contains(r.stdout, "Usage: mailroom archive [ID]") ||
		!strings.Contains(r.stdout, "--list") || !strings.Contains(r.stdout, "--after id") || !strings.Contains(r.stdout, "MAILROOM_TOKEN") ||
		!strings.Contains(r.stdout, "mailroom archive reader-12") {
		t.Errorf("archive -h: exit %d, stdout %q; want usage, flags, environment and example", r.code, r.stdout)
	}
	for _, body := range []string{"one", "two"} {
		if r := runBin(t, lead, "", "send", "reader", body); r.code != 0 {
			t.Fatalf("send: exit %d, stderr %q", r.code, r.stderr)
		}
	}
	r := runBin(t, reader, "", "archive")
	oneErrorLine(t, "archive with nothing read", r, 1)
	if !strings.Contains(r.stderr, "mark letters read first") {
		t.Errorf("archive with nothing read: stderr %q, want how to mark letters read", r.stderr)
	}
	r = runBin(t, reader, "", "archive", "reader-1")
	oneErrorLine(t, "archive of an unread letter", r, 1)
	if !strings.Contains(r.stderr, "409 not_read") {
		t.Errorf("archive of an unread letter: stderr %q, want 409 not_read", r.stderr)
	}
	for _, args := range [][]string{
		{"archive", "lead-1"},
		{"archive", "reader-1", "reader-2"},
		{"archive", "--after", "reader-1"},
		{"archive", "--list", "reader-1"},
		{"archive", "--list", "--limit", "1001"},
		{"archive", "--nope"},
	} {
		oneErrorLine(t, strings.Join(args, " "), runBin(t, reader, "", args...), 1)
	}
	if r := runBin(t, reader, "", "inbox", "--mark-read"); r.code != 0 {
		t.Fatalf("inbox --mark-read: exit %d, stderr %q", r.code, r.stderr)
	}
	if r := runBin(t, lead, "", "send", "reader", "three"); r.code != 0 || r.stdout != "reader-3\n" {
		t.Fatalf("send: exit %d, stdout %q, stderr %q; want reader-3", r.code, r.stdout, r.stderr)
	}
	if r := runBin(t, reader, "", "archive"); r.code != 0 || r.stdout != "Through reader-2: 2 archived, 1 left in the inbox.\n" {
		t.Fatalf("archive: exit %d, stdout %q, stderr %q; want 2 archived through reader-2", r.code, r.stdout, r.stderr)
	}
	if r := runBin(t, reader, "", "archive", "reader-2", "--json"); r.code != 0 || !strings.Contains(r.stdout, `"archived": 0`) {
		t.Fatalf("archive again --json: exit %d, stdout %q, stderr %q; want archived 0", r.code, r.stdout, r.stderr)
	}
	r = runBin(t, reader, "", "archive", "--list")
	if r.code != 0 || !strings.Contains(r.stdout, "Mail from lead (reader-1)") || !strings.Contains(r.stdout, "> two") || strings.Contains(r.stdout, "three") {
		t.Fatalf("archive --list: exit %d, stdout %q, stderr %q; want reader-1 and reader-2 only", r.code, r.stdout, r.stderr)
	}
	r = runBin(t, reader, "", "archive", "--list", "--after", "reader-1", "--limit", "1", "--json")
	var page struct {
		Letters []struct{ ID, Body string } `json:"letters"`
	}
	if err := json.Unmarshal([]byte(r.stdout), &page); r.code != 0 || err != nil || len(page.Letters) != 1 || page.Letters[0].ID != "reader-2" {
		t.Fatalf("archive --list --after reader-1 --limit 1 --json: exit %d, stdout %q (%v); want reader-2", r.code, r.stdout, err)
	}
	if r := runBin(t, lead, "", "archive", "--list"); r.code != 0 || r.stdout != "No archived letters.\n" {
		t.Fatalf("lead's archive --list: exit %d, stdout %q; want No archived letters.", r.code, r.stdout)
	}
}
