// Package agent runs one teammate turn: the single agent loop of docs/spec.md §4.7
// with its tools (docs/spec.md §13.12) and the Model seam it talks to.
//
// The loop keeps the member's committed history as a prefix, consumes
// protocol replies and attaches mail before every model request, executes
// the tools the model asks for and stops after at most four requests. The
// model is an interface shaped like the Anthropic Messages API, so a real
// LLM can be plugged in with a thin adapter; Scripted replays fixed steps
// and stands in for it in lessons, tests and the REST turn endpoint.
package agent

import (
	"context"
	"encoding/json"

	"mailroom/internal/core"
)

// Stop reasons of a model response, as in the Messages API. A provider
// adapter maps its own reasons onto these (Chat Completions' "tool_calls"
// becomes StopToolUse, "length" StopMaxTokens); a reason with no
// counterpart is passed through as the provider wrote it.
const (
	StopToolUse   = "tool_use"
	StopEndTurn   = "end_turn"
	StopMaxTokens = "max_tokens"
)

// ToolSpec describes one tool to the model: the name it calls, what the
// tool does and the JSON schema of its input (Messages API "tools").
type ToolSpec struct {
	Name        string          `json:"name"`
	Description string          `json:"description"`
	InputSchema json.RawMessage `json:"input_schema"`
}

// Request is one model request: who asks, the system text, the whole
// conversation (the member's committed history followed by this turn) and
// the tools the host offers for this turn.
type Request struct {
	Member   string       `json:"member"`
	System   string       `json:"system"`
	Messages []core.Entry `json:"messages"`
	Tools    []ToolSpec   `json:"tools"`
}

// Response is one model answer: content blocks (text and tool_use) and a
// stop reason, StopToolUse when it asks for tools, StopEndTurn otherwise.
// Tool-use ids in a response are advisory; the loop assigns its own.
// Usage and Retries are what a real provider reports: the tokens the
// request cost and how many times the provider's SDK sent it again after a
// transient failure. A scripted model leaves both zero.
type Response struct {
	Content    []core.Block `json:"content"`
	StopReason string       `json:"stop_reason"`
	Usage      Usage        `json:"usage"`
	Retries    int          `json:"retries"`
	// UsageMissing is set by a provider adapter whose answer reported no
	// token counts (OpenAI-compatible servers often send none): the loop
	// then charges an estimate (core.EstimateUsage).
	UsageMissing bool `json:"usage_missing,omitempty"`
}

// Usage counts the tokens of one model request, as the provider bills
// them: the prompt it read and the answer it wrote. It is core's type,
// since core keeps the totals per turn, member and team.
type Usage = core.Usage

// Model answers model requests. An error fails the member's turn; a model
// that recovers from transient failures does so inside Respond (see
// Retry), never by asking the loop to run tools again.
type Model interface {
	Respond(ctx context.Context, req Request) (Response, error)
}

// Retry wraps m so that a request that fails with an error for which
// retryable returns true is sent again, up to attempts sends in all. Only
// the model request is repeated: the loop runs tools after a response has
// arrived, so a retry can never repeat a tool's side effect (docs/spec.md §10).
func Retry(m Model, attempts int, retryable func(error) bool) Model {
	if attempts < 1 {
		attempts = 1
	}
	return retryModel{m: m, attempts: attempts, retryable: retryable}
}

type retryModel struct {
	m         Model
	attempts  int
	retryable func(error) bool
}

func (r retryModel) Respond(ctx context.Context, req Request) (Response, error) {
	var err error
	for range r.attempts {
		var resp Response
		resp, err = r.m.Respond(ctx, req)
		if err == nil {
			return resp, nil
		}
		if ctx.Err() != nil || r.retryable == nil || !r.retryable(err) {
			return Response{}, err
		}
	}
	return Response{}, err
}

// cloneEntries deep-copies a history so that a recorded request or a
// returned outcome never aliases the loop's own slices.
func cloneEntries(in []core.Entry) []core.Entry {
	out := make([]core.Entry, len(in))
	for i, e := range in {
		out[i] = core.Entry{Role: e.Role, Text: e.Text}
		if e.Blocks != nil {
			out[i].Blocks = cloneBlocks(e.Blocks)
		}
	}
	return out
}

func cloneBlocks(in []core.Block) []core.Block {
	out := make([]core.Block, len(in))
	for i, b := range in {
		if b.Input != nil {
			b.Input = append(json.RawMessage(nil), b.Input...)
		}
		out[i] = b
	}
	return out
}
