package agent

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"mailroom/internal/core"
)

// TestReservationTools: the four tools act through core as the caller, on
// both doors; a refused grant carries reservation_conflict and names the
// holder, and bad input is validation_failed with nothing stored.
func TestReservationTools(t *testing.T) {
	svc := newService(t)
	tools := Registry(Env{Svc: svc, Limits: core.DefaultLimits()})
	call := func(door Door, member, name, input string) (Result, error) {
		t.Helper()
		tool, ok := Lookup(tools, door, name)
		if !ok {
			t.Fatalf("door %d offers no %s", door, name)
		}
		return tool.Handler(core.AsMember(t.Context(), testTeam, member), json.RawMessage(input))
	}
	res, err := call(DoorAgent, "reader", ToolReservePaths, `{"paths":["internal/**"],"reason":"rework","ttl_seconds":600}`)
	if err != nil {
		t.Fatal(err)
	}
	if got := res.Value.(reservationOutput).Reservation; got.ID != "res-1" || got.Member != "reader" || !got.Exclusive {
		t.Fatalf("reserved = %+v, want res-1 of reader, exclusive", got)
	}
	_, err = call(DoorMCP, "reviewer", ToolReservePaths, `{"paths":["internal/core/x.go"],"exclusive":false}`)
	wantCode(t, err, core.CodeReservationConflict)
	if msg := core.ErrorMessage(err); !strings.Contains(msg, "res-1 of reader") {
		t.Fatalf("conflict message %q does not name res-1 of reader", msg)
	}
	for _, bad := range []string{`{"paths":["../x"]}`, `{"paths":[]}`, `{"paths":["a"],"ttl_seconds":0}`, `{"paths":["a"],"member":"reader"}`} {
		_, err = call(DoorMCP, "reviewer", ToolReservePaths, bad)
		if code := refusalCode(err); code != core.CodeValidation {
			t.Fatalf("%s: %v (code %q), want validation_failed", bad, err, code)
		}
	}
	res, err = call(DoorMCP, "reviewer", ToolCheckPaths, `{"paths":["internal/a.go","README.md"]}`)
	if err != nil {
		t.Fatal(err)
	}
	if got := res.Value.(checkOutput).Conflicts; len(got) != 1 || got[0].Path != "internal/a.go" || got[0].ReservationID != "res-1" {
		t.Fatalf("check = %+v, want internal/a.go held by res-1", got)
	}
	res, err = call(DoorAgent, "lead", ToolListReservations, `{"path":"internal/a.go"}`)
	if err != nil {
		t.Fatal(err)
	}
	if got := res.Value.(reservationsOutput).Reservations; len(got) != 1 {
		t.Fatalf("list = %+v, want res-1 only", got)
	}
	_, err = call(DoorAgent, "reviewer", ToolReleaseReservation, `{"reservation_id":"res-1"}`)
	wantCode(t, err, core.CodeForbidden)
	if _, err = call(DoorAgent, "lead", ToolReleaseReservation, `{"reservation_id":"res-1"}`); err != nil {
		t.Fatal(err)
	}
	_, err = call(DoorMCP, "reader", ToolReleaseReservation, `{"reservation_id":"res-1"}`)
	wantCode(t, err, core.CodeReservationClosed)
	if _, err = call(DoorMCP, "reviewer", ToolReservePaths, `{"paths":["internal/core/x.go"]}`); err != nil {
		t.Fatalf("after the release: %v", err)
	}
}

// refusalCode is the code of a tool's own refusal or of core's.
func refusalCode(err error) core.Code {
	var te *ToolError
	if errors.As(err, &te) {
		return te.Code
	}
	return core.ErrorCode(err)
}
