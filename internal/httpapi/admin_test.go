package httpapi_test

import (
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"mailroom/internal/core"
	"mailroom/internal/httpapi"
	"mailroom/internal/testkit"
)

// openEnv starts a server over place (nil: a fresh one), as the server
// wires it: scenario runs and workspaces on its data directory, and the
// team limit maxTeams (0: the default). Calling it again over an env's
// place is a restart.
func openEnv(t *testing.T, place *testkit.Place, maxTeams int) *env {
	t.Helper()
	return startEnv(t, envOptions{place: place, maxTeams: maxTeams, runs: true})
}

func (e *env) del(path, token string) result {
	e.t.Helper()
	return e.do(call{method: http.MethodDelete, path: path, token: token})
}

func (e *env) reset(tm team, member, token string) result {
	e.t.Helper()
	return e.do(call{method: http.MethodPost, path: "/api/v1/teams/" + tm.name + "/members/" + member + "/reset", token: token})
}

// assertNoTrash fails when a deletion left anything behind under dir's
// teams and runs directories.
func assertNoTrash(t *testing.T, dir string) {
	t.Helper()
	for _, sub := range []string{"teams", "runs"} {
		entries, _ := os.ReadDir(filepath.Join(dir, sub))
		for _, e := range entries {
			if strings.HasPrefix(e.Name(), ".") {
				t.Errorf("left in %s: %s", sub, e.Name())
			}
		}
	}
}

func TestDeleteTeam(t *testing.T) {
	e := openEnv(t, nil, 0)
	dir := e.dir
	a := e.newTeam("alpha", nil)
	b := e.newTeam("beta", nil)
	want(t, e.send(a, "lead", "reader", "a letter"), http.StatusCreated, "")

	want(t, e.del("/api/v1/teams/alpha", a.tokens["lead"]), http.StatusForbidden, "forbidden")
	want(t, e.del("/api/v1/teams/alpha", b.tokens["lead"]), http.StatusForbidden, "forbidden")
	want(t, e.del("/api/v1/teams/alpha", ""), http.StatusUnauthorized, "unauthorized")
	want(t, e.del("/api/v1/teams/nope", adminToken), http.StatusNotFound, "not_found")
	want(t, e.del("/api/v1/teams/Bad_Name", adminToken), http.StatusBadRequest, "validation_failed")

	r := e.del("/api/v1/teams/alpha", adminToken)
	want(t, r, http.StatusNoContent, "")
	if len(r.body) != 0 {
		t.Errorf("204 with a body: %q", r.body)
	}
	want(t, e.get("/api/v1/teams/alpha", adminToken), http.StatusNotFound, "not_found")
	want(t, e.get("/api/v1/teams/alpha/members/reader/inbox", a.tokens["reader"]), http.StatusUnauthorized, "unauthorized")
	want(t, e.del("/api/v1/teams/alpha", adminToken), http.StatusNotFound, "not_found")
	if _, err := os.Stat(filepath.Join(dir, "teams", "alpha")); !os.IsNotExist(err) {
		t.Errorf("the team directory is still there: %v", err)
	}
	assertNoTrash(t, dir)
	// The other team is untouched.
	want(t, e.send(b, "lead", "reader", "still here"), http.StatusCreated, "")

	// After a restart the team stays gone, its tokens get 401 and the
	// name can be used again, starting empty.
	e.srv.Close()
	e = openEnv(t, e.place, 0)
	want(t, e.get("/api/v1/teams/alpha", adminToken), http.StatusNotFound, "not_found")
	for member, tok := range a.tokens {
		if r := e.get("/api/v1/teams/alpha/members/"+member+"/inbox", tok); r.status != http.StatusUnauthorized {
			t.Errorf("%s's old token after restart: %d, want 401", member, r.status)
		}
	}
	again := e.newTeam("alpha", nil)
	if box := e.inbox(again, "reader"); len(box) != 0 {
		t.Errorf("the new alpha's reader inbox = %+v, want empty", box)
	}
	if r := e.get("/api/v1/teams/alpha/members/reader/inbox", a.tokens["reader"]); r.status != http.StatusUnauthorized {
		t.Errorf("the old token on the new team: %d, want 401", r.status)
	}
	want(t, e.get("/api/v1/teams/alpha/members/reader/inbox", again.tokens["reader"]), http.StatusOK, "")
}

func TestDeleteTeamDuringTurn(t *testing.T) {
	e := newEnv(t)
	tm := e.newTeam("crew", nil)
	slow := textStep("slow answer")
	slow["wait_ms"] = slowStepMS
	first := e.turnAsync(tm, "reader", slow)
	e.waitActive(tm, "reader")

	// Deletion always wins: the running turn is cancelled and the team
	// deleted within 5 s (round two answered 409 member_unavailable).
	begin := time.Now()
	want(t, e.del("/api/v1/teams/crew", adminToken), http.StatusNoContent, "")
	if took := time.Since(begin); took > 5*time.Second {
		t.Errorf("DELETE took %v, want under 5 s", took)
	}
	r := <-first
	want(t, r, http.StatusOK, "")
	if got := decode[struct {
		Status string `json:"status"`
	}](t, r); got.Status != "cancelled" {
		t.Errorf("the running turn ended %q, want cancelled", got.Status)
	}
	want(t, e.get("/api/v1/teams/crew", adminToken), http.StatusNotFound, "not_found")
}

