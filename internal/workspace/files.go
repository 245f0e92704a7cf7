// Package workspace owns the teams' workspaces: the directories where the
// admin puts files, where members read them (read_file) and where the
// fixed program runs (run_main) inside the sandbox of docs/api.md. REST,
// MCP, the agents' tools and the scenarios all reach workspaces through
// this package and nothing else.
package workspace

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"strings"
	"syscall"
	"time"
)

// Program is the workspace's fixed program; run_main runs nothing else.
const Program = "main.py"

// MaxReadBytes is the largest file read_file returns.
const MaxReadBytes = 64 << 10

// reservedPrefix starts the names Mailroom keeps for itself inside a
// workspace (temporary files of a write, the program's TMPDIR): no client
// names them.
const reservedPrefix = ".mailroom-"

// ErrNotRegular is returned for a path that names something other than a
// regular file: a directory, a FIFO, a socket or a device.
var ErrNotRegular = errors.New("workspace: not a regular file")

// Ensure creates the workspaces root and the workspace dir in it when
// they are missing, mode 0700 both, and checks that dir is a directory.
func Ensure(dir string) error {
	if err := os.MkdirAll(filepath.Dir(dir), 0o700); err != nil {
		return err
	}
	if err := os.Mkdir(dir, 0o700); err != nil && !errors.Is(err, fs.ErrExist) {
		return err
	}
	fi, err := os.Lstat(dir)
	if err != nil {
		return err
	}
	if !fi.IsDir() {
		return errors.New("workspace: the workspace is not a directory")
	}
	return nil
}

