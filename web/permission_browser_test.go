package web_test

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/chromedp/chromedp"
)

// mainPy prints 42 and counts its runs in counter.txt beside itself.
const mainPy = `from pathlib import Path

with open(Path(__file__).with_name("counter.txt"), "a", encoding="utf-8") as counter:
    counter.write("x")
print(42)
`

// TestPageAllowsPermission: a teammate of a team with a workspace asks to
// run main.py under an approved plan; the page shows the pending
// permission with Allow and Deny, a click on Allow answers it, and the
// waiting turn goes on to run the program once and report its output.
func TestPageAllowsPermission(t *testing.T) {
	s := newAPIServer(t)
	doc := s.call("POST", "/teams", browserAdmin, map[string]any{
		"name": "bench", "workspace": true, "host_permission": "ask",
		"members": []map[string]string{{"name": "reader", "role": "runs the program"}},
	}, http.StatusCreated)
	tok := map[string]string{}
	for _, m := range doc["members"].([]any) {
		mm := m.(map[string]any)
		tok[mm["name"].(string)] = mm["token"].(string)
	}
	s.raw("PUT", "/teams/bench/workspace/files/main.py", "application/octet-stream", mainPy, http.StatusNoContent)
	s.call("POST", "/teams/bench/requests", tok["reader"], map[string]any{"kind": "plan", "target": "lead", "payload": "Run main.py once."}, http.StatusCreated)
	s.call("POST", "/teams/bench/requests/req-1/reply", tok["lead"], map[string]any{"approve": true}, http.StatusOK)

	ctx := newBrowser(t, 1280, 900)
	openPage(t, ctx, s)
	do(t, ctx, "see the team", chromedp.WaitVisible(css(`[data-member="reader"][data-status="idle"]`)))
	if !eval[bool](t, ctx, `document.getElementById('permissions').hidden`) {
		t.Fatal("the permission list shows before anything asked")
	}

	// The turn waits for the permission, so it runs in the background.
	turn := make(chan string, 1)
	go func() {
		body, _ := json.Marshal(map[string]any{"prompt": "Run the program.", "responses": []any{
			map[string]any{"tool": "run_main", "input": map[string]any{}},
			map[string]any{"text": "ran it"},
		}})
		turn <- s.rawBody("POST", "/teams/bench/members/reader/turns", "application/json", body)
	}()

	do(t, ctx, "see the pending permission with its buttons",
		chromedp.WaitVisible(css(`[data-permission-id="perm-1"][data-status="pending"] button.allow`)),
		chromedp.WaitVisible(css(`[data-permission-id="perm-1"] button.deny`)),
	)
	if got := textOf(t, ctx, `[data-permission-id="perm-1"]`); !strings.Contains(got, "reader") || !strings.Contains(got, "run_main") || !strings.Contains(got, "req-1") {
		t.Errorf("permission text = %q, want the member, the tool and the plan", got)
	}
	clickOf(t, ctx, "click Allow", `[data-permission-id="perm-1"] button.allow`)

	result := <-turn
	var got struct {
		Status string `json:"status"`
		Steps  []struct {
			Kind   string `json:"kind"`
			Tool   string `json:"tool"`
			Status string `json:"status"`
			Result string `json:"result"`
		} `json:"steps"`
	}
	if err := json.Unmarshal([]byte(result), &got); err != nil {
		t.Fatalf("turn answer %q: %v", result, err)
	}
	output, allowed := "", false
	for _, st := range got.Steps {
		if st.Kind == "tool_call" && st.Tool == "run_main" {
			output = st.Result
		}
		if st.Kind == "permission" && st.Status == "allowed" {
			allowed = true
		}
	}
	if got.Status != "answered" || !allowed || output != "42\n" {
		t.Fatalf("turn = %s, want answered with the permission allowed and run_main's output 42", result)
	}
	if counter := s.rawBody("GET", "/teams/bench/workspace/files/counter.txt", "", nil); counter != "x" {
		t.Fatalf("counter.txt = %q, want one x: the program ran once", counter)
	}
	do(t, ctx, "see the list empty again", chromedp.WaitNotPresent(css(`[data-permission-id="perm-1"]`)))
	if !eval[bool](t, ctx, `document.getElementById('permissions').hidden`) {
		t.Error("the permission list stays visible with nothing pending")
	}
}

// raw sends a body of any media type as the admin and fails the test
// unless the status is want.
func (s *apiServer) raw(method, path, contentType, body string, want int) {
	s.t.Helper()
	req, err := http.NewRequest(method, s.url+"/api/v1"+path, strings.NewReader(body))
	if err != nil {
		s.t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+browserAdmin)
	req.Header.Set("Content-Type", contentType)
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		s.t.Fatal(err)
	}
	defer res.Body.Close()
	b, _ := io.ReadAll(res.Body)
	if res.StatusCode != want {
		s.t.Fatalf("%s %s: status %d, want %d: %s", method, path, res.StatusCode, want, b)
	}
}

// rawBody sends a request as the admin and returns the answer's body; a
// failure is returned as its text, for the caller to report (it may run
// outside the test's goroutine).
func (s *apiServer) rawBody(method, path, contentType string, body []byte) string {
	req, err := http.NewRequest(method, s.url+"/api/v1"+path, bytes.NewReader(body))
	if err != nil {
		return err.Error()
	}
	req.Header.Set("Authorization", "Bearer "+browserAdmin)
	if contentType != "" {
		req.Header.Set("Content-Type", contentType)
	}
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		return err.Error()
	}
	defer res.Body.Close()
	b, _ := io.ReadAll(res.Body)
	return string(b)
}
