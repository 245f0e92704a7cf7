package mail

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"syscall"
)

// lockFile is the name of the data-directory lock inside the data directory.
const lockFile = "mailroom.lock"

// ErrBusy is what a lock error wraps when another process holds the data
// directory, so that a command can tell "busy" (try elsewhere, or ask the
// server that holds it) from a directory it cannot use at all.
var ErrBusy = errors.New("data directory is in use")

// busyError names the directory and who holds it, and matches ErrBusy.
type busyError struct{ dir, holder string }

func (e *busyError) Error() string        { return fmt.Sprintf("data directory %s: %s", e.dir, e.holder) }
func (e *busyError) Is(target error) bool { return target == ErrBusy }

// LockDir takes an exclusive lock on dataDir (creating it with mode 0700 if
// missing) so that only one server owns it. The lock is flock(2) on
// dataDir/mailroom.lock: the kernel drops it when the process dies, so a
// crash never leaves a stale lock, and the file itself is never removed
// (removing it would let two servers lock two different files). If another
// server holds the lock, the error names the directory.
//
// release unlocks and closes the file.
func LockDir(dataDir string) (release func() error, err error) {
	return lockDir(dataDir, syscall.LOCK_EX,
		"another Mailroom server is using it (a file-store server needs its data directory to itself; only replicas on PostgreSQL may share one)")
}

// LockDirShared takes a shared lock on dataDir, as LockDir does an
// exclusive one: a server on PostgreSQL keeps only its host's files there
// (workspaces, scenario run files), so any number of them may share the
// directory, but no file-store server may use it meanwhile, nor they a
// directory a file-store server holds.
func LockDirShared(dataDir string) (release func() error, err error) {
	return lockDir(dataDir, syscall.LOCK_SH,
		"a file-store Mailroom server is using it (replicas on PostgreSQL may share a data directory with each other, never with a file-store server)")
}

func lockDir(dataDir string, how int, busy string) (release func() error, err error) {
	if err := makeDataDir(OS(), dataDir); err != nil {
		return nil, err
	}
	f, err := os.OpenFile(filepath.Join(dataDir, lockFile), os.O_RDWR|os.O_CREATE|syscall.O_NOFOLLOW, fileMode)
	if err != nil {
		return nil, fmt.Errorf("mail: open lock file in %s: %w", dataDir, err)
	}
	if err := f.Chmod(fileMode); err != nil {
		f.Close()
		return nil, fmt.Errorf("mail: chmod lock file in %s: %w", dataDir, err)
	}
	if err := syscall.Flock(int(f.Fd()), how|syscall.LOCK_NB); err != nil {
		f.Close()
		if errors.Is(err, syscall.EWOULDBLOCK) {
			return nil, &busyError{dir: dataDir, holder: busy}
		}
		return nil, fmt.Errorf("mail: lock data directory %s: %w", dataDir, err)
	}
	return func() error {
		uerr := syscall.Flock(int(f.Fd()), syscall.LOCK_UN)
		return errors.Join(uerr, f.Close())
	}, nil
}
