package core

import "context"

// LimitsUpdate names the limits of a team to change; a nil field keeps
// its limit. Only the limits that bound what comes next can change: the
// inbox bounds and the lengths of bodies, payloads, feedback and history
// are fixed at creation, because what is stored was written within them
// and is checked against the team's limits again when it is read back
// (docs/spec.md §4.2, §13.3), also after a crash, before anything newer is
// known.
type LimitsUpdate struct {
	Requests           *int
	Turns              *int
	ModelTokens        *int64
	PermissionTimeoutS *int
	Tasks              *int
	ToolCalls          *int
	WakeDelayMS        *int
	ModelRequests      *int
	WorkspaceBytes     *int64
	WorkspaceFiles     *int
	Reservations       *int
}

// UpdateLimits changes a team's limits (the admin only) and, when
// something changed, announces the team with a team event, so that
// whoever built something from the old limits (an MCP session's tool
// schemas, the page) builds it again.
func (s *Service) UpdateLimits(ctx context.Context, team string, upd LimitsUpdate) (TeamView, error) {
	if err := CheckAdmin(ctx); err != nil {
		return TeamView{}, err
	}
	var v TeamView
	err := s.update(ctx, team, func(u *unit) error {
		old := u.st.Limits
		l := old
		for _, f := range []struct{ dst, src *int }{
			{&l.Requests, upd.Requests}, {&l.Turns, upd.Turns}, {&l.PermissionTimeoutS, upd.PermissionTimeoutS}, {&l.Tasks, upd.Tasks}, {&l.ToolCalls, upd.ToolCalls}, {&l.WakeDelayMS, upd.WakeDelayMS},
			{&l.ModelRequests, upd.ModelRequests}, {&l.Reservations, upd.Reservations},
		} {
			if f.src != nil {
				*f.dst = *f.src
			}
		}
		if upd.ModelTokens != nil {
			l.ModelTokens = *upd.ModelTokens
		}
		// The workspace quota bounds what is written next; a workspace
		// already past a lowered one keeps its files and runs nothing
		// until it is within it again.
		if upd.WorkspaceBytes != nil {
			l.WorkspaceBytes = *upd.WorkspaceBytes
		}
		if upd.WorkspaceFiles != nil {
			l.WorkspaceFiles = *upd.WorkspaceFiles
		}
		if err := l.validate(); err != nil {
			return err
		}
		u.st.Limits = l
		v = u.teamView(nil)
		if l != old {
			u.emit(EventTeam, v)
		}
		return nil
	})
	if err != nil {
		return TeamView{}, err
	}
	return v, nil
}
