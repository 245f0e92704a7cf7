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

func newTestOpenAI(t *testing.T, fake *providertest.Server, key string, o ProviderOptions) *OpenAI {
	t.Helper()
	if o.HTTPClient == nil {
		o.HTTPClient = fake.Client()
	}
	return NewOpenAI(ModelConfig{Provider: ProviderOpenAI, Name: "gpt-test", MaxTokens: 555}, key, fake.URL(), o)
}

func decodeOpenAI(t *testing.T, r providertest.Request) providertest.OpenAIRequest {
	t.Helper()
	req, err := r.OpenAI()
	if err != nil {
		t.Fatalf("request body: %v", err)
	}
	return req
}

// TestOpenAISendsTheConversation checks what Mailroom sends to Chat
// Completions and what it makes of the answer.
func TestOpenAISendsTheConversation(t *testing.T) {
	fake := providertest.NewOpenAI(t, testKey)
	fake.Push(providertest.OpenAIReply("tool_calls", providertest.OpenAIUsage{PromptTokens: 200, CompletionTokens: 40},
		core.Block{Type: "text", Text: "Reading it."},
		core.Block{Type: "tool_use", ID: "call_abc", Name: ToolReadFile, Input: json.RawMessage(`{"path":"main.py"}`)}))
	m := newTestOpenAI(t, fake, testKey, ProviderOptions{})

	req := testRequest()
	req.Messages[2].Blocks[0].IsError = true // the committed tool result was an error
	resp, err := m.Respond(t.Context(), req)
	if err != nil {
		t.Fatal(err)
	}
	want := []core.Block{
		{Type: "text", Text: "Reading it."},
		{Type: "tool_use", ID: "call_abc", Name: ToolReadFile, Input: json.RawMessage(`{"path":"main.py"}`)},
	}
	if !reflect.DeepEqual(resp.Content, want) {
		t.Errorf("content: got %+v, want %+v", resp.Content, want)
	}
	if resp.StopReason != StopToolUse || resp.Usage != (Usage{InputTokens: 200, OutputTokens: 40}) || resp.Retries != 0 {
		t.Errorf("got stop %q usage %+v retries %d, want tool_use {200 40} 0", resp.StopReason, resp.Usage, resp.Retries)
	}

	reqs := fake.Requests()
	if len(reqs) != 1 {
		t.Fatalf("got %d requests, want 1", len(reqs))
	}
	if got := reqs[0].Header.Get("Authorization"); got != "Bearer "+testKey {
		t.Errorf("Authorization: got a value of %d characters, want Bearer and the key", len(got))
	}
	body := decodeOpenAI(t, reqs[0])
	// A server other than OpenAI's gets max_tokens, which local servers
	// understand.
	if body.Model != "gpt-test" || body.MaxTokens == nil || *body.MaxTokens != 555 || body.MaxCompletionTokens != nil {
		t.Errorf("got model %q max_tokens %v max_completion_tokens %v, want gpt-test 555 and none", body.Model, body.MaxTokens, body.MaxCompletionTokens)
	}
	var names []string
	for i, tool := range body.Tools {
		names = append(names, tool.Function.Name)
		spec := allTools()[i]
		if tool.Type != "function" || tool.Function.Description != spec.Description || !sameJSON(tool.Function.Parameters, spec.InputSchema) {
			t.Errorf("tool %s: got %+v, want the spec's description and schema", tool.Function.Name, tool)
		}
	}
	if !reflect.DeepEqual(names, toolNames(allTools())) {
		t.Errorf("tools: got %v, want %v", names, toolNames(allTools()))
	}
	var roles []string
	for _, msg := range body.Messages {
		roles = append(roles, msg.Role)
	}
	if want := []string{"system", "user", "assistant", "tool", "assistant", "user", "user"}; !reflect.DeepEqual(roles, want) {
		t.Fatalf("roles: got %v, want %v", roles, want)
	}
	msgs := body.Messages
	if msgs[0].Text() != req.System || msgs[1].Text() != "Ask the reviewer for the expected value." {
		t.Errorf("system and first prompt: got %q, %q", msgs[0].Text(), msgs[1].Text())
	}
	if len(msgs[2].ToolCalls) != 1 || msgs[2].ToolCalls[0].ID != "reader-t1-1" || msgs[2].ToolCalls[0].Function.Name != ToolSendMessage ||
		!sameJSON(json.RawMessage(msgs[2].ToolCalls[0].Function.Arguments), json.RawMessage(`{"to":"reviewer","body":"What does main.py print?"}`)) ||
		msgs[2].Text() != "I will write to the reviewer." {
		t.Errorf("assistant message: got %+v", msgs[2])
	}
	if msgs[3].ToolCallID != "reader-t1-1" || msgs[3].Text() != `Error: {"msg_id":"m-1"}` {
		t.Errorf("tool message: got id %q text %q, want reader-t1-1 and the result marked as an error", msgs[3].ToolCallID, msgs[3].Text())
	}
	if msgs[5].Text() != "Continue." || msgs[6].Text() != "Mail from reviewer: 42" {
		t.Errorf("new turn: got %q, %q", msgs[5].Text(), msgs[6].Text())
	}
}

