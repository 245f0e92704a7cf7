package httpapi_test

import (
	"encoding/json"
	"net/http"
	"testing"

	"mailroom/internal/httpapi"
)

func (e *env) patch(path, token, body string) result {
	e.t.Helper()
	return e.do(call{method: http.MethodPatch, path: path, token: token, body: body})
}

// TestUpdateTeamLimits: the admin changes the limits that bound what comes
// next; the change applies at once, is announced with a team event and
// survives a restart. A limit out of range is refused.
func TestUpdateTeamLimits(t *testing.T) {
	e := openEnv(t, nil, 0)
	tm := e.newTeam("alpha", nil)
	events := e.openStream(t, "?team=alpha", adminToken)

	change := `{"limits": {"requests": 1, "permission_timeout_s": 600}}`
	want(t, e.patch("/api/v1/teams/alpha", tm.tokens["lead"], change), http.StatusForbidden, "forbidden")
	want(t, e.patch("/api/v1/teams/alpha", "", change), http.StatusUnauthorized, "unauthorized")
	want(t, e.patch("/api/v1/teams/nope", adminToken, change), http.StatusNotFound, "not_found")
	want(t, e.patch("/api/v1/teams/alpha", adminToken, `{"limits": {"inbox_messages": 0}}`), http.StatusBadRequest, "validation_failed")
	want(t, e.patch("/api/v1/teams/alpha", adminToken, `{"limits": {"turns": 0}}`), http.StatusBadRequest, "validation_failed")

	r := e.patch("/api/v1/teams/alpha", adminToken, change)
	want(t, r, http.StatusOK, "")
	got := decode[httpapi.Team](t, r).Limits
	if got.Requests != 1 || got.PermissionTimeoutS != 600 || got.Turns != 2 || got.BodyChars != 600 {
		t.Fatalf("limits after PATCH = %+v, want requests 1, permission_timeout_s 600 and the others kept (turns 2, body_chars 600)", got)
	}
	ev := events.nextOf("team")
	var doc httpapi.Team
	if err := json.Unmarshal(ev.data.Data, &doc); err != nil {
		t.Fatalf("team event data %s: %v", ev.data.Data, err)
	}
	if ev.data.Team != "alpha" || doc.Limits.Requests != 1 || doc.Limits.PermissionTimeoutS != 600 {
		t.Errorf("team event = team %q, limits %+v; want alpha with requests 1, permission_timeout_s 600", ev.data.Team, doc.Limits)
	}
	// The new quota holds at once: one request, then request_limit.
	open := func() result {
		return e.post("/api/v1/teams/alpha/requests", tm.tokens["reader"], map[string]string{"kind": "plan", "target": "lead", "payload": "read, then run"})
	}
	want(t, open(), http.StatusCreated, "")
	want(t, e.post("/api/v1/teams/alpha/requests", tm.tokens["reviewer"], map[string]string{"kind": "plan", "target": "lead", "payload": "check"}), http.StatusConflict, "request_limit")

	e = openEnv(t, e.place, 0)
	r = e.get("/api/v1/teams/alpha", adminToken)
	want(t, r, http.StatusOK, "")
	if got := decode[httpapi.Team](t, r); got.Damaged || got.Limits.Requests != 1 || got.Limits.PermissionTimeoutS != 600 {
		t.Errorf("after a restart: damaged %v, limits %+v; want undamaged with requests 1, permission_timeout_s 600", got.Damaged, got.Limits)
	}
}
