package httpapi_test

import (
	"encoding/json"
	"net/http"
	"reflect"
	"strings"
	"testing"

	"mailroom/internal/core"
	"mailroom/internal/httpapi"
)

// newRunEnv is newEnv with scenario runs enabled on the same data
// directory, as the server wires it.
func newRunEnv(t *testing.T) *env {
	t.Helper()
	return startEnv(t, envOptions{runs: true})
}

// letters summarises an inbox as "<id> <sender> <type>" per letter, the
// type being the protocol letter's type or "ordinary".
func letters(t *testing.T, box []httpapi.Message) []string {
	t.Helper()
	out := []string{}
	for _, m := range box {
		typ := "ordinary"
		if rest, ok := strings.CutPrefix(m.Body, core.ProtocolPrefix); ok {
			var data struct {
				Type string `json:"type"`
			}
			if err := json.Unmarshal([]byte(rest), &data); err != nil {
				t.Fatalf("letter %s: protocol body is not JSON: %v", m.ID, err)
			}
			typ = data.Type
		}
		out = append(out, m.ID+" "+m.Sender+" "+typ)
	}
	return out
}

// runScenario posts a run and checks that every check held and that
// GET /runs/{id} returns the very same document.
func (e *env) runScenario(t *testing.T, name string, opts map[string]any) httpapi.RunResult {
	t.Helper()
	r := e.post("/api/v1/scenarios/"+name+"/runs", adminToken, opts)
	want(t, r, http.StatusOK, "")
	doc := decode[httpapi.RunResult](t, r)
	for _, c := range doc.Checks {
		if !c.Ok {
			t.Errorf("check %s failed: %s", c.Name, c.Detail)
		}
	}
	if !doc.Ok || len(doc.Checks) == 0 {
		t.Errorf("ok = %t with %d checks, want true", doc.Ok, len(doc.Checks))
	}
	if string(doc.Scenario) != name || doc.Team != doc.RunID || !strings.HasPrefix(doc.RunID, name+"-") {
		t.Errorf("run_id %q, scenario %q, team %q", doc.RunID, doc.Scenario, doc.Team)
	}

	again := e.get("/api/v1/runs/"+doc.RunID, adminToken)
	want(t, again, http.StatusOK, "")
	var first, second any
	if err := json.Unmarshal(r.body, &first); err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(again.body, &second); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(first, second) {
		t.Errorf("GET /runs/%s differs from the run's answer:\n%s\n%s", doc.RunID, r.body, again.body)
	}

	// The run's team stays browsable.
	want(t, e.get("/api/v1/teams/"+doc.Team, adminToken), http.StatusOK, "")
	return doc
}

