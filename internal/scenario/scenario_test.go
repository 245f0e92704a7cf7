package scenario

import (
	"context"
	"encoding/json"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"mailroom/internal/core"
	"mailroom/internal/testkit"
)

// backend is the store this run of the package's tests uses: TestMain
// runs them once on the file store and once on PostgreSQL.
var backend string

func TestMain(m *testing.M) { os.Exit(testkit.MainBackends(m, &backend)) }

type env struct {
	place  *testkit.Place
	dir    string // the data directory (the run workspaces under workspaces/)
	svc    *core.Service
	runner *Runner

	mu      sync.Mutex
	started [][2]string
}

func newEnv(t *testing.T) *env {
	t.Helper()
	e := &env{place: testkit.NewPlace(t, backend)}
	e.dir = e.place.Dir
	e.svc = e.place.OpenService(t, core.Options{})
	e.runner = NewRunner(e.svc, workspaces(e.dir), Config{OnStart: func(runID, team string) {
		e.mu.Lock()
		e.started = append(e.started, [2]string{runID, team})
		e.mu.Unlock()
	}})
	return e
}

// openService opens a fresh store on this run's backend and a service
// over it; dir is its data directory.
func openService(t *testing.T) (svc *core.Service, dir string) {
	t.Helper()
	p := testkit.NewPlace(t, backend)
	return p.OpenService(t, core.Options{}), p.Dir
}

// workspaces is the run workspaces' root of a data directory, as the
// server has it by default.
func workspaces(dir string) string { return filepath.Join(dir, "workspaces") }

// storedResult is run id's stored result, nil while it has none.
func storedResult(t *testing.T, svc *core.Service, id string) []byte {
	t.Helper()
	doc, err := svc.Runs().Get(t.Context(), id)
	if err != nil {
		t.Fatalf("GetRun(%s): %v", id, err)
	}
	return doc.Result
}

// assertChecks fails unless every check of doc holds and the named ones
// are present.
func assertChecks(t *testing.T, doc Result, names ...string) {
	t.Helper()
	have := map[string]bool{}
	for _, c := range doc.Checks {
		have[c.Name] = true
		if !c.OK {
			t.Errorf("check %s failed: %s", c.Name, c.Detail)
		}
	}
	for _, n := range names {
		if !have[n] {
			t.Errorf("check %s missing", n)
		}
	}
	if !doc.OK {
		t.Errorf("ok = false")
	}
}

func letterSummary(box []core.Message) string {
	var parts []string
	for _, m := range box {
		typ := "ordinary"
		if data, ok := protocolData(m.Body); ok {
			typ, _ = data["type"].(string)
		}
		parts = append(parts, m.ID+" "+m.Sender+" "+typ)
	}
	return strings.Join(parts, "|")
}

