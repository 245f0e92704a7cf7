package runtime_test

import (
	"slices"
	"testing"
	"time"

	"mailroom/internal/core"
)

// TestHistoryFullAttachesWhatFits: a turn attaches the oldest unattended
// letters that fit in history_entries (room left for its answer) and
// leaves the rest for later; when none fits the member's wake is held
// with reason history_full and a requested turn is refused history_full;
// a reset that clears the history releases it, and the next turn gets the
// letters it had not seen, not the old ones again.
func TestHistoryFullAttachesWhatFits(t *testing.T) {
	limits := core.DefaultLimits()
	limits.HistoryEntries = 4
	r := newWakeRig(t, &limits, 0)
	var ids []string
	for i := range 5 {
		ids = append(ids, r.send("lead", "reader", string(rune('a'+i))))
	}
	r.timer().fire()
	w := r.turn()
	want := []string{letterLine(ids[0], "lead", "reader", "a"), letterLine(ids[1], "lead", "reader", "b"), letterLine(ids[2], "lead", "reader", "c")}
	if !slices.Equal(w.attached, want) {
		t.Errorf("first turn attached %q, want the three oldest letters %q", w.attached, want)
	}
	w.release <- turnEnd{}
	if d := r.waitEnded("reader"); d.Status != core.TurnAnswered {
		t.Fatalf("first turn = %s %q, want answered", d.Status, d.Text)
	}

	// Two letters are left and none fits: the next wake holds.
	r.timer().fire()
	deadline := time.Now().Add(30 * time.Second)
	for !r.member("reader").WakeHeld {
		if time.Now().After(deadline) {
			t.Fatal("the wake of a member whose history is full is not held")
		}
		time.Sleep(5 * time.Millisecond)
	}
	m := r.member("reader")
	if m.WakeHeldReason == nil || *m.WakeHeldReason != core.WakeHeldHistoryFull || m.Turns != 1 {
		t.Errorf("reader = reason %v turns %d, want history_full after 1 turn", m.WakeHeldReason, m.Turns)
	}
	ctx := core.AsAdmin(t.Context())
	_, err := r.svc.RunTurn(ctx, "demo", "reader", answer("never"))
	wantCode(t, err, core.CodeHistoryFull)

	v, err := r.svc.ResetMemberWith(ctx, "demo", "reader", core.ResetOptions{ClearHistory: true})
	if err != nil {
		t.Fatal(err)
	}
	if v.HistoryLength != 0 || v.WakeHeld || v.WakeHeldReason != nil {
		t.Errorf("reader after a clearing reset = history %d held %v reason %v, want empty and released", v.HistoryLength, v.WakeHeld, v.WakeHeldReason)
	}
	r.timer().fire()
	w = r.turn()
	want = []string{letterLine(ids[3], "lead", "reader", "d"), letterLine(ids[4], "lead", "reader", "e")}
	if !slices.Equal(w.attached, want) {
		t.Errorf("turn after the clear attached %q, want only the letters not yet seen %q", w.attached, want)
	}
	w.release <- turnEnd{}
	r.waitEnded("reader")
}
