package main

import (
	"encoding/json"
	"net/http"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"mailroom/internal/providertest"
)

// scenarioDoc is the part of a run document these tests look at.
type scenarioDoc struct {
	RunID         string `json:"run_id"`
	Scenario      string `json:"scenario"`
	Team          string `json:"team"`
	OK            bool   `json:"ok"`
	ModelRequests int    `json:"model_requests"`
	Checks        []struct {
		Name string `json:"name"`
		OK   bool   `json:"ok"`
	} `json:"checks"`
	Outcome   map[string]any              `json:"outcome"`
	Mailboxes map[string][]map[string]any `json:"mailboxes"`
}

// output collects the process's whole stdout and its exit code.
func (p *proc) output() (string, int) {
	p.t.Helper()
	var b strings.Builder
	for line := range p.lines {
		b.WriteString(line + "\n")
	}
	return b.String(), p.wait(exitDeadline)
}

func decodeDoc(t *testing.T, out string) scenarioDoc {
	t.Helper()
	var doc scenarioDoc
	if err := json.Unmarshal([]byte(out), &doc); err != nil {
		t.Fatalf("stdout is not a run document: %v\n%s", err, out)
	}
	return doc
}

func TestScenarioCommand(t *testing.T) {
	tests := []struct {
		name      string
		args      []string
		scenario  string
		requests  int
		refusedBy any // outcome.refused_by of team-protocols
	}{
		{"agent-teams", []string{"scenario", "agent-teams"}, "agent-teams", 9, nil},
		{"team-protocols allow", []string{"scenario", "team-protocols", "--decision", "allow"}, "team-protocols", 7, nil},
		{"flags before the name", []string{"scenario", "--plan", "reject", "--decision", "allow", "team-protocols"}, "team-protocols", 7, "plan"},
		{"defaults", []string{"scenario", "team-protocols", "--step-ms", "0"}, "team-protocols", 7, "host"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tmp := t.TempDir()
			p := start(t, []string{"TMPDIR=" + tmp}, tt.args...)
			out, code := p.output()
			if code != 0 {
				t.Fatalf("exit %d, want 0; stderr:\n%s", code, p.stderr)
			}
			doc := decodeDoc(t, out)
			if !doc.OK || doc.Scenario != tt.scenario || doc.ModelRequests != tt.requests || len(doc.Checks) == 0 {
				t.Errorf("document: ok %t, scenario %q, %d model requests, %d checks", doc.OK, doc.Scenario, doc.ModelRequests, len(doc.Checks))
			}
			if tt.scenario == "team-protocols" && !reflect.DeepEqual(doc.Outcome["refused_by"], tt.refusedBy) {
				t.Errorf("refused_by = %v, want %v", doc.Outcome["refused_by"], tt.refusedBy)
			}
			// Without --data the run's temporary directory is removed.
			if left, _ := os.ReadDir(tmp); len(left) != 0 {
				t.Errorf("temporary files left behind: %v", left)
			}
		})
	}
}

func TestScenarioCommandKeepsData(t *testing.T) {
	dataDir := filepath.Join(t.TempDir(), "data")
	for _, want := range []string{"team-protocols-1", "team-protocols-2"} {
		p := start(t, nil, "scenario", "team-protocols", "--data", dataDir, "--expected", "43", "--decision", "allow")
		out, code := p.output()
		if code != 0 {
			t.Fatalf("exit %d, want 0; stderr:\n%s", code, p.stderr)
		}
		doc := decodeDoc(t, out)
		if doc.RunID != want || doc.Outcome["match"] != false || doc.Outcome["output"] != "42" {
			t.Errorf("run %s: outcome %v, want run %s with output 42 not matching 43", doc.RunID, doc.Outcome, want)
		}
		stored, err := os.ReadFile(filepath.Join(dataDir, "runs", doc.RunID, "result.json"))
		if err != nil {
			t.Fatal(err)
		}
		var a, b any
		if err := json.Unmarshal(stored, &a); err != nil {
			t.Fatal(err)
		}
		if err := json.Unmarshal([]byte(out), &b); err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(a, b) {
			t.Errorf("stored result differs from the printed one")
		}
	}

	// The teams are kept: a server on the same directory shows them.
	_, ready := startServer(t, dataDir, []string{"MAILROOM_ADMIN_TOKEN=scenario-admin-0123456789"})
	req, err := http.NewRequest(http.MethodGet, "http://"+ready.Host+"/api/v1/runs/team-protocols-2", nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer scenario-admin-0123456789")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Errorf("GET /runs/team-protocols-2 on a server over the same data = %d, want 200", resp.StatusCode)
	}

	// While that server holds the directory, the command refuses it with
	// its own exit status, and points to the server's API and to --data.
	p := start(t, nil, "scenario", "agent-teams", "--data", dataDir)
	if _, code := p.output(); code != 3 {
		t.Errorf("scenario on a directory in use: exit %d, want 3; stderr:\n%s", code, p.stderr)
	}
	for _, want := range []string{"POST /api/v1/scenarios/agent-teams/runs", "--data", dataDir} {
		if !strings.Contains(p.stderr.String(), want) {
			t.Errorf("stderr = %q, want it to contain %q", p.stderr.String(), want)
		}
	}
}

func TestScenarioCommandNotOK(t *testing.T) {
	// Without python3 on PATH main.py cannot run, so the path where both
	// gates pass fails its checks: the document is printed and the exit is 1.
	p := start(t, []string{"PATH=" + t.TempDir()}, "scenario", "team-protocols", "--decision", "allow")
	out, code := p.output()
	if code != 1 {
		t.Fatalf("exit %d, want 1; stderr:\n%s", code, p.stderr)
	}
	if doc := decodeDoc(t, out); doc.OK {
		t.Errorf("ok = true without python3")
	}
	if msg := p.stderr.String(); !strings.Contains(msg, "not ok") || !strings.Contains(msg, "run_gates") {
		t.Errorf("stderr does not name the failed checks:\n%s", msg)
	}
}

