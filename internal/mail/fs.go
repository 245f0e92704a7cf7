package mail

import (
	"io"
	"io/fs"
	"os"
	"time"
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

// File is the part of *os.File the store uses, plus SetModTime.
type File interface {
	io.Reader
	io.Writer
	// WriteAt writes at an offset; the write-ahead log writes its records
	// into space it filled with zeros beforehand (see walChunk).
	io.WriterAt
	Name() string
	Stat() (fs.FileInfo, error)
	Chmod(mode fs.FileMode) error
	Truncate(size int64) error
	Sync() error
	Close() error
	// SetModTime sets the open file's modification time (futimens(2)),
	// leaving its access time alone.
	SetModTime(t time.Time) error
}

// OS returns the FS backed by package os.
func OS() FS { return osFS{} }

type osFS struct{}

// osFile is *os.File with SetModTime.
type osFile struct{ *os.File }

func (f osFile) SetModTime(t time.Time) error { return setModTime(f.File, t) }

// Datasync is fdatasync(2) where there is one (see syncData).
func (f osFile) Datasync() error { return datasync(f.File) }

// syncData flushes f's data and size: fdatasync when f offers it (the
// files of OS() do), else Sync. The write-ahead log uses it.
func syncData(f File) error {
	if d, ok := f.(interface{ Datasync() error }); ok {
		return d.Datasync()
	}
	return f.Sync()
}

func (osFS) Lstat(name string) (fs.FileInfo, error) { return os.Lstat(name) }

func (osFS) OpenFile(name string, flag int, perm fs.FileMode) (File, error) {
	f, err := os.OpenFile(name, flag, perm)
	if err != nil {
		// Return a nil interface, not a File holding a nil *os.File.
		return nil, err
	}
	return osFile{f}, nil
}

func (osFS) CreateTemp(dir, pattern string) (File, error) {
	f, err := os.CreateTemp(dir, pattern)
	if err != nil {
		return nil, err
	}
	return osFile{f}, nil
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
