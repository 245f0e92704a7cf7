package workspace

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/elastic/go-seccomp-bpf/arch"
)

// rootOnly skips nothing: these tests are about a server that is root,
// and fail loudly where they cannot be one.
func rootOnly(t *testing.T) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Fatalf("this test needs a root server (as in containers); euid %d", os.Geteuid())
	}
}

// program puts prog into a fresh workspace (mode 0700, the server's, as
// Ensure makes it) as main.py and returns the workspace.
func program(t *testing.T, prog string) string {
	t.Helper()
	ws := filepath.Join(t.TempDir(), "workspaces", "shop")
	if err := Ensure(ws); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(ws, Program), []byte(prog), 0o600); err != nil {
		t.Fatal(err)
	}
	return ws
}

// runJSON runs ws's program and decodes its output as JSON into v.
func runJSON(t *testing.T, ws string, q Quota, v any) Outcome {
	t.Helper()
	out, err := sandboxRunner(t).Run(t.Context(), ws, q)
	if err != nil {
		t.Fatalf("Run = %v, want the program run", err)
	}
	if err := json.Unmarshal([]byte(out.Output), v); err != nil {
		t.Fatalf("the program's output = %q (exit %d, %s), want JSON: %v", out.Output, out.ExitCode, out.Stderr, err)
	}
	return out
}

// A root server's program runs as the unprivileged user: a host file
// only root may read (mode 0600, in a directory Landlock lets it read)
// and /etc/shadow stay closed to it, while its workspace is its own.
func TestSandboxProgramIsNotRoot(t *testing.T) {
	rootOnly(t)
	secret, err := os.CreateTemp("/etc", "mailroom-test-secret-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.Remove(secret.Name()) })
	if _, err := secret.WriteString("root-only-secret\n"); err != nil {
		t.Fatal(err)
	}
	secret.Close()
	if err := os.Chmod(secret.Name(), 0o600); err != nil {
		t.Fatal(err)
	}
	ws := program(t, `import json, os
out = {"uid": os.getuid(), "gid": os.getgid(), "euid": os.geteuid()}
for name, path in [("secret", `+fmt.Sprintf("%q", secret.Name())+`), ("shadow", "/etc/shadow")]:
    try:
        out[name] = "read: " + open(path).read()
    except OSError as e:
        out[name] = "blocked: " + type(e).__name__
with open("notes/written.txt", "w") as f:
    f.write("ok")
out["own"] = open("data.txt").read()
print(json.dumps(out))
`)
	if err := os.Mkdir(filepath.Join(ws, "notes"), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(ws, "data.txt"), []byte("mine"), 0o600); err != nil {
		t.Fatal(err)
	}
	var got map[string]any
	runJSON(t, ws, Quota{}, &got)
	for _, k := range []string{"uid", "gid", "euid"} {
		if got[k] != float64(DefaultUser.UID) {
			t.Errorf("the program's %s = %v, want %d (the sandbox user)", k, got[k], DefaultUser.UID)
		}
	}
	for _, k := range []string{"secret", "shadow"} {
		if s, _ := got[k].(string); s != "blocked: PermissionError" {
			t.Errorf("reading the root-only %s file: %q, want blocked: PermissionError", k, s)
		}
	}
	if got["own"] != "mine" {
		t.Errorf("the program read its own data.txt as %v, want mine", got["own"])
	}
	if b, err := os.ReadFile(filepath.Join(ws, "notes", "written.txt")); err != nil || string(b) != "ok" {
		t.Errorf("notes/written.txt = %q, %v; want the program's write", b, err)
	}
	// The workspace is the server's again.
	checkOwned(t, ws)
}

// checkOwned fails unless ws and everything in it belong to the server.
func checkOwned(t *testing.T, ws string) {
	t.Helper()
	_ = filepath.WalkDir(ws, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			t.Errorf("walking the workspace: %v", err)
			return nil
		}
		fi, err := os.Lstat(p)
		if err != nil {
			t.Error(err)
			return nil
		}
		st := fi.Sys().(*syscall.Stat_t)
		if int(st.Uid) != os.Geteuid() || int(st.Gid) != os.Getegid() {
			t.Errorf("%s belongs to %d:%d after the run, want the server's %d:%d", p, st.Uid, st.Gid, os.Geteuid(), os.Getegid())
		}
		return nil
	})
}