// TestOpenAIStopReasonsAndMalformedCalls: finish reasons map to the
// Messages API's, and arguments that are not JSON reach the loop as a
// JSON string instead of failing the request.
func TestOpenAIStopReasonsAndMalformedCalls(t *testing.T) {
	fake := providertest.NewOpenAI(t, testKey)
	fake.Push(
		providertest.OpenAIText("all done", providertest.OpenAIUsage{PromptTokens: 3, CompletionTokens: 2}),
		providertest.OpenAIReply("length", providertest.OpenAIUsage{PromptTokens: 3, CompletionTokens: 555}, core.Block{Type: "text", Text: "The answer is"}),
		providertest.OpenAIRawCall("call_bad", ToolSendMessage, `{"to": "lead", "body": `, providertest.OpenAIUsage{}),
		providertest.OpenAIRawCall("call_empty", ToolRunMain, ``, providertest.OpenAIUsage{}),
	)
	m := newTestOpenAI(t, fake, testKey, ProviderOptions{})
	for i, want := range []string{StopEndTurn, StopMaxTokens, StopToolUse, StopToolUse} {
		resp, err := m.Respond(t.Context(), testRequest())
		if err != nil {
			t.Fatalf("answer %d: %v", i+1, err)
		}
		if resp.StopReason != want {
			t.Errorf("answer %d: got stop reason %q, want %q", i+1, resp.StopReason, want)
		}
		switch i {
		case 2:
			if len(resp.Content) != 1 || resp.Content[0].ID != "call_bad" || string(resp.Content[0].Input) != `"{\"to\": \"lead\", \"body\":"` {
				t.Errorf("malformed call: got %+v, want its text as a JSON string", resp.Content)
			}
			if _, err := json.Marshal(resp); err != nil {
				t.Errorf("the response cannot be encoded: %v", err)
			}
		case 3:
			if len(resp.Content) != 1 || string(resp.Content[0].Input) != `{}` {
				t.Errorf("call without arguments: got %+v, want an empty object", resp.Content)
			}
		}
	}
}

