package main

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"mailroom/internal/agent"
	"mailroom/internal/pgtest"
	"mailroom/internal/testkit"
	"mailroom/internal/workspace"
)

// serverBin is the real binary, built once by TestMain.
var serverBin string

func TestMain(m *testing.M) { os.Exit(pgtest.Finish(testkit.Main(m, &serverBin))) }

// Bounds for waiting on a real process. They only cap a wait that is
// otherwise driven by output or exit, so a broken server fails instead of
// hanging the test run.
const (
	startDeadline = 60 * time.Second // generous: -race binaries on a busy CI machine
	exitDeadline  = 20 * time.Second
)

// proc is a running server process.
type proc struct {
	t      *testing.T
	cmd    *exec.Cmd
	lines  chan string // stdout, line by line
	stderr *testkit.Output
	done   chan struct{}
	err    error    // from Wait, valid once done is closed
	seen   []string // stdout lines read so far (readyURL, stdoutText)
}

// start runs the binary with args and env (added to a clean environment).
// The process is killed at the end of the test if it is still running.
func start(t *testing.T, env []string, args ...string) *proc {
	t.Helper()
	cmd := exec.Command(serverBin, args...)
	cmd.Env = append([]string{"PATH=" + os.Getenv("PATH"), "HOME=" + t.TempDir()}, env...)
	cmd.Dir = t.TempDir()
	p := &proc{t: t, cmd: cmd, lines: make(chan string, 16), stderr: &testkit.Output{}, done: make(chan struct{})}
	cmd.Stderr = p.stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() {
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			p.lines <- sc.Text()
		}
		close(p.lines)
		p.err = cmd.Wait()
		close(p.done)
	}()
	t.Cleanup(func() {
		select {
		case <-p.done:
		default:
			_ = cmd.Process.Kill()
			<-p.done
		}
	})
	return p
}

// startServer starts a server on a free port over dataDir and returns it
// with its ready URL, once /healthz answers.
func startServer(t *testing.T, dataDir string, env []string, args ...string) (*proc, *url.URL) {
	t.Helper()
	p := start(t, env, append([]string{"--addr", "127.0.0.1:0", "--data", dataDir}, args...)...)
	ready := p.readyURL()
	waitHealthy(t, ready)
	return p, ready
}

// wantAdminAccepted requires GET /api/v1/teams with token to answer 200
// from the server at ready.
func wantAdminAccepted(t *testing.T, ready *url.URL, token string) {
	t.Helper()
	req, _ := http.NewRequest(http.MethodGet, "http://"+ready.Host+"/api/v1/teams", nil)
	req.Header.Set("Authorization", "Bearer "+token)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Errorf("GET /api/v1/teams with the admin token: %s, want 200", resp.Status)
	}
}

// readyURL waits for the ready line on stdout and parses its URL.
func (p *proc) readyURL() *url.URL {
	p.t.Helper()
	timeout := time.After(startDeadline)
	for {
		select {
		case line, ok := <-p.lines:
			if !ok {
				<-p.done
				p.t.Fatalf("server exited before it was ready (%v); stderr:\n%s", p.err, p.stderr)
			}
			p.seen = append(p.seen, line)
			const prefix = "Mailroom is ready: "
			if !strings.HasPrefix(line, prefix) {
				continue
			}
			u, err := url.Parse(strings.TrimPrefix(line, prefix))
			if err != nil {
				p.t.Fatalf("ready line %q: %v", line, err)
			}
			return u
		case <-timeout:
			p.t.Fatalf("no ready line within %v; stderr:\n%s", startDeadline, p.stderr)
		}
	}
}

// stdoutText is everything the process wrote to standard output; call it
// once the process has ended.
func (p *proc) stdoutText() string {
	for line := range p.lines {
		p.seen = append(p.seen, line)
	}
	return strings.Join(p.seen, "\n")
}

