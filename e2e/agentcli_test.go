package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// The real coding agents, from npm at pinned versions, set up with
// `mailroom setup` exactly as the README says and driven headless against
// a fake model server of their provider's wire format (SSE streaming
// included): tools listed and called, letters reaching the model through
// the hooks, the Stop hook, and a session that survives Mailroom down.
// Where the npm registry cannot be reached these tests say so on one line
// and skip.

// claudePackage is the pinned Claude Code CLI.
const claudePackage = "@anthropic-ai/claude-code@2.1.328"

// agentRunDeadline bounds one headless agent session.
const agentRunDeadline = 3 * time.Minute

// npmCLI installs pkg (name@version) into a cache directory shared by
// test runs (MAILROOM_E2E_NPM_CACHE, else the user's cache directory) and
// returns the path of its executable bin. Without npm or the registry the
// test is skipped with one line saying so.
func npmCLI(t *testing.T, pkg, bin string) string {
	t.Helper()
	cache := os.Getenv("MAILROOM_E2E_NPM_CACHE")
	if cache == "" {
		dir, err := os.UserCacheDir()
		if err != nil {
			dir = os.TempDir()
		}
		cache = filepath.Join(dir, "mailroom-e2e-npm")
	}
	prefix := filepath.Join(cache, strings.NewReplacer("@", "", "/", "-").Replace(pkg))
	path := filepath.Join(prefix, "node_modules", ".bin", bin)
	if _, err := os.Stat(path); err == nil {
		return path
	}
	if _, err := exec.LookPath("npm"); err != nil {
		t.Skipf("npm is not on the PATH, so %s cannot be installed; skipped", pkg)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	if out, err := exec.CommandContext(ctx, "npm", "view", pkg, "version").CombinedOutput(); err != nil {
		t.Skipf("the npm registry cannot be reached (npm view %s: %s); skipped", pkg, oneLineOf(string(out)))
	}
	ctx, cancel = context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "npm", "install", "--prefix", prefix, "--no-audit", "--no-fund", "--no-save", pkg)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("npm install %s: %v\n%s", pkg, err, out)
	}
	if _, err := os.Stat(path); err != nil {
		t.Fatalf("npm installed %s but there is no %s: %v", pkg, path, err)
	}
	return path
}

func oneLineOf(s string) string {
	s = strings.Join(strings.Fields(s), " ")
	if len(s) > 200 {
		s = s[:200] + "…"
	}
	return s
}

// pathWithMailroom is a PATH on which `mailroom` is the binary under test,
// as the hooks setup writes expect.
func pathWithMailroom(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	if err := os.Symlink(serverBin, filepath.Join(dir, "mailroom")); err != nil {
		t.Fatal(err)
	}
	return dir + string(os.PathListSeparator) + os.Getenv("PATH")
}

// agentRun is one finished headless session of an agent CLI: its
// output, exit code, and each line of its standard error with the time
// since the start at which it came.
type agentRun struct {
	stdout, stderr string
	code           int
	lines          []stampedLine
}

// stampedLine is one line an agent wrote, and when.
type stampedLine struct {
	at   time.Duration
	text string
}

// lineStamper keeps what is written to it and stamps each line as it
// completes, so a test can tell how long the agent spent between two of
// its own progress lines (e.g. a hook's start and end).
type lineStamper struct {
	start time.Time
	mu    sync.Mutex
	buf   bytes.Buffer
	part  []byte
	lines []stampedLine
}

func (w *lineStamper) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	now := time.Since(w.start)
	w.buf.Write(p)
	w.part = append(w.part, p...)
	for {
		i := bytes.IndexByte(w.part, '\n')
		if i < 0 {
			break
		}
		w.lines = append(w.lines, stampedLine{at: now, text: string(w.part[:i])})
		w.part = w.part[i+1:]
	}
	return len(p), nil
}

// lastLines is the end of an agent's output, for a failure message.
func lastLines(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(lines) > n {
		lines = append([]string{fmt.Sprintf("[… %d lines before]", len(lines)-n)}, lines[len(lines)-n:]...)
	}
	return strings.Join(lines, "\n")
}

