package agent

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"mailroom/internal/core"
)

func TestTurnContinuesHistoryWithTurnScopedIDs(t *testing.T) {
	svc := newService(t)
	ws := newWorkspace(t)
	tools := ToolSet{Names: []string{ToolReadFile, ToolSendMessage}, Workspace: ws}

	first := NewScripted(
		CallStep(ToolReadFile, map[string]string{"path": "main.py"}),
		CallStep(ToolSendMessage, map[string]string{"to": "lead", "body": "main.py prints 42; not run."}),
		TextStep("Source read and reported."),
	)
	res, stats, err := Run(t.Context(), svc, Spec{Team: testTeam, Member: "reader", Prompt: "Inspect main.py.", Model: first, Tools: tools})
	if err != nil {
		t.Fatal(err)
	}
	if res.Status != core.TurnAnswered || res.Text != "Source read and reported." || stats.ModelRequests != 3 {
		t.Fatalf("turn 1 = %+v, %d requests", res, stats.ModelRequests)
	}
	if got := []string{stats.Calls[0].ID, stats.Calls[1].ID}; got[0] != "reader-t1-1" || got[1] != "reader-t1-2" {
		t.Fatalf("turn 1 ids = %v", got)
	}
	if stats.Calls[0].Content != mainPy || stats.Calls[0].IsError {
		t.Fatalf("read_file result = %+v", stats.Calls[0])
	}
	// 1 prompt + 2 × (tool_use, tool_result) + final answer.
	if m := member(t, svc, "reader"); m.HistoryLength != 6 || m.Turns != 1 || m.Status != core.StatusIdle || m.Active {
		t.Fatalf("reader after turn 1 = %+v", m)
	}
	if got := inbox(t, svc, "lead"); len(got) != 1 || got[0].Sender != "reader" || got[0].ID != "lead-1" {
		t.Fatalf("lead inbox = %+v", got)
	}

	second := NewScripted(
		CallStep(ToolSendMessage, map[string]string{"to": "lead", "body": "Supplement."}),
		TextStep("done"),
	)
	if _, stats, err = Run(t.Context(), svc, Spec{Team: testTeam, Member: "reader", Prompt: "Supplement.", Model: second, Tools: tools}); err != nil {
		t.Fatal(err)
	}
	reqs := second.Requests()
	if len(reqs) != 2 || stats.ModelRequests != 2 {
		t.Fatalf("turn 2 made %d requests", len(reqs))
	}
	// The prefix is the committed turn 1, unchanged, including the
	// read_file result; then this turn's prompt.
	h := reqs[0].Messages
	if len(h) != 7 || h[6].Text != "Supplement." {
		t.Fatalf("turn 2 first request has %d messages", len(h))
	}
	if h[2].Blocks[0].Type != "tool_result" || h[2].Blocks[0].ToolUseID != "reader-t1-1" || h[2].Blocks[0].Content != mainPy {
		t.Fatalf("turn-1 read_file result missing from turn 2: %+v", h[2])
	}
	ids := []string{}
	for _, b := range toolUses(reqs[1].Messages) {
		ids = append(ids, b.ID)
	}
	if strings.Join(ids, ",") != "reader-t1-1,reader-t1-2,reader-t2-1" {
		t.Fatalf("tool-use ids = %v", ids)
	}
	if reqs[0].Member != "reader" || len(reqs[0].Tools) != 2 || reqs[0].Tools[0].Name != ToolReadFile || reqs[0].System == "" {
		t.Fatalf("request envelope = %+v", reqs[0])
	}
}