func TestTeamProtocolsPaths(t *testing.T) {
	str := func(s string) *string { return &s }
	boolp := func(b bool) *bool { return &b }
	tests := []struct {
		name      string
		opts      Options
		ran       bool
		refusedBy *string
		output    *string
		match     *bool
		counter   string
		planState string
		verdict   string
	}{
		{name: "defaults: approved, host denies", opts: Options{}, refusedBy: str("host"), planState: core.RequestApproved, verdict: "未运行（host permission: "},
		{name: "rejected, host allows", opts: Options{Plan: "reject", Decision: "allow"}, refusedBy: str("plan"), planState: core.RequestRejected, verdict: "未运行（plan gate: "},
		{name: "approved, host allows", opts: Options{Plan: "approve", Decision: "allow"}, ran: true, output: str("42"), match: boolp(true), counter: "x", planState: core.RequestApproved, verdict: "：相符。"},
		{name: "approved, host allows, expected 43", opts: Options{Decision: "allow", Expected: "43"}, ran: true, output: str("42"), match: boolp(false), counter: "x", planState: core.RequestApproved, verdict: "：不符。"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv(t)
			doc, err := e.runner.Run(t.Context(), TeamProtocols, tc.opts)
			if err != nil {
				t.Fatal(err)
			}
			assertChecks(t, doc, "turn_outcomes", "model_requests", "protocol_letters", "pending_between_reply_and_match",
				"plan_decision", "run_gates", "counter_file", "result_reported_honestly", "shutdown_at_idle_boundary",
				"shutdown_matched_by_lead", "closed_member_unavailable", "shutdown_deferred_while_busy", "closed_with_turns_left_unavailable")
			if doc.RunID != "team-protocols-1" || doc.Team != doc.RunID || doc.Scenario != TeamProtocols || doc.ModelRequests != 7 {
				t.Fatalf("doc header = %s %s %s %d", doc.RunID, doc.Team, doc.Scenario, doc.ModelRequests)
			}
			out, ok := doc.Outcome.(*ProtocolOutcome)
			if !ok {
				t.Fatalf("outcome = %T", doc.Outcome)
			}
			expected := tc.opts.Expected
			if expected == "" {
				expected = "42"
			}
			if out.Ran != tc.ran || !eqPtr(out.RefusedBy, tc.refusedBy) || !eqPtr(out.Output, tc.output) || !eqPtr(out.Match, tc.match) ||
				out.Counter != tc.counter || out.Expected != expected {
				t.Fatalf("outcome = %s", mustJSON(t, out))
			}
			// The counter file exists only where the program ran.
			_, statErr := os.Stat(filepath.Join(workspaces(e.dir), doc.RunID, "counter.txt"))
			if tc.ran == errors.Is(statErr, fs.ErrNotExist) {
				t.Fatalf("counter file: ran %t, stat %v", tc.ran, statErr)
			}
			if got := letterSummary(doc.Mailboxes["lead"]); got != "lead-1 reader plan_request|lead-2 reader shutdown_response" {
				t.Fatalf("lead mailbox = %s", got)
			}
			if got := letterSummary(doc.Mailboxes["reader"]); got != "reader-1 lead plan_response|reader-2 lead shutdown_request" {
				t.Fatalf("reader mailbox = %s", got)
			}
			if len(doc.Mailboxes["reviewer"]) != 0 {
				t.Fatalf("reviewer mailbox = %+v", doc.Mailboxes["reviewer"])
			}
			if len(doc.Requests) != 2 || doc.Requests[0].Status != tc.planState || doc.Requests[1].Kind != core.KindShutdown || doc.Requests[1].Status != core.RequestApproved {
				t.Fatalf("requests = %s", mustJSON(t, doc.Requests))
			}
			if !strings.Contains(checkDetail(doc, "result_reported_honestly"), tc.verdict) {
				t.Fatalf("reader's verdict: %s", checkDetail(doc, "result_reported_honestly"))
			}
			view, err := e.svc.Team(t.Context(), doc.Team)
			if err != nil {
				t.Fatal(err)
			}
			for _, m := range view.Members {
				if m.Name == "reader" && (m.Status != core.StatusClosed || m.Turns != 2 || m.Active) {
					t.Fatalf("reader = %+v", m)
				}
			}
			proof, err := e.svc.Team(t.Context(), doc.Team+"-close")
			if err != nil {
				t.Fatal(err)
			}
			for _, m := range proof.Members {
				if m.Name == "reader" && (m.Status != core.StatusClosed || m.Turns != 1) {
					t.Fatalf("proof team reader = %+v", m)
				}
			}
			if len(e.started) != 1 || e.started[0] != [2]string{doc.RunID, doc.Team} {
				t.Fatalf("OnStart calls = %v", e.started)
			}
		})
	}
}

func TestAgentTeams(t *testing.T) {
	e := newEnv(t)
	doc, err := e.runner.Run(t.Context(), AgentTeams, Options{})
	if err != nil {
		t.Fatal(err)
	}
	assertChecks(t, doc, "turn_outcomes", "model_requests", "mailbox_counts", "reader_context_kept", "reader_no_reread", "lead_saw_both_reports", "tool_use_ids")
	want := TeamsOutcome{LeadLetters: 2, ReaderLetters: 1, ReviewerLetters: 0, ReaderRereadSource: false, LeadSawReports: 2}
	if out, ok := doc.Outcome.(*TeamsOutcome); !ok || *out != want {
		t.Fatalf("outcome = %s", mustJSON(t, doc.Outcome))
	}
	if doc.RunID != "agent-teams-1" || doc.ModelRequests != 9 || len(doc.Requests) != 0 {
		t.Fatalf("doc = %s", mustJSON(t, doc))
	}
	if got := letterSummary(doc.Mailboxes["lead"]); got != "lead-1 reader ordinary|lead-2 reader ordinary" {
		t.Fatalf("lead mailbox = %s", got)
	}
	if r := doc.Mailboxes["reader"]; len(r) != 1 || r[0].Sender != "reviewer" || r[0].Body != "当前expected.txt记录为42；尚未运行。" {
		t.Fatalf("reader mailbox = %+v", r)
	}
	if len(doc.Mailboxes["reviewer"]) != 0 {
		t.Fatal("reviewer got mail")
	}
	// Nothing runs main.py in lesson 15.
	if _, err := os.Stat(filepath.Join(workspaces(e.dir), doc.RunID, "counter.txt")); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("counter file: %v", err)
	}
	// A second run gets its own team and workspace.
	doc2, err := e.runner.Run(t.Context(), AgentTeams, Options{StepMS: 1})
	if err != nil || doc2.RunID != "agent-teams-2" || !doc2.OK {
		t.Fatalf("second run = %s, %v", mustJSON(t, doc2), err)
	}
}

