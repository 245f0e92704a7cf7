package storetest

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"mailroom/internal/core"
)

// The store's side of a unit of work, without core's rules: Begin loads a
// snapshot, Commit stores a change-set whole or reports core.ErrConflict,
// Close discards. These cases drive the Unit directly, as core's Update
// does.

// testChangeSetCommit: every part of a change-set commits together and is
// what the next snapshot shows; a unit closed without committing leaves
// nothing; a view cannot commit.
func testChangeSetCommit(t *testing.T, s core.Store) {
	ctx := t.Context()
	create(t, s, Team("alpha", "reader"))
	u, err := s.Begin(ctx, "alpha", true)
	if err != nil {
		t.Fatal(err)
	}
	n, size, err := u.InboxSize("reader")
	if err != nil || n != 0 || size != 0 {
		t.Fatalf("InboxSize of an empty inbox = %d letters, %d bytes, %v; want 0, 0, nil", n, size, err)
	}
	letter := core.Message{ID: "reader-1", Sender: core.LeadName, Recipient: "reader", Body: "hello"}
	st := u.State().UnitCopy()
	st.Purpose = "changed"
	now := time.Now().UTC().Truncate(time.Millisecond)
	cs := &core.ChangeSet{
		State:       st,
		Letter:      &letter,
		Line:        core.EncodeInboxLine(letter),
		Idempotency: []core.IdempotencyRecord{{Member: core.LeadName, Key: "k", Fingerprint: "f", Result: []byte(`{}`), At: now, Letter: &letter}},
		PutTurns:    []core.TurnDoc{{TurnID: "reader-t1", Team: "alpha", Member: "reader", Status: core.TurnAnswered, Steps: []core.TurnStep{}}},
		Cursors:     map[string]int{"reader": 1},
		Tasks:       []core.Task{{ID: core.TaskID(1), Title: "first", Status: core.TaskPending, CreatedBy: core.LeadName}},
	}
	if err := u.Commit(cs); err != nil {
		t.Fatalf("Commit: %v", err)
	}
	if err := u.Close(); err != nil {
		t.Fatalf("Close after Commit = %v, want nil", err)
	}

	// Discarded: a unit that closes without committing.
	u, err = s.Begin(ctx, "alpha", true)
	if err != nil {
		t.Fatal(err)
	}
	if err := u.Close(); err != nil {
		t.Fatal(err)
	}
	v, err := s.Begin(ctx, "alpha", false)
	if err != nil {
		t.Fatal(err)
	}
	defer v.Close()
	if got := v.State().Purpose; got != "changed" {
		t.Errorf("purpose = %q, want the committed state's", got)
	}
	if items, err := v.LoadInbox("reader"); err != nil || len(items) != 1 || items[0] != letter {
		t.Errorf("inbox = %+v, %v; want the committed letter", items, err)
	}
	if n, size, err := v.InboxSize("reader"); err != nil || n != 1 || size != len(core.EncodeInboxLine(letter)) {
		t.Errorf("InboxSize = %d, %d, %v; want 1 letter of %d bytes", n, size, err, len(core.EncodeInboxLine(letter)))
	}
	if r, ok, err := v.Idempotency(core.LeadName, "k"); err != nil || !ok || r.Fingerprint != "f" || r.Letter == nil || *r.Letter != letter {
		t.Errorf("idempotency record = %+v %v %v", r, ok, err)
	}
	if docs, err := v.Turns(); err != nil || len(docs) != 1 || docs[0].TurnID != "reader-t1" {
		t.Errorf("turns = %+v, %v", docs, err)
	}
	if n, err := v.ReadThrough("reader"); err != nil || n != 1 {
		t.Errorf("read_through = %d, %v; want 1", n, err)
	}
	if board, err := v.Tasks(); err != nil || len(board) != 1 || board[0].Title != "first" {
		t.Errorf("board = %+v, %v", board, err)
	}
	if err := v.Commit(&core.ChangeSet{Cursors: map[string]int{"reader": 0}}); err == nil {
		t.Error("a view's Commit succeeded, want an error")
	}
}

// testLeaseOnlyChange: a change-set that changes leases alone stores
// them and keeps everything else of the state.
func testLeaseOnlyChange(t *testing.T, s core.Store) {
	ctx := t.Context()
	create(t, s, Team("alpha", "reader"))
	exp := time.Now().Add(time.Minute).UTC().Truncate(time.Millisecond)
	u, err := s.Begin(ctx, "alpha", true)
	if err != nil {
		t.Fatal(err)
	}
	if err := u.Commit(&core.ChangeSet{Leases: map[string]*core.Lease{"reader": {Holder: "h1", Expires: exp}}}); err != nil {
		t.Fatal(err)
	}
	st := state(t, s, "alpha")
	if l := st.Member("reader").Lease; l == nil || l.Holder != "h1" || !l.Expires.Equal(exp) {
		t.Fatalf("lease = %+v, want h1 until %v", l, exp)
	}
	if st.Member(core.LeadName).Lease != nil || st.Member("reader").Role != "" || len(st.Members) != 2 {
		t.Fatalf("state after a lease change = %+v, want the rest unchanged", st)
	}
	u, err = s.Begin(ctx, "alpha", true)
	if err != nil {
		t.Fatal(err)
	}
	if err := u.Commit(&core.ChangeSet{Leases: map[string]*core.Lease{"reader": nil}}); err != nil {
		t.Fatal(err)
	}
	if l := state(t, s, "alpha").Member("reader").Lease; l != nil {
		t.Fatalf("released lease = %+v, want none", l)
	}
}

// testConcurrentUnits: units of work racing on one team, each appending
// the next letter by the count its snapshot read, retried on
// core.ErrConflict: no other error, and the letters are 1..n without a
// gap or a duplicate. A store either serialises the units (a lock) or
// refuses the stale ones at commit (a version check).
func testConcurrentUnits(t *testing.T, s core.Store) {
	st := Team("alpha", "reader")
	st.Limits.InboxMessages, st.Limits.InboxBytes = 1000, 1<<20
	create(t, s, st)
	const writers, each = 8, 10
	var wg sync.WaitGroup
	errs := make(chan error, writers*each)
	for w := range writers {
		wg.Go(func() {
			for i := range each {
				for {
					err := commitNext(s, fmt.Sprintf("w%d-%d", w, i))
					if errors.Is(err, core.ErrConflict) {
						continue
					}
					if err != nil {
						errs <- err
					}
					break
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Errorf("a unit failed: %v, want success or core.ErrConflict", err)
	}
	items := inbox(t, s, "alpha", "reader")
	if len(items) != writers*each {
		t.Fatalf("%d letters, want %d", len(items), writers*each)
	}
	wantNumbered(t, items)
}

// commitNext runs one raw unit: the next letter of reader's inbox.
func commitNext(s core.Store, body string) error {
	u, err := s.Begin(context.Background(), "alpha", true)
	if err != nil {
		return err
	}
	defer u.Close()
	n, _, err := u.InboxSize("reader")
	if err != nil {
		return err
	}
	m := core.Message{ID: fmt.Sprintf("reader-%d", n+1), Sender: core.LeadName, Recipient: "reader", Body: body}
	return u.Commit(&core.ChangeSet{Letter: &m, Line: core.EncodeInboxLine(m)})
}
