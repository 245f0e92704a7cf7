package e2e

import (
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// turnAnswer is the part of a turn's answer these tests read.
type turnAnswer struct {
	Status string `json:"status"`
	Text   string `json:"text"`
}

// runDoc is the part of a run's document these tests read.
type runDoc struct {
	RunID  string `json:"run_id"`
	Team   string `json:"team"`
	OK     bool   `json:"ok"`
	Checks []struct {
		Name   string `json:"name"`
		OK     bool   `json:"ok"`
		Detail string `json:"detail"`
	} `json:"checks"`
}

// memberState is a member as GET /teams/{team} shows it.
type memberState struct {
	Name          string `json:"name"`
	Status        string `json:"status"`
	Active        bool   `json:"active"`
	Turns         int    `json:"turns"`
	HistoryLength int    `json:"history_length"`
}

// members returns team's members by name; found is false while the team
// does not exist.
func (c *client) members(t *testing.T, team string) (map[string]memberState, bool) {
	t.Helper()
	var view struct {
		Members []memberState `json:"members"`
	}
	status, code, err := c.do(http.MethodGet, "/teams/"+team, adminToken, "", nil, &view)
	if err != nil {
		t.Fatalf("GET /teams/%s: %v", team, err)
	}
	if status == http.StatusNotFound {
		return nil, false
	}
	if status != http.StatusOK {
		t.Fatalf("GET /teams/%s: %d %s, want 200", team, status, code)
	}
	out := map[string]memberState{}
	for _, m := range view.Members {
		out[m.Name] = m
	}
	return out, true
}

// waitActive polls until a turn of team's member runs. The bound only
// keeps a broken server from hanging the test.
func (c *client) waitActive(t *testing.T, team, member string) {
	t.Helper()
	deadline := time.Now().Add(startDeadline)
	for {
		if ms, ok := c.members(t, team); ok && ms[member].Active {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("no turn of %s/%s started within %v", team, member, startDeadline)
		}
		time.Sleep(10 * time.Millisecond) // polling interval, not synchronisation
	}
}

// callResult is the outcome of a call made in the background.
type callResult struct {
	status int
	code   string
	err    error
}

// doAsync makes one admin POST in the background, decoding a 2xx into out.
func (c *client) doAsync(path string, body, out any) <-chan callResult {
	ch := make(chan callResult, 1)
	go func() {
		status, code, err := c.do(http.MethodPost, path, adminToken, "", body, out)
		ch <- callResult{status, code, err}
	}()
	return ch
}

// TestSIGTERMMidTurn stops the server while a scripted turn waits for its
// model (two steps of ten seconds each: longer than the grace period).
// The turn answers as failed and interrupted, the server exits 0 without
// waiting out its timeout, and after a restart the member is idle with its
// previous history and takes the next turn.
func TestSIGTERMMidTurn(t *testing.T) {
	dataDir := filepath.Join(t.TempDir(), "data")
	srv := startServer(t, dataDir)
	c := newClient(srv.base)
	status, code, err := c.do(http.MethodPost, "/teams", adminToken, "", map[string]any{
		"name": "crew", "members": []map[string]string{{"name": "reader"}},
		// An interrupted turn counts toward the limit like every attempt.
		"limits": map[string]int{"turns": 5},
	}, nil)
	if err != nil || status != http.StatusCreated {
		t.Fatalf("create team: %d %s %v, want 201", status, code, err)
	}
	turnPath := "/teams/crew/members/reader/turns"
	var first turnAnswer
	status, code, err = c.do(http.MethodPost, turnPath, adminToken, "", map[string]any{"responses": []map[string]any{{"text": "first"}}}, &first)
	if err != nil || status != http.StatusOK || first.Status != "answered" {
		t.Fatalf("first turn: %d %s %+v %v, want 200 answered", status, code, first, err)
	}
	before, _ := c.members(t, "crew")

	var answer turnAnswer
	slow := c.doAsync(turnPath, map[string]any{"responses": []map[string]any{
		{"tool": "send_message", "input": map[string]string{"to": "lead", "body": "never sent"}, "wait_ms": 10000},
		{"text": "never said", "wait_ms": 10000},
	}}, &answer)
	c.waitActive(t, "crew", "reader")
	srv.stop()

	r := <-slow
	if r.err != nil || r.status != http.StatusOK {
		t.Fatalf("turn cut by SIGTERM: %d %s %v, want a 200 answer", r.status, r.code, r.err)
	}
	if answer.Status != "failed" || answer.Text != "interrupted" {
		t.Errorf("turn cut by SIGTERM = %+v, want failed, interrupted", answer)
	}
	if logs := srv.stderr.String(); strings.Contains(logs, "shutdown timed out") {
		t.Errorf("shutdown waited out its timeout:\n%s", logs)
	}
	c.close()

	srv = startServer(t, dataDir)
	c = newClient(srv.base)
	defer c.close()
	after, _ := c.members(t, "crew")
	if m := after["reader"]; m.Status != "idle" || m.Active || m.HistoryLength != before["reader"].HistoryLength {
		t.Errorf("reader after restart = %+v, want idle with the previous %d history entries", m, before["reader"].HistoryLength)
	}
	var inbox struct {
		Messages []any `json:"messages"`
	}
	if status, code, err := c.do(http.MethodGet, "/teams/crew/members/lead/inbox", adminToken, "", nil, &inbox); err != nil || status != http.StatusOK || len(inbox.Messages) != 0 {
		t.Errorf("lead's inbox after restart: %d %s %v, %d letters; want 200 with none (the cut tool call never ran)", status, code, err, len(inbox.Messages))
	}
	var next turnAnswer
	status, code, err = c.do(http.MethodPost, turnPath, adminToken, "", map[string]any{"responses": []map[string]any{{"text": "back"}}}, &next)
	if err != nil || status != http.StatusOK || next.Status != "answered" || next.Text != "back" {
		t.Errorf("turn after restart: %d %s %+v %v, want 200 answered \"back\"", status, code, next, err)
	}
	srv.stop()
}

// TestSIGTERMMidRun stops the server while a scenario run (every step
// slowed by ten seconds) is in reader's first turn. The run answers with
// its document, finished and not ok with a failed interrupted check; the
// server exits 0; after a restart GET /runs/{id} answers the same, the
// run's members are not left running, and a new run works.
func TestSIGTERMMidRun(t *testing.T) {
	dataDir := filepath.Join(t.TempDir(), "data")
	srv := startServer(t, dataDir)
	c := newClient(srv.base)

	var doc runDoc
	run := c.doAsync("/scenarios/agent-teams/runs", map[string]any{"step_ms": 10000}, &doc)
	c.waitActive(t, "agent-teams-1", "reader")
	srv.stop()

	r := <-run
	if r.err != nil || r.status != http.StatusOK {
		t.Fatalf("run cut by SIGTERM: %d %s %v, want a 200 answer", r.status, r.code, r.err)
	}
	checkInterrupted := func(when string, d runDoc) {
		t.Helper()
		if d.RunID != "agent-teams-1" || d.OK {
			t.Errorf("%s: run %q ok=%t, want agent-teams-1 not ok", when, d.RunID, d.OK)
		}
		if len(d.Checks) == 0 || d.Checks[0].Name != "interrupted" || d.Checks[0].OK {
			t.Errorf("%s: checks = %+v, want a failed interrupted check first", when, d.Checks)
		}
	}
	checkInterrupted("the run's answer", doc)
	c.close()

	srv = startServer(t, dataDir)
	c = newClient(srv.base)
	defer c.close()
	var stored runDoc
	status, code, err := c.do(http.MethodGet, "/runs/agent-teams-1", adminToken, "", nil, &stored)
	if err != nil || status != http.StatusOK {
		t.Fatalf("GET /runs/agent-teams-1 after restart: %d %s %v, want 200", status, code, err)
	}
	checkInterrupted("after restart", stored)
	ms, ok := c.members(t, "agent-teams-1")
	if !ok {
		t.Fatal("the run's team is gone after restart")
	}
	for name, m := range ms {
		if m.Active || m.Status == "running" || m.Status == "stopped" {
			t.Errorf("%s after restart = %+v, want a member the run did not strand", name, m)
		}
	}
	var next runDoc
	status, code, err = c.do(http.MethodPost, "/scenarios/agent-teams/runs", adminToken, "", map[string]any{}, &next)
	if err != nil || status != http.StatusOK || !next.OK || next.RunID != "agent-teams-2" {
		t.Errorf("next run: %d %s %v, %q ok=%t; want 200, agent-teams-2 ok", status, code, err, next.RunID, next.OK)
	}
	srv.stop()
}
