package e2e

import (
	"io/fs"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"mailroom/internal/providertest"
)

// modelKey is the fake provider's credential; it must never reach the
// data directory.
const modelKey = "sk-e2e-model-turn-5c8e21"

// modelTurnDoc is the part of a turn document these tests read.
type modelTurnDoc struct {
	TurnID        string `json:"turn_id"`
	Status        string `json:"status"`
	Text          string `json:"text"`
	ModelRequests int    `json:"model_requests"`
	EndedAt       any    `json:"ended_at"`
}

// TestSIGTERMMidModelTurn stops the real binary while a turn waits for a
// real model (a fake Messages API that does not answer until the request
// is abandoned). The turn answers failed and interrupted, the server
// exits 0, and after a restart the turn document is kept as failed, the
// member is idle with its previous history and takes the next turn on the
// same model. The key is in no file of the data directory.
func TestSIGTERMMidModelTurn(t *testing.T) {
	fake := providertest.NewAnthropic(t, modelKey)
	env := []string{"ANTHROPIC_API_KEY=" + modelKey, "ANTHROPIC_BASE_URL=" + fake.URL()}
	dataDir := filepath.Join(t.TempDir(), "data")
	srv := startServer(t, dataDir, env...)
	c := newClient(srv.base)
	status, code, err := c.do(http.MethodPost, "/teams", adminToken, "", map[string]any{
		"name": "crew", "members": []map[string]string{{"name": "reader", "role": "reads"}},
		"model": map[string]any{"provider": "anthropic", "name": "claude-test"},
		// An interrupted turn counts toward the limit like every attempt.
		"limits": map[string]int{"turns": 5},
	}, nil)
	if err != nil || status != http.StatusCreated {
		t.Fatalf("create team: %d %s %v, want 201", status, code, err)
	}
	turnPath := "/teams/crew/members/reader/turns"
	usage := providertest.AnthropicUsage{InputTokens: 20, OutputTokens: 3}
	fake.Push(providertest.AnthropicText("first", usage), providertest.Reply{Stall: true})
	var first modelTurnDoc
	status, code, err = c.do(http.MethodPost, turnPath, adminToken, "", map[string]any{"prompt": "Say something."}, &first)
	if err != nil || status != http.StatusOK || first.Status != "answered" || first.Text != "first" {
		t.Fatalf("first turn: %d %s %+v %v, want 200 answered \"first\"", status, code, first, err)
	}
	before, _ := c.members(t, "crew")

	var cut modelTurnDoc
	slow := c.doAsync(turnPath, map[string]any{"prompt": "Think for a long time."}, &cut)
	// The model request has reached the provider: the turn is mid-request.
	deadline := time.Now().Add(startDeadline)
	for len(fake.Requests()) < 2 {
		if time.Now().After(deadline) {
			t.Fatalf("the second model request did not reach the fake within %v", startDeadline)
		}
		time.Sleep(10 * time.Millisecond) // polling interval, not synchronisation
	}
	srv.stop()

	r := <-slow
	if r.err != nil || r.status != http.StatusOK {
		t.Fatalf("turn cut by SIGTERM: %d %s %v, want a 200 answer", r.status, r.code, r.err)
	}
	if cut.Status != "failed" || cut.Text != "interrupted" || cut.TurnID == "" {
		t.Errorf("turn cut by SIGTERM = %+v, want failed, interrupted, with an id", cut)
	}
	if logs := srv.stderr.String(); strings.Contains(logs, "shutdown timed out") {
		t.Errorf("shutdown waited out its timeout:\n%s", logs)
	}
	c.close()

	srv = startServer(t, dataDir, env...)
	c = newClient(srv.base)
	defer c.close()
	after, _ := c.members(t, "crew")
	if m := after["reader"]; m.Status != "idle" || m.Active || m.HistoryLength != before["reader"].HistoryLength {
		t.Errorf("reader after restart = %+v, want idle with the previous %d history entries", m, before["reader"].HistoryLength)
	}
	var stored modelTurnDoc
	status, code, err = c.do(http.MethodGet, "/teams/crew/turns/"+cut.TurnID, adminToken, "", nil, &stored)
	if err != nil || status != http.StatusOK || stored.Status != "failed" || stored.EndedAt == nil {
		t.Errorf("the cut turn's document after restart: %d %s %v %+v, want 200 failed and ended", status, code, err, stored)
	}
	fake.Push(providertest.AnthropicText("back", usage))
	var next modelTurnDoc
	status, code, err = c.do(http.MethodPost, turnPath, adminToken, "", map[string]any{"prompt": "Again."}, &next)
	if err != nil || status != http.StatusOK || next.Status != "answered" || next.Text != "back" {
		t.Errorf("turn after restart: %d %s %+v %v, want 200 answered \"back\"", status, code, next, err)
	}
	srv.stop()

	err = filepath.WalkDir(dataDir, func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		data, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		if strings.Contains(string(data), modelKey) {
			t.Errorf("the key is in %s", path)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}
