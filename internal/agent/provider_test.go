package agent

import (
	"encoding/json"
	"strings"
	"testing"

	"mailroom/internal/core"
	"mailroom/internal/providertest"
)

func mapEnv(env map[string]string) func(string) (string, bool) {
	return func(name string) (string, bool) {
		v, ok := env[name]
		return v, ok
	}
}

func TestParseModel(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want ModelConfig
		code core.Code
	}{
		{"anthropic:claude-sonnet-4-5", ModelConfig{Provider: ProviderAnthropic, Name: "claude-sonnet-4-5"}, ""},
		{"openai:gpt-4.1-mini", ModelConfig{Provider: ProviderOpenAI, Name: "gpt-4.1-mini"}, ""},
		{"openai:llama3.2:3b", ModelConfig{Provider: ProviderOpenAI, Name: "llama3.2:3b"}, ""},
		{"scripted", ModelConfig{Provider: ProviderScripted}, ""},
		{"anthropic", ModelConfig{}, core.CodeValidation},
		{"scripted:x", ModelConfig{}, core.CodeValidation},
		{"gemini:pro", ModelConfig{}, core.CodeValidation},
		{"openai:two words", ModelConfig{}, core.CodeValidation},
	} {
		got, err := ParseModel(tc.in)
		if tc.code != "" {
			if core.ErrorCode(err) != tc.code {
				t.Errorf("ParseModel(%q): got error %v, want %s", tc.in, err, tc.code)
			}
			continue
		}
		if err != nil || got != tc.want {
			t.Errorf("ParseModel(%q): got %+v, %v; want %+v", tc.in, got, err, tc.want)
		}
		if got.String() != tc.in {
			t.Errorf("String of %q: got %q", tc.in, got.String())
		}
	}
	for in, want := range map[string]string{
		"gpt-4":             `"gpt-4" names no provider; a model is PROVIDER:NAME, as in openai:gpt-4.`,
		"claude-sonnet-4-5": `"claude-sonnet-4-5" names no provider; a model is PROVIDER:NAME, as in anthropic:claude-sonnet-4-5.`,
		"llama3.2":          `"llama3.2" names no provider; a model is PROVIDER:NAME, as in openai:llama3.2.`,
	} {
		_, err := ParseModel(in)
		if core.ErrorCode(err) != core.CodeValidation || core.ErrorMessage(err) != want {
			t.Errorf("ParseModel(%q): got %v, want validation_failed %q", in, err, want)
		}
	}
	if err := (ModelConfig{Provider: ProviderAnthropic, Name: "m", MaxTokens: MaxMaxTokens + 1}).Validate(); core.ErrorCode(err) != core.CodeValidation {
		t.Errorf("max_tokens beyond the bound: got %v, want validation_failed", err)
	}
}

// TestNewModelWithoutCredentials: a provider without a key on this server
// and the scripted model are model_unavailable; the message names the
// variable to set and holds no value.
func TestNewModelWithoutCredentials(t *testing.T) {
	for _, tc := range []struct {
		cfg  ModelConfig
		env  map[string]string
		want string
	}{
		{ModelConfig{Provider: ProviderAnthropic, Name: "claude"}, map[string]string{EnvOpenAIKey: testKey}, EnvAnthropicKey},
		{ModelConfig{Provider: ProviderAnthropic, Name: "claude"}, map[string]string{EnvAnthropicKey: "  ", EnvAnthropicBase: "http://127.0.0.1:1"}, EnvAnthropicKey},
		{ModelConfig{Provider: ProviderOpenAI, Name: "gpt"}, map[string]string{EnvAnthropicKey: testKey}, EnvOpenAIKey},
		{ModelConfig{Provider: ProviderScripted}, map[string]string{EnvAnthropicKey: testKey, EnvOpenAIKey: testKey}, "responses"},
	} {
		_, err := NewModel(tc.cfg, mapEnv(tc.env), ProviderOptions{})
		if core.ErrorCode(err) != core.CodeModelUnavailable || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: got %v, want model_unavailable naming %s", tc.cfg, err, tc.want)
		}
		if err != nil {
			noKey(t, "the refusal", err.Error())
		}
	}
	if _, err := NewModel(ModelConfig{Provider: "other", Name: "x"}, mapEnv(nil), ProviderOptions{}); core.ErrorCode(err) != core.CodeValidation {
		t.Errorf("unknown provider: got %v, want validation_failed", err)
	}
}

// TestNewModelReadsTheEnvironment: the key and base URL come from the
// environment, and the adapter says which model it asks.
func TestNewModelReadsTheEnvironment(t *testing.T) {
	fake := providertest.NewAnthropic(t, testKey)
	fake.Push(providertest.AnthropicText("hello", providertest.AnthropicUsage{InputTokens: 2, OutputTokens: 1}))
	cfg := ModelConfig{Provider: ProviderAnthropic, Name: "claude-test"}
	m, err := NewModel(cfg, mapEnv(map[string]string{EnvAnthropicKey: testKey, EnvAnthropicBase: fake.URL()}), ProviderOptions{HTTPClient: fake.Client()})
	if err != nil {
		t.Fatal(err)
	}
	if d, ok := m.(Described); !ok || d.ModelConfig() != cfg {
		t.Errorf("got %T, want a Described adapter for %+v", m, cfg)
	}
	resp, err := m.Respond(t.Context(), testRequest())
	if err != nil {
		t.Fatal(err)
	}
	if len(resp.Content) != 1 || resp.Content[0].Text != "hello" {
		t.Errorf("got %+v, want the fake's text", resp.Content)
	}
	if body := decodeAnthropic(t, fake.Requests()[0]); body.MaxTokens != DefaultMaxTokens {
		t.Errorf("max_tokens: got %d, want the default %d", body.MaxTokens, DefaultMaxTokens)
	}
}