func TestResultsSurviveRestart(t *testing.T) {
	e := newEnv(t)
	doc, err := e.runner.Run(t.Context(), TeamProtocols, Options{Decision: "allow"})
	if err != nil {
		t.Fatal(err)
	}
	got, err := e.runner.Get(t.Context(), doc.RunID)
	if err != nil || mustJSON(t, got) != mustJSON(t, doc) {
		t.Fatalf("Get = %v", err)
	}
	// A fresh runner (a restarted server) reads the stored document.
	fresh := NewRunner(e.svc, workspaces(e.dir), Config{})
	got, err = fresh.Get(t.Context(), doc.RunID)
	if err != nil {
		t.Fatal(err)
	}
	if mustJSON(t, got) != mustJSON(t, doc) {
		t.Fatalf("stored document differs:\n%s\n%s", mustJSON(t, got), mustJSON(t, doc))
	}
	if _, ok := got.Outcome.(*ProtocolOutcome); !ok {
		t.Fatalf("stored outcome = %T", got.Outcome)
	}
	if backend == testkit.BackendFile { // the file store's own file
		info, err := os.Stat(filepath.Join(e.dir, "runs", doc.RunID, "result.json"))
		if err != nil || info.Mode().Perm() != 0o600 {
			t.Fatalf("result.json: %v, %v", info, err)
		}
	}
	// A fresh service over the same store (a restart, or another replica).
	got, err = NewRunner(e.place.OpenService(t, core.Options{}), workspaces(e.dir), Config{}).Get(t.Context(), doc.RunID)
	if err != nil || mustJSON(t, got) != mustJSON(t, doc) {
		t.Fatalf("Get through a new service = %v\n%s", err, mustJSON(t, got))
	}
	for _, id := range []string{"team-protocols-9", "../teams", "", "x/y"} {
		if _, err := fresh.Get(t.Context(), id); core.ErrorCode(err) != core.CodeNotFound {
			t.Fatalf("Get(%q) = %v, want not_found", id, err)
		}
	}
	// The next run after a restart continues the numbering.
	doc2, err := fresh.Run(t.Context(), TeamProtocols, Options{})
	if err != nil || doc2.RunID != "team-protocols-2" {
		t.Fatalf("next run = %s, %v", doc2.RunID, err)
	}
}

// TestRunInterrupted cancels a run's context as soon as its team exists:
// the run stops, is stored finished and not ok with a failed interrupted
// check first, leaves no member running, and a restarted runner answers
// the same document.
func TestRunInterrupted(t *testing.T) {
	for _, name := range []string{AgentTeams, TeamProtocols} {
		t.Run(name, func(t *testing.T) {
			svc, dir := openService(t)
			ctx, cancel := context.WithCancel(t.Context())
			defer cancel()
			runner := NewRunner(svc, workspaces(dir), Config{OnStart: func(string, string) { cancel() }})
			doc, err := runner.Run(ctx, name, Options{})
			if !errors.Is(err, ErrInterrupted) {
				t.Fatalf("Run error = %v, want ErrInterrupted", err)
			}
			if doc.RunID != name+"-1" || doc.OK {
				t.Errorf("run %q ok=%t, want %s-1 not ok", doc.RunID, doc.OK, name)
			}
			if len(doc.Checks) == 0 || doc.Checks[0].Name != CheckInterrupted || doc.Checks[0].OK {
				t.Errorf("checks = %s, want a failed %s check first", mustJSON(t, doc.Checks), CheckInterrupted)
			}
			view, err := svc.Team(t.Context(), doc.Team)
			if err != nil {
				t.Fatal(err)
			}
			for _, m := range view.Members {
				if m.Active || m.Status == core.StatusRunning {
					t.Errorf("member %s after the interrupted run: status %s, active %t; want not running", m.Name, m.Status, m.Active)
				}
				// The run was stopped as it started: no turn and no host
				// step may follow the cut.
				if m.Turns != 0 || m.Status != core.StatusIdle {
					t.Errorf("member %s after a run stopped at its start: %d turns, status %s; want 0 turns, idle", m.Name, m.Turns, m.Status)
				}
			}
			if len(doc.Requests) != 0 {
				t.Errorf("requests after a run stopped at its start = %s, want none", mustJSON(t, doc.Requests))
			}
			got, err := NewRunner(svc, workspaces(dir), Config{}).Get(t.Context(), doc.RunID)
			if err != nil {
				t.Fatalf("Get after restart: %v", err)
			}
			if mustJSON(t, got) != mustJSON(t, doc) {
				t.Errorf("stored document after restart:\n%s\nwant the run's answer:\n%s", mustJSON(t, got), mustJSON(t, doc))
			}
		})
	}
}

