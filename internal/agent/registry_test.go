package agent

import (
	"encoding/json"
	"slices"
	"strings"
	"testing"

	"mailroom/internal/core"
)

// Every tool of the registry has a schema that is a closed JSON object
// stating its bounds in words, each door names a tool once, and the
// agent's default and workspace tool sets are the registry's offers.
func TestRegistryShape(t *testing.T) {
	tools := Registry(Env{Limits: core.DefaultLimits()})
	for _, door := range []Door{DoorAgent, DoorMCP} {
		seen := map[string]bool{}
		for _, tool := range tools {
			if tool.Doors&door == 0 {
				continue
			}
			if seen[tool.Name] {
				t.Errorf("door %d offers %s twice", door, tool.Name)
			}
			seen[tool.Name] = true
		}
	}
	for _, tool := range tools {
		var schema struct {
			Type       string         `json:"type"`
			Properties map[string]any `json:"properties"`
			Additional *bool          `json:"additionalProperties"`
		}
		if err := json.Unmarshal(tool.InputSchema, &schema); err != nil || schema.Type != "object" || schema.Properties == nil || schema.Additional == nil || *schema.Additional {
			t.Errorf("%s's schema = %s (%v), want a closed object", tool.Name, tool.InputSchema, err)
		}
		if strings.Contains(string(tool.InputSchema), "maxLength") || strings.Contains(string(tool.InputSchema), "minLength") {
			t.Errorf("%s's schema = %s, want bounds in words only, so that core refuses an over-long value", tool.Name, tool.InputSchema)
		}
		if tool.Description == "" || tool.Handler == nil {
			t.Errorf("%s has no description or no handler", tool.Name)
		}
	}
	for _, tc := range []struct {
		set  ToolSet
		want []string
	}{
		{DefaultTools("lead"), append(append([]string{ToolSendMessage, ToolReviewPlan}, taskToolNames...), ToolAckLetter, ToolArchiveInbox, ToolReadArchive)},
		{DefaultTools("reader"), append(append([]string{ToolSendMessage, ToolSubmitPlan}, taskToolNames...), ToolAckLetter, ToolArchiveInbox, ToolReadArchive)},
		{WorkspaceTools("lead", "/ws", core.DefaultLimits()), append(append([]string{ToolSendMessage, ToolReviewPlan, ToolReadFile}, taskToolNames...), ToolAckLetter, ToolArchiveInbox, ToolReadArchive)},
		{WorkspaceTools("reader", "/ws", core.DefaultLimits()), append(append([]string{ToolSendMessage, ToolSubmitPlan, ToolReadFile, ToolRunMain}, taskToolNames...), ToolAckLetter, ToolArchiveInbox, ToolReadArchive)},
	} {
		if !slices.Equal(tc.set.Names, tc.want) {
			t.Errorf("tool set = %v, want %v", tc.set.Names, tc.want)
		}
	}
}

// review_plan (the agent's name) and reply_request (the MCP name) are one
// act: lead's review_plan answers req-1, and the same answer sent again
// through reply_request is that reply, already sent.
func TestReviewPlanAndReplyRequestAreOneAct(t *testing.T) {
	svc := newService(t)
	openPlan(t, svc, "reader")
	lead := host{svc: svc, team: testTeam, member: core.LeadName, set: DefaultTools(core.LeadName)}
	input := json.RawMessage(`{"request_id":"req-1","approve":true,"feedback":"go"}`)
	first := lead.call(t.Context(), ToolReviewPlan, input)
	var res core.ReplyResult
	if first.isError || json.Unmarshal([]byte(first.content), &res) != nil || res.Status != "queued" {
		t.Fatalf("review_plan = %+v, want the reply queued", first)
	}
	replyRequest, ok := Lookup(Registry(Env{Svc: svc, Limits: core.DefaultLimits()}), DoorMCP, ToolReplyRequest)
	if !ok {
		t.Fatal("the registry has no reply_request for MCP")
	}
	again, err := replyRequest.Handler(core.AsMember(t.Context(), testTeam, core.LeadName), input)
	if err != nil {
		t.Fatalf("reply_request: %v", err)
	}
	if got := again.Value.(core.ReplyResult); got.Status != "already_sent" || got.RequestID != "req-1" {
		t.Fatalf("reply_request after review_plan = %+v, want req-1 already_sent", got)
	}
	// A different decision is the conflict both names refuse alike.
	_, err = replyRequest.Handler(core.AsMember(t.Context(), testTeam, core.LeadName), json.RawMessage(`{"request_id":"req-1","approve":false}`))
	wantCode(t, err, core.CodeReplyConflict)
	if got := lead.call(t.Context(), ToolReviewPlan, json.RawMessage(`{"request_id":"req-1","approve":false}`)); !got.isError || !strings.HasPrefix(got.content, "reply_conflict: ") {
		t.Fatalf("review_plan with another decision = %+v, want reply_conflict", got)
	}
}

// A handler acts only for the member principal in its context: without
// one, or as the admin, it is refused before anything is done.
func TestRegistryHandlersNeedAMember(t *testing.T) {
	svc := newService(t)
	send, _ := Lookup(Registry(Env{Svc: svc, Limits: core.DefaultLimits()}), DoorMCP, ToolSendMessage)
	input := json.RawMessage(`{"to":"lead","body":"hi"}`)
	_, err := send.Handler(t.Context(), input)
	wantCode(t, err, core.CodeUnauthorized)
	_, err = send.Handler(core.AsAdmin(t.Context()), input)
	wantCode(t, err, core.CodeUnauthorized)
	if got := inbox(t, svc, "lead"); len(got) != 0 {
		t.Fatalf("lead's inbox = %+v, want nothing sent", got)
	}
}

// taskToolNames are the board's and the reservations' tools and search_mail, offered to every
// member after the others.
var taskToolNames = []string{ToolCreateTask, ToolListTasks, ToolClaimTask, ToolCompleteTask, ToolReleaseTask,
	ToolReservePaths, ToolReleaseReservation, ToolListReservations, ToolCheckPaths, ToolSearchMail}
