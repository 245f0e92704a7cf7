package agent

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"mailroom/internal/core"
	"mailroom/internal/testkit"
)

// TestWorstScriptedInputLoadsAfterRestart stores the worst tool inputs a
// turn request can carry (nested as deep as the request parser allows,
// about a megabyte, a made-up tool name) through the real turn path, then
// opens the service again over the same data directory: the team loads
// whole, with its members, and the refused inputs are kept as short notes.
func TestWorstScriptedInputLoadsAfterRestart(t *testing.T) {
	dir := t.TempDir()
	svc := testkit.OpenService(t, dir)
	if _, _, err := svc.CreateTeam(t.Context(), core.TeamSpec{Name: testTeam, Members: []core.MemberSpec{{Name: "reader"}, {Name: "reviewer"}}}); err != nil {
		t.Fatal(err)
	}
	// The turn request's body is {"responses":[{"input": …}]}: three
	// levels around the input, and the parser accepts 10,000 in all.
	const depth = 9_997
	deep := strings.Repeat(`{"a":`, depth-1) + "{}" + strings.Repeat("}", depth-1)
	deepArrays := `{"to":` + strings.Repeat("[", depth-1) + strings.Repeat("]", depth-1) + `}`
	bigBody, _ := json.Marshal(map[string]string{"to": "lead", "body": strings.Repeat("長", 300_000)})
	longName := strings.Repeat("x", 100_000)
	script := `[{"tool":"send_message","input":` + deep + `},` +
		`{"tool":"send_message","input":` + deepArrays + `},` +
		`{"tool":"send_message","input":` + string(bigBody) + `},` +
		`{"tool":"` + longName + `","input":` + deep + `}]`
	var steps []Step
	if err := json.Unmarshal([]byte(script), &steps); err != nil {
		t.Fatalf("decode the script: %v", err)
	}
	if err := ValidateSteps(steps); err != nil {
		t.Fatalf("the script is refused: %v; want it accepted, as the API does", err)
	}
	// The loop makes at most four requests; each asks for a tool, so the
	// turn ends with call_limit and the new history is kept.
	model := NewScripted(steps...)
	res, _, err := Run(t.Context(), svc, Spec{Team: testTeam, Member: "reader", Prompt: "go", Model: model, Tools: DefaultTools("reader")})
	if err != nil || res.Status != core.TurnCallLimit {
		t.Fatalf("turn = %+v, %v; want call_limit", res, err)
	}
	uses := toolUses(model.Requests()[3].Messages)
	if len(uses) != 3 {
		t.Fatalf("the last request shows %d tool uses, want 3", len(uses))
	}
	for _, u := range uses {
		if len(u.Input) > 200 || !strings.Contains(string(u.Input), "input not kept") {
			t.Errorf("refused input of %s kept as %d bytes %.80q, want a short note", u.ID, len(u.Input), u.Input)
		}
	}

	reopened := testkit.OpenService(t, dir)
	view, err := reopened.Team(t.Context(), testTeam)
	if err != nil || view.Damaged || len(view.Members) != 3 {
		t.Fatalf("after restart: %+v, %v; want the whole team, not damaged", view, err)
	}
	// 1 prompt + 4 × (tool_use, tool_result).
	if m := view.Members[1]; m.Name != "reader" || m.Status != core.StatusStopped || m.HistoryLength != 9 {
		t.Fatalf("reader after restart = %+v, want stopped (call_limit) with 9 entries", m)
	}
	if _, err := reopened.Inbox(t.Context(), testTeam, "reader"); err != nil {
		t.Fatalf("reader's inbox after restart: %v", err)
	}
}

