package httpapi_test

import (
	"encoding/json"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"mailroom/internal/agent"
	"mailroom/internal/core"
	"mailroom/internal/httpapi"
)

func (e *env) patchJSON(path, token string, body any) result {
	e.t.Helper()
	return e.do(call{method: http.MethodPatch, path: path, token: token, json: body})
}

func ptrOr[T any](p *T) T {
	var zero T
	if p == nil {
		return zero
	}
	return *p
}

func memberNamed(t *testing.T, e *env, teamName, name string) httpapi.Member {
	t.Helper()
	r := e.get("/api/v1/teams/"+teamName, adminToken)
	want(t, r, http.StatusOK, "")
	for _, m := range decode[httpapi.Team](t, r).Members {
		if m.Name == name {
			return m
		}
	}
	t.Fatalf("no member %s", name)
	return httpapi.Member{}
}

// TestMemberWakeAndModel: members carry their own model and wake, at
// creation and through the member PATCH; wake with the scripted model is
// refused with a detail that says why; only the admin changes members.
func TestMemberWakeAndModel(t *testing.T) {
	e := newEnv(t)
	r := e.post("/api/v1/teams", adminToken, map[string]any{"name": "demo", "members": []map[string]any{{"name": "reader", "wake": true}}})
	want(t, r, http.StatusBadRequest, "validation_failed")
	if p := decode[httpapi.Problem](t, r); !strings.Contains(p.Detail, "scripted") {
		t.Errorf("detail = %v, want it to say the scripted model cannot be woken", p.Detail)
	}
	r = e.post("/api/v1/teams", adminToken, map[string]any{"name": "demo", "members": []map[string]any{
		{"name": "reader", "wake": true, "model": map[string]any{"provider": "openai", "name": "llama3.2", "max_tokens": 256}},
		{"name": "reviewer"},
	}})
	want(t, r, http.StatusCreated, "")
	tokens := map[string]string{}
	for _, m := range decode[httpapi.CreatedTeam](t, r).Members {
		tokens[m.Name] = m.Token
	}
	// A team that has taken no turn lists none: an empty array, never null.
	if r := e.get("/api/v1/teams/demo/turns", adminToken); r.status != http.StatusOK || !strings.Contains(string(r.body), `"turns":[]`) {
		t.Errorf("turns of a fresh team = %d %s, want 200 with an empty list", r.status, r.body)
	}
	m := memberNamed(t, e, "demo", "reader")
	if !m.Wake || m.WakeHeld || m.Model == nil || m.Model.Provider != "openai" || ptrOr(m.Model.Name) != "llama3.2" || ptrOr(m.Model.MaxTokens) != 256 {
		t.Errorf("reader = %+v, want wake, no hold, openai llama3.2 256", m)
	}
	if m := memberNamed(t, e, "demo", "reviewer"); m.Wake || m.Model != nil {
		t.Errorf("reviewer = %+v, want no wake and the team's model (null)", m)
	}
	base := "/api/v1/teams/demo/members/"
	r = e.patchJSON(base+"lead", adminToken, map[string]any{"wake": true})
	want(t, r, http.StatusBadRequest, "validation_failed")
	if p := decode[httpapi.Problem](t, r); !strings.Contains(p.Detail, "scripted") {
		t.Errorf("detail = %v, want it to say why", p.Detail)
	}
	want(t, e.patchJSON(base+"reader", adminToken, map[string]any{"model": map[string]any{"provider": "scripted"}}), http.StatusBadRequest, "validation_failed")
	want(t, e.patchJSON(base+"reader", adminToken, map[string]any{"model": map[string]any{"provider": "openai"}}), http.StatusBadRequest, "validation_failed")
	want(t, e.patchJSON(base+"reader", adminToken, map[string]any{"wake": true, "extra": 1}), http.StatusBadRequest, "validation_failed")
	want(t, e.patchJSON(base+"reader", tokens["reader"], map[string]any{"wake": false}), http.StatusForbidden, "forbidden")
	want(t, e.patchJSON(base+"nobody", adminToken, map[string]any{"wake": false}), http.StatusNotFound, "not_found")

	r = e.patchJSON(base+"reviewer", adminToken, map[string]any{"wake": true, "model": map[string]any{"provider": "anthropic", "name": "claude-x"}})
	want(t, r, http.StatusOK, "")
	if got := decode[httpapi.Member](t, r); !got.Wake || got.Model == nil || got.Model.Provider != "anthropic" {
		t.Errorf("patched reviewer = %+v, want wake on anthropic claude-x", got)
	}
	r = e.patchJSON(base+"reader", adminToken, map[string]any{"wake": false})
	want(t, r, http.StatusOK, "")
	if got := decode[httpapi.Member](t, r); got.Wake || got.Model == nil {
		t.Errorf("patched reader = %+v, want wake off and its model kept", got)
	}
	// A member that is neither stopped, failed nor held is not reset.
	want(t, e.post(base+"reader/reset", adminToken, nil), http.StatusConflict, "member_unavailable")

	// limits.wake_delay_ms: 0–60000, changeable.
	want(t, e.post("/api/v1/teams", adminToken, map[string]any{"name": "slow", "limits": map[string]any{"wake_delay_ms": 60001}}), http.StatusBadRequest, "validation_failed")
	r = e.patchJSON("/api/v1/teams/demo", adminToken, map[string]any{"limits": map[string]any{"wake_delay_ms": 0}})
	want(t, r, http.StatusOK, "")
	if got := decode[httpapi.Team](t, r).Limits.WakeDelayMs; got != 0 {
		t.Errorf("wake_delay_ms = %d, want 0", got)
	}
	want(t, e.patchJSON("/api/v1/teams/demo", adminToken, map[string]any{"limits": map[string]any{"wake_delay_ms": -1}}), http.StatusBadRequest, "validation_failed")
}