func TestPrepareRunsBeforeEveryRequest(t *testing.T) {
	svc := newService(t)
	ctx := t.Context()
	// A plan from reader, already answered by lead: the reply is saved but
	// the request stays pending until reader's prepare matches it.
	if _, err := svc.OpenRequest(core.AsMember(ctx, testTeam, "reader"), core.OpenInput{Team: testTeam, Target: "lead", Kind: core.KindPlan, Payload: "Read, then run."}); err != nil {
		t.Fatal(err)
	}
	if _, err := svc.Reply(core.AsMember(ctx, testTeam, "lead"), core.ReplyInput{Team: testTeam, RequestID: "req-1", Approve: true, Feedback: "ok"}); err != nil {
		t.Fatal(err)
	}
	if r, _ := svc.Request(ctx, testTeam, "req-1"); r.Status != core.RequestPending || r.Reply == nil {
		t.Fatalf("before the turn req-1 = %+v", r)
	}

	var statusAtFirstRequest string
	model := NewScripted(
		ComputedStep(func(Request) Step {
			// Seen from inside the first model request: prepare has
			// already matched the reply. A teammate now mails reader
			// while its turn runs.
			r, _ := svc.Request(context.Background(), testTeam, "req-1")
			statusAtFirstRequest = r.Status
			if _, err := svc.Send(core.AsMember(context.Background(), testTeam, "reviewer"), core.SendInput{Team: testTeam, To: "reader", Body: "expected.txt records 42."}); err != nil {
				t.Error(err)
			}
			return CallStep(ToolSendMessage, map[string]string{"to": "lead", "body": "noted"})
		}),
		TextStep("done"),
	)
	res, _, err := Run(ctx, svc, Spec{Team: testTeam, Member: "reader", Prompt: "Go.", Model: model, Tools: DefaultTools("reader")})
	if err != nil || res.Status != core.TurnAnswered {
		t.Fatalf("turn = %+v, %v", res, err)
	}
	if statusAtFirstRequest != core.RequestApproved {
		t.Fatalf("req-1 during the first request = %q, want approved", statusAtFirstRequest)
	}
	box := inbox(t, svc, "reader")
	reqs := model.Requests()
	if !hasText(reqs[0].Messages, core.HistoryText(box[0])) || hasText(reqs[0].Messages, core.HistoryText(box[1])) {
		t.Fatal("first request: want the plan reply attached and the later letter not yet")
	}
	if !hasText(reqs[1].Messages, core.HistoryText(box[1])) {
		t.Fatal("second request: the letter that arrived during the turn was not attached")
	}
	// Attached once each, never duplicated by the second prepare.
	n := 0
	for _, e := range reqs[1].Messages {
		if e.Text == core.HistoryText(box[0]) {
			n++
		}
	}
	if n != 1 {
		t.Fatalf("plan reply attached %d times", n)
	}
}

func TestFailedTurnKeepsOldHistoryAndReleasesMember(t *testing.T) {
	svc := newService(t)
	ctx := t.Context()
	if _, _, err := Run(ctx, svc, Spec{Team: testTeam, Member: "reader", Prompt: "one", Model: NewScripted(TextStep("ok")), Tools: DefaultTools("reader")}); err != nil {
		t.Fatal(err)
	}
	before := member(t, svc, "reader").HistoryLength
	if _, err := svc.Send(core.AsMember(ctx, testTeam, "reviewer"), core.SendInput{Team: testTeam, To: "reader", Body: "a letter attached during the failing turn"}); err != nil {
		t.Fatal(err)
	}
	// One tool step, then the script runs out: the model errors.
	res, stats, err := Run(ctx, svc, Spec{Team: testTeam, Member: "reader", Prompt: "two",
		Model: NewScripted(CallStep(ToolSendMessage, map[string]string{"to": "lead", "body": "sent before the failure"})), Tools: DefaultTools("reader")})
	if err != nil {
		t.Fatal(err)
	}
	if res.Status != core.TurnFailed || stats.ModelRequests != 2 {
		t.Fatalf("turn = %+v after %d requests", res, stats.ModelRequests)
	}
	m := member(t, svc, "reader")
	if m.Status != core.StatusFailed || m.Active || m.Turns != 2 || m.HistoryLength != before {
		t.Fatalf("reader = %+v, want failed, released, old history of %d", m, before)
	}
	// Side effects are not rolled back, and the letter attached during
	// the failed turn was not committed (history length unchanged).
	if got := inbox(t, svc, "lead"); len(got) != 1 {
		t.Fatalf("lead inbox = %+v", got)
	}
}

