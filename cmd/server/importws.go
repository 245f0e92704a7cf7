package main

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
)

// stagedWorkspaces are the teams' workspaces copied into a staging
// directory inside the destination root, waiting for the database import
// to succeed.
type stagedWorkspaces struct {
	stage, dest string
	teams       []string
}

// stageWorkspaces copies the workspace of each of teams found under from
// into a staging directory inside to. Without workspaces nothing is
// staged; with some and no destination it refuses, so that an import
// never leaves workspaces behind silently. A team whose workspace already
// exists under to is refused too: nothing is overwritten.
func stageWorkspaces(from, to string, teams []string) (*stagedWorkspaces, error) {
	var found []string
	for _, team := range teams {
		fi, err := os.Lstat(filepath.Join(from, team))
		if errors.Is(err, fs.ErrNotExist) {
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("workspace of %s: %w", team, err)
		}
		if fi.IsDir() {
			found = append(found, team)
		}
	}
	if len(found) == 0 {
		return &stagedWorkspaces{}, nil
	}
	if to == "" {
		return nil, usageErrorf("%s holds the workspaces of %d teams; give --workspaces-to DIR, the PostgreSQL server's workspaces root (its MAILROOM_WORKSPACES, or <its data>/workspaces), so they move with their teams", from, len(found))
	}
	if err := os.MkdirAll(to, 0o700); err != nil {
		return nil, fmt.Errorf("workspaces root %s: %w", to, err)
	}
	for _, team := range found {
		if _, err := os.Lstat(filepath.Join(to, team)); err == nil {
			return nil, fmt.Errorf("refusing to import: %s already has a workspace of team %s", to, team)
		}
	}
	stage, err := os.MkdirTemp(to, ".mailroom-import-")
	if err != nil {
		return nil, fmt.Errorf("workspaces root %s: %w", to, err)
	}
	s := &stagedWorkspaces{stage: stage, dest: to, teams: found}
	for _, team := range found {
		if err := copyTree(filepath.Join(from, team), filepath.Join(stage, team)); err != nil {
			s.discard()
			return nil, fmt.Errorf("copy the workspace of %s: %w", team, err)
		}
	}
	return s, nil
}

// commit moves the staged workspaces into place and returns how many.
func (s *stagedWorkspaces) commit() (int, error) {
	for i, team := range s.teams {
		if err := os.Rename(filepath.Join(s.stage, team), filepath.Join(s.dest, team)); err != nil {
			return i, err
		}
	}
	n := len(s.teams)
	s.teams = nil
	return n, nil
}

// discard removes what is still staged; after commit only the empty
// staging directory.
func (s *stagedWorkspaces) discard() {
	if s.stage != "" {
		_ = os.RemoveAll(s.stage)
	}
}

// copyTree copies the directories and regular files under src into dst
// (which must not exist), with their modes' permission bits and times;
// symbolic links and special files are not copied, as the workspace
// routes would never serve them.
func copyTree(src, dst string) error {
	return filepath.WalkDir(src, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(src, p)
		if err != nil {
			return err
		}
		target := filepath.Join(dst, rel)
		info, err := d.Info()
		if err != nil {
			return err
		}
		switch {
		case d.IsDir():
			return os.Mkdir(target, info.Mode().Perm()|0o700)
		case info.Mode().IsRegular():
			if err := copyFile(p, target, info.Mode().Perm()); err != nil {
				return err
			}
			return os.Chtimes(target, info.ModTime(), info.ModTime())
		default:
			return nil
		}
	})
}

// copyFile copies one regular file durably (fsync before close).
func copyFile(src, dst string, perm fs.FileMode) error {
	in, err := os.Open(src)
	if err != nil {
		return err
	}
	defer in.Close()
	out, err := os.OpenFile(dst, os.O_WRONLY|os.O_CREATE|os.O_EXCL, perm)
	if err != nil {
		return err
	}
	if _, err := io.Copy(out, in); err != nil {
		_ = out.Close()
		return err
	}
	if err := out.Sync(); err != nil {
		_ = out.Close()
		return err
	}
	return out.Close()
}