func TestScenarioCommandUsage(t *testing.T) {
	tests := []struct {
		name    string
		args    []string
		wantMsg string
	}{
		{"NoName", []string{"scenario"}, "name a scenario"},
		{"UnknownScenario", []string{"scenario", "bogus"}, `unknown scenario "bogus"`},
		{"OptionNotTaken", []string{"scenario", "agent-teams", "--plan", "reject"}, "takes only step_ms"},
		{"BadDecision", []string{"scenario", "team-protocols", "--decision", "maybe"}, "allow or deny"},
		{"BadStep", []string{"scenario", "team-protocols", "--step-ms", "slow"}, "step-ms"},
		{"StepTooLong", []string{"scenario", "team-protocols", "--step-ms", "10001"}, "step_ms"},
		{"ExtraArgument", []string{"scenario", "agent-teams", "more"}, `unexpected argument "more"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := start(t, nil, tt.args...)
			out, code := p.output()
			if code != 2 {
				t.Errorf("exit %d, want 2; stderr:\n%s", code, p.stderr)
			}
			if out != "" {
				t.Errorf("stdout = %q, want nothing", out)
			}
			if msg := p.stderr.String(); !strings.Contains(msg, tt.wantMsg) {
				t.Errorf("stderr does not contain %q:\n%s", tt.wantMsg, msg)
			}
		})
	}
}

func TestServerRunsScenarios(t *testing.T) {
	dataDir := t.TempDir()
	const token = "scenario-admin-0123456789"
	p, ready := startServer(t, dataDir, []string{"MAILROOM_ADMIN_TOKEN=" + token})
	req, err := http.NewRequest(http.MethodPost, "http://"+ready.Host+"/api/v1/scenarios/agent-teams/runs", strings.NewReader(`{"step_ms": 0}`))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+token)
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	var doc scenarioDoc
	err = json.NewDecoder(resp.Body).Decode(&doc)
	resp.Body.Close()
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("POST run = %d (%v)", resp.StatusCode, err)
	}
	if !doc.OK || doc.RunID != "agent-teams-1" {
		t.Errorf("run %s ok %t, want agent-teams-1 ok", doc.RunID, doc.OK)
	}
	if _, err := os.Stat(filepath.Join(dataDir, "runs", doc.RunID, "result.json")); err != nil {
		t.Errorf("the run's result is not kept in the data directory: %v", err)
	}
	p.stop()
}

// TestScenarioCommandModel runs agent-teams with --model against a fake
// Messages API that answers every request with a text: the document names
// the model, the checks only the script can guarantee are not applicable,
// and the run is not ok (exit 1), since the model skipped the lesson's
// flow. Without credentials the command exits 1 and creates nothing.
func TestScenarioCommandModel(t *testing.T) {
	fake := providertest.NewAnthropic(t, "sk-cli-test-key")
	for range 4 {
		fake.Push(providertest.AnthropicText("Done.", providertest.AnthropicUsage{InputTokens: 3, OutputTokens: 1}))
	}
	data := t.TempDir()
	p := start(t, []string{"ANTHROPIC_API_KEY=sk-cli-test-key", "ANTHROPIC_BASE_URL=" + fake.URL()},
		"scenario", "agent-teams", "--model", "anthropic:claude-test", "--data", data)
	out, code := p.output()
	if code != 1 {
		t.Fatalf("exit %d, want 1 (the run is not ok); stderr:\n%s", code, p.stderr)
	}
	var doc struct {
		OK            bool `json:"ok"`
		ModelRequests int  `json:"model_requests"`
		Model         struct {
			Provider string `json:"provider"`
			Name     string `json:"name"`
		} `json:"model"`
		Checks []struct {
			Name       string `json:"name"`
			Applicable *bool  `json:"applicable"`
		} `json:"checks"`
	}
	if err := json.Unmarshal([]byte(out), &doc); err != nil {
		t.Fatalf("stdout is not a run document: %v\n%s", err, out)
	}
	if doc.OK || doc.ModelRequests != 4 || doc.Model.Provider != "anthropic" || doc.Model.Name != "claude-test" || len(fake.Requests()) != 4 {
		t.Errorf("ok %t, %d model requests, model %+v, the fake saw %d; want not ok, 4, anthropic claude-test, 4", doc.OK, doc.ModelRequests, doc.Model, len(fake.Requests()))
	}
	na := 0
	for _, c := range doc.Checks {
		if c.Applicable != nil && !*c.Applicable {
			na++
		}
	}
	if na == 0 {
		t.Errorf("no check is reported as not applicable on a model's run: %s", out)
	}

	empty := t.TempDir()
	p = start(t, nil, "scenario", "agent-teams", "--model", "anthropic:claude-test", "--data", empty)
	if _, code := p.output(); code != 1 || !strings.Contains(p.stderr.String(), "ANTHROPIC_API_KEY") {
		t.Errorf("without credentials: exit %d, want 1 naming ANTHROPIC_API_KEY; stderr:\n%s", code, p.stderr)
	}
	if left, _ := os.ReadDir(empty); len(left) != 0 {
		t.Errorf("a refused model run left %v in its data directory", left)
	}
	p = start(t, nil, "scenario", "agent-teams", "--model", "nosuch:x")
	if _, code := p.output(); code != 2 {
		t.Errorf("--model nosuch:x: exit %d, want 2; stderr:\n%s", code, p.stderr)
	}
}
