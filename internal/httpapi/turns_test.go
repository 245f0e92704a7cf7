package httpapi_test

import (
	"net/http"
	"testing"
	"time"

	"mailroom/internal/httpapi"
)

// Steps of a scripted turn, as a client writes them.
func textStep(text string) map[string]any { return map[string]any{"text": text} }

func toolStep(tool string, input map[string]any) map[string]any {
	step := map[string]any{"tool": tool}
	if input != nil {
		step["input"] = input
	}
	return step
}

func (e *env) turn(tm team, member, prompt string, steps ...map[string]any) result {
	e.t.Helper()
	return e.post("/api/v1/teams/"+tm.name+"/members/"+member+"/turns", adminToken, map[string]any{"prompt": prompt, "responses": steps})
}

// turnAsync starts a turn request in the background; the channel yields its
// answer. It does not call t.Fatal, so it may run off the test goroutine;
// responses still pass through the spec-validating client.
func (e *env) turnAsync(tm team, member string, steps ...map[string]any) <-chan result {
	return e.postAsync("/api/v1/teams/"+tm.name+"/members/"+member+"/turns", map[string]any{"responses": steps})
}

// member returns a member as GET /teams/{team} shows it.
func (e *env) member(tm team, name string) httpapi.Member {
	e.t.Helper()
	r := e.get("/api/v1/teams/"+tm.name, adminToken)
	want(e.t, r, http.StatusOK, "")
	for _, m := range decode[httpapi.Team](e.t, r).Members {
		if m.Name == name {
			return m
		}
	}
	e.t.Fatalf("no member %s in team %s", name, tm.name)
	return httpapi.Member{}
}

// waitActive polls the team until member's turn is running. The bound only
// keeps a broken server from hanging the test.
func (e *env) waitActive(tm team, name string) {
	e.t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for !e.member(tm, name).Active {
		if time.Now().After(deadline) {
			e.t.Fatalf("%s never became active", name)
		}
	}
}

// slowStep holds a turn open long enough for a second request to meet it
// while it runs; the test waits for the member to be active, never for time.
const slowStepMS = 1500

func TestTurnOutcomes(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	tm := e.newTeam("crew", map[string]int{"turns": 2})

	t.Run("answered, history continued", func(t *testing.T) {
		r := e.turn(tm, "reader", "Tell lead you started.",
			toolStep("send_message", map[string]any{"to": "lead", "body": "reader started"}),
			textStep("Told lead."))
		want(t, r, http.StatusOK, "")
		got := decode[httpapi.TurnDocument](t, r)
		if got.Member != "reader" || got.Status != "answered" || got.Text != "Told lead." || got.ModelRequests != 2 || got.TurnID != "reader-t1" || len(got.Steps) != 3 || got.EndedAt == nil {
			t.Errorf("turn = %+v", got)
		}
		box := e.inbox(tm, "lead")
		if len(box) != 1 || box[0].Sender != "reader" || box[0].Body != "reader started" {
			t.Errorf("lead's inbox = %+v", box)
		}
		m := e.member(tm, "reader")
		if m.Status != httpapi.MemberStatusIdle || m.Active || m.Turns != 1 || m.HistoryLength == 0 {
			t.Errorf("reader = %+v", m)
		}
		first := m.HistoryLength

		// An unknown tool is an error result for the model; the turn goes on.
		r = e.turn(tm, "reader", "", toolStep("run_main", nil), textStep("No run_main here."))
		want(t, r, http.StatusOK, "")
		if got := decode[httpapi.TurnDocument](t, r); got.Status != "answered" || got.ModelRequests != 2 {
			t.Errorf("turn 2 = %+v", got)
		}
		if m := e.member(tm, "reader"); m.HistoryLength <= first || m.Turns != 2 {
			t.Errorf("reader after turn 2 = %+v, want its history continued from %d entries", m, first)
		}
	})

	t.Run("out of turns", func(t *testing.T) {
		want(t, e.turn(tm, "reader", "", textStep("again")), http.StatusConflict, "member_unavailable")
	})

	t.Run("lead is not capped", func(t *testing.T) {
		for i := range 3 {
			r := e.turn(tm, "lead", "", textStep("summary"))
			want(t, r, http.StatusOK, "")
			if got := decode[httpapi.TurnDocument](t, r); got.Status != "answered" {
				t.Fatalf("lead turn %d = %+v", i+1, got)
			}
		}
		if m := e.member(tm, "lead"); m.Turns != 3 || m.Status != httpapi.MemberStatusIdle {
			t.Errorf("lead = %+v", m)
		}
	})

	t.Run("script runs out: failed, history kept", func(t *testing.T) {
		r := e.turn(tm, "reviewer", "", textStep("first"))
		want(t, r, http.StatusOK, "")
		before := e.member(tm, "reviewer").HistoryLength

		r = e.turn(tm, "reviewer", "Work on.", toolStep("send_message", map[string]any{"to": "lead", "body": "one"}))
		want(t, r, http.StatusOK, "")
		got := decode[httpapi.TurnDocument](t, r)
		if got.Status != "failed" || got.ModelRequests != 2 {
			t.Errorf("turn = %+v, want failed after 2 model requests", got)
		}
		m := e.member(tm, "reviewer")
		if m.Status != httpapi.MemberStatusFailed || m.HistoryLength != before || m.Active {
			t.Errorf("reviewer = %+v, want failed with its %d history entries", m, before)
		}
		want(t, e.turn(tm, "reviewer", "", textStep("again")), http.StatusConflict, "member_unavailable")
	})
}

