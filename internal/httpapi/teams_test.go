package httpapi_test

import (
	"net/http"
	"reflect"
	"strings"
	"testing"

	"mailroom/internal/httpapi"
)

func TestCreateTeam(t *testing.T) {
	e := newEnv(t)

	t.Run("OK", func(t *testing.T) {
		r := e.post("/api/v1/teams", adminToken, map[string]any{
			"name":    "demo",
			"members": []map[string]string{{"name": "reader", "role": "reads the source"}},
		})
		want(t, r, http.StatusCreated, "")
		got := decode[httpapi.CreatedTeam](t, r)
		if got.Name != "demo" || len(got.Members) != 2 {
			t.Fatalf("team = %+v, want demo with lead and reader", got)
		}
		if got.Members[0].Name != "lead" || got.Members[1].Name != "reader" || got.Members[1].Role != "reads the source" {
			t.Errorf("members = %+v, want lead first, then reader with its role", got.Members)
		}
		for _, m := range got.Members {
			if m.Token == "" || m.Status != "idle" {
				t.Errorf("member %+v: want a token and status idle", m)
			}
		}
		lessons := httpapi.Limits{InboxMessages: 8, InboxBytes: 32000, BodyChars: 600, Requests: 4, PayloadChars: 180, FeedbackChars: 120, Turns: 2, HistoryEntries: 80, ModelTokens: 1000000, ModelRequests: 2000, PermissionTimeoutS: 300, Tasks: 500, ToolCalls: 32, WakeDelayMs: 250, WorkspaceBytes: 268435456, WorkspaceFiles: 10000, Reservations: 200}
		if got.Limits != lessons {
			t.Errorf("limits = %+v, want the lesson limits %+v", got.Limits, lessons)
		}
	})

	t.Run("OK/the answer shows what GET shows", func(t *testing.T) {
		r := e.post("/api/v1/teams", adminToken, map[string]any{
			"name": "shown", "purpose": "Find out what main.py prints.", "workspace": true, "host_permission": "allow",
			"members": []map[string]string{{"name": "reader", "role": "reads the source"}},
		})
		want(t, r, http.StatusCreated, "")
		created := decode[httpapi.CreatedTeam](t, r)
		r = e.get("/api/v1/teams/shown", adminToken)
		want(t, r, http.StatusOK, "")
		got := decode[httpapi.Team](t, r)
		if created.Purpose != got.Purpose || created.Workspace != got.Workspace || string(created.HostPermission) != string(got.HostPermission) ||
			!reflect.DeepEqual(created.Model, got.Model) || !created.CreatedAt.Equal(got.CreatedAt) || created.Limits != got.Limits {
			t.Errorf("POST answered purpose %q workspace %v host_permission %q model %+v created_at %v limits %+v;\nGET shows %q %v %q %+v %v %+v",
				created.Purpose, created.Workspace, created.HostPermission, created.Model, created.CreatedAt, created.Limits,
				got.Purpose, got.Workspace, got.HostPermission, got.Model, got.CreatedAt, got.Limits)
		}
		if created.Purpose != "Find out what main.py prints." || !created.Workspace || created.HostPermission != "allow" || created.Model.Provider == "" {
			t.Errorf("POST answered purpose %q workspace %v host_permission %q model %+v, want the body's values and the server's model",
				created.Purpose, created.Workspace, created.HostPermission, created.Model)
		}
	})

	t.Run("OK/partial limits keep the other lesson values", func(t *testing.T) {
		r := e.post("/api/v1/teams", adminToken, map[string]any{"name": "small", "limits": map[string]int{"requests": 1, "feedback_chars": 0}})
		want(t, r, http.StatusCreated, "")
		got := decode[httpapi.CreatedTeam](t, r).Limits
		if got.Requests != 1 || got.FeedbackChars != 0 || got.InboxMessages != 8 || got.BodyChars != 600 {
			t.Errorf("limits = %+v, want requests 1, feedback 0, the rest lesson values", got)
		}
	})

	t.Run("OK/listing lead only sets its role", func(t *testing.T) {
		r := e.post("/api/v1/teams", adminToken, map[string]any{"name": "led", "members": []map[string]string{{"name": "lead", "role": "sums up"}}})
		want(t, r, http.StatusCreated, "")
		got := decode[httpapi.CreatedTeam](t, r).Members
		if len(got) != 1 || got[0].Name != "lead" || got[0].Role != "sums up" {
			t.Errorf("members = %+v, want one lead with role", got)
		}
	})

	tests := []struct {
		name   string
		token  string
		body   any
		status int
		code   string
	}{
		{"ErrTeamExists", adminToken, map[string]any{"name": "demo"}, http.StatusConflict, "team_exists"},
		{"ErrBadTeamName", adminToken, map[string]any{"name": "Bad Name"}, http.StatusBadRequest, "validation_failed"},
		{"ErrTooLongName", adminToken, map[string]any{"name": "a" + strings.Repeat("b", 24)}, http.StatusBadRequest, "validation_failed"},
		{"ErrBadMemberName", adminToken, map[string]any{"name": "x1", "members": []map[string]string{{"name": "9lives"}}}, http.StatusBadRequest, "validation_failed"},
		{"ErrDuplicateMembers", adminToken, map[string]any{"name": "x2", "members": []map[string]string{{"name": "reader"}, {"name": "reader"}}}, http.StatusBadRequest, "validation_failed"},
		{"ErrUnknownField", adminToken, map[string]any{"name": "x3", "owner": "me"}, http.StatusBadRequest, "validation_failed"},
		{"ErrUnknownLimit", adminToken, map[string]any{"name": "x4", "limits": map[string]int{"quota": 3}}, http.StatusBadRequest, "validation_failed"},
		{"ErrZeroLimit", adminToken, map[string]any{"name": "x5", "limits": map[string]int{"inbox_messages": 0}}, http.StatusBadRequest, "validation_failed"},
		{"ErrNoName", adminToken, map[string]any{}, http.StatusBadRequest, "validation_failed"},
		{"ErrNoToken", "", map[string]any{"name": "x6"}, http.StatusUnauthorized, "unauthorized"},
		{"ErrUnknownToken", "not-a-token", map[string]any{"name": "x7"}, http.StatusUnauthorized, "unauthorized"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			want(t, e.post("/api/v1/teams", tt.token, tt.body), tt.status, tt.code)
		})
	}

	t.Run("ErrMemberToken", func(t *testing.T) {
		tm := e.newTeam("members", nil)
		want(t, e.post("/api/v1/teams", tm.tokens["lead"], map[string]any{"name": "x8"}), http.StatusForbidden, "forbidden")
	})
}