func TestCallLimitStopsMember(t *testing.T) {
	svc := newService(t)
	steps := make([]Step, 5)
	for i := range steps {
		steps[i] = CallStep(ToolSendMessage, map[string]string{"to": "reviewer", "body": "ping"})
	}
	model := NewScripted(steps...)
	res, stats, err := Run(t.Context(), svc, Spec{Team: testTeam, Member: "reader", Prompt: "loop", Model: model, Tools: DefaultTools("reader")})
	if err != nil {
		t.Fatal(err)
	}
	if res.Status != core.TurnCallLimit || stats.ModelRequests != MaxModelRequests || len(model.Requests()) != MaxModelRequests {
		t.Fatalf("turn = %+v after %d requests", res, stats.ModelRequests)
	}
	m := member(t, svc, "reader")
	// The history is kept: prompt + 4 × (tool_use, tool_result).
	if m.Status != core.StatusStopped || m.Active || m.HistoryLength != 9 {
		t.Fatalf("reader = %+v", m)
	}
	if got := inbox(t, svc, "reviewer"); len(got) != 4 {
		t.Fatalf("reviewer got %d letters, want 4", len(got))
	}
	_, n, err := RunScriptedTurn(t.Context(), svc, testTeam, "reader", "again", []Step{TextStep("x")}, DefaultTools("reader"))
	wantCode(t, err, core.CodeMemberUnavailable)
	if n != 0 {
		t.Fatalf("a refused turn made %d model requests", n)
	}
}

func TestTurnAvailability(t *testing.T) {
	t.Run("lead is not capped", func(t *testing.T) {
		svc := newService(t)
		for i := range 3 {
			res, n, err := RunScriptedTurn(t.Context(), svc, testTeam, "lead", "summarise", []Step{TextStep("summary")}, DefaultTools("lead"))
			if err != nil || res.Status != core.TurnAnswered || n != 1 {
				t.Fatalf("lead turn %d = %+v, %d, %v", i+1, res, n, err)
			}
		}
		if m := member(t, svc, "lead"); m.Turns != 3 || m.HistoryLength != 6 {
			t.Fatalf("lead = %+v", m)
		}
	})
	t.Run("exhausted", func(t *testing.T) {
		svc := newService(t)
		for range 2 {
			if _, _, err := RunScriptedTurn(t.Context(), svc, testTeam, "reader", "go", []Step{TextStep("ok")}, DefaultTools("reader")); err != nil {
				t.Fatal(err)
			}
		}
		model := NewScripted(TextStep("never"))
		_, stats, err := Run(t.Context(), svc, Spec{Team: testTeam, Member: "reader", Model: model, Tools: DefaultTools("reader")})
		wantCode(t, err, core.CodeMemberUnavailable)
		if stats.ModelRequests != 0 || len(model.Requests()) != 0 {
			t.Fatal("the model was asked for a member out of turns")
		}
	})
	t.Run("unknown member", func(t *testing.T) {
		svc := newService(t)
		_, _, err := RunScriptedTurn(t.Context(), svc, testTeam, "nobody", "go", []Step{TextStep("ok")}, DefaultTools("nobody"))
		wantCode(t, err, core.CodeNotFound)
		_, _, err = RunScriptedTurn(t.Context(), svc, "no-team", "reader", "go", []Step{TextStep("ok")}, DefaultTools("reader"))
		wantCode(t, err, core.CodeNotFound)
	})
	t.Run("invalid script", func(t *testing.T) {
		svc := newService(t)
		_, _, err := RunScriptedTurn(t.Context(), svc, testTeam, "reader", "go", []Step{{WaitMS: 1}}, DefaultTools("reader"))
		wantCode(t, err, core.CodeValidation)
		if m := member(t, svc, "reader"); m.Turns != 0 {
			t.Fatal("an invalid script used a turn")
		}
	})
}

