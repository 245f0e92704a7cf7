package e2e

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"
)

// The real Codex CLI, set up with `mailroom setup codex` as the README
// says and run headless (`codex exec`) against a fake OpenAI Responses
// API server: its own config directory (CODEX_HOME) is a temporary one,
// so nothing of the user's is read or written.

// codexPackage is the pinned Codex CLI.
const codexPackage = "@openai/codex@0.169.0"

// codexKeyEnv names the variable Codex reads the fake provider's key from.
const codexKeyEnv = "MAILROOM_E2E_OPENAI_KEY"

// newFakeResponses serves the Responses API (POST /v1/responses, streamed
// as Codex asks) from a script set with steps. Codex offers an MCP
// server's tools as one namespace ("mcp__mailroom") of functions and
// calls one by naming both, so a step's tool "mcp__mailroom__read_inbox"
// is answered as the function read_inbox of that namespace.
func newFakeResponses(t *testing.T) *fakeModel {
	f := &fakeModel{mainMark: `"name":"exec_command"`}
	var mu sync.Mutex
	n := 0
	f.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		data, _ := io.ReadAll(r.Body)
		if r.Method != http.MethodPost || r.URL.Path != "/v1/responses" {
			f.failf("Codex asked %s %s, which the fake does not serve", r.Method, r.URL.Path)
			http.NotFound(w, r)
			return
		}
		var req struct {
			Model  string `json:"model"`
			Stream bool   `json:"stream"`
		}
		if err := json.Unmarshal(data, &req); err != nil || !req.Stream {
			f.failf("a request that is no streamed Responses request (%v): %.200s", err, data)
			http.Error(w, "want stream: true", http.StatusBadRequest)
			return
		}
		step, _ := f.next(string(data))
		mu.Lock()
		n++
		id := n
		mu.Unlock()
		w.Header().Set("Content-Type", "text/event-stream")
		rs := &responseStream{w: w}
		resp := map[string]any{"id": fmt.Sprintf("resp_%d", id), "object": "response", "created_at": time.Now().Unix(),
			"status": "in_progress", "model": req.Model, "output": []any{}}
		rs.event("response.created", map[string]any{"response": resp})
		rs.event("response.in_progress", map[string]any{"response": resp})
		var item map[string]any
		if step.tool != "" {
			args, _ := json.Marshal(step.args) // maps of plain values always encode
			if step.args == nil {
				args = []byte("{}")
			}
			itemID := fmt.Sprintf("fc_%d", id)
			item = map[string]any{"type": "function_call", "id": itemID, "call_id": fmt.Sprintf("call_%d", id), "status": "in_progress", "arguments": ""}
			if ns, name, ok := cutMCPTool(step.tool); ok {
				item["namespace"], item["name"] = ns, name
			} else {
				item["name"] = step.tool
			}
			rs.event("response.output_item.added", map[string]any{"output_index": 0, "item": item})
			rs.event("response.function_call_arguments.delta", map[string]any{"item_id": itemID, "output_index": 0, "delta": string(args)})
			rs.event("response.function_call_arguments.done", map[string]any{"item_id": itemID, "output_index": 0, "arguments": string(args)})
			item = cloneWith(item, "arguments", string(args), "status", "completed")
		} else {
			itemID := fmt.Sprintf("msg_%d", id)
			item = map[string]any{"type": "message", "id": itemID, "role": "assistant", "status": "in_progress", "content": []any{}}
			rs.event("response.output_item.added", map[string]any{"output_index": 0, "item": item})
			part := map[string]any{"type": "output_text", "text": "", "annotations": []any{}}
			rs.event("response.content_part.added", map[string]any{"item_id": itemID, "output_index": 0, "content_index": 0, "part": part})
			rs.event("response.output_text.delta", map[string]any{"item_id": itemID, "output_index": 0, "content_index": 0, "delta": step.text})
			rs.event("response.output_text.done", map[string]any{"item_id": itemID, "output_index": 0, "content_index": 0, "text": step.text})
			part = cloneWith(part, "text", step.text)
			rs.event("response.content_part.done", map[string]any{"item_id": itemID, "output_index": 0, "content_index": 0, "part": part})
			item = cloneWith(item, "status", "completed", "content", []any{part})
		}
		rs.event("response.output_item.done", map[string]any{"output_index": 0, "item": item})
		rs.event("response.completed", map[string]any{"response": cloneWith(resp, "status", "completed", "output", []any{item},
			"usage", map[string]any{"input_tokens": 100, "input_tokens_details": map[string]int{"cached_tokens": 0},
				"output_tokens": 10, "output_tokens_details": map[string]int{"reasoning_tokens": 0}, "total_tokens": 110})})
	}))
	t.Cleanup(f.srv.Close)
	return f
}

