package httpapi

import (
	"context"
	"errors"
	"io"
	"io/fs"
	"net/http"
	"os"
	"strings"

	"mailroom/internal/core"
	"mailroom/internal/workspace"
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

// workspaceOf is workspaceDir with the team's limits (the host's).
func (s *Server) workspaceOf(ctx context.Context, team string) (string, core.Limits, error) {
	return s.host.Workspace(ctx, team)
}

// workspaceName checks a file path of the workspace route and returns it
// cleaned (workspace.StrictName); a refusal is validation_failed.
func workspaceName(root *os.Root, p string) (string, error) {
	name, err := workspace.StrictName(root, p)
	if err != nil {
		return "", core.Errorf(core.CodeValidation, "path: %s.", err.Error())
	}
	return name, nil
}

// PutWorkspaceFile stores a file in the team's workspace (admin only),
// replacing it whole and durably: a temporary file beside it, fsync,
// rename, fsync of the directory, all through os.Root so that nothing is
// written outside the workspace. A file the team's workspace quota has no
// room for is refused whole (workspace_full).
func (s *Server) PutWorkspaceFile(ctx context.Context, req PutWorkspaceFileRequestObject) (PutWorkspaceFileResponseObject, error) {
	if err := core.CheckAdmin(ctx); err != nil {
		return nil, err
	}
	dir, limits, err := s.workspaceOf(ctx, req.Team)
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
	if err := workspace.Ensure(dir); err != nil {
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
	if err := workspace.PutFile(root, name, data, workspace.QuotaOf(limits)); errors.Is(err, workspace.ErrFull) {
		return nil, core.Errorf(core.CodeWorkspaceFull, "With this file the workspace would pass its quota (limits.workspace_bytes %d, limits.workspace_files %d); nothing was stored.", limits.WorkspaceBytes, limits.WorkspaceFiles)
	} else if err != nil {
		return nil, core.StorageError(err)
	}
	s.log.InfoContext(ctx, "workspace file stored", "team", req.Team, "bytes", len(data))
	return PutWorkspaceFile204Response{}, nil
}

// workspaceFile opens the workspace of team for the admin and checks
// path inside it: the root (for the caller to close) and the name in it.
func (s *Server) workspaceFile(ctx context.Context, team, path string) (*os.Root, string, error) {
	if err := core.CheckAdmin(ctx); err != nil {
		return nil, "", err
	}
	dir, err := s.workspaceDir(ctx, team)
	if err != nil {
		return nil, "", err
	}
	root, err := os.OpenRoot(dir)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, "", core.Errorf(core.CodeNotFound, "No such file in the workspace.")
	}
	if err != nil {
		return nil, "", core.StorageError(err)
	}
	name, err := workspaceName(root, path)
	if err != nil {
		root.Close()
		return nil, "", err
	}
	return root, name, nil
}

// GetWorkspaceFile returns a file of the team's workspace (admin only).
func (s *Server) GetWorkspaceFile(ctx context.Context, req GetWorkspaceFileRequestObject) (GetWorkspaceFileResponseObject, error) {
	root, name, err := s.workspaceFile(ctx, req.Team, string(req.Path))
	if err != nil {
		return nil, err
	}
	defer root.Close()
	// Only a regular file, opened without blocking: a FIFO or a device
	// is refused at once.
	f, fi, err := workspace.OpenRegular(root, name)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return nil, core.Errorf(core.CodeNotFound, "No such file in the workspace.")
	case errors.Is(err, workspace.ErrNotRegular):
		return nil, core.Errorf(core.CodeValidation, "path: it names something that is not a regular file.")
	case err != nil:
		return nil, core.Errorf(core.CodeValidation, "path: it cannot be opened inside the workspace.")
	}
	// The response closes f once it has copied it.
	return GetWorkspaceFile200ApplicationOctetStreamResponse{Body: f, ContentLength: fi.Size()}, nil
}

// ListWorkspaceFiles lists the regular files of the team's workspace
// (admin only), in path order.
func (s *Server) ListWorkspaceFiles(ctx context.Context, req ListWorkspaceFilesRequestObject) (ListWorkspaceFilesResponseObject, error) {
	if err := core.CheckAdmin(ctx); err != nil {
		return nil, err
	}
	dir, err := s.workspaceDir(ctx, req.Team)
	if err != nil {
		return nil, err
	}
	files, err := workspace.List(dir)
	if err != nil {
		return nil, core.StorageError(err)
	}
	out := ListWorkspaceFiles200JSONResponse{Files: make([]WorkspaceFile, 0, len(files))}
	for _, f := range files {
		out.Files = append(out.Files, WorkspaceFile{Path: f.Path, Bytes: f.Bytes, Modified: f.Modified})
	}
	return out, nil
}

// DeleteWorkspaceFile removes a file of the team's workspace (admin only).
func (s *Server) DeleteWorkspaceFile(ctx context.Context, req DeleteWorkspaceFileRequestObject) (DeleteWorkspaceFileResponseObject, error) {
	root, name, err := s.workspaceFile(ctx, req.Team, string(req.Path))
	if err != nil {
		return nil, err
	}
	defer root.Close()
	switch err := workspace.RemoveFile(root, name); {
	case errors.Is(err, fs.ErrNotExist):
		return nil, core.Errorf(core.CodeNotFound, "No such file in the workspace; list them with GET /api/v1/teams/%s/workspace.", req.Team)
	case errors.Is(err, workspace.ErrNotRegular):
		return nil, core.Errorf(core.CodeValidation, "path: it names something that is not a regular file.")
	case err != nil:
		return nil, core.StorageError(err)
	}
	s.log.InfoContext(ctx, "workspace file deleted", "team", req.Team)
	return DeleteWorkspaceFile204Response{}, nil
}

// workspaceFilePaths lets a workspace file's path carry literal slashes
// (PUT, GET, DELETE .../workspace/files/src/app.py): the route's {path}
// is one segment, so the slashes after files/ are escaped as %2F before
// the route table (validate.go) sees the request. The decoded path is
// unchanged, so the handler gets "src/app.py" either way.
func workspaceFilePaths(next http.Handler) http.Handler {
	prefix := BasePath + "/teams/"
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		raw := r.URL.EscapedPath()
		if rest, ok := strings.CutPrefix(raw, prefix); ok {
			team, after, _ := strings.Cut(rest, "/")
			if file, ok := strings.CutPrefix(after, "workspace/files/"); ok && strings.Contains(file, "/") {
				u := *r.URL
				u.RawPath = prefix + team + "/workspace/files/" + strings.ReplaceAll(file, "/", "%2F")
				r2 := r.Clone(r.Context())
				r2.URL = &u
				r = r2
			}
		}
		next.ServeHTTP(w, r)
	})
}
