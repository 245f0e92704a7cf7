package providertest

import (
	"strings"
	"testing"
)

const schema = `{"type":"object","properties":{"to":{"type":"string"}},"required":["to"]}`

// TestCheckAnthropic: the fake refuses what the Messages API refuses, so
// an adapter test that passes against it sends valid conversations.
func TestCheckAnthropic(t *testing.T) {
	use := `{"role":"assistant","content":[{"type":"tool_use","id":"a-1","name":"send","input":{"to":"x"}}]}`
	result := `{"role":"user","content":[{"type":"tool_result","tool_use_id":"a-1","content":"ok"}]}`
	for _, tc := range []struct {
		name, body, want string
	}{
		{"valid", `{"model":"m","max_tokens":5,"tools":[{"name":"send","input_schema":` + schema + `}],"messages":[{"role":"user","content":"hi"},` + use + `,` + result + `]}`, ""},
		{"no max_tokens", `{"model":"m","messages":[{"role":"user","content":"hi"}]}`, "max_tokens"},
		{"starts with assistant", `{"model":"m","max_tokens":5,"messages":[{"role":"assistant","content":"hi"}]}`, "alternate"},
		{"two user messages", `{"model":"m","max_tokens":5,"messages":[{"role":"user","content":"a"},{"role":"user","content":"b"}]}`, "alternate"},
		{"unanswered tool_use", `{"model":"m","max_tokens":5,"messages":[{"role":"user","content":"hi"},` + use + `,{"role":"user","content":"next"}]}`, "without tool_result"},
		{"result of another id", `{"model":"m","max_tokens":5,"messages":[{"role":"user","content":"hi"},` + use + `,{"role":"user","content":[{"type":"tool_result","tool_use_id":"a-2","content":"ok"}]}]}`, "unexpected tool_use_id"},
		{"result after text", `{"model":"m","max_tokens":5,"messages":[{"role":"user","content":"hi"},` + use + `,{"role":"user","content":[{"type":"text","text":"mail"},{"type":"tool_result","tool_use_id":"a-1","content":"ok"}]}]}`, "come first"},
		{"empty text", `{"model":"m","max_tokens":5,"messages":[{"role":"user","content":[{"type":"text","text":" "}]}]}`, "non-whitespace"},
		{"schema not an object", `{"model":"m","max_tokens":5,"tools":[{"name":"send","input_schema":{"type":"string"}}],"messages":[{"role":"user","content":"hi"}]}`, "type must be object"},
		{"schema that does not compile", `{"model":"m","max_tokens":5,"tools":[{"name":"send","input_schema":{"type":"object","properties":{"to":{"type":5}}}}],"messages":[{"role":"user","content":"hi"}]}`, "input_schema"},
	} {
		got := checkAnthropic(Request{Body: []byte(tc.body)})
		if (tc.want == "") != (got == "") || !strings.Contains(got, tc.want) {
			t.Errorf("%s: got %q, want a refusal containing %q", tc.name, got, tc.want)
		}
	}
}

// TestCheckOpenAI: the fake refuses what Chat Completions refuses.
func TestCheckOpenAI(t *testing.T) {
	call := `{"role":"assistant","content":null,"tool_calls":[{"id":"c1","type":"function","function":{"name":"send","arguments":"{\"to\":\"x\"}"}}]}`
	for _, tc := range []struct {
		name, body, want string
	}{
		{"valid", `{"model":"m","max_tokens":5,"tools":[{"type":"function","function":{"name":"send","parameters":` + schema + `}}],"messages":[{"role":"system","content":"s"},{"role":"user","content":"hi"},` + call + `,{"role":"tool","tool_call_id":"c1","content":"ok"}]}`, ""},
		{"no bound", `{"model":"m","messages":[{"role":"user","content":"hi"}]}`, "max_tokens"},
		{"unanswered call", `{"model":"m","max_tokens":5,"messages":[{"role":"user","content":"hi"},` + call + `,{"role":"user","content":"next"}]}`, "must be followed by tool messages"},
		{"tool without call", `{"model":"m","max_tokens":5,"messages":[{"role":"user","content":"hi"},{"role":"tool","tool_call_id":"c9","content":"ok"}]}`, "must be a response"},
		{"arguments not JSON", `{"model":"m","max_tokens":5,"messages":[{"role":"user","content":"hi"},{"role":"assistant","tool_calls":[{"id":"c1","type":"function","function":{"name":"send","arguments":"{"}}]},{"role":"tool","tool_call_id":"c1","content":"ok"}]}`, "not JSON"},
		{"late system", `{"model":"m","max_tokens":5,"messages":[{"role":"user","content":"hi"},{"role":"system","content":"s"}]}`, "comes first"},
	} {
		got := checkOpenAI(Request{Body: []byte(tc.body)})
		if (tc.want == "") != (got == "") || !strings.Contains(got, tc.want) {
			t.Errorf("%s: got %q, want a refusal containing %q", tc.name, got, tc.want)
		}
	}
}