// TestDeleteRunTeam: a scenario run's team takes its run document and
// workspace with it, also across a restart.
func TestDeleteRunTeam(t *testing.T) {
	e := openEnv(t, nil, 0)
	dir := e.dir
	r := e.post("/api/v1/scenarios/agent-teams/runs", adminToken, map[string]any{})
	want(t, r, http.StatusOK, "")
	run := decode[httpapi.RunResult](t, r)
	ws := filepath.Join(dir, "workspaces", run.RunID)
	if _, err := os.Stat(ws); err != nil {
		t.Fatalf("the run has no workspace: %v", err)
	}
	want(t, e.get("/api/v1/runs/"+run.RunID, adminToken), http.StatusOK, "")

	want(t, e.del("/api/v1/teams/"+run.Team, adminToken), http.StatusNoContent, "")
	want(t, e.get("/api/v1/runs/"+run.RunID, adminToken), http.StatusNotFound, "not_found")
	for _, gone := range []string{ws, filepath.Join(dir, "runs", run.RunID)} {
		if _, err := os.Stat(gone); !os.IsNotExist(err) {
			t.Errorf("%s is still there: %v", gone, err)
		}
	}
	assertNoTrash(t, dir)

	// What a deletion cut short by a crash leaves (its rename done, its
	// files not yet removed) is removed at the next start.
	trash := filepath.Join(dir, "runs", ".trash-"+run.RunID+"-0123456789ab", "workspace")
	if err := os.MkdirAll(trash, 0o700); err != nil {
		t.Fatal(err)
	}
	e.srv.Close()
	e = openEnv(t, e.place, 0)
	assertNoTrash(t, dir)
	want(t, e.get("/api/v1/runs/"+run.RunID, adminToken), http.StatusNotFound, "not_found")
	want(t, e.get("/api/v1/teams/"+run.Team, adminToken), http.StatusNotFound, "not_found")
}

func TestTeamLimit(t *testing.T) {
	e := openEnv(t, nil, 2)
	dir := e.dir
	e.newTeam("one", nil)

	// team-protocols needs two teams and there is room for one: refused
	// before anything is created.
	want(t, e.post("/api/v1/scenarios/team-protocols/runs", adminToken, map[string]any{}), http.StatusConflict, "team_limit")
	teams := decode[httpapi.TeamList](t, e.get("/api/v1/teams", adminToken)).Teams
	if len(teams) != 1 {
		t.Fatalf("teams after a refused run = %+v, want only one", teams)
	}
	if entries, _ := os.ReadDir(filepath.Join(dir, "runs")); len(entries) != 0 {
		t.Fatalf("a refused run left %d entries in runs/", len(entries))
	}

	// agent-teams needs one: it fits, and a run's team counts.
	want(t, e.post("/api/v1/scenarios/agent-teams/runs", adminToken, map[string]any{}), http.StatusOK, "")
	r := e.post("/api/v1/teams", adminToken, map[string]any{"name": "three"})
	want(t, r, http.StatusConflict, "team_limit")
	want(t, e.get("/api/v1/teams/three", adminToken), http.StatusNotFound, "not_found")

	// The limit holds after a restart, and a deletion makes room.
	e.srv.Close()
	e = openEnv(t, e.place, 2)
	want(t, e.post("/api/v1/teams", adminToken, map[string]any{"name": "three"}), http.StatusConflict, "team_limit")
	want(t, e.del("/api/v1/teams/one", adminToken), http.StatusNoContent, "")
	e.newTeam("three", nil)
}

