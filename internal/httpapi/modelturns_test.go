package httpapi_test

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"io/fs"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"mailroom/internal/agent"
	"mailroom/internal/app"
	"mailroom/internal/core"
	"mailroom/internal/host"
	"mailroom/internal/httpapi"
	"mailroom/internal/providertest"
	"mailroom/internal/testkit"
)

// modelKey is the provider credential of these tests; they search for it
// in every file under the data directory, every log line and every
// response body.
const modelKey = "sk-mailroom-test-4b1d9e77c2a0f3-secret"

// modelEnv is a server whose turns may use a fake provider, with every
// log line (core's, the handler's and the adapters') kept, and every
// response body kept too.
type modelEnv struct {
	*env
	fake      *providertest.Server
	provider  string
	logs      *testkit.Output
	responses *testkit.Output
}

// newModelEnv starts a server with a fake provider of kind ("anthropic" or
// "openai") whose credentials are in the server's environment.
func newModelEnv(t *testing.T, kind string) *modelEnv {
	t.Helper()
	var fake *providertest.Server
	vars := map[string]string{}
	switch kind {
	case agent.ProviderAnthropic:
		fake = providertest.NewAnthropic(t, modelKey)
		vars[agent.EnvAnthropicKey], vars[agent.EnvAnthropicBase] = modelKey, fake.URL()
	case agent.ProviderOpenAI:
		fake = providertest.NewOpenAI(t, modelKey)
		vars[agent.EnvOpenAIKey], vars[agent.EnvOpenAIBase] = modelKey, fake.URL()
	}
	logs := &testkit.Output{}
	log := slog.New(slog.NewJSONHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	responses := &testkit.Output{}
	e := startEnv(t, envOptions{logger: log,
		configureApp: []func(*app.Options){func(opts *app.Options) {
			opts.Models = host.ModelOptions{
				Lookup: func(name string) (string, bool) { v, ok := vars[name]; return v, ok },
				// No SDK retries: each queued reply answers exactly one request.
				Provider: agent.ProviderOptions{MaxRetries: -1, HTTPClient: fake.Client(), Log: log, RequestTimeout: time.Minute},
			}
		}},
		wrap: func(rt http.RoundTripper) http.RoundTripper { return &keepingTransport{base: rt, kept: responses} },
	})
	return &modelEnv{env: e, fake: fake, provider: kind, logs: logs, responses: responses}
}

// keepingTransport keeps every response body, for the key search.
type keepingTransport struct {
	base http.RoundTripper
	kept *testkit.Output
}

func (k *keepingTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	resp, err := k.base.RoundTrip(req)
	if err != nil || strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream") {
		return resp, err
	}
	body, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil {
		return nil, err
	}
	_, _ = k.kept.Write(body)
	for name, values := range resp.Header {
		_, _ = k.kept.Write([]byte(name + ": " + strings.Join(values, ",") + "\n"))
	}
	resp.Body = io.NopCloser(bytes.NewReader(body))
	return resp, nil
}

// team creates the team "crew" (lead, reader with a role) on the fake's
// provider, with limits when given.
func (m *modelEnv) team(limits map[string]any) team {
	m.t.Helper()
	body := map[string]any{
		"name":    "crew",
		"purpose": "Find out what main.py prints.",
		"members": []map[string]string{{"name": "reader", "role": "reads the source"}},
		"model":   map[string]any{"provider": m.provider, "name": "fake-model", "max_tokens": 512},
	}
	if limits != nil {
		body["limits"] = limits
	}
	r := m.post("/api/v1/teams", adminToken, body)
	want(m.t, r, http.StatusCreated, "")
	tm := team{name: "crew", tokens: map[string]string{}}
	for _, mem := range decode[httpapi.CreatedTeam](m.t, r).Members {
		tm.tokens[mem.Name] = mem.Token
	}
	return tm
}

// text and toolUse are the fake's answers in its own wire format.
func (m *modelEnv) text(s string, in, out int64) providertest.Reply {
	if m.provider == agent.ProviderOpenAI {
		return providertest.OpenAIText(s, providertest.OpenAIUsage{PromptTokens: in, CompletionTokens: out})
	}
	return providertest.AnthropicText(s, providertest.AnthropicUsage{InputTokens: in, OutputTokens: out})
}

