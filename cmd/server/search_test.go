package main

import (
	"strings"
	"testing"
)

// TestSearchCommand: `mailroom search` finds a letter right after `send`,
// one line per result, and a malformed query is one line on standard
// error, exit 1.
func TestSearchCommand(t *testing.T) {
	t.Parallel()
	base, admin := cliServer(t)
	tok := memberTokens(t, base, admin, "seekers")
	lead := []string{"MAILROOM_URL=" + base, "MAILROOM_TOKEN=" + tok["lead"]}
	reader := []string{"MAILROOM_URL=" + base, "MAILROOM_TOKEN=" + tok["reader"]}
	if r := runBin(t, lead, "", "send", "reader", "the walrus report is late"); r.code != 0 {
		t.Fatalf("send: exit %d, stderr %q", r.code, r.stderr)
	}
	r := runBin(t, reader, "", "search", "WALRUS", "report", "--from", "lead")
	if want := "reader-1  lead → reader  the walrus report is late\n"; r.code != 0 || r.stdout != want {
		t.Fatalf("search: exit %d, stdout %q, stderr %q; want %q", r.code, r.stdout, r.stderr, want)
	}
	if r := runBin(t, reader, "", "search", "zeppelin"); r.code != 0 || r.stdout != "No letters found.\n" {
		t.Fatalf("search zeppelin: exit %d, stdout %q", r.code, r.stdout)
	}
	r = runBin(t, reader, "", "search", `"unclosed`)
	if r.code != 1 || strings.Count(r.stderr, "\n") != 1 || !strings.Contains(r.stderr, "unclosed quote") {
		t.Fatalf("search with an unclosed quote: exit %d, stderr %q; want exit 1 and one line saying why", r.code, r.stderr)
	}
}