// waitHealthy polls /healthz until it answers 200, within a bounded time.
func waitHealthy(t *testing.T, base *url.URL) {
	t.Helper()
	deadline := time.Now().Add(startDeadline)
	health := base.Scheme + "://" + base.Host + "/healthz"
	for {
		resp, err := http.Get(health)
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK || resp.StatusCode == http.StatusNoContent {
				return
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s not healthy within %v (last: %v)", health, startDeadline, err)
		}
		time.Sleep(20 * time.Millisecond) // polling interval, not synchronisation
	}
}

// wait returns the exit code, failing the test if the process does not end
// within d.
func (p *proc) wait(d time.Duration) int {
	p.t.Helper()
	for range p.lines {
		// Drain stdout so the process never blocks on a full pipe.
	}
	select {
	case <-p.done:
	case <-time.After(d):
		p.t.Fatalf("process still running after %v; stderr:\n%s", d, p.stderr)
	}
	var exit *exec.ExitError
	if p.err != nil && !errors.As(p.err, &exit) {
		p.t.Fatalf("wait: %v", p.err)
	}
	return p.cmd.ProcessState.ExitCode()
}

// stop sends SIGTERM and requires a clean exit 0.
func (p *proc) stop() {
	p.t.Helper()
	if err := p.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		p.t.Fatal(err)
	}
	if code := p.wait(exitDeadline); code != 0 {
		p.t.Fatalf("exit code after SIGTERM = %d, want 0; stderr:\n%s", code, p.stderr)
	}
}

func readToken(t *testing.T, dataDir string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(dataDir, "admin.token"))
	if err != nil {
		t.Fatal(err)
	}
	return strings.TrimSpace(string(b))
}

func TestServeGeneratesAdminToken(t *testing.T) {
	dataDir := filepath.Join(t.TempDir(), "data")
	p, ready := startServer(t, dataDir, nil)

	token := readToken(t, dataDir)
	if ready.Fragment != "token="+token {
		t.Errorf("ready URL fragment = %q, want token=<contents of admin.token>", ready.Fragment)
	}
	if ready.Path != "/" {
		t.Errorf("ready URL path = %q, want /", ready.Path)
	}
	for _, c := range []struct {
		path string
		want os.FileMode
	}{
		{dataDir, 0o700},
		{filepath.Join(dataDir, "admin.token"), 0o600},
	} {
		info, err := os.Stat(c.path)
		if err != nil {
			t.Fatal(err)
		}
		if got := info.Mode().Perm(); got != c.want {
			t.Errorf("mode of %s = %v, want %v", filepath.Base(c.path), got, c.want)
		}
	}

	// The authenticated API accepts the admin token from the ready line.
	wantAdminAccepted(t, ready, token)

	p.stop()

	// Exactly one JSON log line is the ready line, and it carries the
	// page's URL without the token.
	page := *ready
	page.Fragment = ""
	var readyLines int
	for line := range strings.Lines(p.stderr.String()) {
		var rec struct {
			Msg string `json:"msg"`
			URL string `json:"url"`
		}
		if err := json.Unmarshal([]byte(line), &rec); err != nil {
			t.Errorf("stderr line is not JSON: %q", line)
			continue
		}
		if rec.Msg == "ready" {
			readyLines++
			if rec.URL != page.String() {
				t.Errorf("logged ready url = %q, want %q", rec.URL, page.String())
			}
		}
	}
	if readyLines != 1 {
		t.Errorf("got %d ready log lines, want 1", readyLines)
	}
}

func TestServeReusesAdminToken(t *testing.T) {
	dataDir := t.TempDir()
	p, first := startServer(t, dataDir, nil)
	p.stop()
	token := readToken(t, dataDir)

	p, second := startServer(t, dataDir, nil)
	p.stop()
	if second.Fragment != first.Fragment {
		t.Errorf("restart fragment = %q, want the first start's %q", second.Fragment, first.Fragment)
	}
	if got := readToken(t, dataDir); got != token {
		t.Errorf("admin.token changed on restart: %q, want %q", got, token)
	}
}

