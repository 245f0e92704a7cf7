package main

import (
	"bytes"
	"crypto/rand"
	"encoding/json"
	"fmt"
	"math/big"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"mailroom/internal/testkit"
)

// sandboxServer is a real server over dataDir whose environment holds a
// provider key, with the team "shop" (workspace, host_permission allow)
// holding the escape program, and the team "other" with a workspace file
// of its own. It returns the server, its URL, the admin token and shop's
// member tokens.
func sandboxServer(t *testing.T, dataDir string) (*proc, *url.URL, map[string]string, string) {
	t.Helper()
	p, ready := startServer(t, dataDir, []string{"OPENAI_API_KEY=sk-test-must-not-leak"})
	admin := readToken(t, dataDir)
	base := "http://" + ready.Host + "/api/v1"
	do := func(method, path, contentType string, body []byte) []byte {
		t.Helper()
		req, _ := http.NewRequest(method, base+path, bytes.NewReader(body))
		req.Header.Set("Authorization", "Bearer "+admin)
		req.Header.Set("Content-Type", contentType)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var buf bytes.Buffer
		_, _ = buf.ReadFrom(resp.Body)
		if resp.StatusCode/100 != 2 {
			t.Fatalf("%s %s: %s %s", method, path, resp.Status, buf.String())
		}
		return buf.Bytes()
	}
	tokens := map[string]string{}
	for _, team := range []string{"shop", "other"} {
		body := fmt.Sprintf(`{"name": %q, "workspace": true, "host_permission": "allow", "members": [{"name": "reader", "role": "runs the program"}]}`, team)
		var created struct {
			Members []struct{ Name, Token string }
		}
		if err := json.Unmarshal(do(http.MethodPost, "/teams", "application/json", []byte(body)), &created); err != nil {
			t.Fatal(err)
		}
		if team == "shop" {
			for _, m := range created.Members {
				tokens[m.Name] = m.Token
			}
		}
	}
	do(http.MethodPut, "/teams/other/workspace/files/notes.txt", "application/octet-stream", []byte("private\n"))
	program, err := os.ReadFile("../../internal/workspace/testdata/escape.py")
	if err != nil {
		t.Fatal(err)
	}
	do(http.MethodPut, "/teams/shop/workspace/files/main.py", "application/octet-stream", program)
	n, err := rand.Int(rand.Reader, big.NewInt(1e9))
	if err != nil {
		t.Fatal(err)
	}
	marker := fmt.Sprint(1e9 + n.Int64())
	_, port, _ := net.SplitHostPort(ready.Host)
	var portNum int
	fmt.Sscan(port, &portNum)
	targets, _ := json.Marshal(map[string]any{
		"pid": p.cmd.Process.Pid,
		"secrets": []string{
			filepath.Join(dataDir, "admin.token"),
			filepath.Join(dataDir, "teams", "other", "state.json"),
			filepath.Join(dataDir, "workspaces", "other", "notes.txt"),
		},
		"dirs":   []string{dataDir, filepath.Join(dataDir, "teams"), filepath.Join(dataDir, "workspaces", "other"), "/proc/self", "/root", "/tmp"},
		"port":   portNum,
		"marker": marker,
	})
	do(http.MethodPut, "/teams/shop/workspace/files/targets.json", "application/octet-stream", targets)
	t.Cleanup(func() {
		for _, pid := range testkit.Sleepers(t, marker) {
			var n int
			fmt.Sscan(pid, &n)
			_ = (&os.Process{Pid: n}).Kill()
		}
	})
	return p, ready, tokens, marker
}

// mcpMember opens an MCP session with the server at ready as token.
func mcpMember(t *testing.T, ready *url.URL, token string) *mcp.ClientSession {
	t.Helper()
	client := mcp.NewClient(&mcp.Implementation{Name: "test", Version: "1"}, nil)
	cs, err := client.Connect(t.Context(), &mcp.StreamableClientTransport{
		Endpoint:   "http://" + ready.Host + "/mcp",
		HTTPClient: &http.Client{Transport: bearerTransport(token)},
		MaxRetries: -1,
	}, nil)
	if err != nil {
		t.Fatalf("connect to /mcp: %v", err)
	}
	t.Cleanup(func() { _ = cs.Close() })
	return cs
}

type bearerTransport string

func (b bearerTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+string(b))
	return http.DefaultTransport.RoundTrip(r)
}

// approvedReader passes run_main's plan gate for shop's reader and
// returns its session.
func approvedReader(t *testing.T, ready *url.URL, tokens map[string]string) *mcp.ClientSession {
	t.Helper()
	reader, lead := mcpMember(t, ready, tokens["reader"]), mcpMember(t, ready, tokens["lead"])
	for _, c := range []struct {
		cs   *mcp.ClientSession
		tool string
		args map[string]any
	}{
		{reader, "submit_plan", map[string]any{"plan": "run main.py"}},
		{lead, "reply_request", map[string]any{"request_id": "req-1", "approve": true}},
		{reader, "check_replies", map[string]any{}},
	} {
		res, err := c.cs.CallTool(t.Context(), &mcp.CallToolParams{Name: c.tool, Arguments: c.args})
		if err != nil || res.IsError {
			t.Fatalf("%s = %+v, %v", c.tool, res, err)
		}
	}
	return reader
}