// TestOpenAIRetriesThenSucceeds covers 429 with retry-after and 500.
func TestOpenAIRetriesThenSucceeds(t *testing.T) {
	for _, tc := range []struct {
		name  string
		fault providertest.Reply
	}{
		{"rate limit 429 with retry-after", withHeader(providertest.OpenAIError(http.StatusTooManyRequests, "rate_limit_exceeded", "Rate limit reached"), "retry-after", "1")},
		{"server error 500", providertest.OpenAIError(http.StatusInternalServerError, "server_error", "The server had an error")},
		{"overloaded 503", providertest.OpenAIError(http.StatusServiceUnavailable, "server_error", "overloaded")},
	} {
		t.Run(tc.name, func(t *testing.T) {
			fake := providertest.NewOpenAI(t, testKey)
			fake.Push(tc.fault, providertest.OpenAIText("done", providertest.OpenAIUsage{PromptTokens: 5, CompletionTokens: 1}))
			resp, err := newTestOpenAI(t, fake, testKey, ProviderOptions{}).Respond(t.Context(), testRequest())
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

// TestOpenAIInvalidRequestIsNotRetried: a 400 fails at once, named.
func TestOpenAIInvalidRequestIsNotRetried(t *testing.T) {
	fake := providertest.NewOpenAI(t, testKey)
	fake.Push(providertest.OpenAIError(http.StatusBadRequest, "invalid_request_error", "Invalid 'messages[3]'"))
	_, err := newTestOpenAI(t, fake, testKey, ProviderOptions{}).Respond(t.Context(), testRequest())
	pe := providerError(t, err)
	if pe.Status != 400 || pe.Type != "invalid_request_error" || pe.Retries != 0 || !strings.Contains(err.Error(), "invalid_request_error") {
		t.Errorf("got %+v (%v), want 400 invalid_request_error without retries", pe, err)
	}
	if n := len(fake.Requests()); n != 1 {
		t.Errorf("got %d requests, want 1", n)
	}
}

// TestOpenAITimeout: an attempt that outlives the request timeout fails
// as a timeout (this SDK does not send it again), and a cancelled turn
// is told apart.
func TestOpenAITimeout(t *testing.T) {
	fake := providertest.NewOpenAI(t, testKey)
	fake.Push(providertest.Reply{Stall: true})
	_, err := newTestOpenAI(t, fake, testKey, ProviderOptions{RequestTimeout: 100 * time.Millisecond, MaxRetries: 1}).Respond(t.Context(), testRequest())
	pe := providerError(t, err)
	if pe.Type != "timeout" || !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("got %+v (%v), want a timeout", pe, err)
	}
	if n := len(fake.Requests()); n != 1+pe.Retries {
		t.Errorf("got %d requests and %d retries, want one more request than retries", n, pe.Retries)
	}

	fake.Push(providertest.Reply{Stall: true})
	ctx, cancel := context.WithCancel(t.Context())
	go func() {
		for len(fake.Requests()) < 2 {
			time.Sleep(5 * time.Millisecond)
		}
		cancel()
	}()
	_, err = newTestOpenAI(t, fake, testKey, ProviderOptions{}).Respond(ctx, testRequest())
	if pe := providerError(t, err); pe.Type != "canceled" || !errors.Is(err, context.Canceled) {
		t.Errorf("got %+v (%v), want canceled", pe, err)
	}
}

// TestOpenAILocalServerWithoutKey: with a base URL and no key, no
// Authorization header is sent, as Ollama and llama.cpp expect.
func TestOpenAILocalServerWithoutKey(t *testing.T) {
	fake := providertest.NewOpenAI(t, "")
	fake.Push(providertest.OpenAIText("hi", providertest.OpenAIUsage{}))
	t.Setenv(EnvOpenAIKey, "") // the SDK must not find one either
	m, err := NewModel(ModelConfig{Provider: ProviderOpenAI, Name: "llama3.2:3b"}, mapEnv(map[string]string{EnvOpenAIBase: fake.URL()}), ProviderOptions{HTTPClient: fake.Client()})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := m.Respond(t.Context(), testRequest()); err != nil {
		t.Fatal(err)
	}
	r := fake.Requests()[0]
	if got := r.Header.Get("Authorization"); got != "" {
		t.Errorf("got an Authorization header of %d characters, want none", len(got))
	}
	if body := decodeOpenAI(t, r); body.Model != "llama3.2:3b" || body.MaxTokens == nil || *body.MaxTokens != DefaultMaxTokens {
		t.Errorf("got model %q max_tokens %v, want llama3.2:3b and %d", body.Model, body.MaxTokens, DefaultMaxTokens)
	}
}

// TestOpenAIKeyNeverShown: an error that quotes the key (OpenAI quotes a
// wrong key, partly masked), retries and timeouts leave no trace of it.
func TestOpenAIKeyNeverShown(t *testing.T) {
	log, logs := debugLog()
	fake := providertest.NewOpenAI(t, testKey)
	fake.Push(
		providertest.OpenAIError(http.StatusUnauthorized, "invalid_request_error", "Incorrect API key provided: "+testKey+". You can find your API key at https://platform.openai.com."),
		providertest.OpenAIError(http.StatusUnauthorized, "invalid_request_error", "Incorrect API key provided: sk-test-****************cret."),
		withHeader(providertest.OpenAIError(http.StatusTooManyRequests, "rate_limit_exceeded", "slow down"), "retry-after-ms", "10"),
		providertest.OpenAIText("ok", providertest.OpenAIUsage{PromptTokens: 1, CompletionTokens: 1}),
		providertest.Reply{Stall: true},
	)
	m := newTestOpenAI(t, fake, testKey, ProviderOptions{Log: log, RequestTimeout: 100 * time.Millisecond, MaxRetries: -1})
	var texts []string
	for range 2 {
		_, err := m.Respond(t.Context(), testRequest())
		if pe := providerError(t, err); pe.Status != 401 || strings.Contains(pe.Message, "sk-") {
			t.Errorf("got %+v, want a 401 without the key", pe)
		}
		texts = append(texts, err.Error())
	}
	_, err := m.Respond(t.Context(), testRequest())
	texts = append(texts, err.Error())
	resp, err := m.Respond(t.Context(), testRequest())
	if err != nil {
		t.Fatal(err)
	}
	out, _ := json.Marshal(resp)
	texts = append(texts, string(out))
	_, err = m.Respond(t.Context(), testRequest())
	texts = append(texts, err.Error(), logs.String())
	noKey(t, "an error, a response or the log", texts...)
	for _, r := range fake.Requests() {
		noKey(t, "a request body", string(r.Body))
	}
}
