package mail

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"path/filepath"
	"strings"

	"mailroom/internal/core"
)

// trashPrefix names a directory that is being deleted. A deletion first
// renames the directory to trashPrefix + its name + a random suffix, in
// the same parent, and fsyncs the parent: that one rename is the moment
// the directory is gone. Only then are its files removed, so a crash at
// any point leaves either the whole directory or a trash directory, never
// a half-deleted one. The leading dot keeps trash out of every listing of
// teams (team names start with a letter); start-up removes what is left.
const trashPrefix = ".trash-"

func isTrashName(name string) bool { return strings.HasPrefix(name, trashPrefix) }

// DeleteTeam removes teams/<team> with everything in it: state, inboxes
// and whatever else is kept there. The rename to a trash name and the
// fsync of the teams directory make it durable and all or nothing (see
// trashPrefix); a failure to remove the trash afterwards is logged and
// left for the next start. A team directory that is already missing is
// not an error.
func (s *Store) deleteTeamFiles(ctx context.Context, team string) error {
	if !core.ValidName(team) {
		return fmt.Errorf("mail: invalid team name %q", team)
	}
	trash, err := s.moveToTrash(s.root, team)
	if errors.Is(err, fs.ErrNotExist) {
		s.forgetTeam(team)
		return nil
	}
	if err != nil {
		return err
	}
	// Whatever the store knew of the team's inboxes describes files that
	// are gone; a new team of the same name starts from its own files.
	s.forgetTeam(team)
	if err := s.removeTree(trash); err != nil {
		s.log.WarnContext(ctx, "removing a deleted team's files failed; the next start removes them", "team", team, "err", err)
	}
	return nil
}

// forgetTeam drops what the store knows of every inbox of team and closes
// the inbox files it keeps open for them.
func (s *Store) forgetTeam(team string) {
	prefix := cacheKey(team, "")
	s.mu.Lock()
	for key := range s.inboxes {
		if strings.HasPrefix(key, prefix) {
			delete(s.inboxes, key)
		}
	}
	s.mu.Unlock()
	s.files.dropPrefix(prefix)
}

// moveToTrash renames parent/name to a fresh trash name in parent and
// makes the rename durable. When the fsync fails the rename is undone (as
// far as possible), so the caller can report the deletion as not done.
func (s *Store) moveToTrash(parent, name string) (string, error) {
	from := filepath.Join(parent, name)
	if _, err := s.fs.Lstat(from); err != nil {
		return "", err
	}
	suffix := make([]byte, 6)
	_, _ = rand.Read(suffix) // crypto/rand.Read never fails on supported platforms
	to := filepath.Join(parent, trashPrefix+name+"-"+hex.EncodeToString(suffix))
	if err := s.fs.Rename(from, to); err != nil {
		return "", fmt.Errorf("mail: move %s to trash: %w", name, err)
	}
	if err := s.fs.SyncDir(parent); err != nil {
		if rerr := s.fs.Rename(to, from); rerr == nil {
			_ = s.fs.SyncDir(parent)
		}
		return "", fmt.Errorf("mail: sync directory after moving %s to trash: %w", name, err)
	}
	return to, nil
}

// removeTree removes path and, for a directory, everything below it,
// without following symbolic links. A missing path is not an error.
func (s *Store) removeTree(path string) error {
	fi, err := s.fs.Lstat(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	if fi.IsDir() {
		entries, err := s.fs.ReadDir(path)
		if err != nil {
			return err
		}
		for _, e := range entries {
			if err := s.removeTree(filepath.Join(path, e.Name())); err != nil {
				return err
			}
		}
	}
	if err := s.fs.Remove(path); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return err
	}
	return nil
}

// removeTrash removes the trash directories a crash left in dir (see
// trashPrefix). Each was renamed away before any of its files was removed,
// so nothing that still exists is lost.
func (s *Store) removeTrash(dir string, entries []fs.DirEntry) {
	for _, e := range entries {
		if !isTrashName(e.Name()) {
			continue
		}
		if err := s.removeTree(filepath.Join(dir, e.Name())); err != nil {
			s.log.Warn("removing a deleted directory's files failed", "dir", e.Name(), "err", err)
			continue
		}
		s.log.Info("removed the files of a deletion a crash interrupted", "dir", e.Name())
	}
}
