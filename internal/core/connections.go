package core

import (
	"context"
	"sort"
	"time"
)

// The reads the process around core (internal/live) makes for the
// connections it holds: a read that waits for mail, a subscription told
// of every letter, an MCP session and its member's presence, a stream
// that follows a team. Each is one view of the team; the waiting, the
// counting and the following are internal/live's.

// MaxWait bounds how long one read may wait for mail.
const MaxWait = 60 * time.Second

// LettersAfter returns the letters of member's inbox that come after the
// one whose id is after (every letter when after is empty). An after that
// names no letter of this inbox is validation_failed. Reading deletes
// nothing. The caller must be the admin or member itself.
func (s *Service) LettersAfter(ctx context.Context, teamName, member, after string) ([]Message, error) {
	if err := CheckSelfOrAdmin(ctx, teamName, member); err != nil {
		return nil, err
	}
	var msgs []Message
	err := s.view(ctx, teamName, true, func(u *unit) error {
		items, err := inboxOf(u, member)
		if err != nil {
			return err
		}
		start := 0
		if after != "" {
			// A letter of this inbox, or of its archive: the inbox's
			// letters are in number order, so those after it follow.
			who, n, ok := ParseLetterID(after)
			if !ok || who != member || n > u.member(member).Archive.Sent(len(items)) {
				return Errorf(CodeValidation, "The after parameter names no letter of this inbox.")
			}
			start = sort.Search(len(items), func(i int) bool { return letterNumberOf(items[i]) > n })
		}
		msgs = append([]Message{}, items[start:]...)
		return nil
	})
	return msgs, err
}

// LettersSent is how many letters member has been sent, its inbox's and
// its archive's: a count that only grows, which a subscription compares
// to tell a new letter. It reads no letter where the store keeps counts.
// The caller must be the admin or member itself.
func (s *Service) LettersSent(ctx context.Context, teamName, member string) (int, error) {
	if err := CheckSelfOrAdmin(ctx, teamName, member); err != nil {
		return 0, err
	}
	var n int
	err := s.view(ctx, teamName, true, func(u *unit) error {
		if !u.isMember(member) {
			return u.noSuchMember()
		}
		held, err := inboxLen(u.tx, member)
		if err != nil {
			return asStoreError(err)
		}
		n = u.member(member).Archive.Sent(held)
		return nil
	})
	return n, err
}

// MemberView is member's view as the team document shows it, damaged team
// or not: what a member event announces when the member's presence
// changed (an MCP session opened or ended, an MCP request seen). The
// caller must be a reader of team.
func (s *Service) MemberView(ctx context.Context, team, member string) (MemberView, error) {
	if err := CheckReader(ctx, team); err != nil {
		return MemberView{}, err
	}
	var mv MemberView
	err := s.view(ctx, team, false, func(u *unit) error {
		m := u.member(member)
		if m == nil {
			return u.noSuchMember()
		}
		mv = u.memberView(m)
		return nil
	})
	return mv, err
}

// CheckConnection is the rule of a long-lived connection of the caller (a
// reader of team) to team: an event stream, a held read, an MCP session.
// A member principal that carries its token (LookupPrincipal) must still
// be that team's member by that token, and a member without one must
// still exist, so a connection authenticated just before a deletion
// cannot follow the next team of the same name (internal/live follows the
// team before it asks).
func (s *Service) CheckConnection(ctx context.Context, team string) error {
	if err := CheckReader(ctx, team); err != nil {
		return err
	}
	p, _ := PrincipalFrom(ctx)
	return s.view(ctx, team, false, func(u *unit) error {
		if p.Admin || p.Member == "" {
			return nil
		}
		// A token of another incarnation of the team is refused by view
		// itself (tokenHolds); a member without one must still exist.
		if u.member(p.Member) == nil {
			return Errorf(CodeNotFound, "No such member; its team may have been deleted.")
		}
		return nil
	})
}
