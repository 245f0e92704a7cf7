package httpapi_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"mailroom/internal/core"
	"mailroom/internal/httpapi"
)

// mainPy is the lesson's program: it prints 42 and appends one x to
// counter.txt beside itself each time it runs.
const mainPy = `from pathlib import Path

with open(Path(__file__).with_name("counter.txt"), "a", encoding="utf-8") as counter:
    counter.write("x")
print(42)
`

// workspaceTeam creates a team with lead and reader, a workspace and the
// given host_permission and limits, and puts main.py into its workspace.
func (e *env) workspaceTeam(name, hostPermission string, limits *core.Limits) team {
	e.t.Helper()
	_, created, err := e.svc.CreateTeam(core.AsAdmin(e.t.Context()), core.TeamSpec{
		Name: name, Workspace: true, HostPermission: hostPermission, Limits: limits,
		Members: []core.MemberSpec{{Name: "reader", Role: "runs the program"}},
	})
	if err != nil {
		e.t.Fatal(err)
	}
	tm := team{name: name, tokens: map[string]string{}}
	for _, m := range created {
		tm.tokens[m.Name] = m.Token
	}
	want(e.t, e.putFile(tm.name, "main.py", mainPy, adminToken), http.StatusNoContent, "")
	return tm
}

func (e *env) putFile(team, path, data, token string) result {
	e.t.Helper()
	return e.do(call{method: http.MethodPut, path: "/api/v1/teams/" + team + "/workspace/files/" + path, token: token, body: data,
		header: map[string]string{"Content-Type": "application/octet-stream"}})
}

func (e *env) getFile(team, path, token string) result {
	e.t.Helper()
	return e.get("/api/v1/teams/"+team+"/workspace/files/"+path, token)
}

// approvePlan has reader open a plan and lead approve it, over the API.
func (e *env) approvePlan(tm team) {
	e.t.Helper()
	r := e.post("/api/v1/teams/"+tm.name+"/requests", tm.tokens["reader"], map[string]string{"kind": "plan", "target": "lead", "payload": "Run main.py once."})
	want(e.t, r, http.StatusCreated, "")
	id := decode[httpapi.OpenResult](e.t, r).RequestID
	want(e.t, e.post("/api/v1/teams/"+tm.name+"/requests/"+id+"/reply", tm.tokens["lead"], map[string]any{"approve": true}), http.StatusOK, "")
}