func TestListTeams(t *testing.T) {
	e := newEnv(t)
	a := e.newTeam("alpha", nil)
	e.newTeam("beta", nil)

	t.Run("OK", func(t *testing.T) {
		r := e.get("/api/v1/teams", adminToken)
		want(t, r, http.StatusOK, "")
		got := decode[httpapi.TeamList](t, r).Teams
		if len(got) != 2 {
			t.Fatalf("teams = %+v, want 2", got)
		}
		names := map[string]int{}
		for _, s := range got {
			names[s.Name] = s.Members
			if s.CreatedAt.IsZero() {
				t.Errorf("team %s has no created_at", s.Name)
			}
		}
		if names["alpha"] != 3 || names["beta"] != 3 {
			t.Errorf("member counts = %v, want 3 each", names)
		}
	})
	t.Run("OK/empty list is an array", func(t *testing.T) {
		r := newEnv(t).get("/api/v1/teams", adminToken)
		want(t, r, http.StatusOK, "")
		if got := strings.TrimSpace(string(r.body)); got != `{"teams":[]}` {
			t.Errorf("body = %s, want an empty array", got)
		}
	})
	t.Run("ErrMemberToken", func(t *testing.T) {
		want(t, e.get("/api/v1/teams", a.tokens["reader"]), http.StatusForbidden, "forbidden")
	})
	t.Run("ErrNoToken", func(t *testing.T) {
		want(t, e.get("/api/v1/teams", ""), http.StatusUnauthorized, "unauthorized")
	})
}

func TestGetTeam(t *testing.T) {
	e := newEnv(t)
	a := e.newTeam("alpha", nil)
	b := e.newTeam("beta", nil)
	want(t, e.send(a, "lead", "reader", "hello"), http.StatusCreated, "")

	for _, tok := range []struct{ name, token string }{{"admin", adminToken}, {"member", a.tokens["reviewer"]}} {
		t.Run("OK/"+tok.name, func(t *testing.T) {
			r := e.get("/api/v1/teams/alpha", tok.token)
			want(t, r, http.StatusOK, "")
			got := decode[httpapi.Team](t, r)
			if got.Name != "alpha" || got.Damaged || len(got.Members) != 3 || got.Requests == nil {
				t.Fatalf("team = %+v", got)
			}
			reader := got.Members[1]
			if reader.Name != "reader" || reader.InboxLength != 1 || reader.Status != "idle" || reader.Active || reader.Turns != 0 || reader.HistoryLength != 0 {
				t.Errorf("reader = %+v, want idle with one letter", reader)
			}
		})
	}
	t.Run("ErrOtherTeam", func(t *testing.T) {
		want(t, e.get("/api/v1/teams/alpha", b.tokens["lead"]), http.StatusForbidden, "forbidden")
	})
	t.Run("ErrNotFound", func(t *testing.T) {
		want(t, e.get("/api/v1/teams/nope", adminToken), http.StatusNotFound, "not_found")
	})
	t.Run("ErrBadName", func(t *testing.T) {
		want(t, e.get("/api/v1/teams/Nope!", adminToken), http.StatusBadRequest, "validation_failed")
	})
}
