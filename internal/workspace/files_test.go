package workspace

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

// Only regular files are read from a workspace, and a FIFO, a socket or
// a device is refused at once: opening a FIFO that no one writes to used
// to block the reading thread for good.
func TestReadOnlyRegularFiles(t *testing.T) {
	ws := t.TempDir()
	if err := os.WriteFile(filepath.Join(ws, "notes.txt"), []byte("hello"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Mkfifo(filepath.Join(ws, "fifo"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Mknod(filepath.Join(ws, "null"), syscall.S_IFCHR|0o600, int(unixMkdev(1, 3))); err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(filepath.Join(ws, "dir"), 0o700); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name    string
		want    string
		wantErr error
	}{
		{"notes.txt", "hello", nil},
		{"fifo", "", ErrNotRegular},
		{"null", "", ErrNotRegular},
		{"dir", "", ErrNotRegular},
		{"missing", "", fs.ErrNotExist},
	} {
		got, err := ReadFile(ws, tc.name, MaxReadBytes)
		if string(got) != tc.want || !errors.Is(err, tc.wantErr) {
			t.Errorf("ReadFile(%s) = %q, %v; want %q, %v", tc.name, got, err, tc.want, tc.wantErr)
		}
	}
	if _, err := ReadFile(ws, "notes.txt", 4); !errors.Is(err, ErrTooLarge) {
		t.Errorf("ReadFile over the limit: got %v, want %v", err, ErrTooLarge)
	}
}

// unixMkdev is the device number of major:minor.
func unixMkdev(major, minor uint32) uint64 {
	return uint64(major)<<8 | uint64(minor)
}

// Once a directory is renamed aside its deletion has happened, even when
// its files resist removal; RemoveTrash, run at every start, removes what
// was left, as it does after a crash between the rename and the removal.
func TestRemoveLeavesTrashForTheNextStart(t *testing.T) {
	root := t.TempDir()
	ws := filepath.Join(root, "shop")
	if err := os.MkdirAll(filepath.Join(ws, "sub"), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(ws, "sub", "f"), []byte("x"), 0o600); err != nil {
		t.Fatal(err)
	}
	removeAll = func(string) error { return errors.New("a file resists") }
	left, err := Remove(ws)
	removeAll = os.RemoveAll
	if err != nil || left == nil {
		t.Fatalf("Remove with a stubborn file = left %v, err %v; want done (err nil) with what was left reported", left, err)
	}
	if _, err := os.Lstat(ws); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("the workspace is still there under its name (%v), want it gone", err)
	}
	trash := trashIn(t, root)
	if len(trash) != 1 {
		t.Fatalf("trash = %v, want the renamed workspace", trash)
	}
	// A crash between rename and removal leaves the same: a trash
	// directory with everything in it.
	crashed := filepath.Join(root, trashPrefix+"other-0123")
	if err := os.MkdirAll(filepath.Join(crashed, "deep"), 0o700); err != nil {
		t.Fatal(err)
	}
	removed, err := RemoveTrash(root)
	if err != nil || len(removed) != 2 {
		t.Fatalf("RemoveTrash = %v, %v; want both trash directories removed", removed, err)
	}
	if got := trashIn(t, root); len(got) != 0 {
		t.Fatalf("trash after RemoveTrash = %v, want none", got)
	}
	if left, err := Remove(ws); left != nil || err != nil {
		t.Fatalf("Remove of a missing directory = %v, %v; want nothing to do", left, err)
	}
}

func trashIn(t *testing.T, dir string) []string {
	t.Helper()
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, e := range entries {
		if strings.HasPrefix(e.Name(), trashPrefix) {
			out = append(out, e.Name())
		}
	}
	return out
}
