package core_test

import (
	"os"
	"path/filepath"
	"testing"
)

// TestGoldenMailboxes builds mailboxes through the service (plain sends
// with ASCII, CJK, quotes, backslashes, control characters, HTML
// characters and astral code points, then a plan and a shutdown request
// with their replies) and compares the files with testdata/golden, which
// the lessons' own send_message, open_request and reply_request wrote for
// the same sequence.
func TestGoldenMailboxes(t *testing.T) {
	f := newFixture(t, nil)
	for _, s := range []struct{ from, to, body string }{
		{"reviewer", "reader", "当前expected.txt记录为42；尚未运行。"},
		{"lead", "reader", "  plain ASCII with padding  \n"},
		{"reader", "lead", "quote \" backslash \\ tab\there <b>&amp;</b>"},
		{"reviewer", "lead", "controls \x00\x01\x1f\x7f bell\x07 ff\x0c bs\x08 cr\r nl\n end"},
		{"lead", "reviewer", "astral 🙂𝄞 and é, ß, 中文"},
	} {
		f.send(s.from, s.to, s.body)
	}
	f.open("reader", "lead", "plan", planText)
	f.reply("req-1", "lead", true, planFeedback)
	f.open("lead", "reviewer", "shutdown", "  "+shutdownText+" ")
	f.reply("req-2", "reviewer", false, "still \"busy\"\tsoon")

	for _, member := range []string{"lead", "reader", "reviewer"} {
		want, err := os.ReadFile(filepath.Join("testdata", "golden", member+".jsonl"))
		if err != nil {
			t.Fatal(err)
		}
		if got := f.inboxBytes(member); got != string(want) {
			t.Errorf("%s.jsonl:\n got %q\nwant %q", member, got, want)
		}
	}
}