// TestTurnsThroughEachAdapter runs two turns of the real loop on each
// adapter against its fake: the first calls send_message with input that
// is not JSON (refused, the model is told) and then with good input; the
// second turn's request must carry the first turn's committed history as
// its prefix, with every tool call answered under the loop's own ids.
func TestTurnsThroughEachAdapter(t *testing.T) {
	for _, provider := range []string{ProviderAnthropic, ProviderOpenAI} {
		t.Run(provider, func(t *testing.T) {
			svc := newService(t)
			var fake *providertest.Server
			var m Model
			call := func(id, args string) providertest.Reply {
				if provider == ProviderOpenAI {
					return providertest.OpenAIRawCall(id, ToolSendMessage, args, providertest.OpenAIUsage{PromptTokens: 10, CompletionTokens: 5})
				}
				return providertest.AnthropicReply("tool_use", providertest.AnthropicUsage{InputTokens: 10, OutputTokens: 5},
					core.Block{Type: "tool_use", ID: id, Name: ToolSendMessage, Input: json.RawMessage(args)})
			}
			text := func(s string) providertest.Reply {
				if provider == ProviderOpenAI {
					return providertest.OpenAIText(s, providertest.OpenAIUsage{PromptTokens: 10, CompletionTokens: 5})
				}
				return providertest.AnthropicText(s, providertest.AnthropicUsage{InputTokens: 10, OutputTokens: 5})
			}
			if provider == ProviderOpenAI {
				fake = providertest.NewOpenAI(t, testKey)
				m = newTestOpenAI(t, fake, testKey, ProviderOptions{})
			} else {
				fake = providertest.NewAnthropic(t, testKey)
				m = newTestAnthropic(t, fake, ProviderOptions{})
			}
			badInput := `{"to": "lead", "body": `
			if provider == ProviderAnthropic {
				// The Messages API always sends JSON; a wrong type stands in.
				badInput = `{"to": 7}`
			}
			bad := call("x1", badInput)
			fake.Push(bad, call("x2", `{"to":"lead","body":"The program prints 42."}`), text("Told lead."), text("Nothing new."))

			res, _, err := Run(t.Context(), svc, Spec{Team: testTeam, Member: "reader", Prompt: "Tell lead the value.", Model: m, Tools: DefaultTools("reader")})
			if err != nil || res.Status != core.TurnAnswered || res.Text != "Told lead." {
				t.Fatalf("first turn: got %+v, %v; want answered", res, err)
			}
			res, _, err = Run(t.Context(), svc, Spec{Team: testTeam, Member: "reader", Prompt: "Anything else?", Model: m, Tools: DefaultTools("reader")})
			if err != nil || res.Status != core.TurnAnswered {
				t.Fatalf("second turn: got %+v, %v; want answered", res, err)
			}
			reqs := fake.Requests()
			if len(reqs) != 4 || fake.Pending() != 0 || len(fake.Problems()) != 0 {
				t.Fatalf("got %d requests, %d replies left, problems %v; want 4, 0, none", len(reqs), fake.Pending(), fake.Problems())
			}
			// Request n+1 begins with everything request n sent, except in
			// the first turn where the answer is appended; the fourth
			// request begins with the third's messages.
			prefix, full := conversation(t, provider, reqs[2]), conversation(t, provider, reqs[3])
			if len(full) <= len(prefix) {
				t.Fatalf("the second turn sent %d messages, the first %d", len(full), len(prefix))
			}
			for i := range prefix {
				if !sameJSON(prefix[i], full[i]) {
					t.Errorf("message %d of the second turn differs from the first turn's: got %s, want %s", i, full[i], prefix[i])
				}
			}
			joined := string(reqs[3].Body)
			for _, id := range []string{"reader-t1-1", "reader-t1-2"} {
				if strings.Count(joined, `"`+id+`"`) != 2 {
					t.Errorf("id %s: got %d mentions, want a call and its result", id, strings.Count(joined, `"`+id+`"`))
				}
			}
			if strings.Contains(joined, `"x1"`) || strings.Contains(joined, `"x2"`) {
				t.Errorf("the model's own ids reached the history: %s", joined)
			}
			if !strings.Contains(joined, "The JSON is not an object") {
				t.Errorf("the refused call's error is not in the history: %s", joined)
			}
			if inbox := lettersTo(t, svc, "lead"); inbox != 1 {
				t.Errorf("lead got %d letters, want 1", inbox)
			}
		})
	}
}

// conversation returns the messages of a request, each as JSON.
func conversation(t *testing.T, provider string, r providertest.Request) []json.RawMessage {
	t.Helper()
	var body struct {
		Messages []json.RawMessage `json:"messages"`
	}
	if err := json.Unmarshal(r.Body, &body); err != nil {
		t.Fatal(err)
	}
	return body.Messages
}

// lettersTo counts the letters in member's inbox.
func lettersTo(t *testing.T, svc *core.Service, member string) int {
	t.Helper()
	msgs, err := svc.Inbox(t.Context(), testTeam, member)
	if err != nil {
		t.Fatal(err)
	}
	return len(msgs)
}
