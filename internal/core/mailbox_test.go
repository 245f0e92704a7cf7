package core_test

import (
	"errors"
	"fmt"
	"os"
	"strings"
	"sync"
	"testing"

	"mailroom/internal/core"
)

const fixtureBody = "当前expected.txt记录为42；尚未运行。"

// TestSendMessage covers the send_message teaching area of docs/spec.md §9.1.
func TestSendMessage(t *testing.T) {
	t.Run("OKQueued", func(t *testing.T) {
		f := newFixture(t, nil)
		got := f.send("reviewer", "reader", "  "+fixtureBody+"\n")
		if got != (core.SendResult{ID: "reader-1", Status: "queued"}) {
			t.Fatalf("got %+v", got)
		}
		want := `{"id": "reader-1", "sender": "reviewer", "recipient": "reader", "body": "` + fixtureBody + `"}` + "\n"
		if b := f.inboxBytes("reader"); b != want {
			t.Fatalf("file:\n%q\nwant\n%q", b, want)
		}
		info, err := os.Stat(f.inboxPath("reader"))
		if err != nil || info.Mode().Perm() != 0o600 {
			t.Fatalf("mode %v, %v; want 0600", info.Mode(), err)
		}
	})
	t.Run("ErrFull", func(t *testing.T) {
		f := newFixture(t, nil)
		for i := range 8 {
			f.send("reviewer", "reader", fmt.Sprintf("旧记录%d", i))
		}
		before := f.inboxBytes("reader")
		_, err := f.svc.Send(core.AsMember(t.Context(), "demo", "reviewer"), core.SendInput{Team: "demo", To: "reader", Body: fixtureBody})
		wantCode(t, err, core.CodeInboxFull)
		if f.inboxBytes("reader") != before || strings.Count(before, "\n") != 8 {
			t.Fatal("full inbox changed")
		}
	})
	t.Run("ErrCorrupt", func(t *testing.T) {
		f := newFixture(t, nil)
		if err := os.MkdirAll(f.inboxPath("reader")[:len(f.inboxPath("reader"))-len("reader.jsonl")], 0o700); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(f.inboxPath("reader"), []byte("not-json"), 0o600); err != nil {
			t.Fatal(err)
		}
		_, err := f.svc.Send(core.AsMember(t.Context(), "demo", "reviewer"), core.SendInput{Team: "demo", To: "reader", Body: fixtureBody})
		wantCode(t, err, core.CodeInboxCorrupt)
		if !errors.Is(err, core.ErrInboxJSON) {
			t.Fatalf("cause %v", err)
		}
		_, err = f.svc.PrepareInbox(t.Context(), "demo", "reader", nil)
		wantCode(t, err, core.CodeInboxCorrupt)
		if f.inboxBytes("reader") != "not-json" {
			t.Fatal("corrupt file was overwritten")
		}
	})
	t.Run("ErrReplace", func(t *testing.T) {
		f := newFixture(t, nil)
		f.fs.setFailSave(failInbox)
		_, err := f.svc.Send(core.AsMember(t.Context(), "demo", "reviewer"), core.SendInput{Team: "demo", To: "reader", Body: fixtureBody})
		wantCode(t, err, core.CodeStorageFailed)
		if !errors.Is(err, errInjected) {
			t.Fatalf("cause %v", err)
		}
		if f.inboxBytes("reader") != "<missing>" {
			t.Fatal("mailbox file exists after failed save")
		}
		f.assertNoTemp()
	})
	t.Run("ErrReplaceKeepsOldBytes", func(t *testing.T) {
		f := newFixture(t, nil)
		f.send("reviewer", "reader", "first")
		before := f.inboxBytes("reader")
		f.fs.setFailSave(failInbox)
		_, err := f.svc.Send(core.AsMember(t.Context(), "demo", "reviewer"), core.SendInput{Team: "demo", To: "reader", Body: "second"})
		wantCode(t, err, core.CodeStorageFailed)
		if f.inboxBytes("reader") != before {
			t.Fatal("old bytes changed")
		}
		f.assertNoTemp()
	})
	for _, tc := range []struct {
		name, sender, recipient, body string
		code                          core.Code
	}{
		{"ErrUnknownRecipient", "reviewer", "../other", fixtureBody, core.CodeUnknownMember},
		{"ErrUnknownSender", "unknown", "reader", fixtureBody, core.CodeUnknownMember},
		{"ErrEmptyBody", "reviewer", "reader", "", core.CodeBodyLength},
		{"ErrWhitespaceBody", "reviewer", "reader", " \u3000\u2028\x1c ", core.CodeBodyLength},
		{"ErrLongBody", "reviewer", "reader", strings.Repeat("字", 601), core.CodeBodyLength},
		// The unknown recipient is reported before the bad body, as in the lesson.
		{"ErrUnknownBeatsBody", "reviewer", "nobody", "", core.CodeUnknownMember},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t, nil)
			_, err := f.svc.Send(core.AsMember(t.Context(), "demo", tc.sender), core.SendInput{Team: "demo", To: tc.recipient, Body: tc.body})
			wantCode(t, err, tc.code)
			if f.inboxBytes("reader") != "<missing>" {
				t.Fatal("a file was written")
			}
		})
	}
	t.Run("ErrUnknownRecipientNamesItAndTheMembers", func(t *testing.T) {
		f := newFixture(t, nil)
		_, err := f.svc.Send(core.AsMember(t.Context(), "demo", "reviewer"), core.SendInput{Team: "demo", To: "readr", Body: fixtureBody})
		wantCode(t, err, core.CodeUnknownMember)
		want := `Only registered member names may be used: "readr" is not a member of team demo, whose members are lead, reader, reviewer.`
		if got := core.ErrorMessage(err); got != want {
			t.Errorf("detail = %q, want %q", got, want)
		}
		long := strings.Repeat("x", 500)
		_, err = f.svc.Send(core.AsMember(t.Context(), "demo", "reviewer"), core.SendInput{Team: "demo", To: long, Body: fixtureBody})
		if got := core.ErrorMessage(err); strings.Contains(got, long[:65]) || !strings.Contains(got, long[:64]+`"…`) {
			t.Errorf("detail = %q, want the name cut to 64 characters", got)
		}
	})
	t.Run("OKPaddedLongBodyTrimmedToLimit", func(t *testing.T) {
		f := newFixture(t, nil)
		f.send("reviewer", "reader", "  "+strings.Repeat("字", 600)+"  ")
	})
	t.Run("OKSendToSelf", func(t *testing.T) {
		f := newFixture(t, nil)
		if got := f.send("reader", "reader", "note"); got.ID != "reader-1" {
			t.Fatal(got)
		}
	})
	t.Run("OKLineSeparatorDoesNotPoisonInbox", func(t *testing.T) {
		f := newFixture(t, nil)
		f.send("reviewer", "reader", "a\u2028b\u0085c\u2029d")
		f.send("reviewer", "reader", "next")
		items, err := f.svc.Inbox(t.Context(), "demo", "reader")
		if err != nil || len(items) != 2 || items[0].Body != "a\u2028b\u0085c\u2029d" {
			t.Fatalf("%v %v", items, err)
		}
		if !strings.Contains(f.inboxBytes("reader"), `a\u2028b\u0085c\u2029d`) {
			t.Fatal("line separators not escaped on disk")
		}
	})
	t.Run("ErrByteLimit", func(t *testing.T) {
		limits := core.DefaultLimits()
		limits.InboxBytes = 200
		f := newFixture(t, &limits)
		f.send("reviewer", "reader", strings.Repeat("a", 100))
		_, err := f.svc.Send(core.AsMember(t.Context(), "demo", "reviewer"), core.SendInput{Team: "demo", To: "reader", Body: strings.Repeat("b", 100)})
		wantCode(t, err, core.CodeInboxFull)
		if strings.Count(f.inboxBytes("reader"), "\n") != 1 {
			t.Fatal("inbox changed")
		}
	})
}

