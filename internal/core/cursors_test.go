package core_test

import (
	"context"
	"errors"
	"testing"

	"mailroom/internal/core"
	"mailroom/internal/testkit"
)

// cursorOf is member's read_through ("" for none) and unread count.
func (f *fixture) cursorOf(member string) (string, int) {
	f.t.Helper()
	m := f.member(member)
	if m.ReadThrough == nil {
		return "", m.Unread
	}
	return *m.ReadThrough, m.Unread
}

// TestTurnMovesCursor: a turn whose outcome commits has read the letters
// it was shown (prepare_inbox attached them): the cursor moves through the
// last one. A failed turn, whose outcome is not committed, moves nothing.
func TestTurnMovesCursor(t *testing.T) {
	f := newFixture(t, nil)
	f.send("lead", "reader", "one")
	f.send("reviewer", "reader", "two")
	shown := func(ctx context.Context, h []core.Entry) (core.TurnOutcome, error) {
		h, err := f.svc.PrepareInbox(core.AsMember(ctx, "demo", "reader"), "demo", "reader", h)
		if err != nil {
			return core.TurnOutcome{}, err
		}
		h = append(h, core.Entry{Role: "assistant", Text: "Read them."})
		return core.TurnOutcome{Messages: h, Status: core.TurnAnswered, Text: "Read them."}, nil
	}
	failing := func(ctx context.Context, h []core.Entry) (core.TurnOutcome, error) {
		if _, err := f.svc.PrepareInbox(core.AsMember(ctx, "demo", "reader"), "demo", "reader", h); err != nil {
			return core.TurnOutcome{}, err
		}
		return core.TurnOutcome{}, errors.New("the model broke")
	}
	if _, err := f.svc.RunTurn(t.Context(), "demo", "reader", failing); err != nil {
		t.Fatal(err)
	}
	if through, unread := f.cursorOf("reader"); through != "" || unread != 2 {
		t.Fatalf("after a failed turn: read_through %q, unread %d; want none, 2", through, unread)
	}
	if _, err := f.svc.ResetMember(t.Context(), "demo", "reader"); err != nil {
		t.Fatal(err)
	}
	if _, err := f.svc.RunTurn(t.Context(), "demo", "reader", shown); err != nil {
		t.Fatal(err)
	}
	if through, unread := f.cursorOf("reader"); through != "reader-2" || unread != 0 {
		t.Fatalf("after an answered turn: read_through %q, unread %d; want reader-2, 0", through, unread)
	}
	// A letter that came after the turn's last look stays unread.
	f.send("lead", "reader", "three")
	if through, unread := f.cursorOf("reader"); through != "reader-2" || unread != 1 {
		t.Fatalf("after a later letter: read_through %q, unread %d; want reader-2, 1", through, unread)
	}
	// The cursor is durable: a restart reads it back.
	svc := f.reopen()
	v, err := svc.Team(t.Context(), "demo")
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range v.Members {
		if m.Name == "reader" && (m.ReadThrough == nil || *m.ReadThrough != "reader-2" || m.Unread != 1) {
			t.Fatalf("after a restart: %+v, want reader-2 with 1 unread", m)
		}
	}
}

// TestMarkReadEvent: moving a cursor is announced with a member event
// carrying it; a move that changes nothing announces nothing.
func TestMarkReadEvent(t *testing.T) {
	f := newFixture(t, nil)
	f.send("lead", "reader", "one")
	var got []core.MemberView
	cancel := testkit.Hub(f.svc).Subscribe(func(ev core.Event) {
		if mv, ok := ev.Data.(core.MemberView); ok && ev.Type == core.EventMember {
			got = append(got, mv)
		}
	})
	defer cancel()
	ctx := core.AsMember(t.Context(), "demo", "reader")
	if _, err := f.svc.MarkRead(ctx, "demo", "reader", "reader-1"); err != nil {
		t.Fatal(err)
	}
	if _, err := f.svc.MarkRead(ctx, "demo", "reader", "reader-1"); err != nil {
		t.Fatal(err)
	}
	if len(got) != 1 || got[0].Name != "reader" || got[0].ReadThrough == nil || *got[0].ReadThrough != "reader-1" || got[0].Unread != 0 {
		t.Fatalf("member events = %+v, want one for reader read through reader-1", got)
	}
}
