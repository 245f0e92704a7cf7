package core_test

import (
	"context"
	"testing"
	"time"

	"mailroom/internal/core"
)

// TestDeleteTeamCancelsTurns: deleting a team while one of its turns runs
// is no longer refused: the turn is cancelled (it ends cancelled) and the
// team is gone within 5 s (docs/api.md, "Deletion always wins").
func TestDeleteTeamCancelsTurns(t *testing.T) {
	f := newFixture(t, nil)
	started := make(chan struct{})
	done := make(chan core.TurnResult, 1)
	go func() {
		res, err := f.svc.RunTurn(context.Background(), f.team, "reader", func(ctx context.Context, h []core.Entry) (core.TurnOutcome, error) {
			close(started)
			<-ctx.Done()
			return core.TurnOutcome{}, ctx.Err()
		})
		if err != nil {
			t.Error(err)
		}
		done <- res
	}()
	<-started
	begin := time.Now()
	if err := f.svc.DeleteTeam(core.AsAdmin(t.Context()), f.team, nil); err != nil {
		t.Fatalf("DeleteTeam while a turn runs: %v, want it deleted", err)
	}
	if took := time.Since(begin); took > 5*time.Second {
		t.Errorf("the deletion took %v, want under 5 s", took)
	}
	select {
	case res := <-done:
		if res.Status != core.TurnCancelled {
			t.Errorf("the running turn ended %q, want cancelled", res.Status)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the running turn did not end")
	}
	if _, err := f.svc.Team(core.AsAdmin(t.Context()), f.team); core.ErrorCode(err) != core.CodeNotFound {
		t.Errorf("the team after its deletion: %v, want not_found", err)
	}
}
