package httpapi_test

import (
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"mailroom/internal/core"
	"mailroom/internal/testkit"
)

func TestWorkspaceFiles(t *testing.T) {
	e := openEnv(t, nil, 0)
	dir := e.dir
	tm := e.workspaceTeam("crew", "ask", nil)
	ws := filepath.Join(dir, "workspaces", "crew")

	r := e.getFile(tm.name, "main.py", adminToken)
	want(t, r, http.StatusOK, "")
	if string(r.body) != mainPy || r.header.Get("Content-Type") != "application/octet-stream" {
		t.Fatalf("GET main.py = %q (%s), want the bytes put", r.body, r.header.Get("Content-Type"))
	}
	if b, err := os.ReadFile(filepath.Join(ws, "main.py")); err != nil || string(b) != mainPy {
		t.Fatalf("main.py on disk = %q, %v; want the bytes put", b, err)
	}
	// A second put replaces the file whole; a folder path spells its
	// slash %2F and gets its folders.
	want(t, e.putFile(tm.name, "main.py", "print(1)\n", adminToken), http.StatusNoContent, "")
	if r := e.getFile(tm.name, "main.py", adminToken); string(r.body) != "print(1)\n" {
		t.Fatalf("main.py after a second put = %q", r.body)
	}
	want(t, e.putFile(tm.name, "data%2Finput.txt", "7\n", adminToken), http.StatusNoContent, "")
	if b, err := os.ReadFile(filepath.Join(ws, "data", "input.txt")); err != nil || string(b) != "7\n" {
		t.Fatalf("data/input.txt on disk = %q, %v", b, err)
	}
	if r := e.getFile(tm.name, "data%2Finput.txt", adminToken); r.status != http.StatusOK || string(r.body) != "7\n" {
		t.Fatalf("GET data/input.txt = %d %q", r.status, r.body)
	}
	if entries, _ := os.ReadDir(ws); len(entries) != 2 {
		t.Fatalf("workspace holds %d entries, want main.py and data (no temporary file left)", len(entries))
	}

	want(t, e.getFile(tm.name, "missing.txt", adminToken), http.StatusNotFound, "not_found")
	want(t, e.putFile(tm.name, "big.bin", strings.Repeat("a", 1<<20+1), adminToken), http.StatusRequestEntityTooLarge, "body_too_large")
	want(t, e.putFile(tm.name, "x.txt", "x", tm.tokens["reader"]), http.StatusForbidden, "forbidden")
	want(t, e.getFile(tm.name, "main.py", tm.tokens["lead"]), http.StatusForbidden, "forbidden")
	want(t, e.getFile(tm.name, "main.py", ""), http.StatusUnauthorized, "unauthorized")
	want(t, e.putFile("nobody", "main.py", "x", adminToken), http.StatusNotFound, "not_found")

	// A team without a workspace has no files.
	e.newTeam("plain", nil)
	want(t, e.putFile("plain", "main.py", "x", adminToken), http.StatusNotFound, "not_found")
	want(t, e.getFile("plain", "main.py", adminToken), http.StatusNotFound, "not_found")
}