// runAgent runs bin with args in dir and env until it exits, at most
// agentRunDeadline: then the agent and everything it started (its
// process group) are killed and the test fails with the end of its
// output.
func runAgent(t *testing.T, dir string, env []string, bin string, args ...string) agentRun {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), agentRunDeadline)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, args...)
	cmd.Dir = dir
	cmd.Env = env
	cmd.Stdin = strings.NewReader("")
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	var out bytes.Buffer
	errOut := &lineStamper{start: time.Now()}
	cmd.Stdout, cmd.Stderr = &out, errOut
	// A child the agent started may keep its output open after the
	// agent is killed; the run still ends.
	cmd.WaitDelay = 5 * time.Second
	err := cmd.Run()
	if pgid := cmd.Process; pgid != nil {
		// Hooks or servers the agent left behind go with it.
		_ = syscall.Kill(-pgid.Pid, syscall.SIGKILL)
	}
	errOut.mu.Lock()
	defer errOut.mu.Unlock()
	if ctx.Err() != nil {
		t.Fatalf("%s %v did not end within %v; the end of its stderr:\n%s\nstdout:\n%s", filepath.Base(bin), args, agentRunDeadline,
			lastLines(errOut.buf.String(), 40), lastLines(out.String(), 40))
	}
	if err != nil && cmd.ProcessState == nil {
		t.Fatalf("run %s: %v", bin, err)
	}
	return agentRun{stdout: out.String(), stderr: errOut.buf.String(), code: cmd.ProcessState.ExitCode(), lines: errOut.lines}
}

// fakeModel is a model server that answers each request with the next
// step of a script (main requests: those that offer the agent's shell
// tool) and any other request (titles, summaries) with a short text.
// Steps run on the server's goroutines, where a test must not stop: what
// goes wrong there is recorded with failf and reported by check.
type fakeModel struct {
	srv      *httptest.Server
	mainMark string // a text only main requests hold

	mu     sync.Mutex
	main   []string // bodies of the main requests, in order
	script []func(body string) modelStep
	errs   []string
}

// modelStep is what the fake model answers: a tool call or a text.
type modelStep struct {
	tool string         // a tool to call (empty: text)
	args map[string]any // its input
	text string
}

// steps sets the script, before the agent runs.
func (f *fakeModel) steps(script ...func(body string) modelStep) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.script = script
}

// failf records a failure seen while answering a request.
func (f *fakeModel) failf(format string, args ...any) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.errs = append(f.errs, fmt.Sprintf(format, args...))
}

// check fails the test (from its own goroutine) with what went wrong
// while the model answered.
func (f *fakeModel) check(t *testing.T) {
	t.Helper()
	f.mu.Lock()
	defer f.mu.Unlock()
	if len(f.errs) > 0 {
		t.Fatalf("while the fake model answered:\n%s", strings.Join(f.errs, "\n"))
	}
}

// send sends a letter from within a step; a failure is recorded and the
// id is then empty.
func (f *fakeModel) send(c *client, team, token, to, body string) string {
	var res sendResult
	status, code, err := c.do(http.MethodPost, "/teams/"+team+"/messages", token, "", map[string]string{"to": to, "body": body}, &res)
	if err != nil || status != http.StatusCreated {
		f.failf("send %q to %s: %d %s %v; want 201", body, to, status, code, err)
		return ""
	}
	return res.ID
}

// isMain tells a request of the agent's conversation, which offers the
// agent's shell tool, from the CLI's side requests (titles, summaries).
func (f *fakeModel) isMain(body string) bool { return strings.Contains(body, f.mainMark) }

func (f *fakeModel) next(body string) (modelStep, bool) {
	f.mu.Lock()
	if !f.isMain(body) {
		f.mu.Unlock()
		return modelStep{text: "ok"}, false
	}
	f.main = append(f.main, body)
	i := len(f.main) - 1
	if i >= len(f.script) {
		f.mu.Unlock()
		return modelStep{text: "All done."}, true
	}
	step := f.script[i]
	f.mu.Unlock() // a step may send letters, which take a while
	return step(body), true
}

func (f *fakeModel) mainRequests() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]string(nil), f.main...)
}