func (m *modelEnv) toolUse(name string, input any, in, out int64) providertest.Reply {
	if m.provider == agent.ProviderOpenAI {
		return providertest.OpenAIToolCallReply("call_1", name, input, providertest.OpenAIUsage{PromptTokens: in, CompletionTokens: out})
	}
	return providertest.AnthropicToolUse("toolu_1", name, input, providertest.AnthropicUsage{InputTokens: in, OutputTokens: out})
}

func (m *modelEnv) failure(status int, typ, msg string) providertest.Reply {
	if m.provider == agent.ProviderOpenAI {
		return providertest.OpenAIError(status, typ, msg)
	}
	return providertest.AnthropicError(status, typ, msg)
}

// realTurn runs a turn of member on the team's model, waiting for it.
func (m *modelEnv) realTurn(tm team, member, prompt string) result {
	m.t.Helper()
	return m.post("/api/v1/teams/"+tm.name+"/members/"+member+"/turns", adminToken, map[string]any{"prompt": prompt})
}

// turnDoc is a turn document as a client reads it.
type turnDoc struct {
	TurnID        string `json:"turn_id"`
	Team          string `json:"team"`
	Member        string `json:"member"`
	Model         struct{ Provider, Name string }
	Status        string     `json:"status"`
	Text          string     `json:"text"`
	ModelRequests int        `json:"model_requests"`
	Usage         core.Usage `json:"usage"`
	Steps         []struct {
		Kind       string     `json:"kind"`
		N          int        `json:"n"`
		StopReason string     `json:"stop_reason"`
		Usage      core.Usage `json:"usage"`
		Error      string     `json:"error"`
		ToolUseID  string     `json:"tool_use_id"`
		Tool       string     `json:"tool"`
		Input      string     `json:"input"`
		IsError    bool       `json:"is_error"`
		Result     string     `json:"result"`
	} `json:"steps"`
	StartedAt time.Time  `json:"started_at"`
	EndedAt   *time.Time `json:"ended_at"`
}

func (d turnDoc) kinds() string {
	var k []string
	for _, s := range d.Steps {
		k = append(k, s.Kind)
	}
	return strings.Join(k, ",")
}

// noKeyAnywhere fails when the key is in a file under the data directory,
// in the log or in a response.
func (m *modelEnv) noKeyAnywhere() {
	m.t.Helper()
	err := filepath.WalkDir(m.dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		data, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		if bytes.Contains(data, []byte(modelKey)) {
			m.t.Errorf("the key is in %s", path)
		}
		return nil
	})
	if err != nil {
		m.t.Fatalf("walk the data directory: %v", err)
	}
	if strings.Contains(m.logs.String(), modelKey) {
		m.t.Errorf("the key is in the log")
	}
	if strings.Contains(m.responses.String(), modelKey) {
		m.t.Errorf("the key is in a response")
	}
	if m.logs.String() == "" || m.responses.String() == "" {
		m.t.Errorf("nothing was logged or answered; the search proves nothing")
	}
}

