package httpapi_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"

	"mailroom/internal/agent"
	"mailroom/internal/app"
	"mailroom/internal/host"
	"mailroom/internal/httpapi"
	"mailroom/internal/providertest"
)

// newModelRunEnv is newRunEnv whose server has the credentials of a fake
// Messages API in its environment (none when fake is nil).
func newModelRunEnv(t *testing.T, fake *providertest.Server) *env {
	t.Helper()
	o := envOptions{runs: true}
	if fake != nil {
		vars := map[string]string{agent.EnvAnthropicKey: modelKey, agent.EnvAnthropicBase: fake.URL()}
		o.configureApp = append(o.configureApp, func(opts *app.Options) {
			opts.Models = host.ModelOptions{
				Lookup:   func(name string) (string, bool) { v, ok := vars[name]; return v, ok },
				Provider: agent.ProviderOptions{MaxRetries: -1, HTTPClient: fake.Client()},
			}
		})
	}
	return startEnv(t, o)
}

// TestScenarioOnAModel runs both scenarios on a model that answers every
// request with prose and calls no tool (it claims main.py printed 42): a
// run is ok only if the scenario happened, so both runs are ok: false,
// naming the checks of the lesson's flow the model skipped; only the
// checks about the script's exact numbers are not applicable, each
// saying why, and applicable is true or false on every check. The
// provider and model that answered are named everywhere: the run, the
// run's team, every turn document of it and the metrics.
func TestScenarioOnAModel(t *testing.T) {
	fake := providertest.NewAnthropic(t, modelKey)
	for range 4 + 3 {
		fake.Push(providertest.AnthropicText("I ran main.py: it printed 42, as expected.", providertest.AnthropicUsage{InputTokens: 10, OutputTokens: 2}))
	}
	e := newModelRunEnv(t, fake)
	model := map[string]any{"provider": "anthropic", "name": "claude-test", "max_tokens": 300}
	for _, tc := range []struct {
		scenario     string
		requests     int
		failed, skip []string
	}{
		{"agent-teams", 4, []string{"lead_saw_both_reports", "reader_context_kept"}, []string{"mailbox_counts", "model_requests", "reader_no_reread"}},
		{"team-protocols", 3, []string{"pending_between_reply_and_match", "plan_decision", "protocol_letters", "result_reported_honestly", "run_gates"}, []string{"model_requests"}},
	} {
		r := e.post("/api/v1/scenarios/"+tc.scenario+"/runs", adminToken, map[string]any{"model": model})
		want(t, r, http.StatusOK, "")
		doc := decode[httpapi.RunResult](t, r)
		if doc.Ok || doc.ModelRequests != tc.requests {
			t.Errorf("%s: ok %t, model_requests %d; want false, %d", tc.scenario, doc.Ok, doc.ModelRequests, tc.requests)
		}
		if doc.Model == nil || doc.Model.Provider != "anthropic" || orZero(doc.Model.Name) != "claude-test" || orZero(doc.Model.MaxTokens) != 300 {
			t.Errorf("%s: model = %+v, want anthropic claude-test 300", tc.scenario, doc.Model)
		}
		var raw struct{ Checks []map[string]any }
		if err := json.Unmarshal(r.body, &raw); err != nil {
			t.Fatal(err)
		}
		for _, c := range raw.Checks {
			if _, ok := c["applicable"].(bool); !ok {
				t.Errorf("%s: check %v: applicable is %v, want true or false", tc.scenario, c["name"], c["applicable"])
			}
		}
		var failed, skipped []string
		for _, c := range doc.Checks {
			switch {
			case !c.Applicable:
				skipped = append(skipped, c.Name)
				if !c.Ok || !strings.HasPrefix(c.Detail, "not applicable: ") {
					t.Errorf("%s: not applicable check %s: ok %t, detail %q; want ok with a reason", tc.scenario, c.Name, c.Ok, c.Detail)
				}
			case !c.Ok:
				failed = append(failed, c.Name)
			}
		}
		slices.Sort(failed)
		slices.Sort(skipped)
		if !slices.Equal(failed, tc.failed) || !slices.Equal(skipped, tc.skip) {
			t.Errorf("%s: failed %v and not applicable %v, want %v and %v", tc.scenario, failed, skipped, tc.failed, tc.skip)
		}

		// The run's team and its turn documents name the model.
		tr := e.get("/api/v1/teams/"+doc.Team, adminToken)
		want(t, tr, http.StatusOK, "")
		if tm := decode[httpapi.Team](t, tr); tm.Model.Provider != "anthropic" || orZero(tm.Model.Name) != "claude-test" {
			t.Errorf("%s: team %s's model = %+v, want anthropic claude-test", tc.scenario, doc.Team, tm.Model)
		}
		lr := e.get("/api/v1/teams/"+doc.Team+"/turns", adminToken)
		want(t, lr, http.StatusOK, "")
		turns := decode[struct{ Turns []turnDoc }](t, lr).Turns
		if len(turns) != tc.requests {
			t.Errorf("%s: %d turn documents, want %d", tc.scenario, len(turns), tc.requests)
		}
		for _, d := range turns {
			if d.Model.Provider != "anthropic" || d.Model.Name != "claude-test" {
				t.Errorf("%s: turn %s's model = %+v, want anthropic claude-test", tc.scenario, d.TurnID, d.Model)
			}
		}
		again := e.get("/api/v1/runs/"+doc.RunID, adminToken)
		want(t, again, http.StatusOK, "")
		var first, second any
		if json.Unmarshal(r.body, &first) != nil || json.Unmarshal(again.body, &second) != nil || !reflect.DeepEqual(first, second) {
			t.Errorf("GET /runs/%s differs from the run's answer:\n%s\n%s", doc.RunID, r.body, again.body)
		}
	}
	// Every request the provider answered is counted under its name.
	metrics := string(e.get("/metrics", "").body)
	if line := fmt.Sprintf(`mailroom_model_requests_total{outcome="ok",provider="anthropic"} %d`, len(fake.Requests())); !strings.Contains(metrics, line) {
		t.Errorf("metrics lack %s", line)
	}
}