// userTexts returns the user messages' texts of a provider request, in
// order, for both wire formats (a string content or text blocks).
func userTexts(t *testing.T, body []byte) []string {
	t.Helper()
	var req struct {
		Messages []struct {
			Role    string          `json:"role"`
			Content json.RawMessage `json:"content"`
		} `json:"messages"`
	}
	if err := json.Unmarshal(body, &req); err != nil {
		t.Fatalf("provider request: %v", err)
	}
	var out []string
	for _, m := range req.Messages {
		if m.Role != "user" {
			continue
		}
		var s string
		if json.Unmarshal(m.Content, &s) == nil {
			out = append(out, s)
			continue
		}
		var blocks []struct{ Type, Text string }
		if err := json.Unmarshal(m.Content, &blocks); err != nil {
			t.Fatalf("user content %s: %v", m.Content, err)
		}
		for _, b := range blocks {
			if b.Type == "text" {
				out = append(out, b.Text)
			}
		}
	}
	return out
}

// waitTurn polls the team's turns until turnID has ended, and returns it.
func waitTurn(t *testing.T, e *env, teamName, turnID string) turnDocWithTrigger {
	t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for time.Now().Before(deadline) {
		r := e.get("/api/v1/teams/"+teamName+"/turns", adminToken)
		want(t, r, http.StatusOK, "")
		var list struct {
			Turns []turnDocWithTrigger `json:"turns"`
		}
		if err := json.Unmarshal(r.body, &list); err != nil {
			t.Fatal(err)
		}
		for _, d := range list.Turns {
			if d.TurnID == turnID && d.Status != "running" {
				return d
			}
		}
		time.Sleep(10 * time.Millisecond)
	}
	t.Fatalf("turn %s did not end", turnID)
	return turnDocWithTrigger{}
}

type turnDocWithTrigger struct {
	turnDoc
	Trigger struct {
		Kind    string   `json:"kind"`
		Letters []string `json:"letters"`
		TaskID  string   `json:"task_id"`
	} `json:"trigger"`
}

// newWakeCrew creates team crew on provider's fake model: lead and
// reader (wake set), no wake delay, 5 turns each; it returns the members'
// tokens by name.
func newWakeCrew(t *testing.T, m *modelEnv, provider string) map[string]string {
	t.Helper()
	r := m.post("/api/v1/teams", adminToken, map[string]any{
		"name":    "crew",
		"members": []map[string]any{{"name": "reader", "role": "reads the source", "wake": true}},
		"model":   map[string]any{"provider": provider, "name": "fake-model"},
		"limits":  map[string]any{"wake_delay_ms": 0, "turns": 5},
	})
	want(t, r, http.StatusCreated, "")
	tokens := map[string]string{}
	for _, mem := range decode[httpapi.CreatedTeam](t, r).Members {
		tokens[mem.Name] = mem.Token
	}
	return tokens
}