func TestRunTeamProtocols(t *testing.T) {
	t.Parallel()
	e := newRunEnv(t)
	tests := []struct {
		name      string
		opts      map[string]any
		planState string // req-1 after the run
		ran       bool
		refusedBy string // "" for null
		output    string // "" for null
		match     *bool
		counter   string
		expected  string
	}{
		{name: "default: approve, deny", opts: map[string]any{}, planState: "approved", refusedBy: "host", expected: "42"},
		{name: "reject, allow", opts: map[string]any{"plan": "reject", "decision": "allow"}, planState: "rejected", refusedBy: "plan", expected: "42"},
		{name: "approve, allow", opts: map[string]any{"plan": "approve", "decision": "allow"}, planState: "approved", ran: true, output: "42", match: boolPtr(true), counter: "x", expected: "42"},
		{name: "approve, allow, expected 43", opts: map[string]any{"plan": "approve", "decision": "allow", "expected": "43", "step_ms": 0}, planState: "approved", ran: true, output: "42", match: boolPtr(false), counter: "x", expected: "43"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			doc := e.runScenario(t, "team-protocols", tt.opts)
			if doc.ModelRequests != 7 {
				t.Errorf("model_requests = %d, want 7", doc.ModelRequests)
			}
			if doc.Outcome == nil {
				t.Fatal("outcome is null")
			}
			out, err := doc.Outcome.AsProtocolOutcome()
			if err != nil {
				t.Fatal(err)
			}
			if out.Ran != tt.ran || out.Counter != tt.counter || out.Expected != tt.expected {
				t.Errorf("ran %t counter %q expected %q, want %t %q %q", out.Ran, out.Counter, out.Expected, tt.ran, tt.counter, tt.expected)
			}
			if got := string(orZero(out.RefusedBy)); got != tt.refusedBy || (tt.refusedBy == "") != (out.RefusedBy == nil) {
				t.Errorf("refused_by = %q, want %q", got, tt.refusedBy)
			}
			if got := orZero(out.Output); got != tt.output || (tt.output == "") != (out.Output == nil) {
				t.Errorf("output = %q, want %q", got, tt.output)
			}
			if (out.Match == nil) != (tt.match == nil) || (out.Match != nil && *out.Match != *tt.match) {
				t.Errorf("match = %v, want %v", out.Match, tt.match)
			}

			wantBoxes := map[string][]string{
				"lead":     {"lead-1 reader plan_request", "lead-2 reader shutdown_response"},
				"reader":   {"reader-1 lead plan_response", "reader-2 lead shutdown_request"},
				"reviewer": {},
			}
			if len(doc.Mailboxes) != len(wantBoxes) {
				t.Errorf("mailboxes of %d members, want %d", len(doc.Mailboxes), len(wantBoxes))
			}
			for member, wantLetters := range wantBoxes {
				box, ok := doc.Mailboxes[member]
				if !ok {
					t.Errorf("no mailbox for %s", member)
					continue
				}
				if got := letters(t, box); !reflect.DeepEqual(got, wantLetters) {
					t.Errorf("mailbox %s = %q, want %q", member, got, wantLetters)
				}
				// The document's mailboxes are the inboxes as GET inbox shows them.
				r := e.get("/api/v1/teams/"+doc.Team+"/members/"+member+"/inbox", adminToken)
				want(t, r, http.StatusOK, "")
				if got := decode[httpapi.Inbox](t, r).Messages; !reflect.DeepEqual(got, box) {
					t.Errorf("GET inbox of %s differs from the document's mailbox", member)
				}
			}

			var states []string
			for _, rq := range doc.Requests {
				states = append(states, rq.RequestID+" "+string(rq.Kind)+" "+string(rq.Status))
			}
			wantStates := []string{"req-1 plan " + tt.planState, "req-2 shutdown approved"}
			if !reflect.DeepEqual(states, wantStates) {
				t.Errorf("requests = %q, want %q", states, wantStates)
			}

			tm := decode[httpapi.Team](t, e.get("/api/v1/teams/"+doc.Team, adminToken))
			for _, m := range tm.Members {
				if m.Name == "reader" && m.Status != httpapi.MemberStatusClosed {
					t.Errorf("reader is %s after the run, want closed", m.Status)
				}
			}
		})
	}
}

func TestRunAgentTeams(t *testing.T) {
	t.Parallel()
	e := newRunEnv(t)
	stream := e.openStream(t, "", adminToken)

	doc := e.runScenario(t, "agent-teams", map[string]any{"step_ms": 0})
	if doc.ModelRequests != 9 {
		t.Errorf("model_requests = %d, want 9", doc.ModelRequests)
	}
	if doc.Outcome == nil {
		t.Fatal("outcome is null")
	}
	out, err := doc.Outcome.AsTeamsOutcome()
	if err != nil {
		t.Fatal(err)
	}
	wantOut := httpapi.TeamsOutcome{LeadLetters: 2, ReaderLetters: 1, ReviewerLetters: 0, ReaderRereadSource: false, LeadSawReports: 2}
	if out != wantOut {
		t.Errorf("outcome = %+v, want %+v", out, wantOut)
	}
	wantBoxes := map[string][]string{
		"lead":     {"lead-1 reader ordinary", "lead-2 reader ordinary"},
		"reader":   {"reader-1 reviewer ordinary"},
		"reviewer": {},
	}
	for member, wantLetters := range wantBoxes {
		if got := letters(t, doc.Mailboxes[member]); !reflect.DeepEqual(got, wantLetters) {
			t.Errorf("mailbox %s = %q, want %q", member, got, wantLetters)
		}
	}
	if len(doc.Requests) != 0 {
		t.Errorf("requests = %+v, want none", doc.Requests)
	}

	// The stream announced the run when its team existed and when it ended.
	var runs []string
	for len(runs) < 2 {
		ev := stream.next()
		if ev.typ != "run" {
			continue
		}
		var data struct {
			RunID    string `json:"run_id"`
			Scenario string `json:"scenario"`
			Team     string `json:"team"`
			Status   string `json:"status"`
			OK       *bool  `json:"ok"`
		}
		if err := json.Unmarshal(ev.data.Data, &data); err != nil {
			t.Fatal(err)
		}
		if ev.data.Team != doc.Team || data.RunID != doc.RunID || data.Team != doc.Team || data.Scenario != "agent-teams" {
			t.Errorf("run event %+v (team %q) does not name run %s", data, ev.data.Team, doc.RunID)
		}
		s := data.Status
		if data.OK != nil {
			s += " ok=" + map[bool]string{true: "true", false: "false"}[*data.OK]
		}
		runs = append(runs, s)
	}
	if want := []string{"running", "done ok=true"}; !reflect.DeepEqual(runs, want) {
		t.Errorf("run events = %q, want %q", runs, want)
	}
}

