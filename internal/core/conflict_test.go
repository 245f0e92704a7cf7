package core_test

import (
	"context"
	"log/slog"
	"sync/atomic"
	"testing"

	"mailroom/internal/core"
	"mailroom/internal/mail"
)

// conflicting is the file store, whose units of work never conflict (it
// holds the team's lock), made to refuse the next n commits with
// core.ErrConflict, as a store shared by replicas refuses a unit whose
// team changed since its snapshot: nothing of the refused unit is stored.
type conflicting struct {
	*mail.Store
	n atomic.Int32
}

func (c *conflicting) Begin(ctx context.Context, name string, write bool) (core.Unit, error) {
	u, err := c.Store.Begin(ctx, name, write)
	if err != nil {
		return nil, err
	}
	return &conflictingUnit{Unit: u, c: c}, nil
}

type conflictingUnit struct {
	core.Unit
	c *conflicting
}

func (u *conflictingUnit) Commit(cs *core.ChangeSet) error {
	if u.c.n.Add(-1) >= 0 {
		return core.ErrConflict // Close, deferred by core, ends the unit
	}
	return u.Unit.Commit(cs)
}

// TestConflictRunsTheUnitAgain: a unit of work refused at commit is run
// again on a new snapshot and commits once: the send's letter is stored
// once, with the id its second run gave it, and a retry does not undo what
// a committed run registered in memory (the turn that began runs to its
// end): with the runtime's Work, and with core alone.
func TestConflictRunsTheUnitAgain(t *testing.T) {
	for _, w := range works {
		t.Run(w.name, func(t *testing.T) { testConflictRunsTheUnitAgain(t, w.open) })
	}
}

func testConflictRunsTheUnitAgain(t *testing.T, open func(testing.TB, core.Store) *core.Service) {
	store, err := mail.Open(t.TempDir(), mail.WithLogger(slog.New(slog.DiscardHandler)))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = store.Close() })
	c := &conflicting{Store: store}
	svc := open(t, c)
	if _, _, err := svc.CreateTeam(core.AsAdmin(t.Context()), core.TeamSpec{Name: "demo", Members: []core.MemberSpec{{Name: "reader", Role: "r"}}}); err != nil {
		t.Fatal(err)
	}
	c.n.Store(2)
	res, err := svc.Send(core.AsMember(t.Context(), "demo", "reader"), core.SendInput{Team: "demo", To: "lead", Body: "hello"})
	if err != nil || res.ID != "lead-1" {
		t.Fatalf("send after two conflicts = %+v, %v; want lead-1", res, err)
	}
	if got := c.n.Load(); got != -1 {
		t.Fatalf("commits tried = %d, want 3 (two refused, one stored)", 2-got)
	}
	items, err := svc.Inbox(core.AsMember(t.Context(), "demo", "lead"), "demo", "lead")
	if err != nil || len(items) != 1 || items[0].Body != "hello" {
		t.Fatalf("lead's inbox = %+v, %v; want the one letter", items, err)
	}

	c.n.Store(1)
	tr, err := svc.BeginTurn(core.AsAdmin(t.Context()), "demo", "reader", core.ModelRef{})
	if err != nil {
		t.Fatalf("BeginTurn after a conflict: %v", err)
	}
	if _, err := tr.Run(core.AsAdmin(t.Context()), answer("done")); err != nil {
		t.Fatalf("the turn begun after a conflict: %v", err)
	}
	if m := memberOf(t, svc, "demo", "reader"); m.Active || m.Turns != 1 {
		t.Fatalf("reader after its turn = %+v, want one turn, not active", m)
	}
}