// sse writes one server-sent event.
func sse(w io.Writer, event string, data any) {
	b, _ := json.Marshal(data)
	if event != "" {
		fmt.Fprintf(w, "event: %s\n", event)
	}
	fmt.Fprintf(w, "data: %s\n\n", b)
	if f, ok := w.(http.Flusher); ok {
		f.Flush()
	}
}

// newFakeAnthropic serves the Messages API (POST /v1/messages, streamed
// as Claude Code asks) from script.
func newFakeAnthropic(t *testing.T) *fakeModel {
	f := &fakeModel{mainMark: `"name":"Bash"`}
	n := 0
	f.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		data, _ := io.ReadAll(r.Body)
		if r.Method != http.MethodPost || !strings.HasPrefix(r.URL.Path, "/v1/messages") {
			http.NotFound(w, r)
			return
		}
		if strings.HasSuffix(r.URL.Path, "/count_tokens") {
			_ = json.NewEncoder(w).Encode(map[string]int{"input_tokens": 100})
			return
		}
		var req struct {
			Model  string `json:"model"`
			Stream bool   `json:"stream"`
		}
		_ = json.Unmarshal(data, &req)
		step, _ := f.next(string(data))
		f.mu.Lock()
		n++
		id := fmt.Sprintf("msg_%d", n)
		f.mu.Unlock()
		var block map[string]any
		stop := "end_turn"
		if step.tool != "" {
			stop = "tool_use"
			block = map[string]any{"type": "tool_use", "id": "toolu_" + id, "name": step.tool, "input": step.args}
		} else {
			block = map[string]any{"type": "text", "text": step.text}
		}
		usage := map[string]int{"input_tokens": 100, "output_tokens": 10}
		if !req.Stream {
			w.Header().Set("Content-Type", "application/json")
			_ = json.NewEncoder(w).Encode(map[string]any{"id": id, "type": "message", "role": "assistant", "model": req.Model,
				"content": []any{block}, "stop_reason": stop, "stop_sequence": nil, "usage": usage})
			return
		}
		w.Header().Set("Content-Type", "text/event-stream")
		sse(w, "message_start", map[string]any{"type": "message_start", "message": map[string]any{"id": id, "type": "message", "role": "assistant",
			"model": req.Model, "content": []any{}, "stop_reason": nil, "stop_sequence": nil, "usage": map[string]int{"input_tokens": 100, "output_tokens": 1}}})
		if step.tool != "" {
			args, _ := json.Marshal(step.args)
			sse(w, "content_block_start", map[string]any{"type": "content_block_start", "index": 0,
				"content_block": map[string]any{"type": "tool_use", "id": "toolu_" + id, "name": step.tool, "input": map[string]any{}}})
			sse(w, "content_block_delta", map[string]any{"type": "content_block_delta", "index": 0,
				"delta": map[string]any{"type": "input_json_delta", "partial_json": string(args)}})
		} else {
			sse(w, "content_block_start", map[string]any{"type": "content_block_start", "index": 0,
				"content_block": map[string]any{"type": "text", "text": ""}})
			sse(w, "content_block_delta", map[string]any{"type": "content_block_delta", "index": 0,
				"delta": map[string]any{"type": "text_delta", "text": step.text}})
		}
		sse(w, "content_block_stop", map[string]any{"type": "content_block_stop", "index": 0})
		sse(w, "message_delta", map[string]any{"type": "message_delta", "delta": map[string]any{"stop_reason": stop, "stop_sequence": nil},
			"usage": map[string]int{"output_tokens": 10}})
		sse(w, "message_stop", map[string]any{"type": "message_stop"})
	}))
	t.Cleanup(f.srv.Close)
	return f
}

// claudeEnv is the environment of a headless Claude Code session against
// the fake model, as the member whose token is given, with mailroom on
// the PATH.
func claudeEnv(t *testing.T, model *fakeModel, base, token string) []string {
	return []string{
		"PATH=" + pathWithMailroom(t),
		"HOME=" + t.TempDir(),
		"ANTHROPIC_BASE_URL=" + model.srv.URL,
		"ANTHROPIC_API_KEY=sk-ant-fake-key",
		"CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC=1",
		"DISABLE_AUTOUPDATER=1",
		"MAILROOM_URL=" + base,
		"MAILROOM_TOKEN=" + token,
	}
}