func TestScenarioRefusals(t *testing.T) {
	t.Parallel()
	e := newRunEnv(t)
	tm := e.newTeam("demo", nil)
	member := tm.tokens["reader"]
	tests := []struct {
		name   string
		method string
		path   string
		token  string
		body   any
		status int
		code   string
	}{
		{"unknown scenario", http.MethodPost, "/api/v1/scenarios/no-such/runs", adminToken, map[string]any{}, http.StatusNotFound, "not_found"},
		{"malformed scenario name", http.MethodPost, "/api/v1/scenarios/No_Such/runs", adminToken, map[string]any{}, http.StatusBadRequest, "validation_failed"},
		{"member runs", http.MethodPost, "/api/v1/scenarios/agent-teams/runs", member, map[string]any{}, http.StatusForbidden, "forbidden"},
		{"no token runs", http.MethodPost, "/api/v1/scenarios/agent-teams/runs", "", map[string]any{}, http.StatusUnauthorized, "unauthorized"},
		{"agent-teams takes only step_ms", http.MethodPost, "/api/v1/scenarios/agent-teams/runs", adminToken, map[string]any{"plan": "reject"}, http.StatusBadRequest, "validation_failed"},
		{"plan outside its enum", http.MethodPost, "/api/v1/scenarios/team-protocols/runs", adminToken, map[string]any{"plan": "maybe"}, http.StatusBadRequest, "validation_failed"},
		{"step_ms too large", http.MethodPost, "/api/v1/scenarios/team-protocols/runs", adminToken, map[string]any{"step_ms": 10001}, http.StatusBadRequest, "validation_failed"},
		{"unknown option", http.MethodPost, "/api/v1/scenarios/team-protocols/runs", adminToken, map[string]any{"speed": 1}, http.StatusBadRequest, "validation_failed"},
		{"expected on two lines", http.MethodPost, "/api/v1/scenarios/team-protocols/runs", adminToken, map[string]any{"expected": "4\n2"}, http.StatusBadRequest, "validation_failed"},
		{"unknown run", http.MethodGet, "/api/v1/runs/agent-teams-99", adminToken, nil, http.StatusNotFound, "not_found"},
		{"member reads a run", http.MethodGet, "/api/v1/runs/agent-teams-1", member, nil, http.StatusForbidden, "forbidden"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := e.do(call{method: tt.method, path: tt.path, token: tt.token, json: tt.body})
			want(t, r, tt.status, tt.code)
		})
	}
	if teams := e.svc.Teams(t.Context()); len(teams) != 1 {
		t.Errorf("%d teams after refused runs, want only demo", len(teams))
	}
}

func TestListScenarios(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	tm := e.newTeam("demo", nil)
	for _, token := range []string{adminToken, tm.tokens["reader"]} {
		r := e.get("/api/v1/scenarios", token)
		want(t, r, http.StatusOK, "")
		var names []string
		for _, s := range decode[httpapi.ScenarioList](t, r).Scenarios {
			names = append(names, string(s.Name))
		}
		if want := []string{"agent-teams", "team-protocols"}; !reflect.DeepEqual(names, want) {
			t.Errorf("scenarios = %q, want %q", names, want)
		}
	}
	want(t, e.get("/api/v1/scenarios", ""), http.StatusUnauthorized, "unauthorized")
}

func TestRunsNeedADataDirectory(t *testing.T) {
	t.Parallel()
	e := newEnv(t) // no DataDir
	want(t, e.post("/api/v1/scenarios/agent-teams/runs", adminToken, map[string]any{}), http.StatusNotFound, "not_found")
	want(t, e.get("/api/v1/runs/agent-teams-1", adminToken), http.StatusNotFound, "not_found")
}

func TestRunWithoutBody(t *testing.T) {
	t.Parallel()
	e := newRunEnv(t)
	r := e.do(call{method: http.MethodPost, path: "/api/v1/scenarios/team-protocols/runs", token: adminToken})
	want(t, r, http.StatusOK, "")
	doc := decode[httpapi.RunResult](t, r)
	out, err := doc.Outcome.AsProtocolOutcome()
	if err != nil {
		t.Fatal(err)
	}
	if !doc.Ok || orZero(out.RefusedBy) != httpapi.ProtocolOutcomeRefusedByHost {
		t.Errorf("ok %t, refused_by %v: want the default path (approve, deny)", doc.Ok, out.RefusedBy)
	}
}

func boolPtr(v bool) *bool { return &v }

func orZero[T any](p *T) T {
	var zero T
	if p == nil {
		return zero
	}
	return *p
}