// CheckPath refuses, with a reason a model or a client can act on, a path
// that is not a plain relative path inside a workspace: empty, holding a
// NUL, absolute, or with a ".." component. What it lets through is still
// opened through os.Root, which refuses whatever a symbolic link would
// lead out of the workspace.
func CheckPath(p string) error {
	if p == "" || strings.ContainsRune(p, 0) {
		return errors.New("the path must be a non-empty relative path")
	}
	if filepath.IsAbs(p) || strings.HasPrefix(p, "/") || strings.HasPrefix(p, `\`) {
		return errors.New("absolute paths are not allowed; give a path relative to the workspace")
	}
	for _, part := range strings.FieldsFunc(p, func(r rune) bool { return r == '/' || r == '\\' }) {
		if part == ".." {
			return errors.New("paths may not contain a .. component")
		}
	}
	return nil
}

// StrictName checks a file path an admin names over HTTP and returns it
// cleaned, with forward slashes. Besides CheckPath's rules, it refuses a
// path naming the workspace itself or a name Mailroom keeps for itself,
// and one whose components (any of them, the file included) are symbolic
// links: such a file is reached only through real directories. The error
// is a reason to show the client.
func StrictName(root *os.Root, p string) (string, error) {
	if err := CheckPath(p); err != nil {
		return "", err
	}
	clean := path.Clean(strings.ReplaceAll(p, `\`, "/"))
	if clean == "." || strings.HasPrefix(clean, reservedPrefix) || strings.Contains(clean, "/"+reservedPrefix) {
		return "", errors.New("name a file inside the workspace")
	}
	parts := strings.Split(clean, "/")
	for i := range parts {
		fi, err := root.Lstat(strings.Join(parts[:i+1], "/"))
		if errors.Is(err, fs.ErrNotExist) {
			break
		}
		if err != nil {
			return "", errors.New("it cannot be reached inside the workspace")
		}
		if fi.Mode()&fs.ModeSymlink != 0 {
			return "", errors.New("it leads through a symbolic link, which is not followed")
		}
		if i < len(parts)-1 && !fi.IsDir() {
			return "", errors.New("a component of it is not a directory")
		}
	}
	return clean, nil
}

// OpenRegular opens name inside root for reading, only if it is a regular
// file. The open itself never blocks: O_NONBLOCK makes opening a FIFO
// return at once (instead of waiting for a writer, which pinned a thread
// for good), and the type is then checked on the open descriptor, so
// nothing can be swapped in between. Anything but a regular file gives
// ErrNotRegular; a missing one an error matching fs.ErrNotExist.
func OpenRegular(root *os.Root, name string) (*os.File, fs.FileInfo, error) {
	f, err := root.OpenFile(name, os.O_RDONLY|syscall.O_NONBLOCK|syscall.O_NOCTTY, 0)
	if err != nil {
		return nil, nil, err
	}
	fi, err := f.Stat()
	if err != nil {
		_ = f.Close()
		return nil, nil, err
	}
	if !fi.Mode().IsRegular() {
		_ = f.Close()
		return nil, nil, ErrNotRegular
	}
	return f, fi, nil
}

// ReadFile returns the content of the regular file name inside dir, at
// most limit bytes: a longer file is an error (ErrTooLarge).
func ReadFile(dir, name string, limit int) ([]byte, error) {
	root, err := os.OpenRoot(dir)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrNoWorkspace, err)
	}
	defer root.Close()
	f, _, err := OpenRegular(root, name)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, int64(limit)+1))
	if err != nil {
		return nil, err
	}
	if len(data) > limit {
		return nil, ErrTooLarge
	}
	return data, nil
}

// ErrNoWorkspace is returned when the workspace directory itself cannot
// be opened.
var ErrNoWorkspace = errors.New("workspace: the workspace is not available")

// ErrTooLarge is returned by ReadFile for a file over its limit.
var ErrTooLarge = errors.New("workspace: the file is too large")

// WriteFile durably replaces name inside root with data (mode 0600),
// creating its directories: a temporary file beside it, fsync, rename,
// fsync of the directory, all through os.Root so that nothing is written
// outside the workspace.
func WriteFile(root *os.Root, name string, data []byte) error {
	parent := path.Dir(name)
	if parent != "." {
		if err := root.MkdirAll(parent, 0o700); err != nil {
			return err
		}
	}
	suffix := make([]byte, 8)
	_, _ = rand.Read(suffix) // crypto/rand.Read never fails on supported platforms
	tmp := path.Join(parent, reservedPrefix+hex.EncodeToString(suffix)+".tmp")
	f, err := root.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return err
	}
	renamed := false
	defer func() {
		if !renamed {
			_ = root.Remove(tmp)
		}
	}()
	if _, err := f.Write(data); err != nil {
		_ = f.Close()
		return err
	}
	if err := f.Sync(); err != nil {
		_ = f.Close()
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	if err := root.Rename(tmp, name); err != nil {
		return err
	}
	renamed = true
	d, err := root.Open(parent)
	if err != nil {
		return err
	}
	defer d.Close()
	return d.Sync()
}

// File is one regular file of a workspace as List shows it.
type File struct {
	Path     string // slash-separated, relative to the workspace
	Bytes    int64
	Modified time.Time
}

// MaxListed bounds how many files List returns, so that a workspace a
// program filled with files cannot make one answer unbounded.
const MaxListed = 10000

// List returns the regular files under dir in path order (at most
// MaxListed), leaving out symbolic links, anything else that is not a
// regular file, and the names Mailroom keeps for itself. A missing
// workspace directory lists no files.
func List(dir string) ([]File, error) {
	root, err := os.OpenRoot(dir)
	if errors.Is(err, fs.ErrNotExist) {
		return []File{}, nil
	}
	if err != nil {
		return nil, err
	}
	defer root.Close()
	out := []File{}
	err = fs.WalkDir(root.FS(), ".", func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if strings.HasPrefix(d.Name(), reservedPrefix) {
			if d.IsDir() {
				return fs.SkipDir
			}
			return nil
		}
		if !d.Type().IsRegular() {
			return nil
		}
		fi, err := d.Info()
		if err != nil {
			return err
		}
		out = append(out, File{Path: p, Bytes: fi.Size(), Modified: fi.ModTime().UTC()})
		if len(out) >= MaxListed {
			return fs.SkipAll
		}
		return nil
	})
	return out, err
}

// RemoveFile deletes the regular file name (cleaned by StrictName) inside
// root and syncs its directory, so the removal survives a crash. A
// missing file gives an error matching fs.ErrNotExist, anything that is
// not a regular file ErrNotRegular.
func RemoveFile(root *os.Root, name string) error {
	fi, err := root.Lstat(name)
	if err != nil {
		return err
	}
	if !fi.Mode().IsRegular() {
		return ErrNotRegular
	}
	if err := root.Remove(name); err != nil {
		return err
	}
	d, err := root.Open(path.Dir(name))
	if err != nil {
		return err
	}
	defer d.Close()
	return d.Sync()
}