func TestModelTurnThroughEachAdapter(t *testing.T) {
	for _, provider := range []string{agent.ProviderAnthropic, agent.ProviderOpenAI} {
		t.Run(provider, func(t *testing.T) {
			t.Parallel()
			m := newModelEnv(t, provider)
			tm := m.team(nil)
			m.fake.Push(
				m.toolUse("send_message", map[string]string{"to": "lead", "body": "reader started"}, 100, 20),
				m.text("Told lead.", 150, 10),
			)
			r := m.realTurn(tm, "reader", "Tell lead you started.")
			want(t, r, http.StatusOK, "")
			d := decode[turnDoc](t, r)
			if d.TurnID != "reader-t1" || d.Member != "reader" || d.Team != "crew" || d.Status != "answered" || d.Text != "Told lead." || d.ModelRequests != 2 {
				t.Errorf("turn = %+v, want reader-t1 answered with 2 model requests", d)
			}
			if d.Model.Provider != provider || d.Model.Name != "fake-model" {
				t.Errorf("model = %+v, want %s fake-model", d.Model, provider)
			}
			if d.Usage != (core.Usage{InputTokens: 250, OutputTokens: 30}) {
				t.Errorf("usage = %+v, want 250 in, 30 out", d.Usage)
			}
			if got := d.kinds(); got != "model_request,tool_call,model_request" {
				t.Fatalf("steps = %s, want model_request,tool_call,model_request", got)
			}
			if s := d.Steps[0]; s.N != 1 || s.StopReason != "tool_use" || s.Usage.InputTokens != 100 {
				t.Errorf("first step = %+v, want n 1, tool_use, 100 input tokens", s)
			}
			if s := d.Steps[1]; s.Tool != "send_message" || s.ToolUseID != "reader-t1-1" || s.IsError || !strings.Contains(s.Input, "reader started") || !strings.Contains(s.Result, "queued") {
				t.Errorf("tool step = %+v, want send_message reader-t1-1 queued", s)
			}
			if d.EndedAt == nil || d.EndedAt.Before(d.StartedAt) {
				t.Errorf("ended_at = %v, started_at %v", d.EndedAt, d.StartedAt)
			}

			// What the provider was sent: the system text names the role
			// and the purpose, max_tokens is the team's.
			reqs := m.fake.Requests()
			if len(reqs) != 2 || len(m.fake.Problems()) != 0 {
				t.Fatalf("provider saw %d requests with problems %v, want 2 and none", len(reqs), m.fake.Problems())
			}
			body := string(reqs[0].Body)
			for _, wantText := range []string{"reads the source", "Find out what main.py prints.", `512`, "send_message"} {
				if !strings.Contains(body, wantText) {
					t.Errorf("the first request does not hold %q: %s", wantText, body)
				}
			}

			// Usage per member and team, in the team document.
			r = m.get("/api/v1/teams/crew", adminToken)
			want(t, r, http.StatusOK, "")
			team := decode[httpapi.Team](t, r)
			if team.Usage != (httpapi.Usage{InputTokens: 250, OutputTokens: 30}) || team.Model.Provider != httpapi.ModelSettingsProvider(provider) {
				t.Errorf("team usage %+v model %+v, want 250/30 on %s", team.Usage, team.Model, provider)
			}
			for _, mem := range team.Members {
				wantUsage := httpapi.Usage{}
				if mem.Name == "reader" {
					wantUsage = httpapi.Usage{InputTokens: 250, OutputTokens: 30}
				}
				if mem.Usage != wantUsage {
					t.Errorf("%s's usage = %+v, want %+v", mem.Name, mem.Usage, wantUsage)
				}
			}

			// Metrics by provider, with no team or member name.
			mr := m.get("/metrics", "")
			metrics := string(mr.body)
			for _, line := range []string{
				`mailroom_model_requests_total{outcome="ok",provider="` + provider + `"} 2`,
				`mailroom_model_tokens_total{kind="input",provider="` + provider + `"} 250`,
				`mailroom_model_tokens_total{kind="output",provider="` + provider + `"} 30`,
				`mailroom_model_request_duration_seconds_count{provider="` + provider + `"} 2`,
			} {
				if !strings.Contains(metrics, line) {
					t.Errorf("metrics lack %q", line)
				}
			}
			for _, name := range []string{"crew", "reader", "fake-model"} {
				if strings.Contains(metrics, `"`+name+`"`) {
					t.Errorf("metrics carry the name %q as a label value", name)
				}
			}
			m.noKeyAnywhere()
		})
	}
}

func TestModelTurnAsyncListAndGet(t *testing.T) {
	t.Parallel()
	m := newModelEnv(t, agent.ProviderAnthropic)
	tm := m.team(nil)
	m.fake.Push(m.text("First.", 10, 1), m.text("Second.", 10, 1))
	want(t, m.realTurn(tm, "reader", "one"), http.StatusOK, "")

	r := m.do(call{method: http.MethodPost, path: "/api/v1/teams/crew/members/reader/turns", token: adminToken,
		json: map[string]any{"prompt": "two"}, header: map[string]string{"Prefer": "respond-async"}})
	want(t, r, http.StatusAccepted, "")
	loc := r.header.Get("Location")
	if loc != "/api/v1/teams/crew/turns/reader-t2" || r.header.Get("Preference-Applied") != "respond-async" {
		t.Fatalf("Location %q Preference-Applied %q, want /api/v1/teams/crew/turns/reader-t2 and respond-async", loc, r.header.Get("Preference-Applied"))
	}
	if d := decode[turnDoc](t, r); d.TurnID != "reader-t2" {
		t.Errorf("202 document = %+v, want reader-t2", d)
	}
	d := m.waitTurnEnd(loc, tm.tokens["reader"])
	if d.Status != "answered" || d.Text != "Second." {
		t.Errorf("async turn = %+v, want answered Second.", d)
	}

	// Listed newest first, to a member of the team too.
	r = m.get("/api/v1/teams/crew/turns", tm.tokens["lead"])
	want(t, r, http.StatusOK, "")
	list := decode[struct{ Turns []turnDoc }](t, r).Turns
	if len(list) != 2 || list[0].TurnID != "reader-t2" || list[1].TurnID != "reader-t1" {
		t.Errorf("turns = %+v, want reader-t2 then reader-t1", list)
	}
	want(t, m.get("/api/v1/teams/crew/turns/reader-t9", adminToken), http.StatusNotFound, "not_found")
	want(t, m.post("/api/v1/teams/crew/turns/reader-t2/cancel", tm.tokens["reader"], nil), http.StatusForbidden, "forbidden")
	// A finished turn's cancel changes nothing.
	r = m.post("/api/v1/teams/crew/turns/reader-t2/cancel", adminToken, nil)
	want(t, r, http.StatusOK, "")
	if d := decode[turnDoc](t, r); d.Status != "answered" {
		t.Errorf("cancel of a finished turn = %+v, want it answered still", d)
	}
}

