package httpapi_test

import (
	"fmt"
	"net/http"
	"strings"
	"testing"

	"mailroom/internal/agent"
	"mailroom/internal/core"
	"mailroom/internal/providertest"
)

// Model answers are untrusted input (docs/api.md, Turns): these tests play
// a hostile provider through each fake, the official SDKs as clients.

// teamUsage is the usage of the team and of each member as GET shows it.
func (m *modelEnv) teamUsage(tm team) (core.Usage, map[string]core.Usage) {
	m.t.Helper()
	r := m.get("/api/v1/teams/"+tm.name, adminToken)
	want(m.t, r, http.StatusOK, "")
	doc := decode[struct {
		Usage   core.Usage
		Members []struct {
			Name  string
			Usage core.Usage
		}
	}](m.t, r)
	members := map[string]core.Usage{}
	for _, mem := range doc.Members {
		members[mem.Name] = mem.Usage
	}
	return doc.Usage, members
}

// TestHostileUsageFailsTheTurn: a usage count that is negative, beyond
// 2^53 (2^63-1 wrapped the totals) or not an integer fails the turn,
// synchronous or asynchronous, naming the bad answer; nothing is added to
// the member, the team, the budget or the metrics, the member stays idle
// with its history and the server goes on serving.
func TestHostileUsageFailsTheTurn(t *testing.T) {
	for _, provider := range []string{agent.ProviderAnthropic, agent.ProviderOpenAI} {
		t.Run(provider, func(t *testing.T) {
			t.Parallel()
			m := newModelEnv(t, provider)
			tm := m.team(map[string]any{"turns": 9, "model_tokens": 1000})
			m.fake.Push(m.text("Warm.", 10, 2))
			want(t, m.realTurn(tm, "reader", "warm up"), http.StatusOK, "")
			history := m.member(tm, "reader").HistoryLength

			for _, tc := range []struct{ name, in, out string }{
				{"negative", "-1000000", "1"},
				{"2^63-1", "9223372036854775807", "9223372036854775807"},
				{"float", "1.5", "2"},
			} {
				m.fake.Push(m.text("Done.", 1, 1).WithUsage(tc.in, tc.out))
				r := m.realTurn(tm, "reader", tc.name)
				want(t, r, http.StatusOK, "")
				d := decode[turnDoc](t, r)
				if d.Status != "failed" || !strings.Contains(d.Text, "invalid_response") || !strings.Contains(d.Text, "usage.") || d.Usage != (core.Usage{}) {
					t.Errorf("%s: turn = %+v, want failed naming the answer's usage, with no usage", tc.name, d)
				}
			}

			// Asynchronous: the turn runs in a goroutine no handler
			// protects; a panic there ended the process.
			m.fake.Push(m.text("Done.", 1, 1).WithUsage("-7", "-7"))
			r := m.do(call{method: http.MethodPost, path: "/api/v1/teams/crew/members/reader/turns", token: adminToken,
				json: map[string]any{"prompt": "async"}, header: map[string]string{"Prefer": "respond-async"}})
			want(t, r, http.StatusAccepted, "")
			if d := m.waitTurnEnd(r.header.Get("Location"), adminToken); d.Status != "failed" || !strings.Contains(d.Text, "usage.") {
				t.Errorf("async turn = %+v, want failed naming the answer's usage", d)
			}

			mem := m.member(tm, "reader")
			if mem.Status != "idle" || mem.Active || mem.HistoryLength != history {
				t.Errorf("reader = %+v, want idle with its %d history entries", mem, history)
			}
			total, members := m.teamUsage(tm)
			if total != (core.Usage{InputTokens: 10, OutputTokens: 2}) || members["reader"] != total {
				t.Errorf("usage: team %+v, reader %+v, want only the first turn's {10 2}", total, members["reader"])
			}
			metrics := string(m.get("/metrics", "").body)
			for _, line := range []string{
				fmt.Sprintf(`mailroom_model_tokens_total{kind="input",provider=%q} 10`, provider),
				fmt.Sprintf(`mailroom_model_tokens_total{kind="output",provider=%q} 2`, provider),
				fmt.Sprintf(`mailroom_model_requests_total{outcome="error",provider=%q} 4`, provider),
			} {
				if !strings.Contains(metrics, line) {
					t.Errorf("metrics lack %s", line)
				}
			}
			// The budget still applies: 12 of 1000 tokens are spent.
			m.fake.Push(m.text("Still here.", 500, 600))
			want(t, m.realTurn(tm, "reader", "spend"), http.StatusOK, "")
			want(t, m.realTurn(tm, "reader", "more"), http.StatusConflict, "budget_exhausted")
			want(t, m.get("/healthz", ""), http.StatusOK, "")
		})
	}
}

