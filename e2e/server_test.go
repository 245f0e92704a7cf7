// Package e2e holds black-box tests against the real server binary: it is
// built once, started on a loopback port over a temporary data directory,
// and driven only through HTTP, signals and the files it writes.
package e2e

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"mailroom/internal/pgtest"
	"mailroom/internal/testkit"
)

// serverBin is the real binary, built once by TestMain.
var serverBin string

// adminToken is the admin token every server in these tests is given.
const adminToken = "e2e-admin-token-0123456789"

// TestMain builds the binary and, when a test asked for a database
// (pgtest.New), stops the test binary's private PostgreSQL cluster at the end.
func TestMain(m *testing.M) { os.Exit(pgtest.Finish(testkit.Main(m, &serverBin))) }

// Bounds for waiting on a real process. They only cap a wait that is
// otherwise driven by output or exit, so a broken server fails the test
// instead of hanging it.
const (
	startDeadline = 60 * time.Second // generous: -race binaries on a busy machine
	exitDeadline  = 20 * time.Second
)

// server is one running server process.
type server struct {
	t      *testing.T
	cmd    *exec.Cmd
	base   string // http://127.0.0.1:port
	stderr *testkit.Output
	done   chan struct{}
	err    error // from Wait, valid once done is closed
}

// startServer runs the binary on a free loopback port over dataDir, with
// env added to its environment, and returns once /healthz answers. The
// process is killed at the end of the test if it is still running.
func startServer(t *testing.T, dataDir string, env ...string) *server {
	t.Helper()
	cmd := exec.Command(serverBin)
	cmd.Env = append([]string{
		"PATH=" + os.Getenv("PATH"),
		"HOME=" + t.TempDir(),
		"MAILROOM_ADDR=127.0.0.1:0",
		"MAILROOM_DATA=" + dataDir,
		"MAILROOM_ADMIN_TOKEN=" + adminToken,
	}, env...)
	cmd.Dir = t.TempDir()
	s := &server{t: t, cmd: cmd, stderr: &testkit.Output{}, done: make(chan struct{})}
	cmd.Stderr = s.stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	ready := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			if u, ok := strings.CutPrefix(sc.Text(), "Mailroom is ready: "); ok {
				select {
				case ready <- u:
				default:
				}
			}
		}
		s.err = cmd.Wait()
		close(s.done)
	}()
	t.Cleanup(func() {
		select {
		case <-s.done:
		default:
			_ = cmd.Process.Kill()
			<-s.done
		}
	})
	select {
	case raw := <-ready:
		u, err := url.Parse(raw)
		if err != nil {
			t.Fatalf("ready line %q: %v", raw, err)
		}
		s.base = "http://" + u.Host
	case <-s.done:
		t.Fatalf("server exited before it was ready (%v); stderr:\n%s", s.err, s.stderr)
	case <-time.After(startDeadline):
		t.Fatalf("no ready line within %v; stderr:\n%s", startDeadline, s.stderr)
	}
	s.waitHealthy()
	return s
}

// waitHealthy polls /healthz until it answers 200, within a bounded time.
func (s *server) waitHealthy() {
	s.t.Helper()
	deadline := time.Now().Add(startDeadline)
	for {
		resp, err := http.Get(s.base + "/healthz")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return
			}
		}
		if time.Now().After(deadline) {
			s.t.Fatalf("%s/healthz not healthy within %v (last: %v)", s.base, startDeadline, err)
		}
		time.Sleep(10 * time.Millisecond) // polling interval, not synchronisation
	}
}

// wait returns the exit code, failing the test if the process does not
// end within d.
func (s *server) wait(d time.Duration) int {
	s.t.Helper()
	select {
	case <-s.done:
	case <-time.After(d):
		s.t.Fatalf("server still running after %v; stderr:\n%s", d, s.stderr)
	}
	var exit *exec.ExitError
	if s.err != nil && !errors.As(s.err, &exit) {
		s.t.Fatalf("wait: %v", s.err)
	}
	return s.cmd.ProcessState.ExitCode()
}

// kill ends the process with SIGKILL: no handler runs, nothing is flushed.
func (s *server) kill() {
	s.t.Helper()
	if err := s.cmd.Process.Signal(syscall.SIGKILL); err != nil {
		s.t.Fatal(err)
	}
	s.wait(exitDeadline)
}

// stop sends SIGTERM and requires a clean exit 0.
func (s *server) stop() {
	s.t.Helper()
	if err := s.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		s.t.Fatal(err)
	}
	if code := s.wait(exitDeadline); code != 0 {
		s.t.Fatalf("exit code after SIGTERM = %d, want 0; stderr:\n%s", code, s.stderr)
	}
}

// client talks to one server incarnation. Each incarnation gets its own
// transport, so no connection to a killed process is ever reused.
type client struct {
	base string
	http *http.Client
}

func newClient(base string) *client {
	tr := &http.Transport{MaxIdleConnsPerHost: 64, DisableCompression: true}
	// The timeout only bounds a request to a server that hangs; a killed
	// server resets its connections at once.
	return &client{base: base, http: &http.Client{Transport: tr, Timeout: 30 * time.Second}}
}

func (c *client) close() { c.http.CloseIdleConnections() }

// errTransport marks a call whose outcome is unknown: the connection
// failed or the response was cut off.
var errTransport = errors.New("no complete response")

// do sends one API call and decodes a 2xx body into out. It returns the
// status code; err wraps errTransport when no complete response arrived.
// A non-2xx response is returned with its problem code.
func (c *client) do(method, path, token, idemKey string, body, out any) (status int, code string, err error) {
	var rd io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			return 0, "", err
		}
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequest(method, c.base+"/api/v1"+path, rd)
	if err != nil {
		return 0, "", err
	}
	req.Header.Set("Authorization", "Bearer "+token)
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	if idemKey != "" {
		req.Header.Set("Idempotency-Key", idemKey)
	}
	resp, err := c.http.Do(req)
	if err != nil {
		return 0, "", fmt.Errorf("%w: %v", errTransport, err)
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	if err != nil {
		return 0, "", fmt.Errorf("%w: %v", errTransport, err)
	}
	if resp.StatusCode/100 != 2 {
		var p struct {
			Code   string `json:"code"`
			Detail string `json:"detail"`
		}
		if err := json.Unmarshal(data, &p); err != nil {
			return resp.StatusCode, "", fmt.Errorf("%s %s: %d with a body that is no problem document: %q", method, path, resp.StatusCode, data)
		}
		return resp.StatusCode, p.Code, nil
	}
	if out != nil {
		if err := json.Unmarshal(data, out); err != nil {
			return resp.StatusCode, "", fmt.Errorf("%s %s: decode %q: %v", method, path, data, err)
		}
	}
	return resp.StatusCode, "", nil
}

// killSwitch kills a server with SIGKILL at its at-th acknowledgement:
// the crash tests count every answer their clients were given (ack) and
// check after a restart that each one held.
type killSwitch struct {
	srv    *server
	at     int64
	acks   atomic.Int64
	once   sync.Once
	killed chan struct{} // closed at the kill
}

func newKillSwitch(srv *server, at int64) *killSwitch {
	return &killSwitch{srv: srv, at: at, killed: make(chan struct{})}
}

// ack counts one acknowledgement, and kills the server at the at-th.
func (k *killSwitch) ack() {
	if k.acks.Add(1) == k.at {
		k.kill()
	}
}

// kill kills the server now, once.
func (k *killSwitch) kill() {
	k.once.Do(func() { k.srv.kill(); close(k.killed) })
}