func TestServeAdminTokenFromConfig(t *testing.T) {
	const envToken, flagToken = "env-token-0123456789", "flag-token-0123456789"
	tests := []struct {
		name string
		env  []string
		args []string
		want string
	}{
		{"Env", []string{"MAILROOM_ADMIN_TOKEN=" + envToken}, nil, envToken},
		{"FlagWinsOverEnv", []string{"MAILROOM_ADMIN_TOKEN=" + envToken}, []string{"--admin-token", flagToken}, flagToken},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dataDir := t.TempDir()
			p, ready := startServer(t, dataDir, tt.env, tt.args...)
			wantAdminAccepted(t, ready, tt.want)
			p.stop()
			if ready.Fragment != "" {
				t.Errorf("fragment = %q, want none: a token the operator gave is never printed", ready.Fragment)
			}
			if _, err := os.Stat(filepath.Join(dataDir, "admin.token")); !errors.Is(err, os.ErrNotExist) {
				t.Errorf("admin.token written although a token was configured (stat: %v)", err)
			}
		})
	}
}

// TestAdminTokenNeverLogged checks that an admin token the operator gave
// in the environment appears neither on standard output nor on standard
// error, even at debug level and across a request and a shutdown, and
// that the start-up log names the providers with credentials, never
// their keys.
func TestAdminTokenNeverLogged(t *testing.T) {
	const token = "env-secret-token-5f3a9c0e17b2"
	const key = "sk-ant-secret-key-9d81c2"
	dataDir := t.TempDir()
	p, ready := startServer(t, dataDir, []string{"MAILROOM_ADMIN_TOKEN=" + token, "MAILROOM_LOG_LEVEL=debug", "ANTHROPIC_API_KEY=" + key})
	if ready.Fragment != "" {
		t.Errorf("ready line fragment = %q, want none for a token the operator gave", ready.Fragment)
	}
	wantAdminAccepted(t, ready, token)
	p.stop()
	logs := p.stderr.String()
	if !strings.Contains(logs, `"msg":"ready"`) {
		t.Errorf("no ready log line on stderr:\n%s", logs)
	}
	if !strings.Contains(logs, `"with_credentials":["anthropic"]`) {
		t.Errorf("stderr does not name the providers with credentials; got:\n%s\nwant \"with_credentials\":[\"anthropic\"]", logs)
	}
	for name, secret := range map[string]string{"admin token": token, "provider key": key} {
		if strings.Contains(logs, secret) {
			t.Errorf("stderr carries the %s; got:\n%s\nwant no occurrence of %q", name, logs, secret)
		}
		if out := p.stdoutText(); strings.Contains(out, secret) {
			t.Errorf("stdout carries the %s; got:\n%s\nwant no occurrence of %q", name, out, secret)
		}
	}
}

func TestServeEnvConfig(t *testing.T) {
	dataDir := t.TempDir()
	p := start(t, []string{"MAILROOM_ADDR=127.0.0.1:0", "MAILROOM_DATA=" + dataDir, "MAILROOM_LOG_LEVEL=debug"})
	ready := p.readyURL()
	waitHealthy(t, ready)
	p.stop()
	if ready.Fragment != "token="+readToken(t, dataDir) {
		t.Errorf("fragment %q does not match admin.token in MAILROOM_DATA", ready.Fragment)
	}
}

// TestShutdownEndsEventStream checks that SIGTERM with the status page's
// event stream open still shuts down cleanly, without waiting out the
// shutdown timeout, and closes the stream.
func TestShutdownEndsEventStream(t *testing.T) {
	dataDir := t.TempDir()
	p, ready := startServer(t, dataDir, nil)
	req, _ := http.NewRequest(http.MethodGet, "http://"+ready.Host+"/api/v1/events", nil)
	req.Header.Set("Authorization", "Bearer "+readToken(t, dataDir))
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if ct := resp.Header.Get("Content-Type"); resp.StatusCode != http.StatusOK || !strings.HasPrefix(ct, "text/event-stream") {
		t.Fatalf("GET /api/v1/events: %s %q, want 200 text/event-stream", resp.Status, ct)
	}
	// Read the stream's first bytes, so the handler is surely running.
	if _, err := bufio.NewReader(resp.Body).ReadString('\n'); err != nil {
		t.Fatal(err)
	}
	streamDone := make(chan error, 1)
	go func() {
		_, err := io.Copy(io.Discard, resp.Body)
		streamDone <- err
	}()

	p.stop()
	if err := <-streamDone; err != nil {
		t.Errorf("event stream did not end cleanly: %v", err)
	}
	if log := p.stderr.String(); strings.Contains(log, "shutdown timed out") {
		t.Errorf("shutdown waited for the event stream until its timeout:\n%s", log)
	}
}

