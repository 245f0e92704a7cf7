package storetest

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"mailroom/internal/core"
)

// Scalars are the Unicode scalar values a store is tested to keep exactly
// (docs/api.md, "Every Unicode scalar value round-trips"): U+0000, which
// neither a PostgreSQL text column nor jsonb can hold, the other C0 and C1
// controls and DEL, the line separators the inbox encoder escapes, the
// edges of the planes and of the surrogate gap, noncharacters, the byte
// order mark, and text that merely looks like an escape.
var Scalars = []string{
	"\x00", "\x01", "\x1f", "\x7f", "\u0080", "\u0085", "\u009f",
	"\u2028", "\u2029", "\ufeff", "\ud7ff", "\ue000", "\ufdd0",
	"\ufffd", "\ufffe", "\uffff", "\U00010000", "\U0001f600", "\U0010ffff",
	`\u0000`, `\\u0000`, `\x00`, "%00",
}

// UnicodeText is every value of Scalars in one string, each between
// letters, with a NUL at both ends.
func UnicodeText() string {
	var b strings.Builder
	b.WriteString("\x00")
	for i, s := range Scalars {
		fmt.Fprintf(&b, "%c%s", 'a'+rune(i%26), s)
	}
	b.WriteString("\x00")
	return b.String()
}

// RunUnicode runs the tests that every text field keeps any scalar value.
func RunUnicode(t *testing.T, newStore func(t *testing.T) core.Store) {
	t.Run("UnicodeLetters", func(t *testing.T) { testUnicodeLetters(t, newStore(t)) })
	t.Run("UnicodeDocuments", func(t *testing.T) { testUnicodeDocuments(t, newStore(t)) })
}

// testUnicodeLetters: a letter body of each interesting value alone, and
// of all of them together, reads back exactly, with the inbox's bytes the
// lesson's encoding of those letters.
func testUnicodeLetters(t *testing.T, s core.Store) {
	ctx := t.Context()
	st := Team("alpha", "reader")
	st.Limits.InboxMessages = 64
	create(t, s, st)
	bodies := append(append([]string{}, Scalars...), UnicodeText(), "plain")
	var want []core.Message
	var wantBytes []byte
	for _, body := range bodies {
		id, err := send(ctx, s, "alpha", core.LeadName, "reader", body)
		if err != nil {
			t.Fatalf("send %+q: %v", body, err)
		}
		m := core.Message{ID: id, Sender: core.LeadName, Recipient: "reader", Body: body}
		want = append(want, m)
		wantBytes = append(wantBytes, core.EncodeInboxLine(m)...)
	}
	got := inbox(t, s, "alpha", "reader")
	if len(got) != len(want) {
		t.Fatalf("inbox holds %d letters, want %d", len(got), len(want))
	}
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("letter %d = %+q, want %+q", i+1, got[i].Body, want[i].Body)
		}
	}
	if err := core.View(ctx, s, "alpha", func(tx core.TeamTx) error {
		b, err := tx.InboxBytes("reader")
		if err != nil {
			return err
		}
		if string(b) != string(wantBytes) {
			t.Errorf("inbox bytes = %+q, want %+q", b, wantBytes)
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	// Another letter after them still gets the next id.
	if id, err := send(ctx, s, "alpha", "reader", "reader", "next"); err != nil || id != fmt.Sprintf("reader-%d", len(want)+1) {
		t.Fatalf("next send = %q, %v", id, err)
	}
}

// testUnicodeDocuments: the team's state (history, a request's payload and
// feedback), a turn document, an idempotency record's letter and a task's
// text keep every value.
func testUnicodeDocuments(t *testing.T, s core.Store) {
	ctx := t.Context()
	text := UnicodeText()
	create(t, s, Team("alpha", "reader"))
	at := time.Now().UTC().Truncate(time.Millisecond)
	letter := core.Message{ID: "lead-1", Sender: "reader", Recipient: core.LeadName, Body: text}
	turn := core.TurnDoc{TurnID: "reader-t1", Team: "alpha", Member: "reader", Status: core.TurnAnswered, Text: text,
		Steps: []core.TurnStep{}, StartedAt: at}
	task := Task(1, text)
	task.Detail = text
	task.Result = &text
	if err := core.Update(ctx, s, "alpha", func(tx core.TeamTx) error {
		st := tx.State()
		st.Requests = append(st.Requests, core.Request{ID: "req-1", Kind: core.KindPlan, Sender: "reader", Target: core.LeadName,
			Payload: text, Status: core.RequestRejected, Receipt: "lead-1",
			Reply: &core.Reply{Type: "plan_approval_response", RequestID: "req-1", Feedback: text}})
		m := st.Member("reader")
		m.History = append(m.History, core.UserText(text))
		if err := tx.AppendLetter(letter); err != nil {
			return err
		}
		if err := tx.PutIdempotency(core.IdempotencyRecord{Member: "reader", Key: "k1", Fingerprint: "fp", Result: []byte(`{}`), At: at}); err != nil {
			return err
		}
		if err := tx.PutTurn(turn); err != nil {
			return err
		}
		return tx.PutTask(task)
	}); err != nil {
		t.Fatalf("UpdateTeam with %+q: %v", text, err)
	}
	if err := core.View(ctx, s, "alpha", func(tx core.TeamTx) error {
		st := tx.State()
		if len(st.Requests) != 1 || st.Requests[0].Payload != text || st.Requests[0].Reply == nil || st.Requests[0].Reply.Feedback != text {
			t.Errorf("request = %+v, want payload and feedback %+q", st.Requests, text)
		}
		if h := st.Member("reader").History; len(h) != 1 || h[0].Text != text {
			t.Errorf("history = %+v, want one entry %+q", h, text)
		}
		r, ok, err := tx.Idempotency("reader", "k1")
		if err != nil || !ok || r.Letter == nil || *r.Letter != letter {
			t.Errorf("idempotency record = %+v, %v, %v; want its letter %+v", r, ok, err, letter)
		}
		docs, err := tx.Turns()
		if err != nil || len(docs) != 1 || docs[0].Text != text {
			t.Errorf("turns = %+v, %v; want one with text %+q", docs, err, text)
		}
		tasks, err := tx.Tasks()
		if err != nil || len(tasks) != 1 || tasks[0].Title != text || tasks[0].Detail != text || tasks[0].Result == nil || *tasks[0].Result != text {
			t.Errorf("tasks = %+v, %v; want one with title, detail and result %+q", tasks, err, text)
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	// A later unit of work on the team (the one a replica runs on what
	// it remembers of it) reads the same task, and can change it.
	if err := core.Update(ctx, s, "alpha", func(tx core.TeamTx) error {
		tasks, err := tx.Tasks()
		if err != nil {
			return err
		}
		if len(tasks) != 1 || tasks[0].Title != text {
			t.Errorf("task in a later unit = %+v, want title %+q", tasks, text)
		}
		next := tasks[0]
		next.Title = text + "\x00"
		return tx.PutTask(next)
	}); err != nil {
		t.Fatal(err)
	}
	if b := board(t, s, "alpha"); len(b) != 1 || b[0].Title != text+"\x00" {
		t.Fatalf("board = %+v, want title %+q", b, text+"\x00")
	}
}
