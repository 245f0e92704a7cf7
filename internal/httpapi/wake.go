package httpapi

import (
	"context"

	"mailroom/internal/agent"
	"mailroom/internal/core"
)

// Members woken on mail: the member PATCH and the members' own models.
// Woken turns are built by the host (internal/host) and run by the
// process's waker (internal/runtime), which the composition root wires.

// UpdateMember changes a member's wake and model (admin only).
func (s *Server) UpdateMember(ctx context.Context, req UpdateMemberRequestObject) (UpdateMemberResponseObject, error) {
	if err := requireAdmin(ctx); err != nil {
		return nil, err
	}
	var upd core.MemberUpdate
	if req.Body != nil {
		upd.Wake = req.Body.Wake
		upd.Skills = (*[]string)(req.Body.Skills)
		if req.Body.Model != nil {
			cfg := modelConfigFrom(req.Body.Model)
			if err := cfg.Validate(); err != nil {
				return nil, err
			}
			upd.Model = coreModelOf(cfg)
		}
	}
	m, err := s.svc.UpdateMember(ctx, req.Team, req.Member, upd)
	if err != nil {
		return nil, err
	}
	return UpdateMember200JSONResponse(memberOf(m)), nil
}

// checkMemberModels validates the members' own models of a team being
// created, as the team's is.
func checkMemberModels(spec core.TeamSpec) error {
	for _, m := range spec.Members {
		if m.Model == nil {
			continue
		}
		if err := agentModelOf(*m.Model).Validate(); err != nil {
			return err
		}
	}
	return nil
}

func coreModelOf(cfg agent.ModelConfig) *core.ModelSettings {
	return &core.ModelSettings{Provider: cfg.Provider, Name: cfg.Name, MaxTokens: cfg.MaxTokens}
}

// agentModelOf is the inverse of coreModelOf.
func agentModelOf(m core.ModelSettings) agent.ModelConfig {
	return agent.ModelConfig{Provider: m.Provider, Name: m.Name, MaxTokens: m.MaxTokens}
}