// TestScenarioModelRefusals: a model without credentials is 409
// model_unavailable and creates nothing; plan with a model and a model
// without a name are 400; the scripted model is the script.
func TestScenarioModelRefusals(t *testing.T) {
	e := newModelRunEnv(t, nil)
	anthropic := map[string]any{"provider": "anthropic", "name": "claude-test"}
	want(t, e.post("/api/v1/scenarios/team-protocols/runs", adminToken, map[string]any{"model": anthropic}), http.StatusConflict, "model_unavailable")
	want(t, e.post("/api/v1/scenarios/agent-teams/runs", adminToken, map[string]any{"model": map[string]any{"provider": "openai", "name": "gpt-test"}}), http.StatusConflict, "model_unavailable")
	want(t, e.post("/api/v1/scenarios/agent-teams/runs", adminToken, map[string]any{"model": map[string]any{"provider": "anthropic"}}), http.StatusBadRequest, "validation_failed")
	if teams := e.svc.Teams(t.Context()); len(teams) != 0 {
		t.Errorf("%d team(s) created by refused runs, want none", len(teams))
	}
	if entries, _ := os.ReadDir(filepath.Join(e.dir, "runs")); len(entries) != 0 {
		t.Errorf("%d run director(ies) created by refused runs, want none", len(entries))
	}

	fake := providertest.NewAnthropic(t, modelKey)
	withKey := newModelRunEnv(t, fake)
	want(t, withKey.post("/api/v1/scenarios/team-protocols/runs", adminToken, map[string]any{"model": anthropic, "plan": "approve"}), http.StatusBadRequest, "validation_failed")
	if len(fake.Requests()) != 0 || len(withKey.svc.Teams(t.Context())) != 0 {
		t.Errorf("a refused run asked the model %d time(s) and created %d team(s); want none", len(fake.Requests()), len(withKey.svc.Teams(t.Context())))
	}

	doc := e.runScenario(t, "agent-teams", map[string]any{"model": map[string]any{"provider": "scripted"}})
	if doc.Model != nil || doc.ModelRequests != 9 {
		t.Errorf("a scripted run: model %+v, %d requests; want none, 9", doc.Model, doc.ModelRequests)
	}
}