func TestSecondServerOnSameDataDirExits1(t *testing.T) {
	dataDir := t.TempDir()
	first, _ := startServer(t, dataDir, nil)

	second := start(t, nil, "--addr", "127.0.0.1:0", "--data", dataDir)
	if code := second.wait(exitDeadline); code != 1 {
		t.Errorf("second server exit code = %d, want 1", code)
	}
	if msg := second.stderr.String(); !strings.Contains(msg, dataDir) {
		t.Errorf("second server's message does not name %s:\n%s", dataDir, msg)
	}
	first.stop()
}

func TestPortInUseExits1(t *testing.T) {
	first, ready := startServer(t, t.TempDir(), nil)
	second := start(t, nil, "--addr", ready.Host, "--data", t.TempDir())
	if code := second.wait(exitDeadline); code != 1 {
		t.Errorf("exit code = %d, want 1", code)
	}
	if msg := second.stderr.String(); !strings.Contains(msg, ready.Host) {
		t.Errorf("message does not name the address %s:\n%s", ready.Host, msg)
	}
	first.stop()
}

func TestHealthcheckCommand(t *testing.T) {
	p, ready := startServer(t, t.TempDir(), nil)
	hc := start(t, nil, "healthcheck", "--addr", ready.Host)
	if code := hc.wait(exitDeadline); code != 0 {
		t.Errorf("healthcheck against a running server: exit %d, want 0; stderr:\n%s", code, hc.stderr)
	}
	p.stop()
	hc = start(t, nil, "healthcheck", "--addr", ready.Host)
	if code := hc.wait(exitDeadline); code != 1 {
		t.Errorf("healthcheck against a stopped server: exit %d, want 1", code)
	}
}

func TestCommandLineErrors(t *testing.T) {
	tests := []struct {
		name     string
		args     []string
		env      []string
		wantCode int
		wantMsg  string
	}{
		{"UnknownCommand", []string{"bogus"}, nil, 2, `unknown command "bogus"`},
		{"UnknownFlag", []string{"--bogus"}, nil, 2, "bogus"},
		{"ExtraArgument", []string{"--data", "x", "extra"}, nil, 2, `unexpected argument "extra"`},
		{"BadAddr", []string{"--addr", "nonsense"}, nil, 2, "nonsense"},
		{"BadLogLevel", nil, []string{"MAILROOM_LOG_LEVEL=loud"}, 2, "loud"},
		{"ShortToken", []string{"--admin-token", "short"}, nil, 2, "at least 16"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := start(t, tt.env, tt.args...)
			if code := p.wait(exitDeadline); code != tt.wantCode {
				t.Errorf("exit code = %d, want %d; stderr:\n%s", code, tt.wantCode, p.stderr)
			}
			if msg := p.stderr.String(); !strings.Contains(msg, tt.wantMsg) {
				t.Errorf("stderr does not contain %q:\n%s", tt.wantMsg, msg)
			}
		})
	}
}

