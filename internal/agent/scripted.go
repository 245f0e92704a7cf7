package agent

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"time"

	"mailroom/internal/core"
)

// MaxWaitMS bounds Step.WaitMS: a scripted model may stand in for a slow
// one, but never for longer than this.
const MaxWaitMS = 10000

// ErrScriptExhausted is returned by Scripted when it is asked for more
// answers than it has steps; the member's turn fails.
var ErrScriptExhausted = errors.New("the scripted model has no step left")

// Step is one scripted model answer: either a tool call (Tool with its
// Input, a JSON object) or a final answer (Text). WaitMS delays the answer
// to stand in for a slow model. Compute, when set, builds the step from the
// request it answers, the way a model reads its tool results; it is never
// part of a JSON script.
type Step struct {
	Tool    string             `json:"tool,omitempty"`
	Input   json.RawMessage    `json:"input,omitempty"`
	Text    *string            `json:"text,omitempty"`
	WaitMS  int                `json:"wait_ms,omitempty"`
	Compute func(Request) Step `json:"-"`
}

// CallStep returns a tool-call step; input is encoded as JSON.
func CallStep(tool string, input any) Step {
	raw, err := json.Marshal(input)
	if err != nil {
		panic(fmt.Sprintf("agent: tool input for %s is not encodable: %v", tool, err))
	}
	return Step{Tool: tool, Input: raw}
}

// TextStep returns a final-answer step.
func TextStep(text string) Step { return Step{Text: &text} }

// ComputedStep returns a step built when the request it answers arrives.
func ComputedStep(f func(Request) Step) Step { return Step{Compute: f} }

// ValidateSteps checks a script: every step is exactly one of a tool call
// or a final text, its input (if any) is a JSON object and its wait is
// within 0..MaxWaitMS. Errors are validation_failed domain errors.
func ValidateSteps(steps []Step) error {
	for i, s := range steps {
		if err := s.validate(); err != nil {
			return core.Errorf(core.CodeValidation, "Step %d: %s", i+1, err.Error())
		}
	}
	return nil
}

func (s Step) validate() error {
	if s.WaitMS < 0 || s.WaitMS > MaxWaitMS {
		return fmt.Errorf("wait_ms must be within 0..%d", MaxWaitMS)
	}
	if s.Compute != nil {
		return nil
	}
	switch {
	case s.Tool != "" && s.Text != nil:
		return errors.New("a step is either a tool call or a text, not both")
	case s.Tool == "" && s.Text == nil:
		return errors.New("a step needs a tool or a text")
	case s.Tool == "" && len(s.Input) > 0:
		return errors.New("input belongs to a tool call")
	}
	if len(s.Input) > 0 {
		trimmed := bytes.TrimSpace(s.Input)
		if len(trimmed) == 0 || trimmed[0] != '{' || !json.Valid(trimmed) {
			return errors.New("input must be a JSON object")
		}
	}
	return nil
}

// Scripted is a Model that replays fixed steps, one per request, and
// records every request it receives so that tests and scenario checks can
// inspect what the model was actually shown.
type Scripted struct {
	mu       sync.Mutex
	steps    []Step
	next     int
	requests []Request
}

// NewScripted returns a model that answers with steps in order. It panics
// on an invalid script; callers taking scripts from clients validate them
// first with ValidateSteps.
func NewScripted(steps ...Step) *Scripted {
	if err := ValidateSteps(steps); err != nil {
		panic("agent: " + err.Error())
	}
	return &Scripted{steps: append([]Step(nil), steps...)}
}

// Respond records req, waits the step's WaitMS (returning early with the
// context's error if ctx ends) and answers with the next step.
func (m *Scripted) Respond(ctx context.Context, req Request) (Response, error) {
	recorded := Request{Member: req.Member, System: req.System, Messages: cloneEntries(req.Messages), Tools: append([]ToolSpec(nil), req.Tools...)}
	m.mu.Lock()
	m.requests = append(m.requests, recorded)
	if m.next >= len(m.steps) {
		m.mu.Unlock()
		return Response{}, ErrScriptExhausted
	}
	step := m.steps[m.next]
	n := m.next + 1
	m.next++
	m.mu.Unlock()

	wait := step.WaitMS
	if step.Compute != nil {
		computed := step.Compute(recorded)
		if computed.Compute != nil {
			return Response{}, errors.New("agent: a computed step must not compute again")
		}
		if err := computed.validate(); err != nil {
			return Response{}, fmt.Errorf("agent: computed step %d: %w", n, err)
		}
		if computed.WaitMS > wait {
			wait = computed.WaitMS
		}
		step = computed
	}
	if err := sleep(ctx, time.Duration(wait)*time.Millisecond); err != nil {
		return Response{}, err
	}
	if step.Text != nil {
		return Response{Content: []core.Block{{Type: "text", Text: *step.Text}}, StopReason: StopEndTurn}, nil
	}
	input := step.Input
	if len(input) == 0 {
		input = json.RawMessage(`{}`)
	}
	return Response{
		Content:    []core.Block{{Type: "tool_use", ID: fmt.Sprintf("toolu_scripted_%d", n), Name: step.Tool, Input: append(json.RawMessage(nil), input...)}},
		StopReason: StopToolUse,
	}, nil
}

// Requests returns copies of every request received so far, in order.
func (m *Scripted) Requests() []Request {
	m.mu.Lock()
	defer m.mu.Unlock()
	out := make([]Request, len(m.requests))
	for i, r := range m.requests {
		out[i] = Request{Member: r.Member, System: r.System, Messages: cloneEntries(r.Messages), Tools: append([]ToolSpec(nil), r.Tools...)}
	}
	return out
}

// sleep waits d or until ctx ends, whichever comes first.
func sleep(ctx context.Context, d time.Duration) error {
	if d <= 0 {
		return ctx.Err()
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}
