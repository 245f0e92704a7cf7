package agent

import (
	"context"
	"testing"

	"mailroom/internal/core"
	"mailroom/internal/providertest"
)

// TestAnswerWithoutUsageIsEstimated: an answer that reports no usage is
// charged an estimate (a token per four bytes of request and answer, at
// least one each way) against the team's tokens, and its step says so; an
// answer that reports usage is charged what it reports.
func TestAnswerWithoutUsageIsEstimated(t *testing.T) {
	fake := providertest.NewOpenAI(t, testKey)
	fake.Push(providertest.OpenAIText("no usage here", providertest.OpenAIUsage{}).WithoutUsage())
	m := newTestOpenAI(t, fake, testKey, ProviderOptions{})
	resp, err := m.Respond(t.Context(), testRequest())
	if err != nil {
		t.Fatal(err)
	}
	if !resp.UsageMissing {
		t.Fatalf("answer without usage: UsageMissing = false, want true")
	}

	svc := newService(t)
	tr, err := svc.BeginTurn(core.AsAdmin(t.Context()), testTeam, "reader", Ref(m))
	if err != nil {
		t.Fatal(err)
	}
	fake.Push(providertest.OpenAIText("still none", providertest.OpenAIUsage{}).WithoutUsage())
	doc, err := tr.Run(t.Context(), turn(svc, Spec{Team: testTeam, Member: "reader", Prompt: "Hello.", Model: m}, &recorder{}))
	if err != nil {
		t.Fatal(err)
	}
	if doc.Status != core.TurnAnswered || len(doc.Steps) != 1 {
		t.Fatalf("turn = %s with %d steps, want answered with 1", doc.Status, len(doc.Steps))
	}
	step := doc.Steps[0]
	if !step.UsageEstimated || step.Usage.InputTokens < 1 || step.Usage.OutputTokens < 1 {
		t.Errorf("step = estimated %v usage %+v, want estimated, at least 1 token each way", step.UsageEstimated, step.Usage)
	}
	if got := member(t, svc, "reader").Usage; got != step.Usage {
		t.Errorf("member usage = %+v, want the estimate %+v charged", got, step.Usage)
	}
}

// TestModelRequestLimit: once a team's model requests reach
// limits.model_requests no turn of the team makes another: a running turn
// ends budget_exhausted before it, and a new one is refused.
func TestModelRequestLimit(t *testing.T) {
	svc := newService(t)
	one := 1
	if _, err := svc.UpdateLimits(core.AsAdmin(t.Context()), testTeam, core.LimitsUpdate{ModelRequests: &one}); err != nil {
		t.Fatal(err)
	}
	asked := 0
	model := modelFunc(func(context.Context, Request) (Response, error) {
		asked++
		return Response{StopReason: StopToolUse, Content: []core.Block{{Type: "tool_use", Name: ToolSendMessage, Input: []byte(`{"to":"lead","body":"again"}`)}}}, nil
	})
	res, _, err := Run(core.AsAdmin(t.Context()), svc, Spec{Team: testTeam, Member: "lead", Prompt: "Go.", Model: model,
		Tools: ToolSet{Names: []string{ToolSendMessage}}})
	if err != nil {
		t.Fatal(err)
	}
	if res.Status != core.TurnBudgetExhausted || asked != 1 {
		t.Errorf("turn = %s after %d model requests, want budget_exhausted after 1", res.Status, asked)
	}
	_, _, err = Run(core.AsAdmin(t.Context()), svc, Spec{Team: testTeam, Member: "lead", Prompt: "Again.", Model: model})
	wantCode(t, err, core.CodeBudgetExhausted)
	if asked != 1 {
		t.Errorf("the model was asked %d times, want 1", asked)
	}
}

// modelFunc is a Model made of a function.
type modelFunc func(context.Context, Request) (Response, error)

func (f modelFunc) Respond(ctx context.Context, req Request) (Response, error) { return f(ctx, req) }
