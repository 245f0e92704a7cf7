package core

import (
	"context"
	"sync"
)

// The lives of teams as long-lived connections see them. A stream of
// events, a held read and an MCP session belong to one team, and a team's
// name is free again once it is deleted: a connection must never serve
// the next team of that name. So each such connection follows the team
// it was opened on (FollowTeam) and ends when that team is deleted, on
// this process or another replica, at once; whatever it would do next it
// checks against Gone first, so nothing of a new team of the same name
// ever reaches it (docs/api.md, section H).

// EventTeamDeleted announces that a team was deleted; Data is the
// incarnation deleted (deletion.go), a string, or nil. It
// travels between replicas like every event, so that every process ends
// the connections it holds on that team; the event stream does not show
// it to clients.
const EventTeamDeleted = "team_deleted"

// teamLives is the teams followed now, by name. The zero value is ready.
type teamLives struct {
	mu    sync.Mutex
	teams map[string]*teamLifeEntry
}

// teamLifeEntry is one followed team: gone is closed when it is deleted;
// refs counts the followers, so the entry goes away with the last.
type teamLifeEntry struct {
	gone chan struct{}
	refs int
}

// TeamLife is one follower's hold on a team's life.
type TeamLife struct {
	gone    chan struct{}
	release func()
	once    sync.Once
}

// Gone is closed when the team the follower was opened on is deleted.
func (l *TeamLife) Gone() <-chan struct{} { return l.gone }

// Ended reports whether the team was deleted.
func (l *TeamLife) Ended() bool {
	select {
	case <-l.gone:
		return true
	default:
		return false
	}
}

// Release ends the following; it may be called more than once.
func (l *TeamLife) Release() { l.once.Do(l.release) }

// FollowTeam follows the life of team for a connection of the caller (a
// reader of team): the returned life's Gone is closed when this team is
// deleted. The follower is registered before the team is looked at, so a
// deletion that comes in between closes it too; a member principal that
// carries its token (TokenPrincipal) must still be that team's
// member by that token, so a connection authenticated just before a
// deletion cannot follow the next team of the same name. The caller must
// Release the life when the connection ends.
func (s *Service) FollowTeam(ctx context.Context, team string) (*TeamLife, error) {
	if err := CheckReader(ctx, team); err != nil {
		return nil, err
	}
	l := s.lives.follow(team)
	p, _ := PrincipalFrom(ctx)
	err := s.view(ctx, team, false, func(u *unit) error {
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
	if err != nil {
		l.Release()
		return nil, err
	}
	return l, nil
}

func (t *teamLives) follow(team string) *TeamLife {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.teams == nil {
		t.teams = map[string]*teamLifeEntry{}
	}
	e := t.teams[team]
	if e == nil {
		e = &teamLifeEntry{gone: make(chan struct{})}
		t.teams[team] = e
	}
	e.refs++
	return &TeamLife{gone: e.gone, release: func() {
		t.mu.Lock()
		defer t.mu.Unlock()
		// After the deletion the entry is gone (or a new team's): only
		// the current one is counted down.
		if t.teams[team] == e {
			if e.refs--; e.refs == 0 {
				delete(t.teams, team)
			}
		}
	}}
}

// end closes the life of team: every follower of it learns that it is
// gone. It never blocks.
func (t *teamLives) end(team string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if e := t.teams[team]; e != nil {
		close(e.gone)
		delete(t.teams, team)
	}
}

// teamDeleted is core's own handling of a deleted team, run from the bus
// before any other subscriber sees the event: the team's followers are
// ended, its turns here cancelled, its wakes dropped and its MCP session
// counts and times dropped, so that a new team of the
// same name starts with none.
func (s *Service) teamDeleted(team string, data any) {
	s.lives.end(team)
	s.seen.drop(team)
	// A deletion on another replica: what this process does for that
	// incarnation of the team ends too (deletion.go).
	inc, _ := data.(string)
	s.endTeamWork(team, inc)
	s.sessions.mu.Lock()
	defer s.sessions.mu.Unlock()
	for k := range s.sessions.n {
		if k.team == team {
			delete(s.sessions.n, k)
		}
	}
}

type teamLifeKey struct{}

// WithTeamLife returns ctx carrying life: the waits core does for the
// call (WaitInbox) end with not_found when the team is deleted, and never
// look at a new team of the same name. An MCP session's calls carry the
// life of the session's team.
func WithTeamLife(ctx context.Context, life *TeamLife) context.Context {
	return context.WithValue(ctx, teamLifeKey{}, life)
}

// teamGoneOf returns the Gone channel of the life ctx carries; nil (never
// ready) when it carries none.
func teamGoneOf(ctx context.Context) <-chan struct{} {
	if l, ok := ctx.Value(teamLifeKey{}).(*TeamLife); ok && l != nil {
		return l.gone
	}
	return nil
}

// teamDeletedError is the answer of a wait whose team was deleted.
func teamDeletedError() error {
	return Errorf(CodeNotFound, "The team was deleted.")
}

// closed reports whether ch is closed (a nil ch never is).
func closed(ch <-chan struct{}) bool {
	select {
	case <-ch:
		return true
	default:
		return false
	}
}
