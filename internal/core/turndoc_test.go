package core_test

import (
	"context"
	"encoding/json"
	"math"
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

// TestUsageNeverWraps: token totals saturate instead of wrapping negative,
// and a model request whose usage is out of range (negative or beyond
// 2^53: a provider's bad answer) adds nothing to the turn, the member or
// the team, whoever recorded it.
func TestUsageNeverWraps(t *testing.T) {
	huge := core.Usage{InputTokens: math.MaxInt64 - 1, OutputTokens: math.MaxInt64}
	if got := huge.Add(core.Usage{InputTokens: 5, OutputTokens: 1 << 53}); got != (core.Usage{InputTokens: math.MaxInt64, OutputTokens: math.MaxInt64}) {
		t.Errorf("sum = %+v, want both counts held at MaxInt64", got)
	}
	if got := huge.Total(); got != math.MaxInt64 {
		t.Errorf("total = %d, want MaxInt64", got)
	}
	for _, u := range []core.Usage{{InputTokens: -1}, {OutputTokens: core.MaxUsageCount + 1}} {
		if u.Valid() {
			t.Errorf("%+v is valid, want not", u)
		}
	}

	f := newFixture(t, nil)
	_, err := f.svc.RunTurn(t.Context(), "demo", "reader", func(ctx context.Context, h []core.Entry) (core.TurnOutcome, error) {
		tr := core.TurnFrom(ctx)
		tr.RecordModelRequest(ctx, core.TurnStep{StopReason: "end_turn", Usage: core.Usage{InputTokens: 7, OutputTokens: 3}})
		tr.RecordModelRequest(ctx, core.TurnStep{StopReason: "end_turn", Usage: core.Usage{InputTokens: -1000, OutputTokens: 3}})
		tr.RecordModelRequest(ctx, core.TurnStep{StopReason: "end_turn", Usage: core.Usage{InputTokens: 1, OutputTokens: math.MaxInt64}})
		return answer("done")(ctx, h)
	})
	if err != nil {
		t.Fatal(err)
	}
	want := core.Usage{InputTokens: 7, OutputTokens: 3}
	if m := f.member("reader"); m.Usage != want {
		t.Errorf("reader's usage = %+v, want %+v", m.Usage, want)
	}
	docs, err := f.svc.Turns(t.Context(), "demo")
	if err != nil || len(docs) != 1 {
		t.Fatalf("turns = %+v, %v", docs, err)
	}
	if d := docs[0]; d.Usage != want || len(d.Steps) != 3 || d.Steps[1].Error != "invalid_usage" || d.Steps[2].Usage != (core.Usage{}) {
		t.Errorf("document usage %+v, steps %+v; want %+v and the two bad requests recorded with no usage", d.Usage, d.Steps, want)
	}
}
