package agent

import (
	"encoding/json"
	"slices"
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
	if want := []string{ToolSendMessage, ToolSubmitPlan, ToolReadFile, ToolRunMain}; !slices.Equal(reader.Names, want) || !reader.AskHost || reader.Workspace != "/ws" {
		t.Fatalf("reader's tools = %+v, want %v asking the host in /ws", reader, want)
	}
	if lead := WorkspaceTools("lead", "/ws", limits); !slices.Equal(lead.Names, []string{ToolSendMessage, ToolReviewPlan, ToolReadFile}) {
		t.Fatalf("lead's tools = %v, want no run_main", lead.Names)
	}
	bound := map[string]int{}
	for _, set := range []ToolSet{reader, WorkspaceTools("lead", "/ws", limits)} {
		for _, spec := range set.Specs() {
			var schema struct {
				Properties map[string]struct {
					MaxLength *int `json:"maxLength"`
				} `json:"properties"`
			}
			if err := json.Unmarshal(spec.InputSchema, &schema); err != nil {
				t.Fatalf("%s's schema is not JSON: %v", spec.Name, err)
			}
			for field, p := range schema.Properties {
				if p.MaxLength != nil {
					bound[spec.Name+"."+field] = *p.MaxLength
				}
			}
		}
	}
	for key, n := range map[string]int{"send_message.body": 2000, "submit_plan.payload": 900, "review_plan.feedback": 50} {
		if got, ok := bound[key]; !ok || got != n {
			t.Errorf("%s maxLength = %d (set: %v), want the team's %d", key, got, ok, n)
		}
	}
	// Without limits the lesson's schemas are unchanged.
	if got, want := DefaultTools("reader").Specs()[0].InputSchema, toolSpecs[ToolSendMessage].InputSchema; string(got) != string(want) {
		t.Errorf("default send_message schema = %s, want the lesson's %s", got, want)
	}
}