// TestConcurrentSenders is docs/spec.md §9.1 group 3: 8 senders at once, ids 1..8,
// none lost.
func TestConcurrentSenders(t *testing.T) {
	f := newFixture(t, nil)
	var wg sync.WaitGroup
	ids := make(chan string, 8)
	for i := range 8 {
		wg.Go(func() {
			r, err := f.svc.Send(core.AsMember(t.Context(), "demo", "reviewer"), core.SendInput{Team: "demo", To: "reader", Body: fmt.Sprintf("letter %d", i)})
			if err != nil {
				t.Error(err)
				return
			}
			ids <- r.ID
		})
	}
	wg.Wait()
	close(ids)
	seen := map[string]bool{}
	for id := range ids {
		seen[id] = true
	}
	items, err := f.svc.Inbox(t.Context(), "demo", "reader")
	if err != nil || len(items) != 8 || len(seen) != 8 {
		t.Fatalf("items %d ids %d err %v", len(items), len(seen), err)
	}
	bodies := map[string]bool{}
	for i, m := range items {
		if m.ID != fmt.Sprintf("reader-%d", i+1) || !seen[m.ID] {
			t.Fatalf("item %d id %s", i, m.ID)
		}
		bodies[m.Body] = true
	}
	if len(bodies) != 8 {
		t.Fatal("a letter was lost")
	}
}

