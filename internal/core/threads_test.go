package core_test

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"strings"
	"testing"

	"mailroom/internal/core"
)

// TestPlainLetterLineUnchanged: a letter sent without in_reply_to or
// ack_required is stored as the lesson's line, byte for byte.
func TestPlainLetterLineUnchanged(t *testing.T) {
	f := newFixture(t, nil)
	f.send("lead", "reader", "hi")
	want := `{"id": "reader-1", "sender": "lead", "recipient": "reader", "body": "hi"}` + "\n"
	if got := f.inboxBytes("reader"); got != want {
		t.Fatalf("inbox file = %q, want %q", got, want)
	}
}

// sendAs sends in as sender and returns the result and error.
func (f *fixture) sendAs(sender string, in core.SendInput) (core.SendResult, error) {
	in.Team = f.team
	return f.svc.Send(core.AsMember(f.t.Context(), f.team, sender), in)
}

// TestReplyLine: a reply's line carries in_reply_to, thread_id and seq
// after the lesson's keys (ack_required last), reads back the same after
// a restart, and its history text holds the keys in sorted order.
func TestReplyLine(t *testing.T) {
	f := newFixture(t, nil)
	f.send("lead", "reader", "question")
	if _, err := f.sendAs("reader", core.SendInput{To: "lead", Body: "answer", InReplyTo: "reader-1", AckRequired: true}); err != nil {
		t.Fatal(err)
	}
	want := `{"id": "lead-1", "sender": "reader", "recipient": "lead", "body": "answer", "in_reply_to": "reader-1", "thread_id": "reader-1", "seq": 2, "ack_required": true}` + "\n"
	if got := f.inboxBytes("lead"); got != want {
		t.Fatalf("inbox file = %q, want %q", got, want)
	}
	wantMsg := core.Message{ID: "lead-1", Sender: "reader", Recipient: "lead", Body: "answer", InReplyTo: "reader-1", ThreadID: "reader-1", Seq: 2, AckRequired: true}
	for name, svc := range map[string]*core.Service{"running": f.svc, "reopened": f.reopen()} {
		got, err := svc.Inbox(t.Context(), f.team, "lead")
		if err != nil || len(got) != 1 || got[0] != wantMsg {
			t.Fatalf("%s: inbox = %+v, %v; want [%+v]", name, got, err, wantMsg)
		}
	}
	wantText := `[team-message] {"ack_required": true, "body": "answer", "id": "lead-1", "in_reply_to": "reader-1", "recipient": "lead", "sender": "reader", "seq": 2, "thread_id": "reader-1"}`
	if got := core.HistoryText(wantMsg); got != wantText {
		t.Fatalf("history text = %s, want %s", got, wantText)
	}
}

// TestDecodeInboxExtras: DecodeInbox takes a reply's keys all together
// and ack_required only as true.
func TestDecodeInboxExtras(t *testing.T) {
	rules := core.InboxRules{Recipient: "reader", Limits: core.DefaultLimits(), IsMember: func(n string) bool { return n == "lead" }}
	base := `{"id": "reader-1", "sender": "lead", "recipient": "reader", "body": "b"`
	tests := []struct {
		name, extra string
		ok          bool
	}{
		{"OKReply", `, "in_reply_to": "lead-1", "thread_id": "lead-1", "seq": 2`, true},
		{"OKAck", `, "ack_required": true`, true},
		{"ErrPartialReply", `, "in_reply_to": "lead-1", "seq": 2`, false},
		{"ErrAckFalse", `, "ack_required": false`, false},
		{"ErrSeqString", `, "in_reply_to": "lead-1", "thread_id": "lead-1", "seq": "2"`, false},
		{"ErrSeqZero", `, "in_reply_to": "lead-1", "thread_id": "lead-1", "seq": 0`, false},
		{"ErrBadID", `, "in_reply_to": "Lead-01", "thread_id": "lead-1", "seq": 2`, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := core.DecodeInbox([]byte(base+tt.extra+"}\n"), rules)
			if tt.ok {
				if err != nil || len(got) != 1 {
					t.Fatalf("got %+v, %v; want one letter", got, err)
				}
				if line := string(core.EncodeInboxLine(got[0])); line != base+tt.extra+"}\n" {
					t.Fatalf("re-encoded %q, want the line read", line)
				}
				return
			}
			if !errors.Is(err, core.ErrInboxFields) {
				t.Fatalf("err = %v, want inbox_corrupt caused by %v", err, core.ErrInboxFields)
			}
		})
	}
}