func TestResetMember(t *testing.T) {
	e := openEnv(t, nil, 0)
	tm := e.newTeam("crew", nil)
	other := e.newTeam("other", nil)

	// A call_limit turn leaves reader stopped with its history.
	steps := make([]map[string]any, 5)
	for i := range steps {
		steps[i] = toolStep("send_message", map[string]any{"to": "lead", "body": "note"})
	}
	want(t, e.turn(tm, "reader", "Keep writing.", steps...), http.StatusOK, "")
	before := e.member(tm, "reader")
	if before.Status != httpapi.MemberStatusStopped {
		t.Fatalf("reader = %+v, want stopped", before)
	}

	want(t, e.reset(tm, "reader", tm.tokens["reader"]), http.StatusForbidden, "forbidden")
	want(t, e.reset(tm, "reader", other.tokens["lead"]), http.StatusForbidden, "forbidden")
	want(t, e.reset(tm, "reader", ""), http.StatusUnauthorized, "unauthorized")
	want(t, e.reset(tm, "nobody", adminToken), http.StatusNotFound, "not_found")
	want(t, e.reset(team{name: "nope"}, "reader", adminToken), http.StatusNotFound, "not_found")
	want(t, e.reset(tm, "lead", adminToken), http.StatusConflict, "member_unavailable") // idle

	r := e.reset(tm, "reader", adminToken)
	want(t, r, http.StatusOK, "")
	got := decode[httpapi.Member](t, r)
	if got.Name != "reader" || got.Status != httpapi.MemberStatusIdle || got.HistoryLength != before.HistoryLength || got.Turns != before.Turns {
		t.Fatalf("reset = %+v, want reader idle with history %d and turns %d kept", got, before.HistoryLength, before.Turns)
	}
	want(t, e.reset(tm, "reader", adminToken), http.StatusConflict, "member_unavailable")

	// Durable: after a restart reader is idle and takes its next turn.
	e.srv.Close()
	e = openEnv(t, e.place, 0)
	if m := e.member(tm, "reader"); m.Status != httpapi.MemberStatusIdle || m.HistoryLength != before.HistoryLength {
		t.Fatalf("after restart reader = %+v, want idle with history %d", m, before.HistoryLength)
	}
	want(t, e.turn(tm, "reader", "Go on.", textStep("done")), http.StatusOK, "")
}

// TestResetFailedMember: a turn that runs out of scripted steps fails;
// the reset makes the member idle again.
func TestResetFailedMember(t *testing.T) {
	e := newEnv(t)
	tm := e.newTeam("crew", nil)
	r := e.turn(tm, "lead", "Write.", toolStep("send_message", map[string]any{"to": "reader", "body": "note"}))
	want(t, r, http.StatusOK, "")
	if got := decode[httpapi.TurnDocument](t, r); got.Status != "failed" {
		t.Fatalf("turn = %+v, want failed", got)
	}
	if m := e.member(tm, "lead"); m.Status != httpapi.MemberStatusFailed {
		t.Fatalf("lead = %+v, want failed", m)
	}
	want(t, e.reset(tm, "lead", adminToken), http.StatusOK, "")
	want(t, e.turn(tm, "lead", "Again.", textStep("fine")), http.StatusOK, "")
	if m := e.member(tm, "lead"); m.Status != httpapi.MemberStatusIdle {
		t.Fatalf("lead = %+v, want idle", m)
	}
}

// TestDeleteTeamWithRunElsewhere: a scenario run that another replica
// holds an unexpired lease on (its document has no result yet) keeps its
// team from being deleted here, though no member of the team is busy at
// that moment; once the lease has expired (the replica died), the team
// goes, with the run's document.
func TestDeleteTeamWithRunElsewhere(t *testing.T) {
	e := openEnv(t, nil, 0)
	e.newTeam("elsewhere-1", nil)
	lease := core.Lease{Holder: "another-replica", Expires: time.Now().Add(time.Hour)}
	if err := e.svc.Runs().Put(t.Context(), core.RunDoc{ID: "elsewhere-1", Lease: &lease}); err != nil {
		t.Fatal(err)
	}
	want(t, e.del("/api/v1/teams/elsewhere-1", adminToken), http.StatusConflict, "member_unavailable")

	lease.Expires = time.Now().Add(-time.Second)
	if err := e.svc.Runs().Put(t.Context(), core.RunDoc{ID: "elsewhere-1", Lease: &lease}); err != nil {
		t.Fatal(err)
	}
	want(t, e.del("/api/v1/teams/elsewhere-1", adminToken), http.StatusNoContent, "")
	want(t, e.get("/api/v1/runs/elsewhere-1", adminToken), http.StatusNotFound, "not_found")
}

// TestResetClearsHistory: POST .../reset with {"history": "clear"} empties
// a member's history whatever its status; another value is 400 and changes
// nothing.
func TestResetClearsHistory(t *testing.T) {
	e := newEnv(t)
	tm := e.newTeam("crew", nil)
	want(t, e.turn(tm, "reader", "Say something.", textStep("said")), http.StatusOK, "")
	if got := e.member(tm, "reader").HistoryLength; got != 2 {
		t.Fatalf("history after a turn = %d, want 2", got)
	}
	want(t, e.post("/api/v1/teams/crew/members/reader/reset", adminToken, map[string]any{"history": "shred"}), http.StatusBadRequest, "validation_failed")
	if got := e.member(tm, "reader").HistoryLength; got != 2 {
		t.Errorf("history after a refused reset = %d, want 2", got)
	}
	r := e.post("/api/v1/teams/crew/members/reader/reset", adminToken, map[string]any{"history": "clear"})
	want(t, r, http.StatusOK, "")
	if got := decode[httpapi.Member](t, r); got.HistoryLength != 0 || got.Status != "idle" {
		t.Errorf("reset answered history %d status %s, want 0 and idle", got.HistoryLength, got.Status)
	}
	// Without a body a reset of an idle member is refused, as before.
	want(t, e.post("/api/v1/teams/crew/members/reader/reset", adminToken, nil), http.StatusConflict, "member_unavailable")
}