// responseStream writes a Responses API stream: each event names its
// type twice (the SSE event and the data's "type") and carries its
// sequence number, as OpenAI's do.
type responseStream struct {
	w   io.Writer
	seq int
}

func (s *responseStream) event(typ string, data map[string]any) {
	data["type"] = typ
	data["sequence_number"] = s.seq
	s.seq++
	sse(s.w, typ, data)
}

// cloneWith is m with the given key, value pairs set.
func cloneWith(m map[string]any, kv ...any) map[string]any {
	c := make(map[string]any, len(m)+len(kv)/2)
	for k, v := range m {
		c[k] = v
	}
	for i := 0; i+1 < len(kv); i += 2 {
		c[kv[i].(string)] = kv[i+1]
	}
	return c
}

// cutMCPTool splits "mcp__server__tool" into Codex's namespace
// ("mcp__server") and the function's name.
func cutMCPTool(tool string) (namespace, name string, ok bool) {
	rest, ok := strings.CutPrefix(tool, "mcp__")
	if !ok {
		return "", "", false
	}
	server, name, ok := strings.Cut(rest, "__")
	if !ok {
		return "", "", false
	}
	return "mcp__" + server, name, true
}

// codexHome makes a Codex config directory whose config.toml points
// Codex at the fake model (a provider of the Responses wire API, its key
// in codexKeyEnv) before `mailroom setup codex` merges into it. Codex's
// own traffic (update check, plugin catalogue, analytics) is off, so a
// session asks nothing of the network but the fake and Mailroom.
func codexHome(t *testing.T, model *fakeModel) string {
	t.Helper()
	home := t.TempDir()
	cfg := fmt.Sprintf(`model = "gpt-fake"
model_provider = "fake"
check_for_update_on_startup = false

[model_providers.fake]
name = "fake"
base_url = %q
env_key = %q
wire_api = "responses"

[features]
plugins = false

[analytics]
enabled = false
`, model.srv.URL+"/v1", codexKeyEnv)
	if err := os.WriteFile(filepath.Join(home, "config.toml"), []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	return home
}

// codexEnv is the environment of a headless Codex session against the
// fake model, as the member whose token is given, with mailroom on the
// PATH: what the README tells a user to set, and Codex's own directory.
func codexEnv(t *testing.T, home, base, token string) []string {
	return []string{
		"PATH=" + pathWithMailroom(t),
		"HOME=" + t.TempDir(),
		"CODEX_HOME=" + home,
		codexKeyEnv + "=sk-fake-key",
		"MAILROOM_URL=" + base,
		"MAILROOM_TOKEN=" + token,
	}
}

// codexHookTimes reads, from the progress lines `codex exec` writes on
// standard error ("hook: Stop", then "hook: Stop Completed" or Blocked
// or Failed), how long each hook run took, by event.
func codexHookTimes(lines []stampedLine) map[string][]time.Duration {
	times := map[string][]time.Duration{}
	started := map[string]time.Duration{}
	for _, l := range lines {
		rest, ok := strings.CutPrefix(strings.TrimSpace(l.text), "hook: ")
		if !ok {
			continue
		}
		event, outcome, ended := strings.Cut(rest, " ")
		if !ended {
			started[event] = l.at
			continue
		}
		if at, ok := started[event]; ok && outcome != "" {
			times[event] = append(times[event], l.at-at)
			delete(started, event)
		}
	}
	return times
}

// formatHookTimes is hook times by event (codexHookTimes,
// claudeHookTimes) in one line, events in order.
func formatHookTimes(times map[string][]time.Duration) string {
	var events []string
	for e := range times {
		events = append(events, e)
	}
	slices.Sort(events)
	var b strings.Builder
	for _, e := range events {
		for _, d := range times[e] {
			fmt.Fprintf(&b, " %s=%.1fms", e, float64(d.Microseconds())/1000)
		}
	}
	return strings.TrimSpace(b.String())
}

// gitProject makes dir a git repository: `codex exec` runs only in one
// (or with --skip-git-repo-check), whatever trust the project has.
func gitProject(t *testing.T, dir string) {
	t.Helper()
	if _, err := exec.LookPath("git"); err != nil {
		t.Skip("git is not on the PATH, and codex exec runs only in a git repository; skipped")
	}
	if out, err := exec.Command("git", "init", "-q", dir).CombinedOutput(); err != nil {
		t.Fatalf("git init %s: %v\n%s", dir, err, out)
	}
}

// TestCodexSession: Codex set up by `mailroom setup codex` lists and
// calls Mailroom's tools (read_inbox returns the waiting letter,
// send_message's letter reaches lead), sees the waiting letter in its
// first request (SessionStart), a letter sent mid-work in the request
// after the tool call (PostToolUse), and one sent as it would stop in the
// request after (Stop blocks with it); then it stops.
func TestCodexSession(t *testing.T) {
	codex := npmCLI(t, codexPackage, "codex")
	t.Parallel()
	s := startServer(t, filepath.Join(t.TempDir(), "data"))
	c := newClient(s.base)
	defer c.close()
	tok := createTeam(t, c, "cx", "reader")
	first := sendAs(t, c, "cx", tok["lead"], "reader", "first letter: say pong to lead")
	var mid, last string
	model := newFakeResponses(t)
	model.steps(
		func(string) modelStep {
			mid = model.send(c, "cx", tok["lead"], "reader", "mid-work letter")
			return modelStep{tool: "mcp__mailroom__read_inbox", args: map[string]any{}}
		},
		func(string) modelStep {
			return modelStep{tool: "mcp__mailroom__send_message", args: map[string]any{"to": "lead", "body": "pong"}}
		},
		func(string) modelStep {
			last = model.send(c, "cx", tok["lead"], "reader", "letter as you stop")
			return modelStep{text: "Sent pong."}
		},
		func(string) modelStep { return modelStep{text: "Read the last letter."} },
	)
	home := codexHome(t, model)
	dir := setupProject(t, s.base, "codex", "CODEX_HOME="+home)
	gitProject(t, dir)
	start := time.Now()
	run := runAgent(t, dir, codexEnv(t, home, s.base, tok["reader"]), codex, "exec", "Work on your mail.")
	took := time.Since(start)
	model.check(t)
	if run.code != 0 {
		t.Fatalf("codex exec: exit %d\nthe end of its stderr:\n%s\nstdout:\n%s", run.code, lastLines(run.stderr, 40), lastLines(run.stdout, 40))
	}
	t.Logf("codex exec took %v; hook times, Mailroom up: %s", took.Round(time.Millisecond), formatHookTimes(codexHookTimes(run.lines)))
	reqs := model.mainRequests()
	if len(reqs) < 4 {
		t.Fatalf("%d main model requests, want 4 (first, after each tool call, after Stop blocked); the end of stderr:\n%s",
			len(reqs), lastLines(run.stderr, 40))
	}
	for _, want := range []string{`"name":"mcp__mailroom"`, `"name":"read_inbox"`, `"name":"send_message"`, `"name":"wait_for_mail"`} {
		if !strings.Contains(reqs[0], want) {
			t.Errorf("the first request's tools hold no %s", want)
		}
	}
	checks := []struct {
		req  int
		want string
		what string
	}{
		{0, "Mail from lead (" + first + ")", "the waiting letter (SessionStart)"},
		{1, `"type":"function_call_output"`, "read_inbox's result"},
		{1, "first letter: say pong to lead", "the waiting letter in read_inbox's result"},
		{1, "Mail from lead (" + mid + ")", "the mid-work letter (PostToolUse)"},
		{2, `\"id\":\"lead-`, "send_message's letter id"},
		{3, "Mail from lead (" + last + ")", "the letter sent as it would stop (Stop)"},
	}
	for _, ch := range checks {
		if !strings.Contains(reqs[ch.req], ch.want) {
			t.Errorf("request %d holds no %s (%q):\n%s", ch.req+1, ch.what, ch.want, lastLines(reqs[ch.req], 1))
		}
	}
	wantPongAndCursor(t, c, "cx", tok["lead"], last)
}

// TestCodexStopWaits: with nothing unread as Codex would stop, the Stop
// hook (`--wait 300`) holds the session on the server's long-poll; a
// letter sent a while later reaches the model's next request, and the
// session then ends.
func TestCodexStopWaits(t *testing.T) {
	codex := npmCLI(t, codexPackage, "codex")
	t.Parallel()
	s := startServer(t, filepath.Join(t.TempDir(), "data"))
	c := newClient(s.base)
	defer c.close()
	tok := createTeam(t, c, "cw", "reader")
	const hold = 1500 * time.Millisecond
	late := make(chan string, 1)
	model := newFakeResponses(t)
	model.steps(
		func(string) modelStep {
			// Sent once the Stop hook that follows this answer waits.
			time.AfterFunc(hold, func() { late <- model.send(c, "cw", tok["lead"], "reader", "a letter while you wait") })
			return modelStep{text: "Nothing to do."}
		},
		func(string) modelStep { return modelStep{text: "Read the letter."} },
	)
	home := codexHome(t, model)
	dir := setupProject(t, s.base, "codex", "CODEX_HOME="+home)
	gitProject(t, dir)
	run := runAgent(t, dir, codexEnv(t, home, s.base, tok["reader"]), codex, "exec", "Wait for your mail.")
	model.check(t)
	if run.code != 0 {
		t.Fatalf("codex exec: exit %d\nthe end of its stderr:\n%s", run.code, lastLines(run.stderr, 40))
	}
	reqs := model.mainRequests()
	if len(reqs) != 2 {
		t.Fatalf("%d main model requests, want 2 (first, after Stop woke with the letter); the end of stderr:\n%s", len(reqs), lastLines(run.stderr, 40))
	}
	id := <-late // the first step ran, so the letter is sent
	if want := "Mail from lead (" + id + ")"; !strings.Contains(reqs[1], want) {
		t.Errorf("request 2 holds no %q:\n%s", want, lastLines(reqs[1], 1))
	}
	stops := codexHookTimes(run.lines)["Stop"]
	if len(stops) != 2 || stops[0] < hold/2 {
		t.Errorf("Stop hook times %v; want two, the first held about %v until the letter came", stops, hold)
	}
}

// TestCodexMailroomDown: with Mailroom down, a Codex session set up for
// it still runs to its end: each hook fails quietly within 2 s, the
// model answers, and codex exec exits 0.
func TestCodexMailroomDown(t *testing.T) {
	codex := npmCLI(t, codexPackage, "codex")
	t.Parallel()
	base := closedPort(t)
	model := newFakeResponses(t)
	home := codexHome(t, model)
	dir := setupProject(t, base, "codex", "CODEX_HOME="+home)
	gitProject(t, dir)
	start := time.Now()
	run := runAgent(t, dir, codexEnv(t, home, base, "mr_not_a_token"), codex, "exec", "Hello.")
	took := time.Since(start)
	model.check(t)
	if run.code != 0 || !strings.Contains(run.stdout, "All done.") {
		t.Fatalf("codex exec with Mailroom down: exit %d, stdout %q; want exit 0 and the model's answer\nthe end of its stderr:\n%s",
			run.code, run.stdout, lastLines(run.stderr, 40))
	}
	if len(model.mainRequests()) == 0 {
		t.Errorf("the model was never asked")
	}
	times := codexHookTimes(run.lines)
	t.Logf("codex exec took %v; hook times, Mailroom down: %s", took.Round(time.Millisecond), formatHookTimes(times))
	for _, event := range []string{"SessionStart", "UserPromptSubmit", "Stop"} {
		if len(times[event]) == 0 {
			t.Errorf("no %s hook ran (want each to run and fail quietly); the end of stderr:\n%s", event, lastLines(run.stderr, 40))
		}
		for _, d := range times[event] {
			if d > 2*time.Second {
				t.Errorf("the %s hook took %v with Mailroom down, want ≤ 2s", event, d)
			}
		}
	}
}

// TestCodexShellSandbox: Codex's shell tool has no network in its
// default sandbox, so `mailroom inbox` run by the agent fails there, as
// the README says; with the README's `network_access = true` in the
// project's .codex/config.toml it reads the inbox. (The hooks and the MCP
// tools run outside the sandbox either way: TestCodexSession.)
func TestCodexShellSandbox(t *testing.T) {
	codex := npmCLI(t, codexPackage, "codex")
	t.Parallel()
	s := startServer(t, filepath.Join(t.TempDir(), "data"))
	for _, tc := range []struct {
		name, config, want string
	}{
		{"default", "", "socket: operation not permitted"},
		{"network_access", "\n[sandbox_workspace_write]\nnetwork_access = true\n", "> shell letter"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			c := newClient(s.base)
			defer c.close()
			team := "sh-" + strings.ReplaceAll(tc.name, "_", "-")
			tok := createTeam(t, c, team, "reader")
			model := newFakeResponses(t)
			model.steps(
				func(string) modelStep {
					model.send(c, team, tok["lead"], "reader", "shell letter")
					// Not a login shell: a profile may set a PATH without mailroom.
					return modelStep{tool: "exec_command", args: map[string]any{"cmd": "mailroom inbox --unread --mark-read", "login": false}}
				},
				func(string) modelStep {
					// Unread mail, so the Stop hook lets the session go at once.
					model.send(c, team, tok["lead"], "reader", "letter as you stop")
					return modelStep{text: "Read it."}
				},
			)
			home := codexHome(t, model)
			dir := setupProject(t, s.base, "codex", "CODEX_HOME="+home)
			gitProject(t, dir)
			if tc.config != "" {
				f, err := os.OpenFile(filepath.Join(dir, ".codex", "config.toml"), os.O_APPEND|os.O_WRONLY, 0)
				if err != nil {
					t.Fatal(err)
				}
				if _, err := f.WriteString(tc.config); err != nil {
					t.Fatal(err)
				}
				if err := f.Close(); err != nil {
					t.Fatal(err)
				}
			}
			run := runAgent(t, dir, codexEnv(t, home, s.base, tok["reader"]), codex, "exec", "Read your mail with the shell.")
			model.check(t)
			if run.code != 0 {
				t.Fatalf("codex exec: exit %d\nthe end of its stderr:\n%s", run.code, lastLines(run.stderr, 40))
			}
			reqs := model.mainRequests()
			if len(reqs) < 2 {
				t.Fatalf("%d main model requests, want 2 or more; the end of stderr:\n%s", len(reqs), lastLines(run.stderr, 40))
			}
			// The shell's output, as Codex gives it to the model.
			var req struct {
				Input []struct {
					Type   string `json:"type"`
					Output string `json:"output"`
				} `json:"input"`
			}
			if err := json.Unmarshal([]byte(reqs[1]), &req); err != nil {
				t.Fatal(err)
			}
			var out string
			for _, in := range req.Input {
				if in.Type == "function_call_output" {
					out = in.Output
				}
			}
			if !strings.Contains(out, tc.want) {
				t.Errorf("the shell's `mailroom inbox` gave the model %q, want it to hold %q", out, tc.want)
			}
		})
	}
}

