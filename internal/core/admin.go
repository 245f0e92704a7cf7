package core

import "context"

// The admin's maintenance operations: removing a team, making a member that
// stopped or failed usable again, and the team limit they are counted
// against.

func teamLimitError() *Error {
	return Errorf(CodeTeamLimit, "The server holds its maximum number of teams; delete one first.")
}

// TeamRoom reports whether n more teams may be created now: a team_limit
// error when they would take the server over its limit. A caller that needs
// several teams (a scenario run) asks first, so that it creates none when
// it could not create them all.
func (s *Service) TeamRoom(n int) error {
	s.mu.RLock()
	defer s.mu.RUnlock()
	if len(s.teams)+n > s.maxTeams {
		return teamLimitError()
	}
	return nil
}

// DeleteTeam removes a team with its inboxes and its member tokens, from
// memory and durably from the store; the name is free again afterwards. A
// damaged team may be deleted too. While a turn of one of its members is
// running it is refused with member_unavailable, since the turn would
// commit into a team that no longer exists.
//
// release, when not nil, removes what belongs to the team outside the
// store (a scenario run's document and workspace). It is called with the
// team's lock held, once nothing can refuse the deletion any more, and
// before the store removes the team: a crash in between leaves a whole
// team that a second deletion completes, never something of a team that
// is gone. Its error cancels the deletion. It must not call the Service.
func (s *Service) DeleteTeam(ctx context.Context, name string, release func() error) error {
	if err := CheckAdmin(ctx); err != nil {
		return err
	}
	t, err := s.lookup(name)
	if err != nil {
		return err
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.deleted {
		return Errorf(CodeNotFound, "No such team.")
	}
	for _, busy := range t.active {
		if busy {
			return Errorf(CodeMemberUnavailable, "A turn is running on this team; delete it when the turn is over.")
		}
	}
	if release != nil {
		if err := release(); err != nil {
			return err
		}
	}
	if err := s.store.DeleteTeam(ctx, name); err != nil {
		return StorageError(err)
	}
	// Marked under the team's lock, so every call that found the team
	// before and waits for the lock sees it gone (lockTeam).
	t.deleted = true
	s.mu.Lock()
	if s.teams[name] == t {
		delete(s.teams, name)
	}
	for hash, ref := range s.tokens {
		if ref.team == name {
			delete(s.tokens, hash)
		}
	}
	s.mu.Unlock()
	s.log.InfoContext(ctx, "team deleted", "team", name)
	return nil
}

// ResetMember makes a stopped or failed member idle again, with its
// history and turn count kept, so it can take turns once more (a turn cut
// short by a shutdown, or one that failed, leaves it so). Any other status
// is refused with member_unavailable. The change is saved before it is
// announced; on a failed save the member keeps its status.
func (s *Service) ResetMember(ctx context.Context, teamName, member string) (MemberView, error) {
	if err := CheckAdmin(ctx); err != nil {
		return MemberView{}, err
	}
	t, err := s.lockTeam(teamName)
	if err != nil {
		return MemberView{}, err
	}
	defer t.mu.Unlock()
	m := t.member(member)
	if m == nil {
		return MemberView{}, Errorf(CodeNotFound, "No such member.")
	}
	if t.active[member] || (m.Status != StatusStopped && m.Status != StatusFailed) {
		return MemberView{}, Errorf(CodeMemberUnavailable, "Only a stopped or failed member can be reset.")
	}
	if err := s.clearStaleIntent(ctx, t); err != nil {
		return MemberView{}, err
	}
	old := m.Status
	m.Status = StatusIdle
	if err := s.store.SaveTeam(ctx, t.st); err != nil {
		m.Status = old
		return MemberView{}, StorageError(err)
	}
	view := s.memberViewLocked(ctx, t, m)
	s.emit("member", t.st.Name, view)
	return view, nil
}
