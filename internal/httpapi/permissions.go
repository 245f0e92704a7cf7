package httpapi

import (
	"context"
	"encoding/json"

	"mailroom/internal/core"
)

// ListPermissions lists the team's permissions of the host gate, pending
// and decided (admin or a member of the team: a member sees what its own
// run_main is waiting for).
func (s *Server) ListPermissions(ctx context.Context, req ListPermissionsRequestObject) (ListPermissionsResponseObject, error) {
	list, err := s.svc.Permissions(ctx, req.Team)
	if err != nil {
		return nil, err
	}
	out := PermissionList{Permissions: make([]Permission, 0, len(list))}
	for _, p := range list {
		out.Permissions = append(out.Permissions, permissionOf(p))
	}
	return ListPermissions200JSONResponse(out), nil
}

// DecidePermission allows or denies a pending permission (admin only);
// the waiting turn goes on at once.
func (s *Server) DecidePermission(ctx context.Context, req DecidePermissionRequestObject) (DecidePermissionResponseObject, error) {
	p, err := s.svc.DecidePermission(ctx, req.Team, req.PermissionID, req.Body.Allow)
	if err != nil {
		return nil, err
	}
	return DecidePermission200JSONResponse(permissionOf(p)), nil
}

func permissionOf(p core.Permission) Permission {
	out := Permission{
		PermissionID:  p.ID,
		Member:        p.Member,
		Tool:          p.Tool,
		Input:         map[string]any{},
		PlanRequestID: p.PlanRequestID,
		Status:        PermissionStatus(p.Status),
		CreatedAt:     p.CreatedAt,
		ExpiresAt:     p.ExpiresAt,
		DecidedAt:     p.DecidedAt,
	}
	// The input was accepted by the tool, so it is a JSON object.
	_ = json.Unmarshal(p.Input, &out.Input)
	if p.DecidedBy != nil {
		by := PermissionDecidedBy(*p.DecidedBy)
		out.DecidedBy = &by
	}
	return out
}