// waitTurnEnd polls a turn document until its turn has ended. The bound
// only keeps a broken server from hanging the test.
func (m *modelEnv) waitTurnEnd(path, token string) turnDoc {
	m.t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		r := m.get(path, token)
		want(m.t, r, http.StatusOK, "")
		d := decode[turnDoc](m.t, r)
		if d.Status != "running" {
			return d
		}
		if time.Now().After(deadline) {
			m.t.Fatalf("turn %s never ended", path)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func TestModelTurnCancelMidRequest(t *testing.T) {
	t.Parallel()
	m := newModelEnv(t, agent.ProviderOpenAI)
	tm := m.team(map[string]any{"turns": 3})
	// The first turn commits a history that the cancelled one must keep.
	m.fake.Push(m.text("Ready.", 5, 1))
	want(t, m.realTurn(tm, "reader", "warm up"), http.StatusOK, "")
	before := m.member(tm, "reader").HistoryLength

	m.fake.Push(providertest.Reply{Stall: true})
	r := m.do(call{method: http.MethodPost, path: "/api/v1/teams/crew/members/reader/turns", token: adminToken,
		json: map[string]any{"prompt": "think long"}, header: map[string]string{"Prefer": "respond-async"}})
	want(t, r, http.StatusAccepted, "")
	// The model request is in flight once the fake has received it.
	deadline := time.Now().Add(30 * time.Second)
	for len(m.fake.Requests()) < 2 {
		if time.Now().After(deadline) {
			t.Fatal("the model request never reached the provider")
		}
		time.Sleep(5 * time.Millisecond)
	}
	r = m.post("/api/v1/teams/crew/turns/reader-t2/cancel", adminToken, nil)
	want(t, r, http.StatusOK, "")
	d := decode[turnDoc](t, r)
	if d.Status != "cancelled" || d.EndedAt == nil {
		t.Fatalf("cancelled turn = %+v, want cancelled and ended", d)
	}
	if got := d.kinds(); got != "model_request" || d.Steps[0].Error != "canceled" {
		t.Errorf("steps = %+v, want one cancelled model request", d.Steps)
	}
	mem := m.member(tm, "reader")
	if mem.Status != httpapi.MemberStatusIdle || mem.Active || mem.HistoryLength != before {
		t.Errorf("reader after cancel = %+v, want idle with its %d history entries", mem, before)
	}
	m.fake.Push(m.text("Back.", 5, 1))
	want(t, m.realTurn(tm, "reader", "again"), http.StatusOK, "")
}

func TestModelTurnBudget(t *testing.T) {
	t.Parallel()
	m := newModelEnv(t, agent.ProviderAnthropic)
	tm := m.team(map[string]any{"model_tokens": 100, "turns": 3})
	m.fake.Push(m.toolUse("send_message", map[string]string{"to": "lead", "body": "hello"}, 80, 30))
	r := m.realTurn(tm, "reader", "spend")
	want(t, r, http.StatusOK, "")
	d := decode[turnDoc](t, r)
	if d.Status != "budget_exhausted" || d.ModelRequests != 1 || d.kinds() != "model_request,tool_call" {
		t.Errorf("turn = %+v (%s), want budget_exhausted after one model request and its tool call", d, d.kinds())
	}
	if m.fake.Pending() != 0 || len(m.fake.Requests()) != 1 {
		t.Errorf("provider saw %d requests, want 1", len(m.fake.Requests()))
	}
	mem := m.member(tm, "reader")
	if mem.Status != httpapi.MemberStatusIdle || mem.HistoryLength != 3 || mem.Usage.InputTokens != 80 {
		t.Errorf("reader = %+v, want idle with the turn's 3 entries kept and 80 input tokens", mem)
	}
	want(t, m.realTurn(tm, "reader", "more"), http.StatusConflict, "budget_exhausted")
	want(t, m.realTurn(tm, "lead", "more"), http.StatusConflict, "budget_exhausted")
}

func TestModelTurnProviderRefusal(t *testing.T) {
	t.Parallel()
	m := newModelEnv(t, agent.ProviderAnthropic)
	tm := m.team(nil)
	m.fake.Push(m.failure(http.StatusBadRequest, "invalid_request_error", "messages: bad request for key "+modelKey))
	r := m.realTurn(tm, "reader", "go")
	want(t, r, http.StatusOK, "")
	d := decode[turnDoc](t, r)
	if d.Status != "failed" || !strings.Contains(d.Text, "invalid_request_error") || d.Steps[0].Error != "invalid_request_error" {
		t.Errorf("turn = %+v, want failed naming invalid_request_error", d)
	}
	mem := m.member(tm, "reader")
	if mem.Status != httpapi.MemberStatusIdle || mem.Active || mem.HistoryLength != 0 {
		t.Errorf("reader = %+v, want idle with no history", mem)
	}
	if !strings.Contains(string(m.get("/metrics", "").body), `mailroom_model_requests_total{outcome="error",provider="anthropic"} 1`) {
		t.Errorf("metrics do not count the failed request")
	}
	m.noKeyAnywhere()
}

func TestModelTurnCallLimitAndMalformedInput(t *testing.T) {
	t.Parallel()
	m := newModelEnv(t, agent.ProviderOpenAI)
	tm := m.team(map[string]any{"turns": 3})

	// Malformed input: arguments that are not JSON, then wrong types. Each
	// is an error result the model sees, and the turn goes on.
	m.fake.Push(
		providertest.OpenAIRawCall("call_a", "send_message", `{"to": "lead", "body": `, providertest.OpenAIUsage{PromptTokens: 1, CompletionTokens: 1}),
		providertest.OpenAIToolCallReply("call_b", "send_message", map[string]any{"to": 7, "body": true}, providertest.OpenAIUsage{PromptTokens: 1, CompletionTokens: 1}),
		m.text("Gave up.", 1, 1),
	)
	r := m.realTurn(tm, "reader", "send")
	want(t, r, http.StatusOK, "")
	d := decode[turnDoc](t, r)
	if d.Status != "answered" || d.kinds() != "model_request,tool_call,model_request,tool_call,model_request" {
		t.Fatalf("turn = %+v (%s), want answered after two refused calls", d, d.kinds())
	}
	if !d.Steps[1].IsError || !d.Steps[3].IsError {
		t.Errorf("tool steps %+v and %+v, want both errors", d.Steps[1], d.Steps[3])
	}

	// A model that never stops asking for tools.
	for range agent.MaxModelRequests {
		m.fake.Push(m.toolUse("send_message", map[string]string{"to": "lead", "body": "again"}, 1, 1))
	}
	r = m.realTurn(tm, "reader", "loop")
	want(t, r, http.StatusOK, "")
	if d := decode[turnDoc](t, r); d.Status != "call_limit" || d.ModelRequests != agent.MaxModelRequests {
		t.Errorf("turn = %+v, want call_limit after %d requests", d, agent.MaxModelRequests)
	}
	if mem := m.member(tm, "reader"); mem.Status != httpapi.MemberStatusStopped {
		t.Errorf("reader = %+v, want stopped", mem)
	}
}

// TestTurnDocumentsSurviveRestart: documents are read back by a new
// server over the same data directory, and a turn that was running when
// the old one died is failed, saying it was interrupted.
func TestTurnDocumentsSurviveRestart(t *testing.T) {
	t.Parallel()
	place := testkit.NewPlace(t, backend)
	store := place.OpenStore(t)
	// A restarted file store releases every lease at start; on a shared
	// database the dead process's lease has to expire first.
	const lease = 300 * time.Millisecond
	svc := core.NewService(store, core.Options{LeaseDuration: lease})
	if err := svc.Open(t.Context()); err != nil {
		t.Fatal(err)
	}
	ctx := core.AsAdmin(t.Context())
	if _, _, err := svc.CreateTeam(ctx, core.TeamSpec{Name: "crew", Members: []core.MemberSpec{{Name: "reader"}}}); err != nil {
		t.Fatal(err)
	}
	done, err := svc.BeginTurn(ctx, "crew", "lead", core.ModelRef{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := done.Run(ctx, func(context.Context, []core.Entry) (core.TurnOutcome, error) {
		return core.TurnOutcome{Messages: []core.Entry{core.UserText("hi"), {Role: "assistant", Text: "Done."}}, Status: core.TurnAnswered, Text: "Done."}, nil
	}); err != nil {
		t.Fatal(err)
	}
	// A turn that is claimed and never ends: the process dies here.
	if _, err := svc.BeginTurn(ctx, "crew", "reader", core.ModelRef{Provider: "anthropic", Name: "fake-model"}); err != nil {
		t.Fatal(err)
	}
	_ = store.(io.Closer).Close()
	if backend != testkit.BackendFile {
		time.Sleep(lease + 100*time.Millisecond)
	}

	e := startEnv(t, envOptions{place: place})
	r := e.get("/api/v1/teams/crew/turns", adminToken)
	want(t, r, http.StatusOK, "")
	list := decode[struct{ Turns []turnDoc }](t, r).Turns
	if len(list) != 2 {
		t.Fatalf("turns after restart = %+v, want 2", list)
	}
	if d := list[0]; d.TurnID != "reader-t1" || d.Status != "failed" || !strings.Contains(d.Text, "interrupted") || d.EndedAt == nil || d.Model.Provider != "anthropic" {
		t.Errorf("the running turn after restart = %+v, want failed, interrupted, ended", d)
	}
	if d := list[1]; d.TurnID != "lead-t1" || d.Status != "answered" || d.Text != "Done." {
		t.Errorf("the finished turn after restart = %+v, want answered Done.", d)
	}
}

// TestTurnEventsPerStep: a turn's steps reach the event stream as they
// happen, each naming the turn and the member.
func TestTurnEventsPerStep(t *testing.T) {
	t.Parallel()
	m := newModelEnv(t, agent.ProviderAnthropic)
	tm := m.team(nil)
	s := m.openStream(t, "", adminToken)
	m.fake.Push(m.toolUse("send_message", map[string]string{"to": "lead", "body": "hi"}, 3, 1), m.text("ok", 3, 1))
	want(t, m.realTurn(tm, "reader", "go"), http.StatusOK, "")
	var kinds []string
	for {
		var d struct {
			TurnID string `json:"turn_id"`
			Member string `json:"member"`
			Status string `json:"status"`
			Step   *struct {
				Kind string `json:"kind"`
				Tool string `json:"tool"`
			} `json:"step"`
		}
		ev := s.nextOf("turn")
		if err := json.Unmarshal(ev.data.Data, &d); err != nil {
			t.Fatal(err)
		}
		if d.TurnID != "reader-t1" || d.Member != "reader" {
			t.Fatalf("turn event %+v, want reader-t1 of reader", d)
		}
		if d.Status != "running" {
			break
		}
		if d.Step != nil {
			kinds = append(kinds, d.Step.Kind+":"+d.Step.Tool)
		}
	}
	if got := strings.Join(kinds, ","); got != "model_request:,tool_call:send_message,model_request:" {
		t.Errorf("step events = %s, want model_request, tool_call send_message, model_request", got)
	}
}

// TestStoppingEndsAsyncTurns: a turn started with respond-async has no
// request for the shutdown to wait for; stopping still ends it at its
// next boundary, it records failed/interrupted with the member idle, and
// WaitTurns returns once it has.
func TestStoppingEndsAsyncTurns(t *testing.T) {
	t.Parallel()
	e, stop := newStoppableEnv(t)
	tm := e.newTeam("crew", nil)
	r := e.do(call{method: http.MethodPost, path: "/api/v1/teams/crew/members/reader/turns", token: adminToken,
		json:   map[string]any{"prompt": "slow", "responses": []any{map[string]any{"text": "late", "wait_ms": 10000}}},
		header: map[string]string{"Prefer": "respond-async"}})
	want(t, r, http.StatusAccepted, "")
	stop()
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	if err := e.svc.WaitTurns(ctx); err != nil {
		t.Fatalf("WaitTurns: %v", err)
	}
	r = e.get("/api/v1/teams/crew/turns/reader-t1", adminToken)
	want(t, r, http.StatusOK, "")
	if d := decode[turnDoc](t, r); d.Status != "failed" || d.Text != core.InterruptedText || d.EndedAt == nil {
		t.Errorf("turn after stopping = %+v, want failed, interrupted", d)
	}
	if m := e.member(tm, "reader"); m.Status != httpapi.MemberStatusIdle || m.Active {
		t.Errorf("reader after stopping = %+v, want idle", m)
	}
}
