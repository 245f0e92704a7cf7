package live_test

import (
	"testing"
	"time"

	"mailroom/internal/core"
	"mailroom/internal/testkit"
)

// TestTeamDeletedElsewhereEndsTurnsHere: the event of a team deleted on
// another replica (core.EventTeamDeleted, as the store's notifications
// deliver it) cancels the turn of that team this process runs; it ends
// cancelled. A turn of the same team under another incarnation's name is
// not this one's: the event names the deleted incarnation.
func TestTeamDeletedElsewhereEndsTurnsHere(t *testing.T) {
	f := newFixture(t, nil)
	done := testkit.WaitingTurn(t, f.svc, f.team, "reader")
	// Another incarnation's deletion leaves this turn running.
	f.hub.Publish(core.Event{Type: core.EventTeamDeleted, Team: f.team, Data: "another-incarnation"})
	select {
	case res := <-done:
		t.Fatalf("the turn ended %q after another incarnation's deletion, want it running", res.Status)
	case <-time.After(200 * time.Millisecond):
	}
	f.hub.Publish(core.Event{Type: core.EventTeamDeleted, Team: f.team, Data: ""})
	select {
	case res := <-done:
		if res.Status != core.TurnCancelled {
			t.Errorf("the turn ended %q, want cancelled", res.Status)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the turn of a team deleted elsewhere did not end")
	}
}
