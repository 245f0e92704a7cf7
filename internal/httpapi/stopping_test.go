package httpapi_test

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"testing"
	"time"

	"mailroom/internal/httpapi"
)

// newStoppableEnv is newRunEnv with the server's stopping context; the
// returned function begins stopping, as SIGTERM does in the server.
func newStoppableEnv(t *testing.T) (*env, context.CancelFunc) {
	t.Helper()
	stopping, stop := context.WithCancel(context.Background())
	t.Cleanup(stop)
	return startEnv(t, envOptions{runs: true, stopping: stopping}), stop
}

// postAsync sends a POST in the background; the channel yields its answer.
func (e *env) postAsync(path string, body any) <-chan result {
	out := make(chan result, 1)
	raw, err := json.Marshal(body)
	if err != nil {
		e.t.Fatal(err)
	}
	req, err := http.NewRequestWithContext(e.t.Context(), http.MethodPost, e.srv.URL+path, bytes.NewReader(raw))
	if err != nil {
		e.t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Authorization", "Bearer "+adminToken)
	go func() {
		resp, err := e.client.Do(req)
		if err != nil {
			out <- result{body: []byte(err.Error())}
			return
		}
		defer resp.Body.Close()
		b, err := io.ReadAll(resp.Body)
		if err != nil {
			b = []byte(err.Error())
		}
		out <- result{status: resp.StatusCode, header: resp.Header, body: b}
	}()
	return out
}

// wantShuttingDown requires a 503 shutting_down answer with a Retry-After.
func wantShuttingDown(t *testing.T, r result) {
	t.Helper()
	want(t, r, http.StatusServiceUnavailable, "shutting_down")
	if got := r.header.Get("Retry-After"); got == "" {
		t.Errorf("Retry-After = %q, want a number of seconds", got)
	}
}

func TestStoppingRefusesNewWork(t *testing.T) {
	t.Parallel()
	e, stop := newStoppableEnv(t)
	tm := e.newTeam("crew", nil)
	stop()

	wantShuttingDown(t, e.turn(tm, "reader", "", textStep("hello")))
	wantShuttingDown(t, e.post("/api/v1/scenarios/agent-teams/runs", adminToken, map[string]any{}))

	// Nothing started: the member took no turn and no run team exists.
	if m := e.member(tm, "reader"); m.Turns != 0 || m.Status != httpapi.MemberStatusIdle {
		t.Errorf("reader = %+v, want idle with 0 turns", m)
	}
	want(t, e.get("/api/v1/teams/agent-teams-1", adminToken), http.StatusNotFound, "not_found")
	want(t, e.get("/api/v1/runs/agent-teams-1", adminToken), http.StatusNotFound, "not_found")
}

func TestStoppingEndsRunningTurn(t *testing.T) {
	t.Parallel()
	e, stop := newStoppableEnv(t)
	tm := e.newTeam("crew", nil)
	want(t, e.turn(tm, "reader", "first", textStep("first answer")), http.StatusOK, "")
	before := e.member(tm, "reader")

	// The longest scripted wait: without stopping, the turn would hold the
	// request for ten seconds.
	slow := textStep("never said")
	slow["wait_ms"] = 10000
	turn := e.turnAsync(tm, "reader", slow)
	e.waitActive(tm, "reader")
	stop()

	r := <-turn
	want(t, r, http.StatusOK, "")
	if got := decode[httpapi.TurnDocument](t, r); got.Status != httpapi.TurnDocumentStatusFailed || got.Text != "interrupted" {
		t.Errorf("interrupted turn = %+v, want failed, interrupted", got)
	}
	after := e.member(tm, "reader")
	if after.Status != httpapi.MemberStatusIdle || after.Active {
		t.Errorf("reader after the interrupted turn = %+v, want idle, not active", after)
	}
	if after.HistoryLength != before.HistoryLength {
		t.Errorf("reader history entries = %d, want the previous %d", after.HistoryLength, before.HistoryLength)
	}
	wantShuttingDown(t, e.turn(tm, "reader", "", textStep("again")))
}

func TestStoppingInterruptsRun(t *testing.T) {
	t.Parallel()
	e, stop := newStoppableEnv(t)
	// step_ms slows every model answer by ten seconds, so that stopping
	// begins while reader's first turn waits for its model.
	run := e.postAsync("/api/v1/scenarios/agent-teams/runs", map[string]any{"step_ms": 10000})
	deadline := time.Now().Add(30 * time.Second)
	for !readerActive(e, "agent-teams-1") {
		if time.Now().After(deadline) {
			t.Fatal("reader's first turn of the run never started")
		}
	}
	stop()

	r := <-run
	want(t, r, http.StatusOK, "")
	doc := decode[httpapi.RunResult](t, r)
	if doc.RunID != "agent-teams-1" || doc.Ok {
		t.Errorf("run %q ok=%t, want agent-teams-1 not ok", doc.RunID, doc.Ok)
	}
	if len(doc.Checks) == 0 || doc.Checks[0].Name != "interrupted" || doc.Checks[0].Ok {
		t.Errorf("checks = %+v, want a failed interrupted check first", doc.Checks)
	}
	if doc.Outcome == nil {
		t.Errorf("outcome = null, want the outcome as far as the run got")
	}
	again := e.get("/api/v1/runs/agent-teams-1", adminToken)
	want(t, again, http.StatusOK, "")
	if !bytes.Equal(again.body, r.body) {
		t.Errorf("GET /runs/agent-teams-1 = %s, want the run's answer %s", again.body, r.body)
	}
	for _, m := range []string{"lead", "reader", "reviewer"} {
		if got := e.member(team{name: "agent-teams-1"}, m); got.Status != httpapi.MemberStatusIdle || got.Active {
			t.Errorf("%s after the interrupted run = %+v, want idle, not active", m, got)
		}
	}
	wantShuttingDown(t, e.post("/api/v1/scenarios/agent-teams/runs", adminToken, map[string]any{}))
}

// readerActive reports whether team exists and a turn of its reader runs.
func readerActive(e *env, team string) bool {
	e.t.Helper()
	r := e.get("/api/v1/teams/"+team, adminToken)
	if r.status != http.StatusOK {
		return false
	}
	for _, m := range decode[httpapi.Team](e.t, r).Members {
		if m.Name == "reader" {
			return m.Active
		}
	}
	return false
}