// TestLongToolNameKeptShort: a made-up tool name is cut in history and in
// the tool result that names it.
func TestLongToolNameKeptShort(t *testing.T) {
	svc := newService(t)
	name := strings.Repeat("é", 1000)
	model := NewScripted(Step{Tool: name}, TextStep("done"))
	if _, _, err := Run(t.Context(), svc, Spec{Team: testTeam, Member: "reader", Model: model, Tools: DefaultTools("reader")}); err != nil {
		t.Fatal(err)
	}
	h := model.Requests()[1].Messages
	use, result := h[0].Blocks[0], h[1].Blocks[0]
	if len(use.Name) > maxToolName || !strings.HasPrefix(name, use.Name) {
		t.Fatalf("tool name kept as %d bytes, want at most %d, a prefix of the name", len(use.Name), maxToolName)
	}
	// Short: the kept name and the list of the tools offered, which grows
	// with the registry, but never the whole name.
	offered := len(strings.Join(DefaultTools("reader").Names, ", "))
	if len(result.Content) > 200+offered || !result.IsError {
		t.Fatalf("result = %d bytes, is_error %t; want a short error (at most %d bytes)", len(result.Content), result.IsError, 200+offered)
	}
}

// cancelModel answers with next and cancels the turn's context as the
// answer arrives, as a server that starts to stop at that moment would.
type cancelModel struct {
	next   Model
	cancel context.CancelFunc
}

func (c cancelModel) Respond(ctx context.Context, req Request) (Response, error) {
	resp, err := c.next.Respond(ctx, req)
	c.cancel()
	return resp, err
}

// TestInterruptStopsAtNextBoundary: once a turn's context ends, the loop
// runs no further tool call and makes no further model request; the turn
// ends failed ("interrupted") with the old history and the member idle.
func TestInterruptStopsAtNextBoundary(t *testing.T) {
	t.Run("BeforeToolCall", func(t *testing.T) {
		svc := newService(t)
		ctx, cancel := context.WithCancel(t.Context())
		model := cancelModel{next: NewScripted(CallStep(ToolSendMessage, map[string]string{"to": "lead", "body": "never sent"}), TextStep("done")), cancel: cancel}
		res, stats, err := Run(ctx, svc, Spec{Team: testTeam, Member: "reader", Model: model, Tools: DefaultTools("reader")})
		if err != nil || res.Status != core.TurnFailed || res.Text != core.InterruptedText {
			t.Fatalf("turn = %+v, %v; want failed, %q", res, err, core.InterruptedText)
		}
		if len(stats.Calls) != 0 || len(inbox(t, svc, "lead")) != 0 {
			t.Fatalf("%d tool calls ran, lead has %d letters; want none", len(stats.Calls), len(inbox(t, svc, "lead")))
		}
		if m := member(t, svc, "reader"); m.Status != core.StatusIdle || m.Active || m.HistoryLength != 0 {
			t.Fatalf("reader = %+v, want idle with the old empty history", m)
		}
	})
	t.Run("BeforeModelRequest", func(t *testing.T) {
		svc := newService(t)
		ctx, cancel := context.WithCancel(t.Context())
		// The letter's event arrives while the tool call runs: the turn
		// is cut between that call and the next request.
		testkit.Hub(svc).SetObserver(func(e core.Event) {
			if e.Type == "message" {
				cancel()
			}
		})
		model := NewScripted(CallStep(ToolSendMessage, map[string]string{"to": "lead", "body": "sent"}), TextStep("never asked"))
		res, stats, err := Run(ctx, svc, Spec{Team: testTeam, Member: "reader", Model: model, Tools: DefaultTools("reader")})
		if err != nil || res.Status != core.TurnFailed || res.Text != core.InterruptedText {
			t.Fatalf("turn = %+v, %v; want failed, %q", res, err, core.InterruptedText)
		}
		if stats.ModelRequests != 1 || len(model.Requests()) != 1 {
			t.Fatalf("%d model requests, want 1", stats.ModelRequests)
		}
		if m := member(t, svc, "reader"); m.Status != core.StatusIdle || m.HistoryLength != 0 || m.Turns != 1 {
			t.Fatalf("reader = %+v, want idle, the old empty history, 1 turn", m)
		}
		// The member can take its next turn.
		if res, _, err := Run(t.Context(), svc, Spec{Team: testTeam, Member: "reader", Model: NewScripted(TextStep("ok")), Tools: DefaultTools("reader")}); err != nil || res.Status != core.TurnAnswered {
			t.Fatalf("next turn = %+v, %v", res, err)
		}
	})
}