// TestWokenTurnThroughEachAdapter: a letter to a wake member wakes it; its
// turn's first model request, sent by the provider's official SDK to the
// fake provider, carries the letter as the lesson's [team-message] line
// and nothing else from the user: no prompt is invented.
func TestWokenTurnThroughEachAdapter(t *testing.T) {
	for _, provider := range []string{agent.ProviderAnthropic, agent.ProviderOpenAI} {
		t.Run(provider, func(t *testing.T) {
			t.Parallel()
			m := newModelEnv(t, provider)
			tokens := newWakeCrew(t, m, provider)
			m.fake.Push(m.text("Read it.", 10, 5))
			r := m.post("/api/v1/teams/crew/messages", tokens["lead"], map[string]string{"to": "reader", "body": "Please read main.py."})
			want(t, r, http.StatusCreated, "")

			d := waitTurn(t, m.env, "crew", "reader-t1")
			if d.Status != "answered" || d.Text != "Read it." || d.Trigger.Kind != "mail" || !slices.Equal(d.Trigger.Letters, []string{"reader-1"}) {
				t.Errorf("woken turn = %s %q trigger %+v, want answered with trigger mail [reader-1]", d.Status, d.Text, d.Trigger)
			}
			reqs := m.fake.Requests()
			if len(reqs) != 1 || len(m.fake.Problems()) != 0 {
				t.Fatalf("provider saw %d requests, problems %v; want 1 and none", len(reqs), m.fake.Problems())
			}
			line := core.HistoryText(core.Message{ID: "reader-1", Sender: "lead", Recipient: "reader", Body: "Please read main.py."})
			if got := userTexts(t, reqs[0].Body); !slices.Equal(got, []string{line}) {
				t.Errorf("user messages = %q, want exactly the letter's line %q", got, line)
			}
			mem := memberNamed(t, m.env, "crew", "reader")
			if mem.Turns != 1 || mem.WakeHeld || mem.Status != "idle" || mem.HistoryLength != 2 {
				t.Errorf("reader = %+v, want idle after 1 turn, history 2, no hold", mem)
			}
			metrics := string(m.get("/metrics", "").body)
			for _, line := range []string{"mailroom_wakes_total 1", "mailroom_wake_delay_seconds_count 1", "mailroom_wakes_queued 0"} {
				if !strings.Contains(metrics, line+"\n") {
					t.Errorf("/metrics lacks %q", line)
				}
			}
			m.noKeyAnywhere()
		})
	}
}

// TestWokenTurnFailureHolds: a woken turn whose provider fails ends failed
// and holds the member's wake; a new letter does not wake it; a reset
// releases the hold (and wakes it for the letters still unattended).
func TestWokenTurnFailureHolds(t *testing.T) {
	m := newModelEnv(t, agent.ProviderAnthropic)
	tokens := newWakeCrew(t, m, agent.ProviderAnthropic)
	m.fake.Push(m.failure(http.StatusBadRequest, "invalid_request_error", "no"))
	want(t, m.post("/api/v1/teams/crew/messages", tokens["lead"], map[string]string{"to": "reader", "body": "one"}), http.StatusCreated, "")
	if d := waitTurn(t, m.env, "crew", "reader-t1"); d.Status != "failed" {
		t.Fatalf("turn = %s, want failed", d.Status)
	}
	if mem := memberNamed(t, m.env, "crew", "reader"); !mem.WakeHeld {
		t.Fatalf("reader = %+v, want wake_held", mem)
	}
	want(t, m.post("/api/v1/teams/crew/messages", tokens["lead"], map[string]string{"to": "reader", "body": "two"}), http.StatusCreated, "")
	m.fake.Push(m.text("Both read.", 10, 5))
	r := m.post("/api/v1/teams/crew/members/reader/reset", adminToken, nil)
	want(t, r, http.StatusOK, "")
	if got := decode[httpapi.Member](t, r); got.WakeHeld {
		t.Errorf("reset answered %+v, want the hold released", got)
	}
	d := waitTurn(t, m.env, "crew", "reader-t2")
	if d.Status != "answered" || !slices.Equal(d.Trigger.Letters, []string{"reader-1", "reader-2"}) {
		t.Errorf("turn after reset = %s trigger %v, want answered for [reader-1 reader-2]", d.Status, d.Trigger.Letters)
	}
	if n := len(m.fake.Requests()); n != 2 {
		t.Errorf("provider saw %d requests, want 2 (nothing reran between the failure and the reset)", n)
	}
}