// TestThread: replies join the thread of the letter they answer, in the
// order sent; each member sees the letters it sent or received, the
// admin all; replies to letters the sender never saw are refused.
func TestThread(t *testing.T) {
	f := newFixture(t, nil)
	f.send("lead", "reader", "root")          // reader-1
	f.send("reviewer", "reader", "unrelated") // reader-2
	reply := func(sender, to, in string) string {
		t.Helper()
		r, err := f.sendAs(sender, core.SendInput{To: to, Body: "re " + in, InReplyTo: in})
		if err != nil {
			t.Fatalf("reply %s→%s to %s: %v", sender, to, in, err)
		}
		return r.ID
	}
	a := reply("reader", "lead", "reader-1") // lead-1
	b := reply("lead", "reviewer", a)        // reviewer-1: lead received a
	c := reply("reviewer", "reader", b)      // reader-3
	ids := func(ms []core.Message) string {
		var out []string
		for _, m := range ms {
			out = append(out, m.ID)
		}
		return strings.Join(out, ",")
	}
	for _, tt := range []struct{ who, want string }{
		{"", "reader-1," + a + "," + b + "," + c},
		{"lead", "reader-1," + a + "," + b},
		{"reader", "reader-1," + a + "," + c},
		{"reviewer", b + "," + c},
	} {
		ctx := core.AsAdmin(t.Context())
		if tt.who != "" {
			ctx = core.AsMember(t.Context(), f.team, tt.who)
		}
		got, err := f.svc.Thread(ctx, f.team, "reader-1")
		if err != nil || ids(got) != tt.want {
			t.Errorf("thread as %q = %s, %v; want %s", tt.who, ids(got), err, tt.want)
		}
		for _, m := range got {
			if m.Thread() != "reader-1" {
				t.Errorf("letter %s: thread %s, want reader-1", m.ID, m.Thread())
			}
		}
	}
	// lead neither sent nor received reader-2.
	_, err := f.sendAs("lead", core.SendInput{To: "reader", Body: "x", InReplyTo: "reader-2"})
	wantCode(t, err, core.CodeUnknownLetter)
	_, err = f.sendAs("lead", core.SendInput{To: "reader", Body: "x", InReplyTo: "reader-99"})
	wantCode(t, err, core.CodeUnknownLetter)
	_, err = f.sendAs("lead", core.SendInput{To: "reader", Body: "x", InReplyTo: "reader-01"})
	wantCode(t, err, core.CodeValidation)
	if n := f.member("reader").InboxLength; n != 3 {
		t.Fatalf("reader's inbox holds %d letters after the refusals, want 3", n)
	}
	_, err = f.svc.Thread(core.AsMember(t.Context(), f.team, "lead"), f.team, "reader-2")
	wantCode(t, err, core.CodeNotFound)
	_, err = f.svc.Thread(core.AsMember(t.Context(), f.team, "lead"), f.team, a)
	wantCode(t, err, core.CodeNotFound) // a reply is no thread's first letter
	_, err = f.svc.Thread(core.AsAdmin(t.Context()), f.team, "nope")
	wantCode(t, err, core.CodeValidation)
}

