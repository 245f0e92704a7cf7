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
func (s *Service) TeamRoom(ctx context.Context, n int) error {
	count, err := s.store.CountTeams(ctx)
	if err != nil {
		return asStoreError(err)
	}
	if count+n > s.maxTeams {
		return teamLimitError()
	}
	return nil
}

// DeleteTeam removes a team with its inboxes and its member tokens,
// durably from the store; the name is free again afterwards. A damaged
// team may be deleted too. Deletion always wins (deletion.go): no turn of
// the team starts here from now on, its pending wakes are dropped, and its
// running turns are cancelled (they end cancelled) and waited for, at
// most DeleteTurnWait, before the team is removed; other replicas cancel
// theirs when the deletion is announced.
//
// release, when not nil, removes what belongs to the team outside the
// store (a scenario run's document and workspace). It is called once
// nothing can refuse the deletion any more, and before the store removes
// the team: a crash in between leaves a whole team that a second deletion
// completes, never something of a team that is gone. Its error cancels
// the deletion. It must not call the Service.
func (s *Service) DeleteTeam(ctx context.Context, name string, release func() error) error {
	if err := CheckAdmin(ctx); err != nil {
		return err
	}
	var inc string
	if err := s.view(ctx, name, false, func(u *unit) error {
		inc = teamIncarnation(u.st)
		return nil
	}); err != nil {
		return err
	}
	// Marked being deleted here (Work.DeletionBegan) so that no turn of
	// it starts here before its turns are collected and cancelled.
	end := s.work.DeletionBegan(name)
	defer end()
	waitTurns(ctx, EndTeamWork(s.work, name, inc), DeleteTurnWait)
	if release != nil {
		if err := release(); err != nil {
			return err
		}
	}
	if err := s.store.DeleteTeam(ctx, name); err != nil {
		return asStoreError(err)
	}
	// Every connection tied to the team ends now, on every replica,
	// before a team of the same name can be created (internal/live).
	s.publish([]Event{{Type: EventTeamDeleted, Team: name, Data: inc}})
	s.log.InfoContext(ctx, "team deleted", "team", name)
	return nil
}

// ResetMember makes a stopped or failed member idle again, with its
// history and turn count kept, so it can take turns once more (a turn cut
// short by a shutdown, or one that failed, leaves it so), and releases a
// held wake (wake.go), whatever the member's status. A member with
// neither is refused with member_unavailable. The change is committed before it
// is announced; on a failed commit the member keeps its status.
func (s *Service) ResetMember(ctx context.Context, teamName, member string) (MemberView, error) {
	return s.ResetMemberWith(ctx, teamName, member, ResetOptions{})
}

// ResetOptions say what a reset does beyond ResetMember's.
type ResetOptions struct {
	// ClearHistory empties the member's history (its turn count kept),
	// for a member whose history has no room left ({"history": "clear"}).
	// The letters and tasks it had attended stay attended (its Attended
	// lines), so that it is not shown its old mail again.
	ClearHistory bool
}

// ResetMemberWith is ResetMember with opts; a reset that clears the
// history is allowed whatever the member's status, unless a turn of it
// runs (member_unavailable).
func (s *Service) ResetMemberWith(ctx context.Context, teamName, member string, opts ResetOptions) (MemberView, error) {
	if err := CheckAdmin(ctx); err != nil {
		return MemberView{}, err
	}
	var view MemberView
	err := s.update(ctx, teamName, func(u *unit) error {
		m := u.member(member)
		if m == nil {
			return u.noSuchMember()
		}
		busy := s.busy(teamName, m, u.now)
		stuck := !busy && (m.Status == StatusStopped || m.Status == StatusFailed)
		if opts.ClearHistory {
			if busy {
				return Errorf(CodeMemberUnavailable, "A turn of the member is running; reset it when the turn is over.")
			}
			if err := u.clearHistory(m); err != nil {
				return err
			}
		} else if !stuck && !m.WakeHeld {
			return Errorf(CodeMemberUnavailable, "Only a stopped or failed member, or one whose wake is held, can be reset; %s is %s and its wake is not held, so there is nothing to reset.", m.Name, resetStatus(m, busy))
		}
		// A held wake is released whatever the member's status: the
		// admin has looked at what its last turn left.
		m.WakeHeld, m.WakeHeldReason = false, ""
		if stuck {
			m.Status = StatusIdle
		}
		// A reset member starts again with nothing held: what it had
		// reserved was for the work it no longer remembers.
		u.releaseReservationsOf(m.Name)
		view = u.memberView(m)
		u.emit(EventMember, view)
		return nil
	})
	return view, err
}

// clearHistory empties m's history and keeps, as attended, the lines of
// the letters of its inbox and the claimable tasks it had attended.
func (u *unit) clearHistory(m *MemberState) error {
	items, err := u.tx.LoadInbox(m.Name)
	if err != nil {
		return asStoreError(err)
	}
	tasks, err := u.tx.Tasks()
	if err != nil {
		return asStoreError(err)
	}
	present := attendedBy(m, m.History)
	var kept []string
	for _, l := range items {
		if line := HistoryText(l); present[line] {
			kept = append(kept, line)
		}
	}
	for _, t := range ClaimableTasks(tasks, m.Name, m.Skills) {
		if line := TaskHistoryText(t); present[line] {
			kept = append(kept, line)
		}
	}
	m.History, m.Attended = []Entry{}, kept
	return nil
}

// resetStatus is the word for a member ResetMember refuses: running when
// a turn of it runs, its status otherwise.
func resetStatus(m *MemberState, busy bool) string {
	if busy {
		return StatusRunning
	}
	return m.Status
}