func TestBusyMemberIsUnavailable(t *testing.T) {
	svc := newService(t)
	gate := newGateModel(NewScripted(TextStep("finally")))
	done := make(chan core.TurnResult)
	go func() {
		res, _, err := Run(context.Background(), svc, Spec{Team: testTeam, Member: "reader", Model: gate, Tools: DefaultTools("reader")})
		if err != nil {
			t.Error(err)
		}
		done <- res
	}()
	<-gate.entered
	if m := member(t, svc, "reader"); !m.Active || m.Status != core.StatusRunning {
		t.Fatalf("reader during its turn = %+v", m)
	}
	second := NewScripted(TextStep("never"))
	_, _, err := Run(t.Context(), svc, Spec{Team: testTeam, Member: "reader", Model: second, Tools: DefaultTools("reader")})
	wantCode(t, err, core.CodeMemberUnavailable)
	if len(second.Requests()) != 0 {
		t.Fatal("the busy member's second model was asked")
	}
	close(gate.release)
	if res := <-done; res.Status != core.TurnAnswered {
		t.Fatalf("first turn = %+v", res)
	}
}

func TestShutdownDuringTurnIsDeferred(t *testing.T) {
	svc := newService(t)
	ctx := t.Context()
	if _, err := svc.OpenRequest(core.AsMember(ctx, testTeam, "lead"), core.OpenInput{Team: testTeam, Target: "reader", Kind: core.KindShutdown, Payload: "Close at an idle boundary."}); err != nil {
		t.Fatal(err)
	}
	// The scripted step waits (a slow model) behind a gate that tells
	// the test the turn has started.
	gate := newGateModel(NewScripted(Step{Text: ptr("working"), WaitMS: 5}))
	done := make(chan struct{})
	go func() {
		defer close(done)
		if _, _, err := Run(context.Background(), svc, Spec{Team: testTeam, Member: "reader", Model: gate, Tools: DefaultTools("reader")}); err != nil {
			t.Error(err)
		}
	}()
	<-gate.entered
	res, err := svc.Reply(core.AsMember(ctx, testTeam, "reader"), core.ReplyInput{Team: testTeam, RequestID: "req-1", Approve: true, Feedback: "at the idle boundary"})
	if err != nil || res.Status != "deferred" {
		t.Fatalf("reply during the turn = %+v, %v", res, err)
	}
	if got := inbox(t, svc, "lead"); len(got) != 0 {
		t.Fatalf("a deferred reply stored a letter: %+v", got)
	}
	close(gate.release)
	<-done
	res, err = svc.Reply(core.AsMember(ctx, testTeam, "reader"), core.ReplyInput{Team: testTeam, RequestID: "req-1", Approve: true, Feedback: "at the idle boundary"})
	if err != nil || res.Status != "queued" || res.Receipt != "lead-1" {
		t.Fatalf("reply after the turn = %+v, %v", res, err)
	}
	m := member(t, svc, "reader")
	if m.Status != core.StatusClosed || m.Turns != 1 {
		t.Fatalf("reader = %+v", m)
	}
	// Closed with a turn left: still no delivery.
	_, _, err = RunScriptedTurn(ctx, svc, testTeam, "reader", "again", []Step{TextStep("never")}, DefaultTools("reader"))
	wantCode(t, err, core.CodeMemberUnavailable)
}

// TestWaitRespectsContext: a scripted wait ends when the turn's context
// does, and the interrupted turn ends failed with the member idle again.
func TestWaitRespectsContext(t *testing.T) {
	svc := newService(t)
	ctx, cancel := context.WithCancel(t.Context())
	model := newGateModel(NewScripted(Step{Text: ptr("too late"), WaitMS: MaxWaitMS}))
	close(model.release)
	done := make(chan core.TurnResult)
	go func() {
		res, _, err := Run(ctx, svc, Spec{Team: testTeam, Member: "reader", Model: model, Tools: DefaultTools("reader")})
		if err != nil {
			t.Error(err)
		}
		done <- res
	}()
	<-model.entered
	cancel()
	if res := <-done; res.Status != core.TurnFailed || res.Text != core.InterruptedText {
		t.Fatalf("cancelled turn = %+v, want failed with text %q", res, core.InterruptedText)
	}
	if m := member(t, svc, "reader"); m.Active || m.Status != core.StatusIdle || m.HistoryLength != 0 {
		t.Fatalf("reader = %+v, want idle, not active, history 0", m)
	}
}

