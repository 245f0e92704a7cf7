package live

import (
	"context"
	"sync"

	"mailroom/internal/core"
)

// The lives of teams as long-lived connections see them. A stream of
// events, a held read and an MCP session belong to one team, and a team's
// name is free again once it is deleted: a connection must never serve
// the next team of that name. So each such connection follows the team
// it was opened on (FollowTeam) and ends when that team is deleted
// (core.EventTeamDeleted), on this process or another replica, at once;
// whatever it would do next it checks against Gone first, so nothing of a
// new team of the same name ever reaches it (docs/api.md, section H).

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
func (l *TeamLife) Ended() bool { return closed(l.gone) }

// Release ends the following; it may be called more than once.
func (l *TeamLife) Release() { l.once.Do(l.release) }

// FollowTeam follows the life of team for a connection of the caller (a
// reader of team): the returned life's Gone is closed when this team is
// deleted. The follower is registered before core looks at the team
// (core.Service.CheckConnection), so a deletion that comes in between
// closes it too. The caller must Release the life when the connection
// ends.
func (h *Hub) FollowTeam(ctx context.Context, team string) (*TeamLife, error) {
	if err := core.CheckReader(ctx, team); err != nil {
		return nil, err
	}
	l := h.lives.follow(team)
	if err := h.svc.CheckConnection(ctx, team); err != nil {
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

type teamLifeKey struct{}

// WithTeamLife returns ctx carrying life: the waits the hub does for the
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
	return core.Errorf(core.CodeNotFound, "The team was deleted.")
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