func TestParseConfig(t *testing.T) {
	scripted := agent.ModelConfig{Provider: agent.ProviderScripted}
	tests := []struct {
		name    string
		args    []string
		env     map[string]string
		want    config
		wantErr bool
	}{
		{name: "Defaults", want: config{addr: "127.0.0.1:8080", dataDir: "./data", logLevel: slog.LevelInfo, maxTeams: 10000, model: scripted, store: storeFile, sandbox: workspace.ModeOn, sandboxUser: workspace.DefaultUser, maxRunningTurns: 32}},
		{
			name: "Env",
			env:  map[string]string{"MAILROOM_ADDR": "0.0.0.0:9000", "MAILROOM_DATA": "/srv/m", "MAILROOM_ADMIN_TOKEN": "abcdefghijklmnop", "MAILROOM_LOG_LEVEL": "warn", "MAILROOM_MAX_TEAMS": "50"},
			want: config{addr: "0.0.0.0:9000", dataDir: "/srv/m", adminToken: "abcdefghijklmnop", logLevel: slog.LevelWarn, maxTeams: 50, model: scripted, store: storeFile, sandbox: workspace.ModeOn, sandboxUser: workspace.DefaultUser, maxRunningTurns: 32},
		},
		{
			name: "FlagsWin",
			args: []string{"--addr", ":7000", "--data", "d", "--admin-token", "qrstuvwxyz-0123456", "--log-level", "debug", "--max-teams", "3", "--max-running-turns", "4"},
			env:  map[string]string{"MAILROOM_ADDR": "0.0.0.0:9000", "MAILROOM_DATA": "/srv/m", "MAILROOM_ADMIN_TOKEN": "abcdefghijklmnop", "MAILROOM_LOG_LEVEL": "warn", "MAILROOM_MAX_TEAMS": "50"},
			want: config{addr: ":7000", dataDir: "d", adminToken: "qrstuvwxyz-0123456", logLevel: slog.LevelDebug, maxTeams: 3, model: scripted, store: storeFile, sandbox: workspace.ModeOn, sandboxUser: workspace.DefaultUser, maxRunningTurns: 4},
		},
		{
			name: "ModelAndWorkspaces",
			args: []string{"--model", "openai:llama3.2:3b"},
			env:  map[string]string{"MAILROOM_MODEL": "anthropic:claude-sonnet-4-5", "MAILROOM_WORKSPACES": "/srv/ws"},
			want: config{addr: "127.0.0.1:8080", dataDir: "./data", logLevel: slog.LevelInfo, maxTeams: 10000,
				model: agent.ModelConfig{Provider: "openai", Name: "llama3.2:3b"}, workspaces: "/srv/ws", store: storeFile, sandbox: workspace.ModeOn, sandboxUser: workspace.DefaultUser, maxRunningTurns: 32},
		},
		{
			name: "SandboxOff",
			env:  map[string]string{"MAILROOM_SANDBOX": "off"},
			want: config{addr: "127.0.0.1:8080", dataDir: "./data", logLevel: slog.LevelInfo, maxTeams: 10000, model: scripted, store: storeFile, sandbox: workspace.ModeOff, sandboxUser: workspace.DefaultUser, maxRunningTurns: 32},
		},
		{
			name: "SandboxFlagWins",
			args: []string{"--sandbox", "on"},
			env:  map[string]string{"MAILROOM_SANDBOX": "off"},
			want: config{addr: "127.0.0.1:8080", dataDir: "./data", logLevel: slog.LevelInfo, maxTeams: 10000, model: scripted, store: storeFile, sandbox: workspace.ModeOn, sandboxUser: workspace.DefaultUser, maxRunningTurns: 32},
		},
		{name: "ErrSandbox", args: []string{"--sandbox", "maybe"}, wantErr: true},
		{name: "ErrModelProvider", args: []string{"--model", "gemini:pro"}, wantErr: true},
		{name: "ErrModelName", env: map[string]string{"MAILROOM_MODEL": "anthropic"}, wantErr: true},
		{name: "ErrPortRange", args: []string{"--addr", "127.0.0.1:70000"}, wantErr: true},
		{name: "ErrNoPort", args: []string{"--addr", "127.0.0.1"}, wantErr: true},
		{name: "ErrEmptyData", args: []string{"--data", " "}, wantErr: true},
		{name: "ErrTokenChars", args: []string{"--admin-token", "abcdefgh#ijklmnop"}, wantErr: true},
		{name: "ErrLogLevel", args: []string{"--log-level", "chatty"}, wantErr: true},
		{name: "ErrMaxTeamsZero", args: []string{"--max-teams", "0"}, wantErr: true},
		{name: "ErrMaxTeamsEnv", env: map[string]string{"MAILROOM_MAX_TEAMS": "many"}, wantErr: true},
		{name: "ErrMaxRunningTurnsZero", args: []string{"--max-running-turns", "0"}, wantErr: true},
		{name: "ErrMaxRunningTurnsEnv", env: map[string]string{"MAILROOM_MAX_RUNNING_TURNS": "lots"}, wantErr: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			getenv := func(k string) string { return tt.env[k] }
			got, err := parseConfig(tt.args, getenv, io.Discard)
			if tt.wantErr {
				if !errors.As(err, new(*usageError)) {
					t.Fatalf("err = %v, want a usage error", err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got != tt.want {
				t.Errorf("got %+v, want %+v", got, tt.want)
			}
		})
	}
}

func TestReport(t *testing.T) {
	tests := []struct {
		name string
		err  error
		want int
	}{
		{"OK", nil, 0},
		{"Usage", usageErrorf("bad"), 2},
		{"WrappedUsage", fmt.Errorf("x: %w", usageErrorf("bad")), 2},
		{"Failure", errors.New("disk on fire"), 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := report(tt.err, io.Discard); got != tt.want {
				t.Errorf("report(%v) = %d, want %d", tt.err, got, tt.want)
			}
		})
	}
}

func TestDialAddr(t *testing.T) {
	tests := []struct{ in, want string }{
		{"127.0.0.1:8080", "127.0.0.1:8080"},
		{"0.0.0.0:8080", "127.0.0.1:8080"},
		{"[::]:8080", "127.0.0.1:8080"},
		{":8080", "127.0.0.1:8080"},
		{"[::1]:8080", "[::1]:8080"},
		{"example.com:80", "example.com:80"},
	}
	for _, tt := range tests {
		if got := dialAddr(tt.in); got != tt.want {
			t.Errorf("dialAddr(%q) = %q, want %q", tt.in, got, tt.want)
		}
	}
}

func TestHealthcheckStatus(t *testing.T) {
	tests := []struct {
		name    string
		status  int
		wantErr bool
	}{
		{"OK", http.StatusOK, false},
		{"NoContent", http.StatusNoContent, false},
		{"ErrUnavailable", http.StatusServiceUnavailable, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				if r.URL.Path != "/healthz" {
					http.NotFound(w, r)
					return
				}
				w.WriteHeader(tt.status)
			}))
			defer srv.Close()
			addr := strings.TrimPrefix(srv.URL, "http://")
			err := run(t.Context(), []string{"healthcheck", "--addr", addr}, func(string) string { return "" }, io.Discard, io.Discard)
			if (err != nil) != tt.wantErr {
				t.Errorf("err = %v, wantErr %v", err, tt.wantErr)
			}
		})
	}
}