// TestAck: the recipient acknowledges a letter that asked for it, once;
// the receipt shows attended, read and the ack, also after a restart.
func TestAck(t *testing.T) {
	f := newFixture(t, nil)
	r, err := f.sendAs("lead", core.SendInput{To: "reader", Body: "do it", AckRequired: true})
	if err != nil {
		t.Fatal(err)
	}
	f.send("lead", "reader", "no ack needed") // reader-2
	ack := func(who, id, outcome, note string) (core.Receipt, error) {
		return f.svc.AckLetter(core.AsMember(t.Context(), f.team, who), core.AckInput{Team: f.team, Member: who, ID: id, Outcome: outcome, Note: note})
	}
	_, err = f.svc.AckLetter(core.AsMember(t.Context(), f.team, "lead"), core.AckInput{Team: f.team, Member: "reader", ID: r.ID, Outcome: core.AckDone})
	wantCode(t, err, core.CodeForbidden) // only the recipient acks
	_, err = ack("lead", r.ID, core.AckDone, "")
	wantCode(t, err, core.CodeNotFound) // no letter of lead's inbox
	_, err = f.svc.AckLetter(core.AsAdmin(t.Context()), core.AckInput{Team: f.team, Member: "reader", ID: r.ID, Outcome: core.AckDone})
	wantCode(t, err, core.CodeForbidden)
	_, err = ack("reader", r.ID, "finished", "")
	wantCode(t, err, core.CodeValidation)
	_, err = ack("reader", r.ID, core.AckDone, strings.Repeat("n", core.MaxAckNoteChars+1))
	wantCode(t, err, core.CodeValidation)
	_, err = ack("reader", "reader-9", core.AckDone, "")
	wantCode(t, err, core.CodeNotFound)
	_, err = ack("reader", "reader-2", core.AckDone, "")
	wantCode(t, err, core.CodeAckNotRequired)

	got, err := ack("reader", r.ID, core.AckBlocked, "  waiting for the key ")
	if err != nil {
		t.Fatal(err)
	}
	if got.Ack == nil || got.Ack.Outcome != core.AckBlocked || got.Ack.Note != "waiting for the key" || got.Ack.At.IsZero() || got.Read || got.Attended {
		t.Fatalf("receipt = %+v (ack %+v), want blocked with the trimmed note, unread, unattended", got, got.Ack)
	}
	_, err = ack("reader", r.ID, core.AckDone, "")
	wantCode(t, err, core.CodeAlreadyAcked)

	if _, err := f.svc.MarkRead(core.AsMember(t.Context(), f.team, "reader"), f.team, "reader", r.ID); err != nil {
		t.Fatal(err)
	}
	for name, svc := range map[string]*core.Service{"running": f.svc, "reopened": f.reopen()} {
		rs, err := svc.Receipts(core.AsMember(t.Context(), f.team, "lead"), f.team, []string{r.ID, "reader-2"})
		if err != nil {
			t.Fatal(err)
		}
		if rs[0].Ack == nil || rs[0].Ack.Outcome != core.AckBlocked || !rs[0].Read || rs[1].Ack != nil || rs[1].Read {
			t.Fatalf("%s: receipts = %+v, want reader-1 read and blocked, reader-2 unread without ack", name, rs)
		}
	}
}

// TestAckAttended: a letter a turn of its recipient attended shows
// attended in its receipt.
func TestAckAttended(t *testing.T) {
	f := newFixture(t, nil)
	r, err := f.sendAs("lead", core.SendInput{To: "reader", Body: "look", AckRequired: true})
	if err != nil {
		t.Fatal(err)
	}
	shown := func(ctx context.Context, h []core.Entry) (core.TurnOutcome, error) {
		h, err := f.svc.PrepareInbox(core.AsMember(ctx, f.team, "reader"), f.team, "reader", h)
		if err != nil {
			return core.TurnOutcome{}, err
		}
		return core.TurnOutcome{Messages: append(h, core.Entry{Role: "assistant", Text: "Seen."}), Status: core.TurnAnswered, Text: "Seen."}, nil
	}
	if _, err := f.svc.RunTurn(t.Context(), f.team, "reader", shown); err != nil {
		t.Fatal(err)
	}
	rs, err := f.svc.Receipts(core.AsMember(t.Context(), f.team, "lead"), f.team, []string{r.ID})
	if err != nil || !rs[0].Attended || !rs[0].Read {
		t.Fatalf("receipts = %+v, %v; want attended and read", rs, err)
	}
}

