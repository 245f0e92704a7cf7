package agent

import (
	"strings"
	"testing"

	"mailroom/internal/providertest"
)

// hostileAdapters are both adapters, each on its own fake, with the SDK's
// retries on as in production, and how each fake writes a plain answer.
func hostileAdapters(t *testing.T) []struct {
	name  string
	fake  *providertest.Server
	model Model
	text  func(string) providertest.Reply
} {
	anth := providertest.NewAnthropic(t, testKey)
	oai := providertest.NewOpenAI(t, testKey)
	return []struct {
		name  string
		fake  *providertest.Server
		model Model
		text  func(string) providertest.Reply
	}{
		{ProviderAnthropic, anth, newTestAnthropic(t, anth, ProviderOptions{}), func(s string) providertest.Reply {
			return providertest.AnthropicText(s, providertest.AnthropicUsage{InputTokens: 3, OutputTokens: 1})
		}},
		{ProviderOpenAI, oai, newTestOpenAI(t, oai, testKey, ProviderOptions{}), func(s string) providertest.Reply {
			return providertest.OpenAIText(s, providertest.OpenAIUsage{PromptTokens: 3, CompletionTokens: 1})
		}},
	}
}

// TestAdaptersRefuseBadUsage: a token count that is negative, not an
// integer or beyond 2^53 fails the request, naming the bad count, in
// either adapter and whichever of the two counts it is.
func TestAdaptersRefuseBadUsage(t *testing.T) {
	for _, a := range hostileAdapters(t) {
		for _, tc := range []struct {
			name          string
			input, output string
			field         string
		}{
			{"negative", "-5", "1", "input_tokens"},
			{"2^63-1", "3", "9223372036854775807", "output_tokens"},
			{"beyond 2^53", "9007199254740993", "1", "input_tokens"},
			{"float", "1.5", "1", "input_tokens"},
			{"exponent", "3", "1e3", "output_tokens"},
			{"beyond int64", "99999999999999999999999", "1", "input_tokens"},
			{"a string", `"7"`, "1", "input_tokens"},
		} {
			t.Run(a.name+"/"+tc.name, func(t *testing.T) {
				a.fake.Push(a.text("Done.").WithUsage(tc.input, tc.output))
				_, err := a.model.Respond(t.Context(), testRequest())
				pe := providerError(t, err)
				field := tc.field
				if a.name == ProviderOpenAI {
					field = map[string]string{"input_tokens": "prompt_tokens", "output_tokens": "completion_tokens"}[field]
				}
				if pe.Type != "invalid_response" || !strings.Contains(pe.Message, "usage."+field) {
					t.Errorf("got %q, want invalid_response naming usage.%s", pe.Error(), field)
				}
			})
		}
		t.Run(a.name+"/in range", func(t *testing.T) {
			a.fake.Push(a.text("Done.").WithUsage("9007199254740992", "0"))
			resp, err := a.model.Respond(t.Context(), testRequest())
			if err != nil {
				t.Fatalf("got %v, want 2^53 and 0 accepted", err)
			}
			if resp.Usage != (Usage{InputTokens: 1 << 53}) {
				t.Errorf("usage = %+v, want {2^53 0}", resp.Usage)
			}
		})
		t.Run(a.name+"/absent", func(t *testing.T) {
			a.fake.Push(a.text("Done.").WithUsage("null", "null"))
			if _, err := a.model.Respond(t.Context(), testRequest()); err != nil {
				t.Errorf("got %v, want an answer without counts taken as 0", err)
			}
		})
	}
}

// TestAdaptersCutHugeAnswers: an answer body beyond MaxAnswerBytes fails
// the request as an invalid response, and the SDK does not send the
// request again for it although its retries are on.
func TestAdaptersCutHugeAnswers(t *testing.T) {
	for _, a := range hostileAdapters(t) {
		t.Run(a.name, func(t *testing.T) {
			a.fake.Push(a.text("Done.").Padded(MaxAnswerBytes + 1024))
			_, err := a.model.Respond(t.Context(), testRequest())
			pe := providerError(t, err)
			if pe.Type != "invalid_response" || !strings.Contains(pe.Message, "larger than 8 MiB") {
				t.Errorf("got %q, want invalid_response saying the answer is larger than 8 MiB", pe.Error())
			}
			if n := len(a.fake.Requests()); n != 1 {
				t.Errorf("the provider got %d requests, want 1: an answer too large is not asked for again", n)
			}
			// Just under the bound is an answer like any other.
			a.fake.Push(a.text("Done.").Padded(MaxAnswerBytes - 4096))
			if _, err := a.model.Respond(t.Context(), testRequest()); err != nil {
				t.Errorf("an answer under the bound: %v", err)
			}
		})
	}
}
