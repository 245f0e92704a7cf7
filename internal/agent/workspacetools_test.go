package agent

import (
	"encoding/json"
	"slices"
	"strings"
	"testing"

	"mailroom/internal/core"
)

// A workspace team's tools: read_file for everyone, run_main for
// teammates only, the host gate asked of the team, and schemas stating
// the team's own limits rather than the lesson's.
func TestWorkspaceTools(t *testing.T) {
	limits := core.DefaultLimits()
	limits.BodyChars, limits.PayloadChars, limits.FeedbackChars = 2000, 900, 50
	reader := WorkspaceTools("reader", "/ws", limits)
	if want := append(append([]string{ToolSendMessage, ToolSubmitPlan, ToolReadFile, ToolRunMain}, taskToolNames...), ToolAckLetter); !slices.Equal(reader.Names, want) || !reader.AskHost || reader.Workspace != "/ws" {
		t.Fatalf("reader's tools = %+v, want %v asking the host in /ws", reader, want)
	}
	if lead := WorkspaceTools("lead", "/ws", limits); !slices.Equal(lead.Names, append(append([]string{ToolSendMessage, ToolReviewPlan, ToolReadFile}, taskToolNames...), ToolAckLetter)) {
		t.Fatalf("lead's tools = %v, want no run_main", lead.Names)
	}
	// The bounds are stated in words, never as maxLength: an over-long
	// value must reach core and be refused with body_length.
	schemas := map[string]string{}
	for _, set := range []ToolSet{reader, WorkspaceTools("lead", "/ws", limits)} {
		for _, spec := range set.Specs() {
			if !json.Valid(spec.InputSchema) {
				t.Fatalf("%s's schema is not JSON: %s", spec.Name, spec.InputSchema)
			}
			if strings.Contains(string(spec.InputSchema), "maxLength") {
				t.Errorf("%s's schema = %s, want no maxLength", spec.Name, spec.InputSchema)
			}
			schemas[spec.Name] = spec.Description + " " + string(spec.InputSchema)
		}
	}
	for name, bound := range map[string]string{ToolSendMessage: "1 to 2000 characters", ToolSubmitPlan: "1 to 900 characters", ToolReviewPlan: "at most 50 characters"} {
		if !strings.Contains(schemas[name], bound) {
			t.Errorf("%s = %s, want the team's bound %q", name, schemas[name], bound)
		}
	}
	// Without limits the schemas state the lesson's.
	if got := DefaultTools("reader").Specs()[0]; got.Name != ToolSendMessage || !strings.Contains(string(got.InputSchema), "1 to 600 characters") {
		t.Errorf("default send_message = %+v, want the lesson's 600 characters", got)
	}
}