// startRunTurn starts reader's turn that calls run_main and then answers;
// the turn waits for the host gate, so it runs in the background. The
// channel gets the turn's status code and body.
func (e *env) startRunTurn(tm team) <-chan result {
	body, _ := json.Marshal(map[string]any{"prompt": "Run the program.", "responses": []any{
		map[string]any{"tool": "run_main", "input": map[string]any{}},
		map[string]any{"text": "done"},
	}})
	req, err := http.NewRequestWithContext(e.t.Context(), http.MethodPost, e.srv.URL+"/api/v1/teams/"+tm.name+"/members/reader/turns", bytes.NewReader(body))
	if err != nil {
		e.t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Authorization", "Bearer "+adminToken)
	out := make(chan result, 1)
	go func() {
		resp, err := e.client.Do(req)
		if err != nil {
			out <- result{status: -1, body: []byte(err.Error())}
			return
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		out <- result{status: resp.StatusCode, header: resp.Header, body: b}
	}()
	return out
}

// pendingPermission waits until the team has a pending permission and
// returns it. It reads the list as reader, which a member may.
func (e *env) pendingPermission(tm team) httpapi.Permission {
	e.t.Helper()
	for {
		r := e.get("/api/v1/teams/"+tm.name+"/permissions", tm.tokens["reader"])
		want(e.t, r, http.StatusOK, "")
		for _, p := range decode[httpapi.PermissionList](e.t, r).Permissions {
			if p.Status == httpapi.PermissionStatusPending {
				return p
			}
		}
		select {
		case <-e.t.Context().Done():
			e.t.Fatal("no pending permission appeared")
		case <-time.After(10 * time.Millisecond):
		}
	}
}

func (e *env) decide(tm team, id, token string, allow bool) result {
	e.t.Helper()
	return e.post("/api/v1/teams/"+tm.name+"/permissions/"+id, token, map[string]bool{"allow": allow})
}

// runMainResult returns the last tool result of reader's committed
// history, as the team's stored state holds it.
func runMainResult(t *testing.T, e *env, team string) string {
	t.Helper()
	var st *core.TeamState
	if err := core.View(t.Context(), e.store, team, func(tx core.TeamTx) error { st = tx.State(); return nil }); err != nil {
		t.Fatal(err)
	}
	out := ""
	for _, m := range st.Members {
		if m.Name != "reader" {
			continue
		}
		for _, e := range m.History {
			for _, b := range e.Blocks {
				if b.Type == "tool_result" {
					out = b.Content
				}
			}
		}
	}
	return out
}

func TestPermissionAllowRunsTheProgramOnce(t *testing.T) {
	e := openEnv(t, nil, 0)
	tm := e.workspaceTeam("crew", "ask", nil)
	e.approvePlan(tm)
	turn := e.startRunTurn(tm)
	p := e.pendingPermission(tm)
	if p.PermissionID != "perm-1" || p.Member != "reader" || p.Tool != "run_main" || p.PlanRequestID != "req-1" || p.DecidedAt != nil || p.DecidedBy != nil {
		t.Fatalf("pending permission = %+v, want perm-1 of reader's run_main under req-1", p)
	}
	// Nothing ran before the decision.
	want(t, e.getFile(tm.name, "counter.txt", adminToken), http.StatusNotFound, "not_found")

	// A member may read the list but never decide, not even its own.
	want(t, e.decide(tm, p.PermissionID, tm.tokens["reader"], true), http.StatusForbidden, "forbidden")
	want(t, e.decide(tm, p.PermissionID, tm.tokens["lead"], true), http.StatusForbidden, "forbidden")

	r := e.decide(tm, p.PermissionID, adminToken, true)
	want(t, r, http.StatusOK, "")
	got := decode[httpapi.Permission](t, r)
	if got.Status != httpapi.PermissionStatusAllowed || got.DecidedBy == nil || *got.DecidedBy != httpapi.Admin || got.DecidedAt == nil {
		t.Fatalf("decision = %+v, want allowed by admin", got)
	}
	tr := <-turn
	want(t, tr, http.StatusOK, "")
	// The turn's document shows the wait and the answer, and the
	// program's output as run_main's result.
	doc := decode[struct {
		Steps []struct {
			Kind         string `json:"kind"`
			PermissionID string `json:"permission_id"`
			Status       string `json:"status"`
			Tool         string `json:"tool"`
			Result       string `json:"result"`
		} `json:"steps"`
	}](t, tr)
	var seen []string
	output := ""
	for _, st := range doc.Steps {
		switch {
		case st.Kind == "permission":
			seen = append(seen, st.PermissionID+" "+st.Status)
		case st.Kind == "tool_call" && st.Tool == "run_main":
			output = st.Result
		}
	}
	if strings.Join(seen, ", ") != "perm-1 pending, perm-1 allowed" || output != "42\n" {
		t.Fatalf("turn steps: permissions %q and run_main result %q, want perm-1 pending then allowed and 42\n\nbody: %s", seen, output, tr.body)
	}
	r = e.getFile(tm.name, "counter.txt", adminToken)
	want(t, r, http.StatusOK, "")
	if string(r.body) != "x" {
		t.Fatalf("counter.txt = %q, want one x: the program ran once", r.body)
	}
	if out := runMainResult(t, e, tm.name); out != "42\n" {
		t.Fatalf("run_main result = %q, want the program's output 42", out)
	}
	// Decided once.
	want(t, e.decide(tm, p.PermissionID, adminToken, false), http.StatusConflict, "not_pending")
	want(t, e.decide(tm, "perm-7", adminToken, false), http.StatusNotFound, "not_found")
}

func TestPermissionDenied(t *testing.T) {
	e := openEnv(t, nil, 0)
	tm := e.workspaceTeam("crew", "ask", nil)
	e.approvePlan(tm)
	turn := e.startRunTurn(tm)
	p := e.pendingPermission(tm)
	want(t, e.decide(tm, p.PermissionID, adminToken, false), http.StatusOK, "")
	want(t, <-turn, http.StatusOK, "")
	want(t, e.getFile(tm.name, "counter.txt", adminToken), http.StatusNotFound, "not_found")
	if out := runMainResult(t, e, tm.name); out != "host permission: the host denied running main.py: permission perm-1 was denied by admin" {
		t.Fatalf("run_main result = %q, want the host's denial", out)
	}
}

func TestPermissionExpires(t *testing.T) {
	e := openEnv(t, nil, 0)
	limits := core.DefaultLimits()
	limits.PermissionTimeoutS = 1
	tm := e.workspaceTeam("crew", "ask", &limits)
	e.approvePlan(tm)
	want(t, <-e.startRunTurn(tm), http.StatusOK, "")
	list := decode[httpapi.PermissionList](t, e.get("/api/v1/teams/"+tm.name+"/permissions", adminToken)).Permissions
	if len(list) != 1 || list[0].Status != httpapi.PermissionStatusExpired || list[0].DecidedBy != nil {
		t.Fatalf("permissions = %+v, want one expired, decided by no one", list)
	}
	want(t, e.getFile(tm.name, "counter.txt", adminToken), http.StatusNotFound, "not_found")
	want(t, e.decide(tm, list[0].PermissionID, adminToken, true), http.StatusConflict, "not_pending")
}

// Under host_permission allow or deny no one is asked.
func TestHostPermissionPolicies(t *testing.T) {
	e := openEnv(t, nil, 0)
	allow := e.workspaceTeam("allowing", "allow", nil)
	deny := e.workspaceTeam("denying", "deny", nil)
	for _, tm := range []team{allow, deny} {
		e.approvePlan(tm)
		want(t, <-e.startRunTurn(tm), http.StatusOK, "")
		if list := decode[httpapi.PermissionList](t, e.get("/api/v1/teams/"+tm.name+"/permissions", adminToken)).Permissions; len(list) != 0 {
			t.Fatalf("%s: permissions = %+v, want none asked", tm.name, list)
		}
	}
	if r := e.getFile(allow.name, "counter.txt", adminToken); r.status != http.StatusOK || string(r.body) != "x" {
		t.Fatalf("allow: counter.txt = %d %q, want one x; run_main's result: %q", r.status, r.body, runMainResult(t, e, allow.name))
	}
	want(t, e.getFile(deny.name, "counter.txt", adminToken), http.StatusNotFound, "not_found")
}

func TestPermissionDecisionsSurviveRestart(t *testing.T) {
	e := openEnv(t, nil, 0)
	tm := e.workspaceTeam("crew", "ask", nil)
	e.approvePlan(tm)
	turn := e.startRunTurn(tm)
	p := e.pendingPermission(tm)
	want(t, e.decide(tm, p.PermissionID, adminToken, true), http.StatusOK, "")
	want(t, <-turn, http.StatusOK, "")
	before := decode[httpapi.PermissionList](t, e.get("/api/v1/teams/"+tm.name+"/permissions", adminToken)).Permissions

	e.srv.Close()
	e = openEnv(t, e.place, 0)
	after := decode[httpapi.PermissionList](t, e.get("/api/v1/teams/"+tm.name+"/permissions", adminToken)).Permissions
	if len(after) != 1 || len(before) != 1 || after[0].Status != httpapi.PermissionStatusAllowed || after[0].DecidedBy == nil ||
		!after[0].DecidedAt.Equal(*before[0].DecidedAt) || after[0].PlanRequestID != "req-1" {
		t.Fatalf("after restart = %+v, want %+v", after, before)
	}
	want(t, e.decide(tm, p.PermissionID, adminToken, false), http.StatusConflict, "not_pending")
}

func TestPermissionsRights(t *testing.T) {
	e := openEnv(t, nil, 0)
	tm := e.workspaceTeam("crew", "ask", nil)
	other := e.workspaceTeam("other", "ask", nil)
	want(t, e.get("/api/v1/teams/"+tm.name+"/permissions", other.tokens["reader"]), http.StatusForbidden, "forbidden")
	want(t, e.get("/api/v1/teams/"+tm.name+"/permissions", ""), http.StatusUnauthorized, "unauthorized")
	want(t, e.get("/api/v1/teams/nobody/permissions", adminToken), http.StatusNotFound, "not_found")
	want(t, e.decide(tm, "perm-x", adminToken, true), http.StatusBadRequest, "validation_failed")
	want(t, e.do(call{method: http.MethodPost, path: "/api/v1/teams/" + tm.name + "/permissions/perm-1", token: adminToken, json: map[string]any{"allow": true, "by": "me"}}), http.StatusBadRequest, "validation_failed")
}

// Cancelling a turn that waits for a permission ends the wait at once:
// the permission expires (a denial) and nothing runs.
func TestPermissionEndsWithCancelledTurn(t *testing.T) {
	e := openEnv(t, nil, 0)
	tm := e.workspaceTeam("crew", "ask", nil)
	e.approvePlan(tm)
	turn := e.startRunTurn(tm)
	p := e.pendingPermission(tm)
	want(t, e.post("/api/v1/teams/"+tm.name+"/turns/reader-t1/cancel", adminToken, nil), http.StatusOK, "")
	tr := <-turn
	want(t, tr, http.StatusOK, "")
	if st := decode[struct {
		Status string `json:"status"`
	}](t, tr).Status; st != "cancelled" {
		t.Fatalf("turn status = %q, want cancelled\nbody: %s", st, tr.body)
	}
	list := decode[httpapi.PermissionList](t, e.get("/api/v1/teams/"+tm.name+"/permissions", adminToken)).Permissions
	if len(list) != 1 || list[0].PermissionID != p.PermissionID || list[0].Status != httpapi.PermissionStatusExpired {
		t.Fatalf("permissions = %+v, want %s expired", list, p.PermissionID)
	}
	want(t, e.getFile(tm.name, "counter.txt", adminToken), http.StatusNotFound, "not_found")
	want(t, e.decide(tm, p.PermissionID, adminToken, true), http.StatusConflict, "not_pending")
}

// The workspace quota both ways: an upload past limits.workspace_bytes or
// limits.workspace_files is 409 workspace_full and stores nothing; a run
// that writes past the quota gets the error result workspace_full, keeps
// nothing it added, and the turn goes on.
func TestWorkspaceQuota(t *testing.T) {
	e := openEnv(t, nil, 0)
	limits := core.DefaultLimits()
	limits.WorkspaceBytes, limits.WorkspaceFiles = 4000, 3
	tm := e.workspaceTeam("quota", "allow", &limits)
	want(t, e.putFile(tm.name, "big.txt", strings.Repeat("x", 4000), adminToken), http.StatusConflict, "workspace_full")
	want(t, e.getFile(tm.name, "big.txt", adminToken), http.StatusNotFound, "not_found")
	want(t, e.putFile(tm.name, "notes.txt", "kept", adminToken), http.StatusNoContent, "")
	want(t, e.putFile(tm.name, "more.txt", "kept", adminToken), http.StatusNoContent, "")
	want(t, e.putFile(tm.name, "fourth.txt", "x", adminToken), http.StatusConflict, "workspace_full")
	want(t, e.getFile(tm.name, "fourth.txt", adminToken), http.StatusNotFound, "not_found")
	want(t, e.putFile(tm.name, "main.py", "for i in range(5):\n    open('out%d.txt' % i, 'w').write('y')\nprint('wrote')\n", adminToken), http.StatusNoContent, "")
	e.approvePlan(tm)
	r := <-e.startRunTurn(tm)
	want(t, r, http.StatusOK, "")
	if !strings.Contains(string(r.body), `"status":"answered"`) || !strings.Contains(string(r.body), `"text":"done"`) {
		t.Errorf("the turn = %s, want it answered after run_main's error", r.body)
	}
	if out := runMainResult(t, e, tm.name); !strings.Contains(out, "workspace_full") && !strings.Contains(out, "quota") {
		t.Errorf("run_main's result = %q, want the workspace_full error", out)
	}
	for i := range 5 {
		want(t, e.getFile(tm.name, fmt.Sprintf("out%d.txt", i), adminToken), http.StatusNotFound, "not_found")
	}
	if r := e.getFile(tm.name, "notes.txt", adminToken); r.status != http.StatusOK || string(r.body) != "kept" {
		t.Errorf("notes.txt after the run = %d %q, want it kept", r.status, r.body)
	}
	// The quota is changeable: with room for a fourth name, it is stored.
	want(t, e.patch("/api/v1/teams/"+tm.name, adminToken, `{"limits": {"workspace_files": 4, "workspace_bytes": 5000}}`), http.StatusOK, "")
	want(t, e.putFile(tm.name, "fourth.txt", "x", adminToken), http.StatusNoContent, "")
}
