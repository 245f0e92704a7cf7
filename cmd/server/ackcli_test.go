package main

import (
	"strings"
	"testing"
)

// TestAckAndReplyCommands: `send --in-reply-to --ack`, the header that
// tells the recipient how to acknowledge, and `ack` with its refusals as
// one line on stderr.
func TestAckAndReplyCommands(t *testing.T) {
	t.Parallel()
	base, admin := cliServer(t)
	tok := memberTokens(t, base, admin, "acks")
	lead := []string{"MAILROOM_URL=" + base, "MAILROOM_TOKEN=" + tok["lead"]}
	reader := []string{"MAILROOM_URL=" + base, "MAILROOM_TOKEN=" + tok["reader"]}

	if r := runBin(t, lead, "", "send", "reader", "run the tests", "--ack"); r.code != 0 || r.stdout != "reader-1\n" {
		t.Fatalf("send --ack: exit %d, stdout %q, stderr %q; want reader-1", r.code, r.stdout, r.stderr)
	}
	r := runBin(t, reader, "", "inbox")
	if want := "Mail from lead (reader-1): a letter. Its sender asks for an acknowledgement: once you have acted on it, run `mailroom ack reader-1 done|blocked|rejected --note TEXT` or call the ack_letter tool (id \"reader-1\").\n> run the tests"; r.code != 0 || !strings.Contains(r.stdout, want) {
		t.Fatalf("inbox: exit %d, stdout %q; want the header %q", r.code, r.stdout, want)
	}
	if r := runBin(t, reader, "", "send", "--in-reply-to", "reader-1", "lead", "running now"); r.code != 0 || r.stdout != "lead-1\n" {
		t.Fatalf("send --in-reply-to: exit %d, stdout %q, stderr %q; want lead-1", r.code, r.stdout, r.stderr)
	}
	if r := runBin(t, lead, "", "inbox"); r.code != 0 || !strings.Contains(r.stdout, "Mail from reader (lead-1): a letter, in reply to reader-1 (thread reader-1).\n> running now") {
		t.Fatalf("lead's inbox: exit %d, stdout %q; want the reply's header", r.code, r.stdout)
	}
	oneErrorLine(t, "ack with a bad outcome", runBin(t, reader, "", "ack", "reader-1", "finished"), 1)
	oneErrorLine(t, "ack without an outcome", runBin(t, reader, "", "ack", "reader-1"), 1)
	oneErrorLine(t, "ack of a letter that asked for none", runBin(t, lead, "", "ack", "lead-1", "done"), 1)
	if r := runBin(t, reader, "", "ack", "reader-1", "done", "--note", "all green"); r.code != 0 || r.stdout != "reader-1 done\n" {
		t.Fatalf("ack: exit %d, stdout %q, stderr %q; want reader-1 done", r.code, r.stdout, r.stderr)
	}
	r = runBin(t, reader, "", "ack", "reader-1", "blocked")
	oneErrorLine(t, "second ack", r, 1)
	if !strings.Contains(r.stderr, "already_acked") {
		t.Errorf("second ack: stderr %q, want already_acked", r.stderr)
	}
}
