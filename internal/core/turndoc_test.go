package core_test

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"mailroom/internal/core"
	"mailroom/internal/testkit"
)

// TestOldStateLoadsWithDefaults: a state file written before models,
// usage, workspaces, permissions and the new limits existed loads with
// their defaults, not with zeros (model_tokens 0 would mean no bound).
func TestOldStateLoadsWithDefaults(t *testing.T) {
	old := `{"name":"demo","created_at":"2025-01-01T00:00:00Z",
		"limits":{"inbox_messages":8,"inbox_bytes":32000,"body_chars":600,"requests":4,"payload_chars":180,"feedback_chars":120,"turns":2,"history_entries":80},
		"members":[{"name":"lead","role":"","status":"idle","turns":0,"history":[],"token_hash":"x"}],"requests":[]}`
	var st core.TeamState
	if err := json.Unmarshal([]byte(old), &st); err != nil {
		t.Fatalf("decode old state: %v", err)
	}
	if st.Limits != core.DefaultLimits() {
		t.Errorf("limits = %+v, want %+v", st.Limits, core.DefaultLimits())
	}
	if st.ModelOf() != core.ScriptedModel() || st.HostPermissionOf() != core.HostAsk || st.Workspace || st.Purpose != "" {
		t.Errorf("settings = model %+v, host %q, workspace %v, purpose %q; want scripted, ask, none", st.ModelOf(), st.HostPermissionOf(), st.Workspace, st.Purpose)
	}
	if st.Members[0].Usage != (core.Usage{}) {
		t.Errorf("usage = %+v, want zero", st.Members[0].Usage)
	}
	if st.Limits.ModelTokens != 1000000 || st.Limits.PermissionTimeoutS != 300 {
		t.Errorf("model_tokens %d permission_timeout_s %d, want 1000000 and 300", st.Limits.ModelTokens, st.Limits.PermissionTimeoutS)
	}
}

// TestTurnStepShapes: each step kind shows its own fields, zeros
// included, and a tool call's input and result are shortened.
func TestTurnStepShapes(t *testing.T) {
	req, _ := json.Marshal(core.TurnStep{Kind: core.StepModelRequest, N: 1, StopReason: "end_turn"})
	if string(req) != `{"duration_ms":0,"kind":"model_request","n":1,"retries":0,"stop_reason":"end_turn","usage":{"input_tokens":0,"output_tokens":0}}` {
		t.Errorf("model_request step = %s", req)
	}
	call, _ := json.Marshal(core.TurnStep{Kind: core.StepToolCall, ToolUseID: "reader-t1-1", Tool: "read_file", Input: `{}`})
	if string(call) != `{"input":"{}","is_error":false,"kind":"tool_call","result":"","tool":"read_file","tool_use_id":"reader-t1-1"}` {
		t.Errorf("tool_call step = %s", call)
	}
	long := strings.Repeat("é", core.MaxStepText+10)
	if got := core.ShortenStepText(long); len([]rune(got)) != core.MaxStepText || !strings.HasSuffix(got, "…") {
		t.Errorf("shortened to %d characters, want %d ending in an ellipsis", len([]rune(got)), core.MaxStepText)
	}
}

// TestTurnDocumentsBounded: a team keeps its last MaxTurnDocs documents,
// in memory and on disk, newest first.
func TestTurnDocumentsBounded(t *testing.T) {
	dir := t.TempDir()
	svc := testkit.OpenService(t, dir)
	ctx := core.AsAdmin(t.Context())
	if _, _, err := svc.CreateTeam(ctx, core.TeamSpec{Name: "demo"}); err != nil {
		t.Fatal(err)
	}
	answer := func(context.Context, []core.Entry) (core.TurnOutcome, error) {
		return core.TurnOutcome{Messages: []core.Entry{}, Status: core.TurnAnswered, Text: "ok"}, nil
	}
	for range core.MaxTurnDocs + 5 {
		if _, err := svc.RunTurn(ctx, "demo", core.LeadName, answer); err != nil {
			t.Fatal(err)
		}
	}
	docs, err := svc.Turns(ctx, "demo")
	if err != nil {
		t.Fatal(err)
	}
	if len(docs) != core.MaxTurnDocs || docs[0].TurnID != "lead-t105" || docs[len(docs)-1].TurnID != "lead-t6" {
		t.Errorf("kept %d documents from %s to %s, want %d from lead-t105 to lead-t6", len(docs), docs[0].TurnID, docs[len(docs)-1].TurnID, core.MaxTurnDocs)
	}
	files, err := os.ReadDir(filepath.Join(dir, "teams", "demo", "turns"))
	if err != nil || len(files) != core.MaxTurnDocs {
		t.Errorf("turn files = %d (%v), want %d", len(files), err, core.MaxTurnDocs)
	}
}
