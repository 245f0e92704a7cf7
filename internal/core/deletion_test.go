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

// TestDeletedTeamWakeNeverFires: a wake whose window is open when its team
// is deleted never fires on a new team of the same name, even for a letter
// to the new team; that letter opens a window of its own.
func TestDeletedTeamWakeNeverFires(t *testing.T) {
	r := newWakeRig(t, nil, 0)
	r.send("lead", "reader", "to the old team")
	old := r.timer()
	ctx := core.AsAdmin(t.Context())
	if err := r.svc.DeleteTeam(ctx, "demo", nil); err != nil {
		t.Fatal(err)
	}
	if _, _, err := r.svc.CreateTeam(ctx, core.TeamSpec{Name: "demo",
		Model:   &core.ModelSettings{Provider: "anthropic", Name: "m"},
		Members: []core.MemberSpec{{Name: "lead"}, {Name: "reader", Wake: true}, {Name: "reviewer"}}}); err != nil {
		t.Fatal(err)
	}
	// A letter to the new team, then the end of the old team's window.
	r.send("lead", "reader", "to the new team")
	old.fire()
	select {
	case w := <-r.turns:
		t.Fatalf("the deleted team's wake fired on the new team: trigger %+v", w.trigger)
	case <-time.After(300 * time.Millisecond):
	}
	r.timer().fire()
	w := r.turn()
	if w.trigger.Kind != core.TriggerMail || len(w.trigger.Letters) != 1 || w.trigger.Letters[0] != "reader-1" {
		t.Errorf("the new team's wake = %+v, want mail [reader-1]", w.trigger)
	}
	w.release <- turnEnd{}
}
