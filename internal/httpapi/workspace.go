package httpapi

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"io"
	"io/fs"
	"net/http"
	"os"
	"path"
	"path/filepath"
	"strings"

	"mailroom/internal/agent"
	"mailroom/internal/core"
	"mailroom/internal/mail"
)

// A team created with "workspace": true has the directory
// <workspaces>/<team>/, where the admin puts files over HTTP and where its
// members' read_file and run_main work. The directory is made when the
// first file is put or the first turn is offered it, and goes away with
// the team.

// workspaceDir returns team's workspace directory; not_found when the
// team does not exist or has none.
func (s *Server) workspaceDir(ctx context.Context, team string) (string, error) {
	dir, _, err := s.workspaceOf(ctx, team)
	return dir, err
}

// workspaceOf is workspaceDir with the team's limits.
func (s *Server) workspaceOf(ctx context.Context, team string) (string, core.Limits, error) {
	view, err := s.svc.Team(ctx, team)
	if err != nil {
		return "", core.Limits{}, err
	}
	if !view.Workspace || s.workspaces == "" {
		return "", core.Limits{}, core.Errorf(core.CodeNotFound, "The team has no workspace; create it with \"workspace\": true.")
	}
	return filepath.Join(s.workspaces, team), view.Limits, nil
}

// ensureWorkspace creates the workspaces root and the team's directory
// when they are missing, mode 0700 both.
func ensureWorkspace(dir string) error {
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
		return errors.New("httpapi: the workspace is not a directory")
	}
	return nil
}

// toolsFor is the tool set of a turn of member: the workspace tools for a
// team with a workspace (whose host gate is the team's host_permission),
// the default ones otherwise.
func (s *Server) toolsFor(ctx context.Context, team, member string) agent.ToolSet {
	dir, limits, err := s.workspaceOf(ctx, team)
	if err != nil {
		return agent.DefaultTools(member)
	}
	if err := ensureWorkspace(dir); err != nil {
		// The tools then answer that the workspace is not available.
		s.log.WarnContext(ctx, "creating a team's workspace failed", "team", team, "err", err)
	}
	return agent.WorkspaceTools(member, dir, limits)
}

// removeWorkspace deletes team's workspace directory, if any, all or
// nothing across a crash. It is part of deleting the team.
func (s *Server) removeWorkspace(team string) error {
	if s.workspaces == "" || !core.ValidName(team) {
		return nil
	}
	if err := mail.RemoveDir(filepath.Join(s.workspaces, team)); err != nil {
		return core.StorageError(err)
	}
	return nil
}

