package agent

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"reflect"
	"strings"
	"testing"
	"time"

	"mailroom/internal/core"
	"mailroom/internal/providertest"
)

func newTestAnthropic(t *testing.T, fake *providertest.Server, o ProviderOptions) *Anthropic {
	t.Helper()
	if o.HTTPClient == nil {
		o.HTTPClient = fake.Client()
	}
	return NewAnthropic(ModelConfig{Provider: ProviderAnthropic, Name: "claude-test", MaxTokens: 777}, testKey, fake.URL(), o)
}

func decodeAnthropic(t *testing.T, r providertest.Request) providertest.AnthropicRequest {
	t.Helper()
	req, err := r.Anthropic()
	if err != nil {
		t.Fatalf("request body: %v", err)
	}
	return req
}

// TestAnthropicSendsTheConversation checks what Mailroom sends to the
// Messages API and what it makes of the answer.
func TestAnthropicSendsTheConversation(t *testing.T) {
	fake := providertest.NewAnthropic(t, testKey)
	fake.Push(providertest.AnthropicReply("tool_use", providertest.AnthropicUsage{InputTokens: 120, OutputTokens: 30},
		core.Block{Type: "text", Text: "Reading it."},
		core.Block{Type: "tool_use", ID: "toolu_01A", Name: ToolReadFile, Input: json.RawMessage(`{"path":"main.py"}`)}))
	m := newTestAnthropic(t, fake, ProviderOptions{})

	resp, err := m.Respond(t.Context(), testRequest())
	if err != nil {
		t.Fatal(err)
	}
	want := []core.Block{
		{Type: "text", Text: "Reading it."},
		{Type: "tool_use", ID: "toolu_01A", Name: ToolReadFile, Input: json.RawMessage(`{"path":"main.py"}`)},
	}
	if !reflect.DeepEqual(resp.Content, want) {
		t.Errorf("content: got %+v, want %+v", resp.Content, want)
	}
	if resp.StopReason != StopToolUse || resp.Usage != (Usage{InputTokens: 120, OutputTokens: 30}) || resp.Retries != 0 {
		t.Errorf("got stop %q usage %+v retries %d, want tool_use {120 30} 0", resp.StopReason, resp.Usage, resp.Retries)
	}

	reqs := fake.Requests()
	if len(reqs) != 1 {
		t.Fatalf("got %d requests, want 1", len(reqs))
	}
	h := reqs[0].Header
	if h.Get("x-api-key") != testKey || h.Get("anthropic-version") == "" || h.Get("Authorization") != "" {
		t.Errorf("headers: x-api-key set %v, anthropic-version %q, Authorization %q; want the key, a version, no Authorization",
			h.Get("x-api-key") == testKey, h.Get("anthropic-version"), h.Get("Authorization"))
	}
	body := decodeAnthropic(t, reqs[0])
	if body.Model != "claude-test" || body.MaxTokens != 777 {
		t.Errorf("got model %q max_tokens %d, want claude-test 777", body.Model, body.MaxTokens)
	}
	if got := body.SystemText(); got != testRequest().System {
		t.Errorf("system: got %q, want %q", got, testRequest().System)
	}
	var names []string
	for i, tool := range body.Tools {
		names = append(names, tool.Name)
		spec := allTools()[i]
		if tool.Description != spec.Description || !sameJSON(tool.InputSchema, spec.InputSchema) {
			t.Errorf("tool %s: got %s %s, want %s %s", tool.Name, tool.Description, tool.InputSchema, spec.Description, spec.InputSchema)
		}
	}
	if !reflect.DeepEqual(names, toolNames(allTools())) {
		t.Errorf("tools: got %v, want %v", names, toolNames(allTools()))
	}

	// The committed history comes first, as it was; the new turn's two
	// user entries become one user message.
	var roles []string
	for _, msg := range body.Messages {
		roles = append(roles, msg.Role)
	}
	if want := []string{"user", "assistant", "user", "assistant", "user"}; !reflect.DeepEqual(roles, want) {
		t.Fatalf("roles: got %v, want %v", roles, want)
	}
	blocks := func(i int) []providertest.AnthropicBlock {
		b, err := body.Messages[i].Blocks()
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	if b := blocks(0); len(b) != 1 || b[0].Text != "Ask the reviewer for the expected value." {
		t.Errorf("message 0: got %+v", b)
	}
	if b := blocks(1); len(b) != 2 || b[1].Type != "tool_use" || b[1].ID != "reader-t1-1" || b[1].Name != ToolSendMessage ||
		!sameJSON(b[1].Input, json.RawMessage(`{"to":"reviewer","body":"What does main.py print?"}`)) {
		t.Errorf("message 1: got %+v, want the text and the tool_use reader-t1-1", b)
	}
	if b := blocks(2); len(b) != 1 || b[0].Type != "tool_result" || b[0].ToolUseID != "reader-t1-1" || b[0].ResultText() != `{"msg_id":"m-1"}` || b[0].IsError {
		t.Errorf("message 2: got %+v, want the tool_result of reader-t1-1", b)
	}
	if b := blocks(4); len(b) != 2 || b[0].Text != "Continue." || b[1].Text != "Mail from reviewer: 42" {
		t.Errorf("message 4: got %+v, want the prompt and the mail", b)
	}
}

// TestAnthropicRetriesThenSucceeds covers the SDK's retries: 529
// overloaded, 429 with retry-after and 500 are sent again, and the
// response counts the retries.
func TestAnthropicRetriesThenSucceeds(t *testing.T) {
	for _, tc := range []struct {
		name  string
		fault providertest.Reply
	}{
		{"overloaded 529", providertest.AnthropicError(529, "overloaded_error", "Overloaded")},
		{"rate limit 429 with retry-after", withHeader(providertest.AnthropicError(http.StatusTooManyRequests, "rate_limit_error", "slow down"), "retry-after", "1")},
		{"server error 500", providertest.AnthropicError(http.StatusInternalServerError, "api_error", "Internal server error")},
	} {
		t.Run(tc.name, func(t *testing.T) {
			fake := providertest.NewAnthropic(t, testKey)
			fake.Push(tc.fault, providertest.AnthropicText("done", providertest.AnthropicUsage{InputTokens: 5, OutputTokens: 1}))
			resp, err := newTestAnthropic(t, fake, ProviderOptions{}).Respond(t.Context(), testRequest())
			if err != nil {
				t.Fatal(err)
			}
			if resp.Retries != 1 || len(resp.Content) != 1 || resp.Content[0].Text != "done" {
				t.Errorf("got retries %d content %+v, want 1 and the text", resp.Retries, resp.Content)
			}
			reqs := fake.Requests()
			if len(reqs) != 2 || string(reqs[0].Body) != string(reqs[1].Body) {
				t.Fatalf("got %d requests, want the same request twice", len(reqs))
			}
		})
	}
}

func withHeader(r providertest.Reply, k, v string) providertest.Reply {
	r.Header = map[string]string{k: v}
	return r
}

// TestAnthropicInvalidRequestIsNotRetried: a 400 fails at once and the
// error names the provider's error type.
func TestAnthropicInvalidRequestIsNotRetried(t *testing.T) {
	fake := providertest.NewAnthropic(t, testKey)
	fake.Push(providertest.AnthropicError(http.StatusBadRequest, "invalid_request_error", "max_tokens: too large"))
	_, err := newTestAnthropic(t, fake, ProviderOptions{}).Respond(t.Context(), testRequest())
	pe := providerError(t, err)
	if pe.Status != 400 || pe.Type != "invalid_request_error" || pe.Retries != 0 || !strings.Contains(err.Error(), "invalid_request_error") {
		t.Errorf("got %+v (%v), want 400 invalid_request_error without retries", pe, err)
	}
	if n := len(fake.Requests()); n != 1 {
		t.Errorf("got %d requests, want 1", n)
	}
}

// TestAnthropicRetriesRunOut: when every attempt fails the error says how
// often the request was sent again.
func TestAnthropicRetriesRunOut(t *testing.T) {
	fake := providertest.NewAnthropic(t, testKey)
	for range 2 {
		fake.Push(withHeader(providertest.AnthropicError(529, "overloaded_error", "Overloaded"), "retry-after-ms", "10"))
	}
	_, err := newTestAnthropic(t, fake, ProviderOptions{MaxRetries: 1}).Respond(t.Context(), testRequest())
	pe := providerError(t, err)
	if pe.Status != 529 || pe.Type != "overloaded_error" || pe.Retries != 1 {
		t.Errorf("got %+v, want 529 overloaded_error after 1 retry", pe)
	}
	if want := "anthropic: overloaded_error (HTTP 529) after 1 retries: Overloaded"; err.Error() != want {
		t.Errorf("got %q, want %q", err.Error(), want)
	}
}

// TestAnthropicTimeouts: an attempt that outlives the request timeout is
// retried and then fails as a timeout; a turn's deadline and a
// cancellation end the request and are told apart.
func TestAnthropicTimeouts(t *testing.T) {
	t.Run("request timeout", func(t *testing.T) {
		fake := providertest.NewAnthropic(t, testKey)
		fake.Push(providertest.Reply{Stall: true}, providertest.Reply{Stall: true})
		_, err := newTestAnthropic(t, fake, ProviderOptions{RequestTimeout: 100 * time.Millisecond, MaxRetries: 1}).Respond(t.Context(), testRequest())
		pe := providerError(t, err)
		if pe.Type != "timeout" || pe.Retries != 1 || !errors.Is(err, context.DeadlineExceeded) {
			t.Errorf("got %+v (%v), want a timeout after 1 retry", pe, err)
		}
		if n := len(fake.Requests()); n != 2 {
			t.Errorf("got %d requests, want 2", n)
		}
	})
	t.Run("turn deadline", func(t *testing.T) {
		fake := providertest.NewAnthropic(t, testKey)
		fake.Push(providertest.Reply{Stall: true})
		ctx, cancel := context.WithTimeout(t.Context(), 100*time.Millisecond)
		defer cancel()
		_, err := newTestAnthropic(t, fake, ProviderOptions{}).Respond(ctx, testRequest())
		if pe := providerError(t, err); pe.Type != "timeout" || !errors.Is(err, context.DeadlineExceeded) {
			t.Errorf("got %+v (%v), want a timeout", pe, err)
		}
	})
	t.Run("cancelled", func(t *testing.T) {
		fake := providertest.NewAnthropic(t, testKey)
		fake.Push(providertest.Reply{Func: func(providertest.Request) providertest.Reply { return providertest.Reply{Stall: true} }})
		ctx, cancel := context.WithCancel(t.Context())
		go func() {
			for len(fake.Requests()) == 0 {
				time.Sleep(5 * time.Millisecond)
			}
			cancel()
		}()
		_, err := newTestAnthropic(t, fake, ProviderOptions{}).Respond(ctx, testRequest())
		if pe := providerError(t, err); pe.Type != "canceled" || !errors.Is(err, context.Canceled) {
			t.Errorf("got %+v (%v), want canceled", pe, err)
		}
	})
}

// TestAnthropicMaxTokensAndOddInput: max_tokens is reported as the stop
// reason, and a tool input of the wrong types is passed to the loop as the
// model wrote it (the tool refuses it, the turn goes on).
func TestAnthropicMaxTokensAndOddInput(t *testing.T) {
	fake := providertest.NewAnthropic(t, testKey)
	fake.Push(
		providertest.AnthropicReply("max_tokens", providertest.AnthropicUsage{InputTokens: 9, OutputTokens: 777}, core.Block{Type: "text", Text: "The answer is"}),
		providertest.AnthropicToolUse("toolu_02", "no_such_tool", map[string]any{"to": 5, "body": []int{1}}, providertest.AnthropicUsage{}),
	)
	m := newTestAnthropic(t, fake, ProviderOptions{})
	resp, err := m.Respond(t.Context(), testRequest())
	if err != nil {
		t.Fatal(err)
	}
	if resp.StopReason != StopMaxTokens || resp.Usage.OutputTokens != 777 {
		t.Errorf("got stop %q usage %+v, want max_tokens with 777 output tokens", resp.StopReason, resp.Usage)
	}
	resp, err = m.Respond(t.Context(), testRequest())
	if err != nil {
		t.Fatal(err)
	}
	if len(resp.Content) != 1 || resp.Content[0].Name != "no_such_tool" || !sameJSON(resp.Content[0].Input, json.RawMessage(`{"to":5,"body":[1]}`)) {
		t.Errorf("got %+v, want the call as written", resp.Content)
	}
}

// TestAnthropicKeyNeverShown drives every kind of failure, one of them an
// answer that quotes the key, and searches errors, logs and responses for
// the key.
func TestAnthropicKeyNeverShown(t *testing.T) {
	log, logs := debugLog()
	fake := providertest.NewAnthropic(t, testKey)
	fake.Push(
		providertest.AnthropicError(http.StatusUnauthorized, "authentication_error", "invalid x-api-key "+testKey),
		withHeader(providertest.AnthropicError(529, "overloaded_error", "Overloaded"), "retry-after-ms", "10"),
		providertest.AnthropicText("ok", providertest.AnthropicUsage{InputTokens: 1, OutputTokens: 1}),
		providertest.Reply{Stall: true},
	)
	m := newTestAnthropic(t, fake, ProviderOptions{Log: log, RequestTimeout: 100 * time.Millisecond, MaxRetries: -1})
	var texts []string
	_, err := m.Respond(t.Context(), testRequest())
	if pe := providerError(t, err); pe.Type != "authentication_error" {
		t.Errorf("got %+v, want authentication_error", pe)
	}
	texts = append(texts, err.Error())
	_, err = m.Respond(t.Context(), testRequest())
	texts = append(texts, err.Error())
	resp, err := m.Respond(t.Context(), testRequest())
	if err != nil {
		t.Fatal(err)
	}
	out, _ := json.Marshal(resp)
	texts = append(texts, string(out))
	_, err = m.Respond(t.Context(), testRequest())
	texts = append(texts, err.Error())
	// A wrong key sent to the fake is refused with a message of its own.
	wrong := NewAnthropic(ModelConfig{Provider: ProviderAnthropic, Name: "claude-test"}, testKey+"x", fake.URL(), ProviderOptions{Log: log, HTTPClient: fake.Client()})
	_, err = wrong.Respond(t.Context(), testRequest())
	texts = append(texts, err.Error(), logs.String())
	noKey(t, "an error, a response or the log", texts...)
	if !strings.Contains(logs.String(), "model request failed") {
		t.Errorf("the log has no failure line: %s", logs.String())
	}
	for _, r := range fake.Requests() {
		noKey(t, "a request body", string(r.Body))
	}
}

func sameJSON(a, b json.RawMessage) bool {
	var x, y any
	if json.Unmarshal(a, &x) != nil || json.Unmarshal(b, &y) != nil {
		return false
	}
	return reflect.DeepEqual(x, y)
}