// flaky fails its n-th request once with a retryable error, as an
// overloaded API (HTTP 529) would.
type flaky struct {
	next  Model
	n     int
	calls int
}

var errOverloaded = errors.New("overloaded")

func (f *flaky) Respond(ctx context.Context, req Request) (Response, error) {
	f.calls++
	if f.calls == f.n {
		return Response{}, errOverloaded
	}
	return f.next.Respond(ctx, req)
}

func TestRetryNeverRepeatsToolSideEffects(t *testing.T) {
	svc := newService(t)
	script := NewScripted(
		CallStep(ToolSendMessage, map[string]string{"to": "lead", "body": "report"}),
		TextStep("done"),
	)
	// The request right after the mail was sent fails once.
	f := &flaky{next: script, n: 2}
	model := Retry(f, 20, func(err error) bool { return errors.Is(err, errOverloaded) })
	res, stats, err := Run(t.Context(), svc, Spec{Team: testTeam, Member: "reader", Prompt: "go", Model: model, Tools: DefaultTools("reader")})
	if err != nil || res.Status != core.TurnAnswered {
		t.Fatalf("turn = %+v, %v", res, err)
	}
	if f.calls != 3 || stats.ModelRequests != 2 || len(stats.Calls) != 1 {
		t.Fatalf("attempts %d, logical requests %d, tool calls %d; want 3, 2, 1", f.calls, stats.ModelRequests, len(stats.Calls))
	}
	if got := inbox(t, svc, "lead"); len(got) != 1 {
		t.Fatalf("lead inbox = %+v, want exactly one letter", got)
	}
	// A non-retryable error is not retried.
	g := &flaky{next: NewScripted(TextStep("x")), n: 1}
	res, _, err = Run(t.Context(), svc, Spec{Team: testTeam, Member: "reviewer", Model: Retry(g, 20, func(error) bool { return false }), Tools: DefaultTools("reviewer")})
	if err != nil || res.Status != core.TurnFailed || g.calls != 1 {
		t.Fatalf("non-retryable: %+v, %v, calls %d", res, err, g.calls)
	}
}

func TestValidateSteps(t *testing.T) {
	text := "done"
	tests := []struct {
		name string
		step Step
		ok   bool
	}{
		{"tool", Step{Tool: "send_message", Input: json.RawMessage(`{"to":"lead","body":"x"}`)}, true},
		{"tool without input", Step{Tool: "run_main"}, true},
		{"text", Step{Text: &text}, true},
		{"empty text", Step{Text: ptr("")}, true},
		{"wait at the bound", Step{Text: &text, WaitMS: MaxWaitMS}, true},
		{"neither", Step{}, false},
		{"both", Step{Tool: "run_main", Text: &text}, false},
		{"input without tool", Step{Text: &text, Input: json.RawMessage(`{}`)}, false},
		{"input not an object", Step{Tool: "run_main", Input: json.RawMessage(`[1]`)}, false},
		{"wait too long", Step{Text: &text, WaitMS: MaxWaitMS + 1}, false},
		{"negative wait", Step{Text: &text, WaitMS: -1}, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			err := ValidateSteps([]Step{tc.step})
			if (err == nil) != tc.ok {
				t.Fatalf("err = %v, want ok %v", err, tc.ok)
			}
			if err != nil && core.ErrorCode(err) != core.CodeValidation {
				t.Fatalf("code = %q", core.ErrorCode(err))
			}
		})
	}
	var steps []Step
	if err := json.Unmarshal([]byte(`[{"tool":"send_message","input":{"to":"lead","body":"hi"},"wait_ms":5},{"text":"bye"}]`), &steps); err != nil {
		t.Fatal(err)
	}
	if err := ValidateSteps(steps); err != nil || steps[0].WaitMS != 5 || *steps[1].Text != "bye" {
		t.Fatalf("decoded steps = %+v, %v", steps, err)
	}
}

func ptr(s string) *string { return &s }