// TestWarnsOfDefaultModelWithoutKey: a server whose default model is
// Anthropic's, started without ANTHROPIC_API_KEY, warns at start (naming
// the variable, not refusing to start); with the key, or on the scripted
// model, it does not.
func TestWarnsOfDefaultModelWithoutKey(t *testing.T) {
	const warning = "the default model cannot answer"
	for _, tc := range []struct {
		name string
		env  []string
		args []string
		want bool
	}{
		{"anthropic without key", nil, []string{"--model", "anthropic:claude-sonnet-4-5"}, true},
		{"anthropic with key", []string{"ANTHROPIC_API_KEY=sk-test-key"}, []string{"--model", "anthropic:claude-sonnet-4-5"}, false},
		{"scripted", nil, nil, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p, _ := startServer(t, filepath.Join(t.TempDir(), "data"), append([]string{"MAILROOM_ADMIN_TOKEN=warn-admin-0123456789"}, tc.env...), tc.args...)
			logs := p.stderr.String()
			if got := strings.Contains(logs, warning); got != tc.want {
				t.Errorf("start-up logs warn %q: %v, want %v; stderr:\n%s", warning, got, tc.want, logs)
			}
			if tc.want && !strings.Contains(logs, "ANTHROPIC_API_KEY") {
				t.Errorf("the warning does not name ANTHROPIC_API_KEY; stderr:\n%s", logs)
			}
			if strings.Contains(logs, "sk-test-key") {
				t.Errorf("the logs carry the key; stderr:\n%s", logs)
			}
		})
	}
}
