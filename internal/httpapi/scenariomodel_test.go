package httpapi_test

import (
	"encoding/json"
	"net/http"
	"os"
	"path/filepath"
	"reflect"
	"testing"

	"mailroom/internal/agent"
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
		o.configure = append(o.configure, func(opts *httpapi.Options) {
			opts.Models = httpapi.ModelOptions{
				Lookup:   func(name string) (string, bool) { v, ok := vars[name]; return v, ok },
				Provider: agent.ProviderOptions{MaxRetries: -1, HTTPClient: fake.Client()},
			}
		})
	}
	return startEnv(t, o)
}

// TestScenarioOnAModel runs agent-teams on a model that answers every
// request with a text and calls no tool: the checks only the script can
// guarantee are not applicable and say why, the protocol checks hold, the
// document names the model and GET /runs returns the same document.
func TestScenarioOnAModel(t *testing.T) {
	fake := providertest.NewAnthropic(t, modelKey)
	for range 4 {
		fake.Push(providertest.AnthropicText("Done; nothing to report.", providertest.AnthropicUsage{InputTokens: 10, OutputTokens: 2}))
	}
	e := newModelRunEnv(t, fake)
	r := e.post("/api/v1/scenarios/agent-teams/runs", adminToken, map[string]any{"model": map[string]any{"provider": "anthropic", "name": "claude-test", "max_tokens": 300}})
	want(t, r, http.StatusOK, "")
	doc := decode[httpapi.RunResult](t, r)
	if !doc.Ok || doc.ModelRequests != 4 || len(fake.Requests()) != 4 {
		t.Errorf("ok %t, model_requests %d, the fake saw %d; want true, 4, 4", doc.Ok, doc.ModelRequests, len(fake.Requests()))
	}
	if doc.Model == nil || doc.Model.Provider != "anthropic" || orZero(doc.Model.Name) != "claude-test" || orZero(doc.Model.MaxTokens) != 300 {
		t.Errorf("model = %+v, want anthropic claude-test 300", doc.Model)
	}
	notApplicable := map[string]bool{}
	for _, c := range doc.Checks {
		if c.Applicable != nil && !*c.Applicable {
			notApplicable[c.Name] = true
			if !c.Ok || c.Detail == "" {
				t.Errorf("not applicable check %s: ok %t, detail %q; want ok with a reason", c.Name, c.Ok, c.Detail)
			}
		} else if !c.Ok {
			t.Errorf("check %s failed: %s", c.Name, c.Detail)
		}
	}
	wantNA := map[string]bool{"model_requests": true, "mailbox_counts": true, "reader_context_kept": true, "reader_no_reread": true}
	if !reflect.DeepEqual(notApplicable, wantNA) {
		t.Errorf("not applicable: %v, want %v", notApplicable, wantNA)
	}
	again := e.get("/api/v1/runs/"+doc.RunID, adminToken)
	want(t, again, http.StatusOK, "")
	var first, second any
	if json.Unmarshal(r.body, &first) != nil || json.Unmarshal(again.body, &second) != nil || !reflect.DeepEqual(first, second) {
		t.Errorf("GET /runs/%s differs from the run's answer:\n%s\n%s", doc.RunID, r.body, again.body)
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
	if teams := e.svc.Teams(); len(teams) != 0 {
		t.Errorf("%d team(s) created by refused runs, want none", len(teams))
	}
	if entries, _ := os.ReadDir(filepath.Join(e.dir, "runs")); len(entries) != 0 {
		t.Errorf("%d run director(ies) created by refused runs, want none", len(entries))
	}

	fake := providertest.NewAnthropic(t, modelKey)
	withKey := newModelRunEnv(t, fake)
	want(t, withKey.post("/api/v1/scenarios/team-protocols/runs", adminToken, map[string]any{"model": anthropic, "plan": "approve"}), http.StatusBadRequest, "validation_failed")
	if len(fake.Requests()) != 0 || len(withKey.svc.Teams()) != 0 {
		t.Errorf("a refused run asked the model %d time(s) and created %d team(s); want none", len(fake.Requests()), len(withKey.svc.Teams()))
	}

	doc := e.runScenario(t, "agent-teams", map[string]any{"model": map[string]any{"provider": "scripted"}})
	if doc.Model != nil || doc.ModelRequests != 9 {
		t.Errorf("a scripted run: model %+v, %d requests; want none, 9", doc.Model, doc.ModelRequests)
	}
}