// TestPrepareInbox covers the prepare_inbox teaching area of docs/spec.md §9.1.
func TestPrepareInbox(t *testing.T) {
	input := []core.Entry{core.UserText("保留上轮源码，等队友补充预期。")}
	letter := `[team-message] {"body": "` + fixtureBody + `", "id": "reader-1", "recipient": "reader", "sender": "reviewer"}`
	t.Run("OKNew", func(t *testing.T) {
		f := newFixture(t, nil)
		f.send("reviewer", "reader", fixtureBody)
		got, err := f.svc.PrepareInbox(t.Context(), "demo", "reader", input)
		if err != nil || len(got) != 2 || got[1].Text != letter || got[1].Role != "user" {
			t.Fatalf("%+v %v", got, err)
		}
		if len(input) != 1 {
			t.Fatal("input history was mutated")
		}
	})
	t.Run("OKAlready", func(t *testing.T) {
		f := newFixture(t, nil)
		f.send("reviewer", "reader", fixtureBody)
		h, _ := f.svc.PrepareInbox(t.Context(), "demo", "reader", input)
		got, err := f.svc.PrepareInbox(t.Context(), "demo", "reader", h)
		if err != nil || len(got) != 2 {
			t.Fatalf("%d entries, %v", len(got), err)
		}
	})
	t.Run("OKDiscarded", func(t *testing.T) {
		f := newFixture(t, nil)
		f.send("reviewer", "reader", fixtureBody)
		_, _ = f.svc.PrepareInbox(t.Context(), "demo", "reader", input) // thrown away
		got, err := f.svc.PrepareInbox(t.Context(), "demo", "reader", input)
		if err != nil || len(got) != 2 || got[1].Text != letter {
			t.Fatalf("%+v %v", got, err)
		}
	})
	t.Run("ErrLimit", func(t *testing.T) {
		f := newFixture(t, nil)
		f.send("reviewer", "reader", fixtureBody)
		long := make([]core.Entry, 80)
		for i := range long {
			long[i] = core.UserText(fmt.Sprintf("已存消息%d", i))
		}
		before := f.inboxBytes("reader")
		_, err := f.svc.PrepareInbox(t.Context(), "demo", "reader", long)
		if !errors.Is(err, core.ErrHistoryLimit) {
			t.Fatalf("err %v", err)
		}
		if len(long) != 80 || f.inboxBytes("reader") != before {
			t.Fatal("history or mailbox changed")
		}
	})
	t.Run("OKEmpty", func(t *testing.T) {
		f := newFixture(t, nil)
		got, err := f.svc.PrepareInbox(t.Context(), "demo", "reader", input)
		if err != nil || len(got) != 1 || got[0].Text != input[0].Text {
			t.Fatalf("%+v %v", got, err)
		}
	})
	t.Run("ErrUnknown", func(t *testing.T) {
		f := newFixture(t, nil)
		_, err := f.svc.PrepareInbox(t.Context(), "demo", "../other", input)
		wantCode(t, err, core.CodeUnknownMember)
	})
	t.Run("OKAssistantEntryDoesNotCount", func(t *testing.T) {
		f := newFixture(t, nil)
		f.send("reviewer", "reader", fixtureBody)
		h := []core.Entry{{Role: "assistant", Text: letter}}
		got, _ := f.svc.PrepareInbox(t.Context(), "demo", "reader", h)
		if len(got) != 2 {
			t.Fatalf("%d entries", len(got))
		}
	})
}