// setupProject runs `mailroom setup host` in a fresh project directory
// (CODEX_HOME given for Codex) and returns the directory.
func setupProject(t *testing.T, base, host string, env ...string) string {
	t.Helper()
	dir := t.TempDir()
	ctx, cancel := context.WithTimeout(context.Background(), startDeadline)
	defer cancel()
	cmd := exec.CommandContext(ctx, serverBin, "setup", host, "--dir", dir)
	cmd.Env = append([]string{"PATH=" + os.Getenv("PATH"), "HOME=" + t.TempDir(), "MAILROOM_URL=" + base}, env...)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("mailroom setup %s: %v\n%s", host, err, out)
	}
	return dir
}

// claudeHookLine is the line Claude Code's debug log writes as a command
// hook ends: "Hooks: Stop [mailroom hook --wait 300] finished with status
// 0 (27ms)", the event carrying ":matcher" for some kinds
// ("SessionStart:startup", "PostToolUse:mcp__mailroom__send_message").
var claudeHookLine = regexp.MustCompile(`Hooks: ([A-Za-z]+)(?::\S*)? \[(.*)\] finished with status (-?\d+) \((\d+)ms\)`)

// claudeHookTimes reads, from a Claude Code debug log (--debug-file), how
// long each run of a mailroom command hook took as Claude Code itself
// reports it, by event.
func claudeHookTimes(log string) map[string][]time.Duration {
	times := map[string][]time.Duration{}
	for _, m := range claudeHookLine.FindAllStringSubmatch(log, -1) {
		if !strings.HasPrefix(m[2], "mailroom hook") {
			continue
		}
		ms, err := strconv.Atoi(m[4])
		if err != nil {
			continue
		}
		times[m[1]] = append(times[m[1]], time.Duration(ms)*time.Millisecond)
	}
	return times
}

// claudeDebugLog is what Claude Code wrote to --debug-file path.
func claudeDebugLog(t *testing.T, path string) string {
	t.Helper()
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("Claude Code's debug log: %v", err)
	}
	return string(raw)
}

// TestClaudeCodeSession: Claude Code set up by `mailroom setup claude`
// lists and calls Mailroom's tools, sees a waiting letter in its first
// request, a letter sent mid-work in the request after the tool call
// (PostToolUse), and one sent as it would stop (Stop blocks with it).
func TestClaudeCodeSession(t *testing.T) {
	claude := npmCLI(t, claudePackage, "claude")
	t.Parallel()
	s := startServer(t, filepath.Join(t.TempDir(), "data"))
	c := newClient(s.base)
	defer c.close()
	tok := createTeam(t, c, "cc", "reader")
	first := sendAs(t, c, "cc", tok["lead"], "reader", "first letter: say pong to lead")
	var mid, last string
	model := newFakeAnthropic(t)
	model.steps(
		func(string) modelStep {
			mid = model.send(c, "cc", tok["lead"], "reader", "mid-work letter")
			return modelStep{tool: "mcp__mailroom__send_message", args: map[string]any{"to": "lead", "body": "pong"}}
		},
		func(string) modelStep {
			last = model.send(c, "cc", tok["lead"], "reader", "letter as you stop")
			return modelStep{text: "Sent pong."}
		},
		func(string) modelStep { return modelStep{text: "Read the last letter."} },
	)
	dir := setupProject(t, s.base, "claude")
	debugLog := filepath.Join(t.TempDir(), "debug.log")
	start := time.Now()
	run := runAgent(t, dir, claudeEnv(t, model, s.base, tok["reader"]), claude, "-p", "Work on your mail.", "--allowedTools", "mcp__mailroom",
		"--debug", "hooks", "--debug-file", debugLog)
	took := time.Since(start)
	model.check(t)
	if run.code != 0 {
		t.Fatalf("claude -p: exit %d\nthe end of its stderr:\n%s\nstdout:\n%s", run.code, lastLines(run.stderr, 40), lastLines(run.stdout, 40))
	}
	times := claudeHookTimes(claudeDebugLog(t, debugLog))
	t.Logf("claude -p took %v; hook times, Mailroom up: %s", took.Round(time.Millisecond), formatHookTimes(times))
	for event, want := range map[string]int{"SessionStart": 1, "UserPromptSubmit": 1, "PostToolUse": 1, "Stop": 2} {
		if got := len(times[event]); got != want {
			t.Errorf("Claude Code's debug log shows %d %s runs of the mailroom hook, want %d", got, event, want)
		}
	}
	reqs := model.mainRequests()
	if len(reqs) < 3 {
		t.Fatalf("%d main model requests, want 3 (first, after the tool call, after Stop blocked); stdout:\n%s\nstderr:\n%s", len(reqs), run.stdout, run.stderr)
	}
	for _, tool := range []string{"mcp__mailroom__send_message", "mcp__mailroom__read_inbox", "mcp__mailroom__wait_for_mail"} {
		// Claude Code may defer MCP tools: the first request then names
		// them for its tool search instead of carrying their schemas.
		if !strings.Contains(reqs[0], tool) {
			t.Errorf("the first request names no %s", tool)
		}
	}
	for i, want := range []string{"Mail from lead (" + first + ")", "Mail from lead (" + mid + ")", "Mail from lead (" + last + ")"} {
		if !strings.Contains(reqs[i], want) {
			t.Errorf("request %d does not hold %q:\n%s", i+1, want, reqs[i])
		}
	}
	if !strings.Contains(reqs[1], `"tool_result"`) || !strings.Contains(reqs[1], `reader-`) && !strings.Contains(reqs[1], `lead-`) {
		t.Errorf("request 2 holds no result of send_message:\n%s", reqs[1])
	}
	wantPongAndCursor(t, c, "cc", tok["lead"], last)
}