// The calls the sandbox refuses fail with EPERM, and the program goes on.
func TestSandboxRefusesCalls(t *testing.T) {
	info, err := arch.GetInfo("")
	if err != nil {
		t.Fatal(err)
	}
	must := []string{"io_uring_setup", "ptrace", "mount", "umount2", "unshare", "setns", "keyctl", "add_key",
		"bpf", "perf_event_open", "userfaultfd", "init_module", "kexec_load", "memfd_create"}
	numbers := map[string]int{}
	for _, n := range must {
		nr, ok := info.SyscallNames[n]
		if !ok {
			t.Fatalf("no number for %s on %s", n, info.Name)
		}
		numbers[n] = nr
	}
	calls, err := json.Marshal(numbers)
	if err != nil {
		t.Fatal(err)
	}
	// Each call is made with arguments that would let it succeed (or
	// fail otherwise than with EPERM) where nothing refused it.
	ws := program(t, `import ctypes, json, os
libc = ctypes.CDLL(None, use_errno=True)
libc.syscall.restype = ctypes.c_long
nr = json.loads(`+fmt.Sprintf("%q", calls)+`)
args = {
    "io_uring_setup": (8, ctypes.create_string_buffer(120)),
    "ptrace": (0, 0, 0, 0),
    "mount": (b"none", b".", b"tmpfs", 0, 0),
    "umount2": (b".", 0),
    "unshare": (0x10000000,),
    "setns": (os.open("/proc/self/ns/net", os.O_RDONLY) if os.path.exists("/proc/self/ns/net") else 0, 0),
    "keyctl": (0, -3, 0),
    "add_key": (b"user", b"k", b"v", 1, -3),
    "bpf": (0, ctypes.create_string_buffer(128), 128),
    "perf_event_open": (ctypes.create_string_buffer(128), 0, -1, -1, 0),
    "userfaultfd": (0,),
    "init_module": (0, 0, b""),
    "kexec_load": (0, 0, 0, 0),
    "memfd_create": (b"x", 0),
}
out = {}
for name, n in nr.items():
    a = []
    for v in args.get(name, ()):
        a.append(v)
    try:
        r = libc.syscall(n, *a)
    except Exception as e:
        out[name] = "python: " + type(e).__name__
        continue
    e = ctypes.get_errno()
    out[name] = "ok" if r >= 0 else os.strerror(e) + " (%d)" % e
out["alive"] = True
print(json.dumps(out))
`)
	var got map[string]any
	runJSON(t, ws, Quota{}, &got)
	eperm := fmt.Sprintf("%s (%d)", syscall.EPERM.Error(), syscall.EPERM)
	for _, n := range must {
		if s, _ := got[n].(string); !strings.EqualFold(s, eperm) {
			t.Errorf("%s in the sandbox: %v, want %s", n, got[n], eperm)
		}
	}
	if got["alive"] != true {
		t.Errorf("the program did not go on after the refused calls: %v", got)
	}
}

// A run cannot leave a setuid or setgid file, nor its workspace open to
// all: after it the bits are gone (the files stay) and the workspace
// directory has its mode and owner again.
func TestSandboxSettlesTheWorkspace(t *testing.T) {
	ws := program(t, `import os, json
for name, mode in [("suid", 0o4755), ("sgid", 0o2755), ("both", 0o6777)]:
    with open(name, "w") as f:
        f.write("#!/bin/sh\nid\n")
    os.chmod(name, mode)
os.mkdir("shared")
os.chmod("shared", 0o2777)
os.chmod(".", 0o777)
print(json.dumps({n: oct(os.stat(n).st_mode) for n in ["suid", "sgid", "both", "shared", "."]}))
`)
	before, err := os.Lstat(ws)
	if err != nil {
		t.Fatal(err)
	}
	var inside map[string]string
	runJSON(t, ws, Quota{}, &inside)
	// Inside, the program did set the bits: the test tries for real.
	if inside["suid"] != "0o104755" || inside["."] != "0o40777" {
		t.Fatalf("the program's own view = %v, want the bits it set", inside)
	}
	for _, name := range []string{"suid", "sgid", "both", "shared"} {
		fi, err := os.Lstat(filepath.Join(ws, name))
		if err != nil {
			t.Fatalf("%s: %v, want it kept", name, err)
		}
		if fi.Mode()&(fs.ModeSetuid|fs.ModeSetgid) != 0 {
			t.Errorf("%s has mode %v after the run, want no setuid or setgid bit", name, fi.Mode())
		}
	}
	after, err := os.Lstat(ws)
	if err != nil {
		t.Fatal(err)
	}
	if after.Mode() != before.Mode() {
		t.Errorf("the workspace's mode after the run = %v, want %v as before", after.Mode(), before.Mode())
	}
	b, a := before.Sys().(*syscall.Stat_t), after.Sys().(*syscall.Stat_t)
	if a.Uid != b.Uid || a.Gid != b.Gid {
		t.Errorf("the workspace's owner after the run = %d:%d, want %d:%d as before", a.Uid, a.Gid, b.Uid, b.Gid)
	}
	checkOwned(t, ws)
}