func TestWorkspaceRefusesEscapes(t *testing.T) {
	e := openEnv(t, nil, 0)
	dir := e.dir
	tm := e.workspaceTeam("crew", "ask", nil)
	ws := filepath.Join(dir, "workspaces", "crew")
	outside := t.TempDir()
	if err := os.WriteFile(filepath.Join(outside, "secret.txt"), []byte("secret"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(filepath.Join(outside, "secret.txt"), filepath.Join(ws, "link.txt")); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(outside, filepath.Join(ws, "out")); err != nil {
		t.Fatal(err)
	}
	// A link that stays inside is not followed either.
	if err := os.Symlink("main.py", filepath.Join(ws, "inner.py")); err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{
		"..%2Fescape.txt",
		"a%2F..%2F..%2Fescape.txt",
		"%2Fetc%2Fpasswd",
		"..",
		".",
		"link.txt",
		"out%2Fsecret.txt",
		"out%2Fnew.txt",
		"inner.py",
	} {
		t.Run(p, func(t *testing.T) {
			want(t, e.putFile(tm.name, p, "pwned", adminToken), http.StatusBadRequest, "validation_failed")
			want(t, e.getFile(tm.name, p, adminToken), http.StatusBadRequest, "validation_failed")
		})
	}
	if b, _ := os.ReadFile(filepath.Join(outside, "secret.txt")); string(b) != "secret" {
		t.Fatalf("the file outside the workspace = %q, want it untouched", b)
	}
	if entries, _ := os.ReadDir(outside); len(entries) != 1 {
		t.Fatalf("outside the workspace %d entries, want only secret.txt", len(entries))
	}
	if _, err := os.Stat(filepath.Join(dir, "workspaces", "escape.txt")); !os.IsNotExist(err) {
		t.Fatalf("a file was written beside the workspace: %v", err)
	}
}

// The workspace's files are what read_file reads in a member's turn, and
// the workspace goes away with its team.
func TestWorkspaceTurnAndDeletion(t *testing.T) {
	e := openEnv(t, nil, 0)
	dir := e.dir
	tm := e.workspaceTeam("crew", "ask", nil)
	r := e.post("/api/v1/teams/crew/members/reader/turns", adminToken, map[string]any{"prompt": "Read the program.", "responses": []any{
		map[string]any{"tool": "read_file", "input": map[string]any{"path": "main.py"}},
		map[string]any{"text": "read"},
	}})
	want(t, r, http.StatusOK, "")
	if got := runMainResult(t, e, tm.name); got != mainPy {
		t.Fatalf("read_file result = %q, want main.py as put", got)
	}

	want(t, e.del("/api/v1/teams/crew", adminToken), http.StatusNoContent, "")
	if _, err := os.Stat(filepath.Join(dir, "workspaces", "crew")); !os.IsNotExist(err) {
		t.Fatalf("the workspace outlived its team: %v", err)
	}
	if entries, _ := os.ReadDir(filepath.Join(dir, "workspaces")); len(entries) != 0 {
		t.Fatalf("the workspaces root holds %d entries after the deletion, want none", len(entries))
	}
	// A new team of the same name starts with an empty workspace.
	_, _, err := e.svc.CreateTeam(core.AsAdmin(t.Context()), core.TeamSpec{Name: "crew", Workspace: true})
	if err != nil {
		t.Fatal(err)
	}
	want(t, e.getFile("crew", "main.py", adminToken), http.StatusNotFound, "not_found")
}

// Only regular files are served: a FIFO (which blocked the handler's
// thread for good when opened for reading with no writer), a socket or a
// device in the workspace is refused at once with validation_failed.
func TestWorkspaceServesOnlyRegularFiles(t *testing.T) {
	e := openEnv(t, nil, 0)
	tm := e.workspaceTeam("crew", "ask", nil)
	ws := filepath.Join(e.dir, "workspaces", "crew")
	if err := syscall.Mkfifo(filepath.Join(ws, "fifo"), 0o600); err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("unix", filepath.Join(ws, "sock"))
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	if err := syscall.Mknod(filepath.Join(ws, "null"), syscall.S_IFCHR|0o600, 1<<8|3); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"fifo", "sock", "null"} {
		want(t, e.getFile(tm.name, name, adminToken), http.StatusBadRequest, "validation_failed")
	}
}

// A deletion cut short left the trash of workspaces (a crash between the
// rename and the removal, a file that resisted); the next start removes
// it, and nothing else.
func TestStartRemovesWorkspaceTrash(t *testing.T) {
	place := testkit.NewPlace(t, backend)
	root := filepath.Join(place.Dir, "workspaces")
	for _, d := range []string{".trash-crew-0a1b2c/deep", "kept"} {
		if err := os.MkdirAll(filepath.Join(root, d), 0o700); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(filepath.Join(root, ".trash-crew-0a1b2c", "deep", "f"), []byte("x"), 0o600); err != nil {
		t.Fatal(err)
	}
	openEnv(t, place, 0)
	entries, err := os.ReadDir(root)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range entries {
		names = append(names, e.Name())
	}
	if len(names) != 1 || names[0] != "kept" {
		t.Fatalf("the workspaces root after a start holds %v, want [kept]", names)
	}
}
