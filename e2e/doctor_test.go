package e2e

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// runDoctor runs `mailroom doctor --dir dir` with base, token, PATH and
// CODEX_HOME=home.
func runDoctor(t *testing.T, base, token, path, home, dir string) proc {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), startDeadline)
	defer cancel()
	cmd := exec.CommandContext(ctx, serverBin, "doctor", "--dir", dir)
	cmd.Env = []string{"PATH=" + path, "HOME=" + t.TempDir(), "CODEX_HOME=" + home, "MAILROOM_URL=" + base, "MAILROOM_TOKEN=" + token}
	var out, errOut strings.Builder
	cmd.Stdout, cmd.Stderr = &out, &errOut
	_ = cmd.Run()
	return proc{stdout: out.String(), stderr: errOut.String(), code: cmd.ProcessState.ExitCode()}
}

// TestDoctor: doctor against a real server: every check passes once
// setup has run, and each wrong thing (no hooks, a wrong token, the
// server down) is the line that fails, with exit 1 naming it.
func TestDoctor(t *testing.T) {
	t.Parallel()
	s := startServer(t, filepath.Join(t.TempDir(), "data"))
	c := newClient(s.base)
	defer c.close()
	tok := createTeam(t, c, "doc", "reader")
	path := pathWithMailroom(t)
	home := t.TempDir()

	dir := t.TempDir()
	p := runDoctor(t, s.base, tok["reader"], path, home, dir)
	if p.code != 1 || !strings.Contains(p.stdout, "ok    token  MAILROOM_TOKEN is member reader of team doc") ||
		!strings.Contains(p.stdout, "FAIL  hooks") || !strings.Contains(p.stderr, "hooks") || strings.Count(p.stdout, "\n") != 4 {
		t.Fatalf("doctor without hooks: exit %d, stdout %q, stderr %q; want 4 lines, hooks failing, exit 1", p.code, p.stdout, p.stderr)
	}
	for _, host := range []string{"claude", "codex"} {
		dir := setupProject(t, s.base, host, "CODEX_HOME="+home)
		p = runDoctor(t, s.base, tok["reader"], path, home, dir)
		if p.code != 0 || strings.Contains(p.stdout, "FAIL") || !strings.Contains(p.stdout, "ok    hooks") {
			t.Errorf("doctor after setup %s: exit %d, stdout %q, stderr %q; want every check ok", host, p.code, p.stdout, p.stderr)
		}
	}
	claudeDir := setupProject(t, s.base, "claude")
	if p = runDoctor(t, s.base, "mr_wrong", path, home, claudeDir); p.code != 1 || !strings.Contains(p.stdout, "FAIL  token") {
		t.Errorf("doctor with a wrong token: exit %d, stdout %q; want the token line failing", p.code, p.stdout)
	}
	down := "http://" + closedPort(t)
	if p = runDoctor(t, down, tok["reader"], path, home, claudeDir); p.code != 1 || !strings.Contains(p.stdout, "FAIL  url") {
		t.Errorf("doctor with the server down: exit %d, stdout %q; want the url line failing", p.code, p.stdout)
	}
	if p = runDoctor(t, s.base, tok["reader"], os.Getenv("PATH"), home, claudeDir); p.code != 1 || !strings.Contains(p.stdout, "not on the PATH") {
		t.Errorf("doctor without mailroom on the PATH: exit %d, stdout %q; want the hooks line naming it", p.code, p.stdout)
	}
}
