package storetest

import (
	"testing"
	"time"

	"mailroom/internal/core"
)

// RunMail runs the part of the contract that threads, acknowledgements
// and limits after creation rely on (docs/api.md, "Mail that stays
// useful"): a reply's fields in its letter and line, the acks in the
// team's state and raised limits, all kept by what every store already
// stores; Run calls it.
func RunMail(t *testing.T, newStore func(t *testing.T) core.Store) {
	t.Run("ReplyLettersRoundTrip", func(t *testing.T) { testReplyLetters(t, newStore(t)) })
	t.Run("AcksAndRaisedLimitsKept", func(t *testing.T) { testAcksAndLimits(t, newStore(t)) })
}

// testReplyLetters: a plain letter's line is the lesson's, a reply's
// carries its keys, and both read back as appended.
func testReplyLetters(t *testing.T, s core.Store) {
	create(t, s, Team("alpha", "reader"))
	plain := core.Message{ID: "reader-1", Sender: "lead", Recipient: "reader", Body: "root"}
	reply := core.Message{ID: "reader-2", Sender: "lead", Recipient: "reader", Body: "more", InReplyTo: "reader-1", ThreadID: "reader-1", Seq: 2, AckRequired: true}
	for _, m := range []core.Message{plain, reply} {
		if err := core.Update(t.Context(), s, "alpha", func(tx core.TeamTx) error { return tx.AppendLetter(m) }); err != nil {
			t.Fatal(err)
		}
	}
	if got := inbox(t, s, "alpha", "reader"); len(got) != 2 || got[0] != plain || got[1] != reply {
		t.Fatalf("inbox = %+v, want [%+v %+v]", got, plain, reply)
	}
	want := `{"id": "reader-1", "sender": "lead", "recipient": "reader", "body": "root"}` + "\n" +
		`{"id": "reader-2", "sender": "lead", "recipient": "reader", "body": "more", "in_reply_to": "reader-1", "thread_id": "reader-1", "seq": 2, "ack_required": true}` + "\n"
	var data []byte
	if err := core.View(t.Context(), s, "alpha", func(tx core.TeamTx) error {
		var err error
		data, err = tx.InboxBytes("reader")
		return err
	}); err != nil || string(data) != want {
		t.Fatalf("InboxBytes = %q, %v; want %q", data, err, want)
	}
}

// testAcksAndLimits: acks in the state and an inbox limit raised after
// creation are kept, and the inbox then holds more than it was created
// for.
func testAcksAndLimits(t *testing.T, s core.Store) {
	st := Team("alpha", "reader")
	st.Limits.InboxMessages = 1
	create(t, s, st)
	if _, err := send(t.Context(), s, "alpha", "lead", "reader", "one"); err != nil {
		t.Fatal(err)
	}
	at := time.Date(2026, 12, 3, 9, 0, 0, 0, time.UTC)
	ack := core.Ack{ID: "reader-1", Outcome: core.AckDone, Note: "ok", At: at}
	if err := core.Update(t.Context(), s, "alpha", func(tx core.TeamTx) error {
		tx.State().Limits.InboxMessages = 3
		tx.State().Acks = []core.Ack{ack}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	for _, body := range []string{"two", "three"} {
		if _, err := send(t.Context(), s, "alpha", "lead", "reader", body); err != nil {
			t.Fatalf("send %s after raising the limit: %v", body, err)
		}
	}
	got := state(t, s, "alpha")
	if got.Limits.InboxMessages != 3 || len(got.Acks) != 1 || got.Acks[0].ID != ack.ID || got.Acks[0].Outcome != ack.Outcome || got.Acks[0].Note != ack.Note || !got.Acks[0].At.Equal(at) {
		t.Fatalf("state: inbox_messages %d, acks %+v; want 3 and [%+v]", got.Limits.InboxMessages, got.Acks, ack)
	}
	if n := len(inbox(t, s, "alpha", "reader")); n != 3 {
		t.Fatalf("inbox holds %d letters, want 3", n)
	}
}
