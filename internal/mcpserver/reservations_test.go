package mcpserver_test

import (
	"testing"

	"mailroom/internal/core"
	"mailroom/internal/mcpserver"
)

// TestReservationTools: the reservations' tools through the official SDK
// client; a refused grant is reservation_conflict with the conflicts in
// the structured content, as in the REST problem document.
func TestReservationTools(t *testing.T) {
	e := newEnv(t)
	lead, reader := e.member("demo", "lead"), e.member("demo", "reader")
	var granted struct {
		Reservation core.Reservation `json:"reservation"`
	}
	mustCall(t, reader, "reserve_paths", map[string]any{"paths": []string{"internal/**"}, "reason": "rework"}, &granted)
	if granted.Reservation.ID != "res-1" || granted.Reservation.Member != "reader" {
		t.Fatalf("reserve_paths = %+v, want res-1 of reader", granted.Reservation)
	}
	res := call(t, lead, "reserve_paths", map[string]any{"paths": []string{"internal/core/x.go"}}, nil)
	var r mcpserver.Refusal
	decodeContent(t, res, &r)
	if !res.IsError || r.Code != "reservation_conflict" || len(r.Conflicts) != 1 || r.Conflicts[0].ReservationID != "res-1" || r.Conflicts[0].Member != "reader" {
		t.Fatalf("conflicting reserve_paths = %+v, want reservation_conflict naming res-1 of reader", r)
	}
	wantRefusal(t, lead, "reserve_paths", map[string]any{"paths": []string{"/etc"}}, "validation_failed")
	var checked struct {
		Conflicts []core.PathConflict `json:"conflicts"`
	}
	mustCall(t, lead, "check_paths", map[string]any{"paths": []string{"internal/a.go", "README.md"}}, &checked)
	if len(checked.Conflicts) != 1 || checked.Conflicts[0].Path != "internal/a.go" {
		t.Fatalf("check_paths = %+v, want internal/a.go held", checked.Conflicts)
	}
	var listed struct {
		Reservations []core.Reservation `json:"reservations"`
	}
	mustCall(t, lead, "list_reservations", map[string]any{}, &listed)
	if len(listed.Reservations) != 1 {
		t.Fatalf("list_reservations = %+v, want res-1", listed.Reservations)
	}
	mustCall(t, lead, "release_reservation", map[string]any{"reservation_id": "res-1"}, &granted)
	wantRefusal(t, reader, "release_reservation", map[string]any{"reservation_id": "res-1"}, "reservation_closed")
}
