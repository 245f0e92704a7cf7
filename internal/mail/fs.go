package mail

import (
	"io"
	"io/fs"
	"os"
)

// FS is every file-system call the store makes. Production code uses OS();
// tests wrap it to make one chosen call fail, so the failure paths run the
// same code as the real ones and need no special cases.
type FS interface {
	Lstat(name string) (fs.FileInfo, error)
	OpenFile(name string, flag int, perm fs.FileMode) (File, error)
	// CreateTemp creates a new file in dir, as os.CreateTemp does.
	CreateTemp(dir, pattern string) (File, error)
	Rename(oldpath, newpath string) error
	Remove(name string) error
	Mkdir(name string, perm fs.FileMode) error
	MkdirAll(name string, perm fs.FileMode) error
	Chmod(name string, mode fs.FileMode) error
	ReadDir(name string) ([]fs.DirEntry, error)
	// SyncDir flushes a directory's entries (creations, renames, removals)
	// to stable storage.
	SyncDir(name string) error
}

// File is the part of *os.File the store uses.
type File interface {
	io.Reader
	io.Writer
	Name() string
	Stat() (fs.FileInfo, error)
	Chmod(mode fs.FileMode) error
	Sync() error
	Close() error
}

// OS returns the FS backed by package os.
func OS() FS { return osFS{} }

type osFS struct{}

func (osFS) Lstat(name string) (fs.FileInfo, error) { return os.Lstat(name) }

func (osFS) OpenFile(name string, flag int, perm fs.FileMode) (File, error) {
	f, err := os.OpenFile(name, flag, perm)
	if err != nil {
		// Return a nil interface, not a typed nil *os.File.
		return nil, err
	}
	return f, nil
}

func (osFS) CreateTemp(dir, pattern string) (File, error) {
	f, err := os.CreateTemp(dir, pattern)
	if err != nil {
		return nil, err
	}
	return f, nil
}

func (osFS) Rename(oldpath, newpath string) error         { return os.Rename(oldpath, newpath) }
func (osFS) Remove(name string) error                     { return os.Remove(name) }
func (osFS) Mkdir(name string, perm fs.FileMode) error    { return os.Mkdir(name, perm) }
func (osFS) MkdirAll(name string, perm fs.FileMode) error { return os.MkdirAll(name, perm) }
func (osFS) Chmod(name string, mode fs.FileMode) error    { return os.Chmod(name, mode) }
func (osFS) ReadDir(name string) ([]fs.DirEntry, error)   { return os.ReadDir(name) }

func (osFS) SyncDir(name string) error {
	d, err := os.Open(name)
	if err != nil {
		return err
	}
	if err := d.Sync(); err != nil {
		d.Close()
		return err
	}
	return d.Close()
}
