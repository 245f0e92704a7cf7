package agent

import (
	"encoding/json"
	"log/slog"
	"strings"
	"testing"

	"mailroom/internal/core"
	"mailroom/internal/testkit"
)

// testKey is the credential the adapter tests configure. Tests search for
// it in every error text, log line and response.
const testKey = "sk-test-9f8e7d6c5b4a39281706-secret"

// debugLog returns a logger that keeps every line, at every level.
func debugLog() (*slog.Logger, *testkit.Output) {
	buf := &testkit.Output{}
	return slog.New(slog.NewTextHandler(buf, &slog.HandlerOptions{Level: slog.LevelDebug})), buf
}

// allTools is every tool the loop can offer, with the schemas it sends.
func allTools() []ToolSpec {
	return ToolSet{Names: []string{ToolReadFile, ToolSendMessage, ToolSubmitPlan, ToolReviewPlan, ToolRunMain}}.Specs()
}

// committedHistory is a member's history after one finished turn: a
// prompt, a tool call with the loop's id, its result, and a final answer.
func committedHistory() []core.Entry {
	return []core.Entry{
		core.UserText("Ask the reviewer for the expected value."),
		{Role: "assistant", Blocks: []core.Block{
			{Type: "text", Text: "I will write to the reviewer."},
			{Type: "tool_use", ID: "reader-t1-1", Name: ToolSendMessage, Input: json.RawMessage(`{"to":"reviewer","body":"What does main.py print?"}`)},
		}},
		{Role: "user", Blocks: []core.Block{{Type: "tool_result", ToolUseID: "reader-t1-1", Content: `{"msg_id":"m-1"}`}}},
		{Role: "assistant", Blocks: []core.Block{{Type: "text", Text: "Sent."}}},
	}
}

// thisTurn is the start of a new turn: its prompt and mail attached as a
// second user entry in a row, which the adapters must merge or keep
// valid.
func thisTurn() []core.Entry {
	return []core.Entry{
		core.UserText("Continue."),
		core.UserText("Mail from reviewer: 42"),
	}
}

func testRequest() Request {
	return Request{
		Member:   "reader",
		System:   "You are reader on team demo. Role: read the source.",
		Messages: append(committedHistory(), thisTurn()...),
		Tools:    allTools(),
	}
}

// noKey fails the test if the key is anywhere in texts.
func noKey(t *testing.T, where string, texts ...string) {
	t.Helper()
	for _, s := range texts {
		if strings.Contains(s, testKey) {
			t.Errorf("%s holds the key: %q", where, s)
		}
		if strings.Contains(s, testKey[len(testKey)-10:]) {
			t.Errorf("%s holds part of the key: %q", where, s)
		}
	}
}

// providerError asserts err is a *ProviderError.
func providerError(t *testing.T, err error) *ProviderError {
	t.Helper()
	pe, ok := err.(*ProviderError)
	if !ok {
		t.Fatalf("got error %T %v, want *ProviderError", err, err)
	}
	return pe
}

// toolNames lists the names of specs in order.
func toolNames(specs []ToolSpec) []string {
	out := make([]string, len(specs))
	for i, s := range specs {
		out[i] = s.Name
	}
	return out
}
