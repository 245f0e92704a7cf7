package core

import (
	"context"
	"sync"
	"time"
)

// Sessions of agents outside Mailroom. An agent that joins a team through
// the MCP endpoint holds a session with the process it connected to; the
// team document shows, per member, how many such sessions this process
// holds, and a member event announces each change, so the status page can
// show who is connected (docs/api.md, section B).
//
// The count belongs to the process, like the sessions themselves: a
// replica knows only its own. Every member event reaches this process's
// bus with this process's count, whichever process built it, and the
// count is set under the same lock that orders the publishing, so that
// the last member event a subscriber sees carries the current count.

// sessionCounts is the open MCP sessions of this process per member. The
// zero value is ready.
type sessionCounts struct {
	mu sync.Mutex
	n  map[memberRef]int
}

type memberRef struct{ team, member string }

func (c *sessionCounts) count(team, member string) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.n[memberRef{team, member}]
}

// add changes a count; the caller holds c.mu.
func (c *sessionCounts) add(team, member string, d int) {
	if c.n == nil {
		c.n = map[memberRef]int{}
	}
	k := memberRef{team, member}
	if c.n[k] += d; c.n[k] <= 0 {
		delete(c.n, k)
	}
}

// OpenMCPSession records that the caller, a member, holds one more MCP
// session with this process and announces it with a member event. end
// records the session's end (once, however often it is called) and
// announces that too.
//
// A session follows its team's life (FollowTeam, carried by ctx with
// WithTeamLife): once the team is deleted its count is dropped with the
// team's (teamDeleted) and its end counts nothing, so a new team of the
// same name starts with no sessions.
func (s *Service) OpenMCPSession(ctx context.Context, team, member string) (end func(), err error) {
	if err := CheckSelf(ctx, team, member); err != nil {
		return nil, err
	}
	gone := teamGoneOf(ctx)
	if err := s.changeSessions(ctx, team, member, 1, gone); err != nil {
		return nil, err
	}
	var once sync.Once
	return func() {
		once.Do(func() {
			// The team may be gone by now (deleted): the count still
			// goes, only the announcement does not. The session's end
			// is not a request's: it runs when the client went away or
			// the server stops, whose contexts are over by then.
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			if err := s.changeSessions(ctx, team, member, -1, gone); err != nil {
				s.log.Debug("mcp session end not announced", "team", team, "code", ErrorCode(err))
			}
		})
	}, nil
}

// changeSessions changes member's count by d and publishes the member's
// view. An opening (d > 0) of a member that cannot be read is refused and
// not counted; an ending is always counted. Once gone (the life of the
// session's team) is closed, the team's counts were dropped with it: an
// opening is refused and an ending counts nothing.
func (s *Service) changeSessions(ctx context.Context, team, member string, d int, gone <-chan struct{}) error {
	var mv MemberView
	err := s.view(ctx, team, false, func(u *unit) error {
		m := u.member(member)
		if m == nil {
			return u.noSuchMember()
		}
		mv = u.memberView(m)
		return nil
	})
	if err != nil && d > 0 {
		return err
	}
	s.sessions.mu.Lock()
	defer s.sessions.mu.Unlock()
	// Under the lock teamDeleted drops the counts with: a session either
	// counted before the drop or not at all.
	if closed(gone) {
		if d > 0 {
			return teamDeletedError()
		}
		return nil
	}
	s.sessions.add(team, member, d)
	if err != nil {
		return err
	}
	// Only this process's subscribers hear of it: the other replicas do
	// not count this process's sessions.
	mv.MCPSessions = s.sessions.n[memberRef{team, member}]
	s.bus.Publish(Event{Type: EventMember, Team: team, Data: mv})
	return nil
}

// publishLocal hands ev to this process's subscribers, a member event with
// this process's session counts: one built before a session opened or
// ended, or by another process, would show a count that is not (or no
// longer) this process's. Its MCP time is the later of the event's and
// this process's (mcpseen.go): another replica's announcement is kept.
func (s *Service) publishLocal(ev Event) {
	if ev.Type != EventMember {
		s.bus.Publish(ev)
		return
	}
	s.sessions.mu.Lock()
	defer s.sessions.mu.Unlock()
	switch d := ev.Data.(type) {
	case MemberView:
		d.MCPSessions = s.sessions.n[memberRef{ev.Team, d.Name}]
		d.MCPLastSeen = s.seen.merge(memberRef{ev.Team, d.Name}, d.MCPLastSeen)
		ev.Data = d
	case []MemberView:
		views := append([]MemberView(nil), d...)
		for i := range views {
			views[i].MCPSessions = s.sessions.n[memberRef{ev.Team, views[i].Name}]
			views[i].MCPLastSeen = s.seen.merge(memberRef{ev.Team, views[i].Name}, views[i].MCPLastSeen)
		}
		ev.Data = views
	}
	s.bus.Publish(ev)
}