// TestCodexMCPConfig: the block `mailroom mcp-config --host codex`
// prints, appended as printed to the user's own Codex config, gives a
// headless `codex exec` (no project setup, no hooks) Mailroom's tools,
// which run without asking.
func TestCodexMCPConfig(t *testing.T) {
	codex := npmCLI(t, codexPackage, "codex")
	t.Parallel()
	s := startServer(t, filepath.Join(t.TempDir(), "data"))
	c := newClient(s.base)
	defer c.close()
	tok := createTeam(t, c, "mc", "reader")
	sendAs(t, c, "mc", tok["lead"], "reader", "a letter for the MCP tool")
	model := newFakeResponses(t)
	model.steps(func(string) modelStep {
		return modelStep{tool: "mcp__mailroom__read_inbox", args: map[string]any{}}
	})
	home := codexHome(t, model)
	printed := runCmd(t, s.base, tok["reader"], "", "mcp-config", "--team", "mc", "--member", "reader", "--host", "codex")
	if printed.code != 0 {
		t.Fatalf("mcp-config --host codex: exit %d, stderr %q", printed.code, printed.stderr)
	}
	f, err := os.OpenFile(filepath.Join(home, "config.toml"), os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.WriteString("\n" + printed.stdout); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	gitProject(t, dir)
	run := runAgent(t, dir, codexEnv(t, home, s.base, tok["reader"]), codex, "exec", "Read your mail.")
	model.check(t)
	if run.code != 0 {
		t.Fatalf("codex exec: exit %d\nthe end of its stderr:\n%s", run.code, lastLines(run.stderr, 40))
	}
	reqs := model.mainRequests()
	if len(reqs) < 2 {
		t.Fatalf("%d main model requests, want 2; the end of stderr:\n%s", len(reqs), lastLines(run.stderr, 40))
	}
	if !strings.Contains(reqs[1], `"type":"function_call_output"`) || !strings.Contains(reqs[1], "a letter for the MCP tool") {
		t.Errorf("request 2 holds no read_inbox result with the letter:\n%s", lastLines(reqs[1], 1))
	}
	if strings.Contains(reqs[1], "requires approval") {
		t.Errorf("the tool call asked for approval:\n%s", lastLines(reqs[1], 1))
	}
}
