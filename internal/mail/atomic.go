package mail

import (
	"errors"
	"fmt"
	"io/fs"
	"path/filepath"
	"strings"
	"time"
)

// File and directory modes. They are set with chmod after creation, so a
// permissive umask cannot widen them and a strict one cannot lock the
// server out of its own files.
const (
	fileMode fs.FileMode = 0o600
	dirMode  fs.FileMode = 0o700
)

// Temporary files are named tempPrefix + random + tempSuffix. The leading
// dot keeps them out of every listing that looks for <member>.jsonl, and
// the fixed shape lets start-up remove exactly the ones a crash left
// behind, never a file it does not own.
const (
	tempPrefix = ".mailroom-"
	tempSuffix = ".tmp"
)

func isTempName(name string) bool {
	return strings.HasPrefix(name, tempPrefix) && strings.HasSuffix(name, tempSuffix) &&
		len(name) > len(tempPrefix)+len(tempSuffix)
}

// previous is what a target file held before a replace, so that a replace
// whose durability could not be confirmed can be undone.
type previous struct {
	data   []byte
	exists bool
}

// replaceFile makes dir/name hold exactly data, or leaves it as it was.
//
// The recipe is the classic one, and each step has a reason:
//   - the new bytes go to a temporary file in the same directory, because
//     rename(2) is atomic only within one file system, and a reader (or a
//     crash) must see either the whole old file or the whole new one;
//   - the temporary file is fsynced before the rename, otherwise a power
//     loss could persist the rename but not the data, leaving an empty or
//     partial file under the real name;
//   - the directory is fsynced after the rename, because the rename is a
//     change to the directory: until it reaches the disk, a power loss can
//     bring the old file back after the caller was told the write succeeded.
//
// On any failure the temporary file is removed. A failure after the rename
// (the directory fsync) restores prev, so the caller's "the previous state
// is kept" stays true for what is visible. On success it returns what fstat
// said of the new file before the rename.
func (s *Store) replaceFile(dir, name string, data []byte, prev previous) (fs.FileInfo, error) {
	target := filepath.Join(dir, name)
	written, err := s.writeRename(dir, target, data)
	if err != nil {
		return nil, err
	}
	if err := s.fs.SyncDir(dir); err != nil {
		err = fmt.Errorf("mail: sync directory of %s: %w", target, err)
		var undo error
		if prev.exists {
			_, undo = s.writeRename(dir, target, prev.data)
		} else {
			undo = s.fs.Remove(target)
		}
		if undo != nil {
			return nil, errors.Join(err, fmt.Errorf("mail: restore %s: %w", target, undo))
		}
		// Best effort: the directory already refused one sync.
		_ = s.fs.SyncDir(dir)
		return nil, err
	}
	return written, nil
}

// writeRename writes data to a fresh temporary file in dir, fsyncs and
// closes it, and renames it over target. The temporary file never outlives
// a failure. It returns what fstat said of the file after the fsync.
//
// The modification time is set to the current time with full nanosecond
// precision (see AppendInbox for why).
func (s *Store) writeRename(dir, target string, data []byte) (fs.FileInfo, error) {
	f, err := s.fs.CreateTemp(dir, tempPrefix+"*"+tempSuffix)
	if err != nil {
		return nil, fmt.Errorf("mail: create temporary file for %s: %w", target, err)
	}
	tmp := f.Name()
	closed, renamed := false, false
	defer func() {
		if !closed {
			_ = f.Close()
		}
		if !renamed {
			_ = s.fs.Remove(tmp)
		}
	}()
	if err := f.Chmod(fileMode); err != nil {
		return nil, fmt.Errorf("mail: chmod temporary file for %s: %w", target, err)
	}
	if _, err := f.Write(data); err != nil {
		return nil, fmt.Errorf("mail: write temporary file for %s: %w", target, err)
	}
	if err := f.SetModTime(time.Now()); err != nil {
		return nil, fmt.Errorf("mail: set modification time of temporary file for %s: %w", target, err)
	}
	if err := f.Sync(); err != nil {
		return nil, fmt.Errorf("mail: sync temporary file for %s: %w", target, err)
	}
	fi, err := f.Stat()
	if err != nil {
		return nil, fmt.Errorf("mail: stat temporary file for %s: %w", target, err)
	}
	closed = true
	if err := f.Close(); err != nil {
		return nil, fmt.Errorf("mail: close temporary file for %s: %w", target, err)
	}
	if err := s.fs.Rename(tmp, target); err != nil {
		return nil, fmt.Errorf("mail: rename temporary file to %s: %w", target, err)
	}
	renamed = true
	return fi, nil
}

// ensureDir creates dir with mode 0700 if it is missing. A new directory's
// own entry lives in its parent, so the parent is fsynced: otherwise a
// power loss could drop the directory together with every file later
// acknowledged inside it.
func (s *Store) ensureDir(dir string) error {
	if err := s.fs.Mkdir(dir, dirMode); err != nil {
		if errors.Is(err, fs.ErrExist) {
			fi, lerr := s.fs.Lstat(dir)
			if lerr != nil {
				return lerr
			}
			if !fi.IsDir() {
				return fmt.Errorf("mail: %s exists and is not a directory", dir)
			}
			return nil
		}
		return err
	}
	if err := s.fs.Chmod(dir, dirMode); err != nil {
		_ = s.fs.Remove(dir)
		return err
	}
	if err := s.fs.SyncDir(filepath.Dir(dir)); err != nil {
		_ = s.fs.Remove(dir)
		return err
	}
	return nil
}

// removeTemps deletes the temporary files a crash left in dir. They were
// never renamed into place, so nothing acknowledged is lost.
func (s *Store) removeTemps(dir string) error {
	entries, err := s.fs.ReadDir(dir)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	for _, e := range entries {
		if e.Type().IsRegular() && isTempName(e.Name()) {
			if err := s.fs.Remove(filepath.Join(dir, e.Name())); err != nil && !errors.Is(err, fs.ErrNotExist) {
				return err
			}
		}
	}
	return nil
}

// WriteFile durably replaces path with data, mode 0600, by the recipe of
// replaceFile: a temporary file in the same directory, fsync, rename,
// directory fsync. Readers and crashes see the whole old file or the whole
// new one. The server keeps its admin token and run documents with it.
func WriteFile(path string, data []byte) error {
	s := &Store{fs: OS()}
	dir := filepath.Dir(path)
	if _, err := s.writeRename(dir, path, data); err != nil {
		return err
	}
	if err := s.fs.SyncDir(dir); err != nil {
		return fmt.Errorf("mail: sync directory of %s: %w", path, err)
	}
	return nil
}