// A run that ends past its workspace's quota keeps nothing it added and
// nothing it grew; the workspace is then within the quota. Within the
// quota, what it writes stays.
func TestSandboxWorkspaceQuota(t *testing.T) {
	const kib = 1 << 10
	cases := []struct {
		name string
		prog string
		full bool
	}{
		{"bytes", `
with open("log.txt", "a") as f:
    f.write("y" * 300 * 1024)
for i in range(3):
    with open("big%d.bin" % i, "wb") as f:
        f.write(b"z" * 400 * 1024)
print("wrote")
`, true},
		{"files", `
import os
os.makedirs("many/deeper")
for i in range(60):
    open("many/deeper/f%d" % i, "w").close()
print("wrote")
`, true},
		{"within", `
with open("small.txt", "w") as f:
    f.write("fits")
print("wrote")
`, false},
	}
	q := Quota{Bytes: 1024 * kib, Files: 20}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			ws := program(t, c.prog)
			if err := os.WriteFile(filepath.Join(ws, "log.txt"), []byte("first line\n"), 0o600); err != nil {
				t.Fatal(err)
			}
			out, err := sandboxRunner(t).Run(t.Context(), ws, q)
			if err != nil || out.Output != "wrote\n" {
				t.Fatalf("Run = %+v, %v; want the program run", out, err)
			}
			if out.WorkspaceFull != c.full {
				t.Fatalf("WorkspaceFull = %v, want %v", out.WorkspaceFull, c.full)
			}
			root, err := os.OpenRoot(ws)
			if err != nil {
				t.Fatal(err)
			}
			defer root.Close()
			s, err := scan(root)
			if err != nil {
				t.Fatal(err)
			}
			if !q.holds(s.use) {
				t.Errorf("the workspace holds %s after the run, over the quota (%s)", s.use, q)
			}
			var names []string
			for _, e := range s.entries {
				names = append(names, e.name)
			}
			if c.full {
				if got := strings.Join(names, " "); got != "log.txt main.py" {
					t.Errorf("the workspace after the run holds %q, want only what was there before (log.txt main.py)", got)
				}
				if b, _ := os.ReadFile(filepath.Join(ws, "log.txt")); string(b) != "first line\n" {
					t.Errorf("log.txt after the run = %d bytes, want the 11 it had before", len(b))
				}
			} else if b, err := os.ReadFile(filepath.Join(ws, "small.txt")); err != nil || string(b) != "fits" {
				t.Errorf("small.txt = %q, %v; want the program's write kept", b, err)
			}
		})
	}
}

// A workspace already past its quota (lowered since) runs nothing; an
// upload past the quota stores nothing.
func TestWorkspaceQuotaRefusals(t *testing.T) {
	ws := program(t, "print(1)\n")
	_, err := sandboxRunner(t).Run(t.Context(), ws, Quota{Bytes: 4, Files: 10})
	var re *RunError
	if !errors.As(err, &re) || re.Code != CodeWorkspaceFull {
		t.Fatalf("Run in a workspace over its quota = %v, want %s", err, CodeWorkspaceFull)
	}
	root, err := os.OpenRoot(ws)
	if err != nil {
		t.Fatal(err)
	}
	defer root.Close()
	q := Quota{Bytes: 100, Files: 3}
	for _, c := range []struct {
		name string
		size int
		want error
	}{
		{"a/b/c.txt", 1, ErrFull}, // three new names with main.py: four
		{"big.txt", 100, ErrFull},
		{"ok.txt", 50, nil},
		{"ok.txt", 91, nil}, // replaces itself: 91 + main.py's 9
		{"ok.txt", 92, ErrFull},
	} {
		err := PutFile(root, c.name, make([]byte, c.size), q)
		if !errors.Is(err, c.want) || (c.want == nil) != (err == nil) {
			t.Fatalf("PutFile(%s, %d bytes) = %v, want %v", c.name, c.size, err, c.want)
		}
		if c.want != nil {
			if _, err := root.Lstat(c.name); err == nil && c.name != "ok.txt" {
				t.Errorf("the refused %s was stored", c.name)
			}
			if _, err := root.Lstat("a"); err == nil {
				t.Errorf("the refused upload made its directory a")
			}
		}
	}
	if fi, err := root.Lstat("ok.txt"); err != nil || fi.Size() != 91 {
		t.Errorf("ok.txt after a refused replacement: %v, %v; want its 91 bytes kept", fi, err)
	}
}