// The real binary's run_main, on this kernel: a program that tries each
// way out (the server's environment and command line, the admin token,
// another team's state and workspace, the server's port, 1 GiB of memory,
// a 64 MiB file, 256 files, hundreds of processes) fails at each; its
// workspace write and ordinary imports work; its environment holds PATH
// and TMPDIR only; its child in a session of its own is dead when
// run_main answers.
func TestRunMainSandboxedInTheRealBinary(t *testing.T) {
	dataDir := filepath.Join(t.TempDir(), "data")
	p, ready, tokens, marker := sandboxServer(t, dataDir)
	reader := approvedReader(t, ready, tokens)
	res, err := reader.CallTool(t.Context(), &mcp.CallToolParams{Name: "run_main", Arguments: map[string]any{}})
	if err != nil || res.IsError {
		t.Fatalf("run_main = %+v, %v; want the program's report; server log:\n%s", res, err, p.stderr)
	}
	b, _ := json.Marshal(res.StructuredContent)
	var out struct{ Output string }
	if err := json.Unmarshal(b, &out); err != nil {
		t.Fatal(err)
	}
	var report map[string]any
	if err := json.Unmarshal([]byte(out.Output), &report); err != nil {
		t.Fatalf("run_main's output = %q, want the escape program's report", out.Output)
	}
	attempts := 0
	for name, v := range report {
		if s, ok := v.(string); ok && name != "tmpdir" && name != "imports" {
			attempts++
			if !strings.HasPrefix(s, "blocked: ") {
				t.Errorf("escape %s: got %q, want blocked", name, s)
			}
		}
	}
	if attempts != 17 || report["imports"] != "ok" {
		t.Errorf("report = %v, want 17 attempts and imports ok", report)
	}
	var env []string
	for _, k := range report["env"].([]any) {
		if k != "LC_CTYPE" { // python's own locale coercion (PEP 538)
			env = append(env, k.(string))
		}
	}
	if !slices.Equal(env, []string{"PATH", "TMPDIR"}) {
		t.Errorf("the program's environment = %v, want [PATH TMPDIR]", env)
	}
	if strings.Contains(out.Output, "sk-test-must-not-leak") || strings.Contains(out.Output, readToken(t, dataDir)) {
		t.Errorf("a secret reached the program's output: %s", out.Output)
	}
	if b, err := os.ReadFile(filepath.Join(dataDir, "workspaces", "shop", "written.txt")); err != nil || string(b) != "ok" {
		t.Errorf("written.txt = %q, %v; want the program's write", b, err)
	}
	if left := testkit.Sleepers(t, marker); len(left) > 0 {
		t.Errorf("the program's child in a session of its own still runs (pids %v) after run_main answered", left)
	}
	if !strings.Contains(p.stderr.String(), "run_main's sandbox is on") {
		t.Errorf("the start-up log does not say the sandbox is on:\n%s", p.stderr)
	}
}

// A program still running when the server is killed (kill -9) dies with
// it, children in a session of their own included.
func TestRunMainDiesWithTheServer(t *testing.T) {
	dataDir := filepath.Join(t.TempDir(), "data")
	p, ready, tokens, marker := sandboxServer(t, dataDir)
	// A program that starts a child in a session of its own, says so
	// with written.txt, and spins.
	spin := fmt.Sprintf("import subprocess\nsubprocess.Popen(['sleep', '%s'], start_new_session=True)\nopen('written.txt', 'w').close()\nwhile True:\n    pass\n", marker)
	if err := os.WriteFile(filepath.Join(dataDir, "workspaces", "shop", "main.py"), []byte(spin), 0o600); err != nil {
		t.Fatal(err)
	}
	reader := approvedReader(t, ready, tokens)
	go func() {
		// Answered only by the server's death.
		_, _ = reader.CallTool(t.Context(), &mcp.CallToolParams{Name: "run_main", Arguments: map[string]any{}})
	}()
	written := filepath.Join(dataDir, "workspaces", "shop", "written.txt")
	for {
		if _, err := os.Stat(written); err == nil {
			break
		}
		select {
		case <-p.done:
			t.Fatalf("the server exited before the program ran; stderr:\n%s", p.stderr)
		case <-time.After(10 * time.Millisecond): // polls for the file; not an assertion
		}
	}
	// The child may show in /proc a moment after the file: waited for
	// (up to 5 s), not asserted on timing.
	pids := testkit.Sleepers(t, marker)
	for deadline := time.Now().Add(5 * time.Second); len(pids) != 1 && time.Now().Before(deadline); pids = testkit.Sleepers(t, marker) {
		time.Sleep(20 * time.Millisecond)
	}
	if len(pids) != 1 {
		// What runs, for the failure's reader: the program, its child.
		out, _ := exec.Command("ps", "-eo", "pid,ppid,user,stat,args").CombinedOutput()
		for _, line := range strings.Split(string(out), "\n") {
			if strings.Contains(line, "python") || strings.Contains(line, "sleep") {
				t.Log(line)
			}
		}
		t.Fatalf("sleeping children before the kill: pids %v, want the program's one", pids)
	}
	if err := p.cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	<-p.done
	// The kernel delivers the parent-death signal as the server's last
	// thread exits, and the namespace's end follows; wait for the
	// process table to show it, within the run's own bound.
	deadline := time.Now().Add(10 * time.Second)
	for len(testkit.Sleepers(t, marker)) > 0 {
		if time.Now().After(deadline) {
			t.Fatalf("the program's child still runs after the server was killed")
		}
		time.Sleep(10 * time.Millisecond) // polling interval, not synchronisation
	}
}

// With the sandbox turned off, the start-up log warns that programs run
// unconfined.
func TestSandboxOffIsLoggedAsAWarning(t *testing.T) {
	p, _ := startServer(t, filepath.Join(t.TempDir(), "data"), []string{"MAILROOM_SANDBOX=off"})
	p.stop() // all of stderr has been read once the process has exited
	log := p.stderr.String()
	if !strings.Contains(log, `"level":"WARN","msg":"run_main's sandbox is off`) {
		t.Errorf("the start-up log does not warn that the sandbox is off:\n%s", log)
	}
}