func TestTurnCallLimit(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	tm := e.newTeam("crew", nil)
	steps := make([]map[string]any, 5)
	for i := range steps {
		steps[i] = toolStep("send_message", map[string]any{"to": "lead", "body": "note"})
	}
	r := e.turn(tm, "reader", "Keep writing.", steps...)
	want(t, r, http.StatusOK, "")
	got := decode[httpapi.TurnDocument](t, r)
	if got.Status != "call_limit" || got.ModelRequests != 4 {
		t.Errorf("turn = %+v, want call_limit after 4 model requests", got)
	}
	if m := e.member(tm, "reader"); m.Status != httpapi.MemberStatusStopped || m.HistoryLength == 0 {
		t.Errorf("reader = %+v, want stopped with its history", m)
	}
	if box := e.inbox(tm, "lead"); len(box) != 4 {
		t.Errorf("lead has %d letters, want 4 (one per executed call)", len(box))
	}
	want(t, e.turn(tm, "reader", "", textStep("again")), http.StatusConflict, "member_unavailable")
}

func TestTurnBusy(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	tm := e.newTeam("crew", nil)
	slow := textStep("slow answer")
	slow["wait_ms"] = slowStepMS
	first := e.turnAsync(tm, "reader", slow)
	e.waitActive(tm, "reader")

	want(t, e.turn(tm, "reader", "", textStep("second")), http.StatusConflict, "member_unavailable")

	r := <-first
	want(t, r, http.StatusOK, "")
	if got := decode[httpapi.TurnDocument](t, r); got.Status != "answered" || got.Text != "slow answer" {
		t.Errorf("first turn = %+v", got)
	}
	if m := e.member(tm, "reader"); m.Turns != 1 || m.Status != httpapi.MemberStatusIdle {
		t.Errorf("reader = %+v, want one turn, idle", m)
	}
}

func TestShutdownDeferredDuringTurn(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	tm := e.newTeam("crew", nil)
	r := e.post("/api/v1/teams/crew/requests", tm.tokens["lead"], map[string]string{"kind": "shutdown", "target": "reader", "payload": "Please close."})
	want(t, r, http.StatusCreated, "")
	id := decode[httpapi.OpenResult](t, r).RequestID

	slow := textStep("working")
	slow["wait_ms"] = slowStepMS
	turn := e.turnAsync(tm, "reader", slow)
	e.waitActive(tm, "reader")

	reply := func() httpapi.ReplyResult {
		t.Helper()
		r := e.post("/api/v1/teams/crew/requests/"+id+"/reply", tm.tokens["reader"], map[string]any{"approve": true})
		want(t, r, http.StatusOK, "")
		return decode[httpapi.ReplyResult](t, r)
	}
	if got := reply(); got.Status != "deferred" {
		t.Errorf("approval during the turn = %+v, want deferred", got)
	}
	if box := e.inbox(tm, "lead"); len(box) != 0 {
		t.Errorf("lead's inbox after a deferred approval = %+v, want empty", box)
	}

	want(t, <-turn, http.StatusOK, "")
	if got := reply(); got.Status != "queued" {
		t.Errorf("approval after the turn = %+v, want queued", got)
	}
	if m := e.member(tm, "reader"); m.Status != httpapi.MemberStatusClosed {
		t.Errorf("reader = %+v, want closed", m)
	}
	want(t, e.turn(tm, "reader", "", textStep("more")), http.StatusConflict, "member_unavailable")
}