// TestUnfinishedRunIsInterrupted covers a process that ended while a run
// was going (SIGKILL, a crash): its run is stored with no result. The next
// process answers it as finished, not ok and interrupted, stores that,
// and numbers the next run after it.
func TestUnfinishedRunIsInterrupted(t *testing.T) {
	e := newEnv(t)
	const id = "agent-teams-1"
	if _, _, err := e.svc.CreateTeam(t.Context(), lessonTeam(id)); err != nil {
		t.Fatal(err)
	}
	if err := e.svc.Runs().Put(t.Context(), core.RunDoc{ID: id}); err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Join(workspaces(e.dir), id), 0o700); err != nil {
		t.Fatal(err)
	}
	doc, err := e.runner.Get(t.Context(), id)
	if err != nil {
		t.Fatalf("Get(%s) = %v, want the interrupted run", id, err)
	}
	if doc.RunID != id || doc.Scenario != AgentTeams || doc.Team != id || doc.OK {
		t.Errorf("document = %s, want run %s of %s, not ok", mustJSON(t, doc), id, AgentTeams)
	}
	if len(doc.Checks) != 1 || doc.Checks[0].Name != CheckInterrupted || doc.Checks[0].OK {
		t.Errorf("checks = %s, want one failed %s check", mustJSON(t, doc.Checks), CheckInterrupted)
	}
	if got := len(doc.Mailboxes); got != 3 {
		t.Errorf("mailboxes of %d members, want the team's 3", got)
	}
	if stored := storedResult(t, e.svc, id); stored == nil {
		t.Error("no result stored after Get, want the interrupted document")
	}
	again, err := NewRunner(e.svc, workspaces(e.dir), Config{}).Get(t.Context(), id)
	if err != nil || mustJSON(t, again) != mustJSON(t, doc) {
		t.Errorf("Get after restart = %s, %v; want %s", mustJSON(t, again), err, mustJSON(t, doc))
	}
	if _, err := e.runner.Get(t.Context(), "agent-teams-2"); core.ErrorCode(err) != core.CodeNotFound {
		t.Errorf("Get of a run that never started = %v, want not_found", err)
	}
	next, err := e.runner.Run(t.Context(), AgentTeams, Options{})
	if err != nil || next.RunID != "agent-teams-2" || !next.OK {
		t.Errorf("next run = %s ok=%t, %v; want agent-teams-2, ok", next.RunID, next.OK, err)
	}
}

func TestRunNamesSkipTakenTeams(t *testing.T) {
	e := newEnv(t)
	if _, _, err := e.svc.CreateTeam(t.Context(), core.TeamSpec{Name: "agent-teams-1"}); err != nil {
		t.Fatal(err)
	}
	doc, err := e.runner.Run(t.Context(), AgentTeams, Options{})
	if err != nil || doc.RunID != "agent-teams-2" || !doc.OK {
		t.Fatalf("run = %s, %v", doc.RunID, err)
	}
}

func TestOptionsValidation(t *testing.T) {
	e := newEnv(t)
	tests := []struct {
		name     string
		scenario string
		opts     Options
		code     core.Code
	}{
		{"unknown scenario", "nope", Options{}, core.CodeNotFound},
		{"bad plan", TeamProtocols, Options{Plan: "maybe"}, core.CodeValidation},
		{"bad decision", TeamProtocols, Options{Decision: "ask"}, core.CodeValidation},
		{"expected with a newline", TeamProtocols, Options{Expected: "4\n2"}, core.CodeValidation},
		{"expected too long", TeamProtocols, Options{Expected: strings.Repeat("4", 33)}, core.CodeValidation},
		{"step_ms too large", TeamProtocols, Options{StepMS: MaxStepMS + 1}, core.CodeValidation},
		{"negative step_ms", AgentTeams, Options{StepMS: -1}, core.CodeValidation},
		{"protocol options on agent-teams", AgentTeams, Options{Plan: "approve"}, core.CodeValidation},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := e.runner.Run(t.Context(), tc.scenario, tc.opts)
			if core.ErrorCode(err) != tc.code {
				t.Fatalf("err = %v, want %s", err, tc.code)
			}
		})
	}
	if teams := e.svc.Teams(t.Context()); len(teams) != 0 {
		t.Fatalf("refused runs created teams: %+v", teams)
	}
	if len(Scenarios()) != 2 || Scenarios()[0].Name != AgentTeams || Scenarios()[1].Name != TeamProtocols {
		t.Fatalf("scenarios = %+v", Scenarios())
	}
}

func checkDetail(doc Result, name string) string {
	for _, c := range doc.Checks {
		if c.Name == name {
			return c.Detail
		}
	}
	return ""
}

func eqPtr[T comparable](a, b *T) bool {
	if a == nil || b == nil {
		return a == b
	}
	return *a == *b
}

func mustJSON(t *testing.T, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}
