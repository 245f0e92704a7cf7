package workspace

import (
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync/atomic"
	"testing"

	"mailroom/internal/testkit"
)

// sandboxRunner is the runner of these tests: the sandbox must work on
// the machine that runs them. A kernel without Landlock or user
// namespaces fails here, loudly, rather than skipping the tests.
func sandboxRunner(t *testing.T) *Runner {
	t.Helper()
	r := Default()
	if why := r.Available(); why != "" {
		t.Fatalf("run_main's sandbox is not available on this machine: %s", why)
	}
	return r
}

// escape is the program that tries each way out (testdata/escape.py).
func escape(t *testing.T) []byte {
	t.Helper()
	b, err := os.ReadFile("testdata/escape.py")
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// newMarker returns a number no other process has on its command line:
// the sleeping child's argument, to find it in /proc.
func newMarker(t *testing.T) string {
	n, err := rand.Int(rand.Reader, big.NewInt(1e9))
	if err != nil {
		t.Fatal(err)
	}
	return fmt.Sprint(1e9 + n.Int64())
}

// killSleepers ends what a failed test left running.
func killSleepers(t *testing.T, marker string) {
	t.Cleanup(func() {
		for _, pid := range testkit.Sleepers(t, marker) {
			var n int
			if _, err := fmt.Sscan(pid, &n); err == nil {
				_ = (&os.Process{Pid: n}).Kill()
			}
		}
	})
}

// escapeSetup is a workspace holding the escape program, beside what it
// must not reach: a secret file, another team's state, a TCP listener
// and this process's environment with a secret in it.
type escapeSetup struct {
	ws, marker string
	conns      *atomic.Int32
}

func newEscapeSetup(t *testing.T) escapeSetup {
	t.Helper()
	t.Setenv("MAILROOM_TEST_SECRET", "sk-must-not-leak")
	data := t.TempDir()
	secret := filepath.Join(data, "admin.token")
	state := filepath.Join(data, "teams", "other", "state.json")
	other := filepath.Join(data, "workspaces", "other")
	ws := filepath.Join(data, "workspaces", "shop")
	for _, d := range []string{filepath.Dir(state), other, ws} {
		if err := os.MkdirAll(d, 0o700); err != nil {
			t.Fatal(err)
		}
	}
	for path, content := range map[string]string{secret: "admin-secret\n", state: "{}\n", filepath.Join(other, "notes.txt"): "private\n"} {
		if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	ln, err := net.Listen("tcp4", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	conns := &atomic.Int32{}
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			conns.Add(1)
			c.Close()
		}
	}()
	marker := newMarker(t)
	killSleepers(t, marker)
	targets, err := json.Marshal(map[string]any{
		"pid":     os.Getpid(),
		"secrets": []string{secret, state, filepath.Join(other, "notes.txt")},
		"dirs":    []string{data, filepath.Join(data, "teams"), other, "/proc/self", "/root", "/tmp"},
		"port":    ln.Addr().(*net.TCPAddr).Port,
		"marker":  marker,
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(ws, "targets.json"), targets, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(ws, Program), escape(t), 0o600); err != nil {
		t.Fatal(err)
	}
	return escapeSetup{ws: ws, marker: marker, conns: conns}
}

// checkReport checks the escape program's report: every attempt blocked,
// what must work working, nothing of the server's environment seen.
func (e escapeSetup) checkReport(t *testing.T, output string) {
	t.Helper()
	var report map[string]any
	if err := json.Unmarshal([]byte(output), &report); err != nil {
		t.Fatalf("the escape program's output = %q, want its JSON report: %v", output, err)
	}
	attempts := 0
	for name, v := range report {
		s, ok := v.(string)
		if !ok || name == "tmpdir" || name == "imports" {
			continue
		}
		attempts++
		if !strings.HasPrefix(s, "blocked: ") {
			t.Errorf("escape %s: got %q, want blocked", name, s)
		}
	}
	if attempts != 17 {
		t.Errorf("the report holds %d attempts, want all 17: %v", attempts, report)
	}
	if got := e.conns.Load(); got != 0 {
		t.Errorf("the listener accepted %d connections from the program, want 0", got)
	}
	if report["imports"] != "ok" {
		t.Errorf("imports = %v, want ok", report["imports"])
	}
	if want := filepath.Join(e.ws, tmpName); report["tmpdir"] != want {
		t.Errorf("the program's temporary directory = %v, want %s (TMPDIR)", report["tmpdir"], want)
	}
	var env []string
	for _, k := range report["env"].([]any) {
		env = append(env, k.(string))
	}
	// LC_CTYPE is python's own (PEP 538 locale coercion), not inherited.
	env = slices.DeleteFunc(env, func(k string) bool { return k == "LC_CTYPE" })
	if !slices.Equal(env, []string{"PATH", "TMPDIR"}) {
		t.Errorf("the program's environment = %v, want [PATH TMPDIR]", env)
	}
	if strings.Contains(output, "sk-must-not-leak") || strings.Contains(output, "admin-secret") {
		t.Errorf("a secret reached the program's output: %s", output)
	}
	if b, err := os.ReadFile(filepath.Join(e.ws, "written.txt")); err != nil || string(b) != "ok" {
		t.Errorf("written.txt = %q, %v; want the program's write to the workspace", b, err)
	}
	if left := testkit.Sleepers(t, e.marker); len(left) > 0 {
		t.Errorf("the program's child in a session of its own still runs (pids %v) after run_main answered", left)
	}
}

// Every way out of the sandbox is blocked, what a program needs still
// works, and no process of the run outlives it.
func TestSandboxBlocksEscapes(t *testing.T) {
	r := sandboxRunner(t)
	e := newEscapeSetup(t)
	out, err := r.Run(t.Context(), e.ws, Quota{})
	if err != nil {
		t.Fatalf("Run = %v, want the program run", err)
	}
	if out.ExitCode != 0 || out.TimedOut {
		t.Fatalf("Run = %+v, want exit 0", out)
	}
	e.checkReport(t, out.Output)
	if _, err := os.Stat(filepath.Join(e.ws, tmpName)); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the program's TMPDIR is still there after the run (%v), want it removed", err)
	}
}

// spinner is a program that starts a child in a session of its own,
// says so, writes started.txt and never ends.
func spinner(t *testing.T, ws, marker string) {
	t.Helper()
	prog := fmt.Sprintf("import subprocess\nsubprocess.Popen(['sleep', '%s'], start_new_session=True)\nprint('spinning', flush=True)\nopen('started.txt', 'w').close()\nwhile True:\n    pass\n", marker)
	if err := os.WriteFile(filepath.Join(ws, Program), []byte(prog), 0o600); err != nil {
		t.Fatal(err)
	}
}

// A program that does not end is killed at the timeout with every process
// it started, and its output so far is kept.
func TestSandboxTimeoutKillsEverything(t *testing.T) {
	r := sandboxRunner(t)
	ws := t.TempDir()
	marker := newMarker(t)
	killSleepers(t, marker)
	spinner(t, ws, marker)
	out, err := r.Run(t.Context(), ws, Quota{})
	if err != nil || !out.TimedOut || out.Output != "spinning\n" {
		t.Fatalf("Run = %+v, %v; want timed out with the output so far", out, err)
	}
	if left := testkit.Sleepers(t, marker); len(left) > 0 {
		t.Errorf("the program's child in a session of its own still runs (pids %v) after the timeout", left)
	}
}

// A run cancelled (the turn cancelled, the server stopping) ends at once,
// whole; while it runs, a second run in the same workspace is refused
// with run_in_progress.
func TestSandboxCancelAndOneRunAtATime(t *testing.T) {
	r := sandboxRunner(t)
	ws := t.TempDir()
	marker := newMarker(t)
	killSleepers(t, marker)
	spinner(t, ws, marker)
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	type result struct {
		out Outcome
		err error
	}
	done := make(chan result, 1)
	go func() {
		out, err := r.Run(ctx, ws, Quota{})
		done <- result{out, err}
	}()
	// Wait for the program to spin (or for the run to end too early).
	for {
		if _, err := os.Stat(filepath.Join(ws, "started.txt")); err == nil {
			break
		}
		select {
		case res := <-done:
			t.Fatalf("Run ended before the program spun: %+v, %v", res.out, res.err)
		default:
		}
	}
	_, err := r.Run(t.Context(), ws, Quota{})
	var re *RunError
	if !errors.As(err, &re) || re.Code != CodeRunInProgress {
		t.Fatalf("a second Run while one runs = %v, want %s", err, CodeRunInProgress)
	}
	cancel()
	res := <-done
	if res.err != nil || res.out.Signal != "killed" {
		t.Fatalf("the cancelled Run = %+v, %v; want the program killed", res.out, res.err)
	}
	if left := testkit.Sleepers(t, marker); len(left) > 0 {
		t.Errorf("the program's child in a session of its own still runs (pids %v) after the run was cancelled", left)
	}
	// The workspace is free again.
	if err := os.WriteFile(filepath.Join(ws, Program), []byte("print(1)\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if out, err := r.Run(t.Context(), ws, Quota{}); err != nil || out.Output != "1\n" {
		t.Fatalf("a run after the cancelled one = %+v, %v; want output 1", out, err)
	}
}

// A program that exits while a child it started keeps its stdout open is
// reported as what it was: its exit status and its output. In the sandbox
// the child dies with the run; with the sandbox off it escapes the
// process group, and the output is still reported.
func TestExitWhileChildHoldsStdout(t *testing.T) {
	for _, mode := range []Mode{ModeOn, ModeOff} {
		t.Run(string(mode), func(t *testing.T) {
			r := sandboxRunner(t)
			if mode == ModeOff {
				r = NewRunner(ModeOff, nil)
			}
			ws := t.TempDir()
			marker := newMarker(t)
			killSleepers(t, marker)
			prog := fmt.Sprintf("import subprocess\nsubprocess.Popen(['sleep', '%s'], start_new_session=True)\nprint('done')\nraise SystemExit(4)\n", marker)
			if err := os.WriteFile(filepath.Join(ws, Program), []byte(prog), 0o600); err != nil {
				t.Fatal(err)
			}
			out, err := r.Run(t.Context(), ws, Quota{})
			if err != nil || out.ExitCode != 4 || out.Output != "done\n" {
				t.Fatalf("Run = %+v, %v; want exit 4 with output %q", out, err, "done\n")
			}
			if left := testkit.Sleepers(t, marker); mode == ModeOn && len(left) > 0 {
				t.Errorf("the child still runs (pids %v) after run_main answered", left)
			}
		})
	}
}

// Where the sandbox cannot run, a run is refused with
// sandbox_unavailable, unless the sandbox is off.
func TestSandboxUnavailable(t *testing.T) {
	ws := t.TempDir()
	if err := os.WriteFile(filepath.Join(ws, Program), []byte("print(1)\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	r := &Runner{mode: ModeOn, env: sandboxEnv{unavailable: "the kernel has no Landlock"}, busy: map[string]bool{}}
	_, err := r.Run(t.Context(), ws, Quota{})
	var re *RunError
	if !errors.As(err, &re) || re.Code != CodeSandboxUnavailable {
		t.Fatalf("Run without a sandbox = %v, want %s", err, CodeSandboxUnavailable)
	}
	off := NewRunner(ModeOff, nil)
	if out, err := off.Run(t.Context(), ws, Quota{}); err != nil || out.Output != "1\n" {
		t.Fatalf("Run with the sandbox off = %+v, %v; want output 1", out, err)
	}
}