func TestTurnRefusals(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	tm := e.newTeam("crew", nil)
	path := "/api/v1/teams/crew/members/reader/turns"
	ok := map[string]any{"responses": []any{textStep("hi")}}
	tests := []struct {
		name   string
		path   string
		token  string
		body   any
		status int
		code   string
	}{
		{"member token", path, tm.tokens["reader"], ok, http.StatusForbidden, "forbidden"},
		{"no token", path, "", ok, http.StatusUnauthorized, "unauthorized"},
		{"unknown team", "/api/v1/teams/nope/members/reader/turns", adminToken, ok, http.StatusNotFound, "not_found"},
		{"unknown member", "/api/v1/teams/crew/members/nobody/turns", adminToken, ok, http.StatusNotFound, "not_found"},
		{"tool and text in one step", path, adminToken, map[string]any{"responses": []any{map[string]any{"tool": "send_message", "text": "x"}}}, http.StatusBadRequest, "validation_failed"},
		{"neither tool nor text", path, adminToken, map[string]any{"responses": []any{map[string]any{"wait_ms": 1}}}, http.StatusBadRequest, "validation_failed"},
		{"wait too long", path, adminToken, map[string]any{"responses": []any{map[string]any{"text": "x", "wait_ms": 10001}}}, http.StatusBadRequest, "validation_failed"},
		{"input not an object", path, adminToken, map[string]any{"responses": []any{map[string]any{"tool": "send_message", "input": "to lead"}}}, http.StatusBadRequest, "validation_failed"},
		{"unknown field", path, adminToken, map[string]any{"responses": []any{}, "model": "x"}, http.StatusBadRequest, "validation_failed"},
		{"scripted model without responses", path, adminToken, map[string]any{"prompt": "hi"}, http.StatusConflict, "model_unavailable"},
		{"real model without credentials", path, adminToken, map[string]any{"model": map[string]any{"provider": "anthropic", "name": "claude-test"}}, http.StatusConflict, "model_unavailable"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			want(t, e.do(call{method: http.MethodPost, path: tt.path, token: tt.token, json: tt.body}), tt.status, tt.code)
		})
	}
	if m := e.member(tm, "reader"); m.Turns != 0 || m.Status != httpapi.MemberStatusIdle {
		t.Errorf("reader after refused turns = %+v, want untouched", m)
	}
}

// TestScriptedInputKeepsItsBytes: a scripted step's tool input is
// recorded as the client wrote it, members in its order, though the
// request's body is decoded once for the schema (validate.go rawUnions).
func TestScriptedInputKeepsItsBytes(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	tm := e.newTeam("crew", nil)
	r := e.do(call{method: http.MethodPost, path: "/api/v1/teams/" + tm.name + "/members/reader/turns", token: adminToken,
		body: `{"responses": [{"tool": "send_message", "input": {"to": "lead", "body": "b < c"}}, {"text": "Told lead."}]}`})
	want(t, r, http.StatusOK, "")
	got := decode[httpapi.TurnDocument](t, r)
	var inputs []string
	for _, s := range got.Steps {
		if s.Input != nil {
			inputs = append(inputs, *s.Input)
		}
	}
	if wantIn := `{"to":"lead","body":"b \u003c c"}`; len(inputs) != 1 || inputs[0] != wantIn {
		t.Errorf("recorded inputs = %q, want [%q]", inputs, wantIn)
	}
}
