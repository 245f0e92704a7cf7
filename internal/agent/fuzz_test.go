package agent

import (
	"encoding/json"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
)

// Fuzz targets for what a model provider sends back, untrusted input: the
// bytes of a 200 answer go through the official SDK's decoding and this
// package's mapping (Respond), which must never panic and must hand the
// loop only blocks it knows, with tool inputs it can hold. Their seed
// corpora under testdata/fuzz run as ordinary tests; CI fuzzes each for a
// bounded time.

// answerServer serves whatever body was set last, as a 200 JSON answer.
type answerServer struct {
	mu   sync.Mutex
	body []byte
	srv  *httptest.Server
}

func newAnswerServer(f *testing.F) *answerServer {
	a := &answerServer{}
	a.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		a.mu.Lock()
		body := a.body
		a.mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write(body)
	}))
	f.Cleanup(a.srv.Close)
	return a
}

func (a *answerServer) set(body []byte) {
	a.mu.Lock()
	a.body = body
	a.mu.Unlock()
}

// checkAnswer holds what the loop relies on in a mapped answer.
func checkAnswer(t *testing.T, resp Response) {
	t.Helper()
	for _, b := range resp.Content {
		switch b.Type {
		case "text":
		case "tool_use":
			if !json.Valid(b.Input) {
				t.Fatalf("tool_use block with an input that is not JSON: %q", b.Input)
			}
		default:
			t.Fatalf("block of type %q handed to the loop", b.Type)
		}
	}
	if _, err := json.Marshal(resp); err != nil {
		t.Fatalf("the answer cannot be kept in a history: %v", err)
	}
}

var fuzzRequest = Request{Member: "reader", System: "You are reader.", Tools: []ToolSpec{{Name: "send_message", Description: "Send.", InputSchema: json.RawMessage(`{"type":"object"}`)}}}

func FuzzAnthropicAnswer(f *testing.F) {
	f.Add([]byte(`{"id":"msg_1","type":"message","role":"assistant","model":"claude-test","content":[{"type":"text","text":"hello"}],"stop_reason":"end_turn","usage":{"input_tokens":10,"output_tokens":5}}`))
	f.Add([]byte(`{"id":"msg_2","type":"message","role":"assistant","content":[{"type":"tool_use","id":"tu_1","name":"send_message","input":{"to":"lead","body":"hi"}},{"type":"thinking","thinking":"x"}],"stop_reason":"tool_use","usage":{"input_tokens":1,"output_tokens":1}}`))
	f.Add([]byte(`{"content":[{"type":"tool_use","id":"tu_1","name":"x","input":"not an object"}],"usage":{"input_tokens":1.5,"output_tokens":"2"}}`))
	f.Add([]byte(`{"content":null}`))
	f.Add([]byte(`[]`))
	fuzzAdapter(f, func(url string, o ProviderOptions) Model {
		return NewAnthropic(ModelConfig{Provider: ProviderAnthropic, Name: "claude-test", MaxTokens: 100}, testKey, url, o)
	})
}

func FuzzOpenAIAnswer(f *testing.F) {
	f.Add([]byte(`{"id":"c1","object":"chat.completion","model":"gpt-test","choices":[{"index":0,"finish_reason":"stop","message":{"role":"assistant","content":"hello"}}],"usage":{"prompt_tokens":10,"completion_tokens":5,"total_tokens":15}}`))
	f.Add([]byte(`{"choices":[{"index":0,"finish_reason":"tool_calls","message":{"role":"assistant","content":null,"tool_calls":[{"id":"call_1","type":"function","function":{"name":"send_message","arguments":"{\"to\":\"lead\",\"body\":\"hi\"}"}},{"id":"call_2","type":"function","function":{"name":"x","arguments":"not json"}}]}}],"usage":{"prompt_tokens":1,"completion_tokens":1}}`))
	f.Add([]byte(`{"choices":[],"usage":{"prompt_tokens":"1"}}`))
	f.Add([]byte(`{"choices":null}`))
	f.Add([]byte(`{}`))
	fuzzAdapter(f, func(url string, o ProviderOptions) Model {
		return NewOpenAI(ModelConfig{Provider: ProviderOpenAI, Name: "gpt-test", MaxTokens: 100}, testKey, url, o)
	})
}

// fuzzAdapter fuzzes the adapter newModel builds: each input is the body
// of the provider's 200 answer, and what Respond makes of it must hold
// (checkAnswer); an error is a refused answer, which is fine.
func fuzzAdapter(f *testing.F, newModel func(url string, o ProviderOptions) Model) {
	srv := newAnswerServer(f)
	m := newModel(srv.srv.URL, ProviderOptions{MaxRetries: -1, HTTPClient: srv.srv.Client(), Log: slog.New(slog.DiscardHandler)})
	f.Fuzz(func(t *testing.T, body []byte) {
		srv.set(body)
		resp, err := m.Respond(t.Context(), fuzzRequest)
		if err == nil {
			checkAnswer(t, resp)
		}
	})
}