// TestHugeAnswerFailsTheTurn: an answer body beyond 8 MiB is cut off and
// fails the turn like any bad answer.
func TestHugeAnswerFailsTheTurn(t *testing.T) {
	for _, provider := range []string{agent.ProviderAnthropic, agent.ProviderOpenAI} {
		t.Run(provider, func(t *testing.T) {
			t.Parallel()
			m := newModelEnv(t, provider)
			tm := m.team(nil)
			m.fake.Push(m.text("Done.", 1, 1).Padded(agent.MaxAnswerBytes + 1))
			r := m.realTurn(tm, "reader", "answer big")
			want(t, r, http.StatusOK, "")
			d := decode[turnDoc](t, r)
			if d.Status != "failed" || !strings.Contains(d.Text, "invalid_response") || !strings.Contains(d.Text, "larger than 8 MiB") {
				t.Errorf("turn = %+v, want failed saying the answer is larger than 8 MiB", d)
			}
			if mem := m.member(tm, "reader"); mem.Status != "idle" || mem.HistoryLength != 0 {
				t.Errorf("reader = %+v, want idle with no history", mem)
			}
		})
	}
}

// manyCalls is one answer asking for n send_message calls to lead.
func (m *modelEnv) manyCalls(n int) providertest.Reply {
	blocks := make([]core.Block, n)
	for i := range blocks {
		blocks[i] = core.Block{Type: "tool_use", ID: fmt.Sprintf("call_%d", i), Name: agent.ToolSendMessage, Input: []byte(fmt.Sprintf(`{"to":"lead","body":"letter %d"}`, i+1))}
	}
	if m.provider == agent.ProviderOpenAI {
		return providertest.OpenAIReply("tool_calls", providertest.OpenAIUsage{PromptTokens: 1, CompletionTokens: 1}, blocks...)
	}
	return providertest.AnthropicReply("tool_use", providertest.AnthropicUsage{InputTokens: 1, OutputTokens: 1}, blocks...)
}

// TestToolCallsPerTurnAreBounded: of one answer's 300 tool calls the first
// limits.tool_calls (32 by default) run in order, the others get an error
// result without running, and the turn ends call_limit with the member
// stopped. The limit is the team's and can be changed.
func TestToolCallsPerTurnAreBounded(t *testing.T) {
	for _, provider := range []string{agent.ProviderAnthropic, agent.ProviderOpenAI} {
		t.Run(provider, func(t *testing.T) {
			t.Parallel()
			m := newModelEnv(t, provider)
			tm := m.team(map[string]any{"inbox_messages": 500, "inbox_bytes": 100000, "turns": 5})
			m.fake.Push(m.manyCalls(300))
			r := m.realTurn(tm, "reader", "write a lot")
			want(t, r, http.StatusOK, "")
			d := decode[turnDoc](t, r)
			if d.Status != "call_limit" || d.ModelRequests != 1 {
				t.Errorf("turn status %s after %d model requests (%q), want call_limit after its one model request", d.Status, d.ModelRequests, d.Text)
			}
			box := m.inbox(tm, "lead")
			if len(box) != core.DefaultToolCalls || box[0].Body != "letter 1" || box[len(box)-1].Body != fmt.Sprintf("letter %d", core.DefaultToolCalls) {
				t.Fatalf("lead got %d letters, want letters 1 to %d in order", len(box), core.DefaultToolCalls)
			}
			var ran, refused int
			for _, s := range d.Steps {
				if s.Kind != "tool_call" {
					continue
				}
				if s.IsError {
					refused++
					if !strings.Contains(s.Result, "call_limit") {
						t.Errorf("refused call %s: result %q, want it to name call_limit", s.ToolUseID, s.Result)
					}
				} else {
					ran++
				}
			}
			if ran != core.DefaultToolCalls || refused == 0 {
				t.Errorf("steps show %d calls run and %d refused, want %d run and the rest refused", ran, refused, core.DefaultToolCalls)
			}
			if mem := m.member(tm, "reader"); mem.Status != "stopped" {
				t.Errorf("reader = %+v, want stopped", mem)
			}

			// PATCH the limit, reset the member: 3 calls run of 5.
			want(t, m.do(call{method: http.MethodPatch, path: "/api/v1/teams/crew", token: adminToken,
				json: map[string]any{"limits": map[string]any{"tool_calls": 3}}}), http.StatusOK, "")
			want(t, m.post("/api/v1/teams/crew/members/reader/reset", adminToken, nil), http.StatusOK, "")
			m.fake.Push(m.manyCalls(5))
			r = m.realTurn(tm, "reader", "write less")
			want(t, r, http.StatusOK, "")
			if d := decode[turnDoc](t, r); d.Status != "call_limit" {
				t.Errorf("turn = %+v, want call_limit", d)
			}
			if n := len(m.inbox(tm, "lead")); n != core.DefaultToolCalls+3 {
				t.Errorf("lead has %d letters, want %d", n, core.DefaultToolCalls+3)
			}
			// Exactly at the limit is an ordinary turn.
			want(t, m.post("/api/v1/teams/crew/members/reader/reset", adminToken, nil), http.StatusOK, "")
			m.fake.Push(m.manyCalls(3), m.text("Done.", 1, 1))
			r = m.realTurn(tm, "reader", "write three")
			want(t, r, http.StatusOK, "")
			if d := decode[turnDoc](t, r); d.Status != "answered" {
				t.Errorf("turn = %+v, want answered", d)
			}
		})
	}
}