// TestLimitsAfterCreation: every limit may be raised; one that bounds
// what the team holds may not be lowered below it; inbox_full names the
// limit and the way out.
func TestLimitsAfterCreation(t *testing.T) {
	l := core.DefaultLimits()
	l.InboxMessages = 2
	f := newFixture(t, &l)
	f.send("lead", "reader", "one")
	f.send("lead", "reader", "two")
	_, err := f.sendAs("lead", core.SendInput{To: "reader", Body: "three"})
	wantCode(t, err, core.CodeInboxFull)
	if msg := core.ErrorMessage(err); !strings.Contains(msg, "limits.inbox_messages (2)") || !strings.Contains(msg, "PATCH") {
		t.Fatalf("inbox_full detail = %q, want the limit and the PATCH that raises it", msg)
	}
	admin := core.AsAdmin(t.Context())
	n := func(v int) *int { return &v }
	if _, err := f.svc.UpdateLimits(admin, f.team, core.LimitsUpdate{InboxMessages: n(3), BodyChars: n(700)}); err != nil {
		t.Fatal(err)
	}
	f.send("lead", "reader", "three")
	for _, tt := range []struct {
		name string
		upd  core.LimitsUpdate
	}{
		{"inbox_messages", core.LimitsUpdate{InboxMessages: n(2)}},
		{"inbox_bytes", core.LimitsUpdate{InboxBytes: n(100)}},
		{"body_chars", core.LimitsUpdate{BodyChars: n(3)}},
	} {
		_, err := f.svc.UpdateLimits(admin, f.team, tt.upd)
		wantCode(t, err, core.CodeLimitBelowUsage)
		if !strings.Contains(core.ErrorMessage(err), tt.name) {
			t.Errorf("%s: detail %q does not name the limit", tt.name, core.ErrorMessage(err))
		}
	}
	// Live reservations are held too.
	for _, path := range []string{"a/**", "b/**"} {
		if _, err := f.svc.Reserve(core.AsMember(t.Context(), f.team, "reader"), f.team, core.ReserveInput{Paths: []string{path}}); err != nil {
			t.Fatal(err)
		}
	}
	_, err = f.svc.UpdateLimits(admin, f.team, core.LimitsUpdate{Reservations: n(1)})
	wantCode(t, err, core.CodeLimitBelowUsage)
	// Lowering to exactly what is held is allowed.
	v, err := f.svc.UpdateLimits(admin, f.team, core.LimitsUpdate{InboxMessages: n(3), BodyChars: n(5), HistoryEntries: n(10)})
	if err != nil || v.Limits.InboxMessages != 3 || v.Limits.BodyChars != 5 || v.Limits.HistoryEntries != 10 {
		t.Fatalf("limits = %+v, %v; want inbox_messages 3, body_chars 5, history_entries 10", v.Limits, err)
	}
	// The team reads back sound under its new limits.
	if got, err := f.reopen().Inbox(admin, f.team, "reader"); err != nil || len(got) != 3 {
		t.Fatalf("after reopening: %d letters, %v; want 3", len(got), err)
	}
}

// TestRaisedLimitsSurviveACrash: after inbox limits were raised, a
// restart (its state file older than its log) reads the inboxes the new
// limits allow, and still repairs a torn last line.
func TestRaisedLimitsSurviveACrash(t *testing.T) {
	l := core.DefaultLimits()
	l.InboxMessages, l.InboxBytes = 2, 200
	f := newFixture(t, &l)
	f.send("lead", "reader", "one")
	n := func(v int) *int { return &v }
	if _, err := f.svc.UpdateLimits(core.AsAdmin(t.Context()), f.team, core.LimitsUpdate{InboxMessages: n(10), InboxBytes: n(4000)}); err != nil {
		t.Fatal(err)
	}
	for _, body := range []string{strings.Repeat("two ", 40), strings.Repeat("three ", 30)} {
		f.send("lead", "reader", body)
	}
	file, err := os.OpenFile(f.inboxPath("reader"), os.O_WRONLY|os.O_APPEND, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := file.WriteString(`{"id": "reader-4", "sen`); err != nil {
		t.Fatal(err)
	}
	file.Close()
	svc := f.reopen()
	got, err := svc.Inbox(core.AsAdmin(t.Context()), f.team, "reader")
	if err != nil || len(got) != 3 {
		t.Fatalf("after a crash: %d letters, %v; want the 3 sent", len(got), err)
	}
	v, err := svc.Team(t.Context(), f.team)
	if err != nil || v.Damaged || v.Limits.InboxBytes != 4000 {
		t.Fatalf("after a crash: damaged %v, inbox_bytes %d, %v; want sound with 4000", v.Damaged, v.Limits.InboxBytes, err)
	}
}

// TestLetterDocumentReadsBack: a letter document of the API (which names
// a first letter's own id as its thread) decodes to the stored letter.
func TestLetterDocumentReadsBack(t *testing.T) {
	var m core.Message
	if err := json.Unmarshal([]byte(`{"id": "reader-1", "sender": "lead", "recipient": "reader", "body": "hi", "thread_id": "reader-1"}`), &m); err != nil {
		t.Fatal(err)
	}
	if want := (core.Message{ID: "reader-1", Sender: "lead", Recipient: "reader", Body: "hi"}); m != want {
		t.Fatalf("decoded %+v, want %+v", m, want)
	}
	reply := core.Message{ID: "lead-1", Sender: "reader", Recipient: "lead", Body: "ok", InReplyTo: "reader-1", ThreadID: "reader-1", Seq: 2}
	data, _ := json.Marshal(reply)
	var got core.Message
	if err := json.Unmarshal(data, &got); err != nil || got != reply {
		t.Fatalf("reply read back as %+v, %v; want %+v", got, err, reply)
	}
}
