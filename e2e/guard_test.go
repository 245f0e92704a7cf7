package e2e

import (
	"bytes"
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// The reservation commands and the commit guard against the real binary,
// a real server and a real git repository: reserve, reservations,
// release, `guard install` keeping an existing hook (and never twice), a
// commit refused naming the path, holder and reservation, the server
// unreachable (a warning; --strict refuses), and outside a repository.

// mailroomCmd runs the binary in dir with env and returns its exit code,
// standard output and error.
func mailroomCmd(t *testing.T, dir string, env []string, args ...string) (int, string, string) {
	t.Helper()
	return runIn(t, dir, env, serverBin, args...)
}

func runIn(t *testing.T, dir string, env []string, name string, args ...string) (int, string, string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 60*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.Dir = dir
	cmd.Env = append([]string{"PATH=" + os.Getenv("PATH"), "HOME=" + dir,
		"GIT_AUTHOR_NAME=t", "GIT_AUTHOR_EMAIL=t@example.com", "GIT_COMMITTER_NAME=t", "GIT_COMMITTER_EMAIL=t@example.com"}, env...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	code := 0
	if err != nil {
		ee, ok := err.(*exec.ExitError)
		if !ok {
			t.Fatalf("%s %v: %v", name, args, err)
		}
		code = ee.ExitCode()
	}
	return code, stdout.String(), stderr.String()
}

// gitRepo makes a repository with one commit.
func gitRepo(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	for _, args := range [][]string{{"init", "-q", "-b", "main"}, {"commit", "-q", "--allow-empty", "-m", "start"}} {
		if code, _, errOut := runIn(t, dir, nil, "git", args...); code != 0 {
			t.Fatalf("git %v: %s", args, errOut)
		}
	}
	return dir
}

func writeFile(t *testing.T, path, text string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
}

func TestReservationCommandsAndGuard(t *testing.T) {
	srv := startServer(t, t.TempDir())
	c := newClient(srv.base)
	defer c.close()
	tokens := createTeam(t, c, "repo", "alice", "bob")
	alice := []string{"MAILROOM_URL=" + srv.base, "MAILROOM_TOKEN=" + tokens["alice"]}
	bob := []string{"MAILROOM_URL=" + srv.base, "MAILROOM_TOKEN=" + tokens["bob"]}
	repo := gitRepo(t)

	code, out, errOut := mailroomCmd(t, repo, alice, "reserve", "internal/store/**", "cmd/main.go", "--ttl", "2h", "--reason", "store rework")
	if code != 0 || !strings.HasPrefix(out, "res-1\talice\texclusive\tuntil ") || !strings.Contains(out, "internal/store/** cmd/main.go") {
		t.Fatalf("reserve = %d %q %q; want res-1 of alice", code, out, errOut)
	}
	code, out, errOut = mailroomCmd(t, repo, bob, "reserve", "internal/**")
	if code != 1 || out != "" || !strings.Contains(errOut, "reservation_conflict") || !strings.Contains(errOut, "res-1 of alice") || strings.Count(errOut, "\n") != 1 {
		t.Fatalf("conflicting reserve = %d %q %q; want one line naming res-1 of alice, exit 1", code, out, errOut)
	}
	for _, bad := range [][]string{{"reserve", "../x"}, {"reserve", "/abs"}, {"reserve", "a", "--ttl", "10s"}, {"reserve"}, {"release"}, {"release", "res-1", "--all"}} {
		if code, _, errOut := mailroomCmd(t, repo, bob, bad...); code != 1 || strings.Count(errOut, "\n") != 1 {
			t.Errorf("%v = %d %q; want exit 1 with one line", bad, code, errOut)
		}
	}
	if code, _, errOut := mailroomCmd(t, repo, bob, "reserve", "docs/**", "--shared"); code != 0 {
		t.Fatalf("shared reserve: %d %s", code, errOut)
	}
	code, out, _ = mailroomCmd(t, repo, bob, "reservations")
	if code != 0 || strings.Count(out, "\n") != 2 || !strings.Contains(out, "res-1\talice") || !strings.Contains(out, "res-2\tbob\tshared") || !strings.Contains(out, "# store rework") {
		t.Fatalf("reservations = %d %q", code, out)
	}

	// guard install keeps an existing hook and adds itself once.
	hook := filepath.Join(repo, ".git", "hooks", "pre-commit")
	writeFile(t, hook, "#!/bin/sh\necho existing-hook-ran\n")
	for range 2 {
		if code, _, errOut := mailroomCmd(t, repo, bob, "guard", "install"); code != 0 {
			t.Fatalf("guard install: %d %s", code, errOut)
		}
	}
	text, err := os.ReadFile(hook)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(string(text), "#!/bin/sh\necho existing-hook-ran\n") || strings.Count(string(text), " guard || exit 1") != 1 {
		t.Fatalf("hook after two installs:\n%s", text)
	}
	if fi, err := os.Stat(hook); err != nil || fi.Mode()&0o111 == 0 {
		t.Fatalf("hook mode: %v %v, want executable", fi, err)
	}

	// bob's commit of alice's file is refused by the hook, naming it.
	writeFile(t, filepath.Join(repo, "internal/store/db.go"), "package store\n")
	writeFile(t, filepath.Join(repo, "docs/a.md"), "shared\n")
	writeFile(t, filepath.Join(repo, "README.md"), "free\n")
	runIn(t, repo, nil, "git", "add", "-A")
	code, out, errOut = runIn(t, repo, bob, "git", "commit", "-q", "-m", "bob's change")
	if code == 0 || !strings.Contains(out+errOut, "existing-hook-ran") ||
		!strings.Contains(errOut, "internal/store/db.go is reserved by alice (res-1)") {
		t.Fatalf("bob's commit = %d\nstdout %s\nstderr %s\nwant refused naming internal/store/db.go, alice, res-1", code, out, errOut)
	}
	if strings.Contains(errOut, "README.md") || strings.Contains(errOut, "docs/a.md") {
		t.Fatalf("the guard named a free path or bob's own: %s", errOut)
	}
	// alice holds the path: her commit passes.
	if code, _, errOut := runIn(t, repo, alice, "git", "commit", "-q", "-m", "alice's change"); code != 0 {
		t.Fatalf("alice's commit refused: %s", errOut)
	}

	// release: one by id, then --all.
	if code, out, errOut := mailroomCmd(t, repo, alice, "release", "--all"); code != 0 || out != "released res-1\n" {
		t.Fatalf("release --all = %d %q %q", code, out, errOut)
	}
	if code, _, errOut := mailroomCmd(t, repo, alice, "release", "res-1"); code != 1 || !strings.Contains(errOut, "reservation_closed") {
		t.Fatalf("release of a released one = %d %q", code, errOut)
	}
	writeFile(t, filepath.Join(repo, "internal/store/db.go"), "package store // bob\n")
	runIn(t, repo, nil, "git", "add", "-A")
	if code, _, errOut := mailroomCmd(t, repo, bob, "guard"); code != 0 || errOut != "" {
		t.Fatalf("guard after the release = %d %q, want 0 and nothing", code, errOut)
	}

	// The server unreachable: a warning and exit 0; --strict exits 1.
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	dead := "http://" + l.Addr().String()
	l.Close()
	down := []string{"MAILROOM_URL=" + dead, "MAILROOM_TOKEN=" + tokens["bob"]}
	if code, _, errOut := mailroomCmd(t, repo, down, "guard"); code != 0 || !strings.Contains(errOut, "warning") || strings.Count(errOut, "\n") != 1 {
		t.Fatalf("guard, server down = %d %q; want a one-line warning, exit 0", code, errOut)
	}
	if code, _, errOut := mailroomCmd(t, repo, down, "guard", "--strict"); code != 1 || strings.Count(errOut, "\n") != 1 {
		t.Fatalf("guard --strict, server down = %d %q; want exit 1, one line", code, errOut)
	}
	// A wrong token is no reason to commit unchecked: exit 1.
	wrong := []string{"MAILROOM_URL=" + srv.base, "MAILROOM_TOKEN=mr_wrong"}
	if code, _, errOut := mailroomCmd(t, repo, wrong, "guard"); code != 1 || !strings.Contains(errOut, "unauthorized") {
		t.Fatalf("guard, wrong token = %d %q; want exit 1 unauthorized", code, errOut)
	}
	// Outside a repository: one clear line.
	outside := t.TempDir()
	for _, args := range [][]string{{"guard"}, {"guard", "install"}} {
		code, _, errOut := mailroomCmd(t, outside, bob, args...)
		if code != 1 || errOut != fmt.Sprintf("mailroom: %s: not inside a git repository (run it from a repository's work tree)\n", strings.Join(args, " ")) {
			t.Fatalf("%v outside a repository = %d %q", args, code, errOut)
		}
	}
}