// workspaceName checks a file path of the workspace route and returns it
// cleaned, with forward slashes. Besides agent.CheckWorkspacePath's rules,
// it refuses a path naming the workspace itself and one whose components
// (any of them, the file included) are symbolic links: a workspace file is
// reached only through real directories.
func workspaceName(root *os.Root, p string) (string, error) {
	if err := agent.CheckWorkspacePath(p); err != nil {
		return "", core.Errorf(core.CodeValidation, "path: %s.", err.Error())
	}
	clean := path.Clean(strings.ReplaceAll(p, `\`, "/"))
	if clean == "." || strings.HasPrefix(clean, ".mailroom-") || strings.Contains(clean, "/.mailroom-") {
		return "", core.Errorf(core.CodeValidation, "path: name a file inside the workspace.")
	}
	parts := strings.Split(clean, "/")
	for i := range parts {
		fi, err := root.Lstat(strings.Join(parts[:i+1], "/"))
		if errors.Is(err, fs.ErrNotExist) {
			break
		}
		if err != nil {
			return "", core.Errorf(core.CodeValidation, "path: it cannot be reached inside the workspace.")
		}
		if fi.Mode()&fs.ModeSymlink != 0 {
			return "", core.Errorf(core.CodeValidation, "path: it leads through a symbolic link, which is not followed.")
		}
		if i < len(parts)-1 && !fi.IsDir() {
			return "", core.Errorf(core.CodeValidation, "path: a component of it is not a directory.")
		}
	}
	return clean, nil
}

// PutWorkspaceFile stores a file in the team's workspace (admin only),
// replacing it whole and durably: a temporary file beside it, fsync,
// rename, fsync of the directory, all through os.Root so that nothing is
// written outside the workspace.
func (s *Server) PutWorkspaceFile(ctx context.Context, req PutWorkspaceFileRequestObject) (PutWorkspaceFileResponseObject, error) {
	if err := core.CheckAdmin(ctx); err != nil {
		return nil, err
	}
	dir, err := s.workspaceDir(ctx, req.Team)
	if err != nil {
		return nil, err
	}
	data, err := io.ReadAll(req.Body)
	if err != nil {
		var tooBig *http.MaxBytesError
		if errors.As(err, &tooBig) {
			return nil, core.Errorf(codeBodyTooLarge, "The file is over 1 MiB.")
		}
		return nil, core.Errorf(core.CodeValidation, "The request body could not be read.")
	}
	if err := ensureWorkspace(dir); err != nil {
		return nil, core.StorageError(err)
	}
	root, err := os.OpenRoot(dir)
	if err != nil {
		return nil, core.StorageError(err)
	}
	defer root.Close()
	name, err := workspaceName(root, string(req.Path))
	if err != nil {
		return nil, err
	}
	if fi, err := root.Lstat(name); err == nil && !fi.Mode().IsRegular() {
		return nil, core.Errorf(core.CodeValidation, "path: it names something that is not a regular file.")
	}
	if err := writeInRoot(root, name, data); err != nil {
		return nil, core.StorageError(err)
	}
	s.log.InfoContext(ctx, "workspace file stored", "team", req.Team, "bytes", len(data))
	return PutWorkspaceFile204Response{}, nil
}

// writeInRoot durably replaces name inside root with data (mode 0600),
// creating its directories.
func writeInRoot(root *os.Root, name string, data []byte) error {
	parent := path.Dir(name)
	if parent != "." {
		if err := root.MkdirAll(parent, 0o700); err != nil {
			return err
		}
	}
	suffix := make([]byte, 8)
	_, _ = rand.Read(suffix) // crypto/rand.Read never fails on supported platforms
	tmp := path.Join(parent, ".mailroom-"+hex.EncodeToString(suffix)+".tmp")
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

// GetWorkspaceFile returns a file of the team's workspace (admin only).
func (s *Server) GetWorkspaceFile(ctx context.Context, req GetWorkspaceFileRequestObject) (GetWorkspaceFileResponseObject, error) {
	if err := core.CheckAdmin(ctx); err != nil {
		return nil, err
	}
	dir, err := s.workspaceDir(ctx, req.Team)
	if err != nil {
		return nil, err
	}
	root, err := os.OpenRoot(dir)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, core.Errorf(core.CodeNotFound, "No such file in the workspace.")
	}
	if err != nil {
		return nil, core.StorageError(err)
	}
	defer root.Close()
	name, err := workspaceName(root, string(req.Path))
	if err != nil {
		return nil, err
	}
	f, err := root.Open(name)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, core.Errorf(core.CodeNotFound, "No such file in the workspace.")
	}
	if err != nil {
		return nil, core.Errorf(core.CodeValidation, "path: it cannot be opened inside the workspace.")
	}
	fi, err := f.Stat()
	if err != nil || !fi.Mode().IsRegular() {
		_ = f.Close()
		return nil, core.Errorf(core.CodeValidation, "path: it names something that is not a regular file.")
	}
	// The response closes f once it has copied it.
	return GetWorkspaceFile200ApplicationOctetStreamResponse{Body: f, ContentLength: fi.Size()}, nil
}

// workspacesRoot is the workspaces root of opts: Workspaces, or
// DataDir/workspaces by default.
func workspacesRoot(opts Options) string {
	if opts.Workspaces != "" {
		return opts.Workspaces
	}
	if opts.DataDir != "" {
		return filepath.Join(opts.DataDir, "workspaces")
	}
	return ""
}

// alsoRemoveWorkspace returns the release function of a team's deletion
// (core.Service.DeleteTeam) that removes its workspace after what release
// removes.
func (s *Server) alsoRemoveWorkspace(team string, release func() error) func() error {
	return func() error {
		if release != nil {
			if err := release(); err != nil {
				return err
			}
		}
		return s.removeWorkspace(team)
	}
}
