package e2e

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"
)

// TestDeepToolInputSurvivesRestart: a turn whose scripted tool call
// carries an input nested as deep as the request parser accepts is
// answered, and after a restart the team loads whole: its members, their
// tokens and their inboxes, not a damaged team.
func TestDeepToolInputSurvivesRestart(t *testing.T) {
	dataDir := t.TempDir()
	s := startServer(t, dataDir)
	c := newClient(s.base)
	var created struct {
		Members []struct {
			Name  string `json:"name"`
			Token string `json:"token"`
		} `json:"members"`
	}
	if status, code, err := c.do(http.MethodPost, "/teams", adminToken, "", map[string]any{"name": "deep", "members": []map[string]string{{"name": "reader", "role": "reads"}}}, &created); err != nil || status != http.StatusCreated {
		t.Fatalf("create team: %d %s %v", status, code, err)
	}
	tokens := map[string]string{}
	for _, m := range created.Members {
		tokens[m.Name] = m.Token
	}

	// The body is {"prompt":…,"responses":[{"tool":…,"input":…}]}: three
	// levels around the input, of the 10,000 the parser accepts.
	const depth = 9_997
	input := strings.Repeat(`{"a":`, depth-1) + "{}" + strings.Repeat("}", depth-1)
	body := json.RawMessage(`{"prompt":"go","responses":[{"tool":"send_message","input":` + input + `},{"text":"done"}]}`)
	var turn struct {
		Status string `json:"status"`
	}
	if status, code, err := c.do(http.MethodPost, "/teams/deep/members/reader/turns", adminToken, "", body, &turn); err != nil || status != http.StatusOK || turn.Status != "answered" {
		t.Fatalf("turn: %d %s %v %+v; want 200 answered", status, code, err, turn)
	}
	c.close()
	s.kill()

	s = startServer(t, dataDir)
	c = newClient(s.base)
	defer c.close()
	var team struct {
		Damaged bool `json:"damaged"`
		Members []struct {
			Name          string `json:"name"`
			Status        string `json:"status"`
			HistoryLength int    `json:"history_length"`
		} `json:"members"`
	}
	if status, code, err := c.do(http.MethodGet, "/teams/deep", adminToken, "", nil, &team); err != nil || status != http.StatusOK {
		t.Fatalf("team after restart: %d %s %v", status, code, err)
	}
	if team.Damaged || len(team.Members) != 2 {
		t.Fatalf("team after restart = %+v; want 2 members, not damaged", team)
	}
	// prompt, tool_use (its refused input kept as a note), tool_result,
	// final answer.
	if r := team.Members[1]; r.Name != "reader" || r.Status != "idle" || r.HistoryLength != 4 {
		t.Fatalf("reader after restart = %+v; want idle with 4 entries", r)
	}
	for name, token := range tokens {
		if status, code, err := c.do(http.MethodGet, "/teams/deep/members/"+name+"/inbox", token, "", nil, nil); err != nil || status != http.StatusOK {
			t.Errorf("%s's inbox with its token after restart: %d %s %v; want 200", name, status, code, err)
		}
	}
}