// TestClaudeCodeMailroomDown: with Mailroom down, a session set up for it
// still runs to its end: the hooks fail quietly and the model answers.
func TestClaudeCodeMailroomDown(t *testing.T) {
	claude := npmCLI(t, claudePackage, "claude")
	t.Parallel()
	base := closedPort(t)
	model := newFakeAnthropic(t)
	dir := setupProject(t, base, "claude")
	debugLog := filepath.Join(t.TempDir(), "debug.log")
	start := time.Now()
	run := runAgent(t, dir, claudeEnv(t, model, base, "mr_not_a_token"), claude, "-p", "Hello.", "--debug", "hooks", "--debug-file", debugLog)
	took := time.Since(start)
	if run.code != 0 || !strings.Contains(run.stdout, "All done.") {
		t.Fatalf("claude -p with Mailroom down: exit %d, stdout %q; want exit 0 and the model's answer\nstderr:\n%s", run.code, run.stdout, run.stderr)
	}
	times := claudeHookTimes(claudeDebugLog(t, debugLog))
	t.Logf("claude -p took %v; hook times, Mailroom down: %s", took.Round(time.Millisecond), formatHookTimes(times))
	for _, event := range []string{"SessionStart", "UserPromptSubmit", "Stop"} {
		if len(times[event]) != 1 {
			t.Errorf("Claude Code's debug log shows %d %s runs of the mailroom hook, want 1", len(times[event]), event)
		}
	}
	if len(model.mainRequests()) == 0 {
		t.Errorf("the model was never asked")
	}
}

// wantPongAndCursor checks how a session of the agent under test left the
// team: reader's "pong" (its send_message) is lead's one letter, and
// reader's read cursor is at last with nothing unread.
func wantPongAndCursor(t *testing.T, c *client, team, leadToken, last string) {
	t.Helper()
	var inbox struct {
		Messages []struct{ Sender, Body string } `json:"messages"`
	}
	if status, code, err := c.do(http.MethodGet, "/teams/"+team+"/members/lead/inbox", leadToken, "", nil, &inbox); err != nil || status != http.StatusOK {
		t.Fatalf("lead's inbox: %d %s %v", status, code, err)
	}
	if len(inbox.Messages) != 1 || inbox.Messages[0].Sender != "reader" || inbox.Messages[0].Body != "pong" {
		t.Errorf("lead's inbox %+v, want reader's pong", inbox.Messages)
	}
	if through, unread := cursorOf(t, c, team, "reader"); through != last || unread != 0 {
		t.Errorf("reader's cursor %q, %d unread; want %s, 0", through, unread, last)
	}
}
