package runtime_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"mailroom/internal/core"
	"mailroom/internal/mail"
	"mailroom/internal/testkit"
)

// TestWorkRenewsTurnLeaseUntilItEnds: the lease of a turn claimed here is
// renewed while the turn runs (a replica would see the member busy past
// the first lease); WaitTurns and Wait hold until the turn has ended and
// its renewal returned; a deleted team's work ends through
// OnTeamWorkEnds, before its turns are cancelled.
func TestWorkRenewsTurnLeaseUntilItEnds(t *testing.T) {
	store, err := mail.Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = store.Close() })
	const lease = 300 * time.Millisecond
	svc := testkit.Serve(t, store, core.Options{LeaseDuration: lease})
	work := testkit.Work(svc)
	admin := core.AsAdmin(t.Context())
	if _, _, err := svc.CreateTeam(admin, core.TeamSpec{Name: "demo", Members: []core.MemberSpec{{Name: "reader"}}}); err != nil {
		t.Fatal(err)
	}
	leaseOf := func() time.Time {
		t.Helper()
		var expires time.Time
		err := core.View(t.Context(), store, "demo", func(tx core.TeamTx) error {
			if l := tx.State().Member("reader").Lease; l != nil {
				expires = l.Expires
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
		return expires
	}

	tr, err := svc.BeginTurn(admin, "demo", "reader", core.ModelRef{})
	if err != nil {
		t.Fatal(err)
	}
	first := leaseOf()
	if first.IsZero() {
		t.Fatal("a claimed turn's member holds no lease")
	}
	for deadline := time.Now().Add(10 * time.Second); !leaseOf().After(first); time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("the lease (expiring %v) was never renewed while the turn ran", first)
		}
	}
	short, cancel := context.WithTimeout(t.Context(), 50*time.Millisecond)
	defer cancel()
	if err := work.WaitTurns(short); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("WaitTurns while a turn runs = %v, want the deadline", err)
	}

	if _, err := tr.Run(admin, func(_ context.Context, h []core.Entry) (core.TurnOutcome, error) {
		return core.TurnOutcome{Status: core.TurnAnswered, Text: "done", Messages: append(h, core.UserText("go"), core.Entry{Role: "assistant", Text: "done"})}, nil
	}); err != nil {
		t.Fatal(err)
	}
	ctx, stop := context.WithTimeout(t.Context(), 10*time.Second)
	defer stop()
	if err := work.WaitTurns(ctx); err != nil {
		t.Fatalf("WaitTurns after the turn ended = %v, want nil", err)
	}
	if err := work.Wait(ctx); err != nil {
		t.Fatalf("Wait after the turn ended = %v, want nil", err)
	}
	if got := leaseOf(); !got.IsZero() {
		t.Errorf("lease after the turn ended expires %v, want none", got)
	}

	var ended []string
	cancelEnds := work.OnTeamWorkEnds(func(team, _ string) { ended = append(ended, team) })
	if err := svc.DeleteTeam(admin, "demo", nil); err != nil {
		t.Fatal(err)
	}
	cancelEnds()
	if len(ended) == 0 || ended[0] != "demo" {
		t.Errorf("work ends told of %v, want demo", ended)
	}
}
