package core

import "time"

// Live is what core needs of the process around it (internal/live) and
// keeps none of itself: what one process knows of the moment is not a
// team's state, and a unit of work stays one snapshot in, one change-set
// out. Core calls it after a commit and when it builds a member's view.
type Live interface {
	// Publish is called with every event of a unit of work once it
	// committed, in order, from the goroutine that committed it. It must
	// not block and must not call back into the Service.
	Publish(ev Event)
	// Presence is member's MCP sessions open with this process and the
	// time of its last MCP request as this process knows it (nil:
	// unknown), which its view shows (docs/api.md, section B).
	Presence(team, member string) (sessions int, lastSeen *time.Time)
	// WatchPermission returns a channel closed once permission id of team
	// may have been decided, and its release: a turn waiting for a person
	// (AskHost) registers it before it reads the permission, and reads it
	// again at every wake.
	WatchPermission(team, id string) (decided <-chan struct{}, release func())
}

// noLive is the Live of a Service built without one: events go nowhere,
// no member has a session, and a permission wait ends only by its expiry
// or its context.
type noLive struct{}

func (noLive) Publish(Event)                             {}
func (noLive) Presence(string, string) (int, *time.Time) { return 0, nil }
func (noLive) WatchPermission(string, string) (<-chan struct{}, func()) {
	return nil, func() {}
}

// Work is what core tells the runtime (internal/runtime) of the work this
// process runs and asks it of that work: which turns run here and which
// teams are being deleted here are the process's, not a team's, so core
// keeps none of it. Its methods must not block and must not call back
// into the Service: core calls some of them inside a unit of work.
type Work interface {
	// TurnClaimed registers tr as running here, from inside the unit of
	// work that claims it, before that commits: no unit of work may take
	// the fresh lease for a dead one (TurnRunning). It refuses (false,
	// nothing registered) while tr's team is being deleted here
	// (DeletionBegan), and decides that under the same lock the deletion
	// marks the team with, so that the deletion sees every turn it must
	// cancel (TeamTurns).
	TurnClaimed(tr *Turn) bool
	// TurnBegan is called once a turn was claimed (its lease committed),
	// before it runs: the runtime renews its lease (Turn.RenewLease)
	// until it is Done, and counts it until then, so that a stopping
	// server waits for it before the store closes.
	TurnBegan(tr *Turn)
	// TurnEnded forgets tr: it finished, or the unit of work that
	// claimed it did not commit. A later turn of the same member that is
	// registered already stays.
	TurnEnded(tr *Turn)
	// TurnRunning reports whether a turn of member of team runs here.
	TurnRunning(team, member string) bool
	// TeamTurns is the turns of team that run here, in no order.
	TeamTurns(team string) []*Turn
	// DeletionBegan marks team as being deleted here, so that no turn of
	// it is claimed here (TurnClaimed), until end is called. Deletions of
	// one team may overlap; the mark holds until the last one ends.
	DeletionBegan(team string) (end func())
	// TeamWorkEnds is called when what this process does for incarnation
	// inc of team ("" any) must end (EndTeamWork), before the team's turns
	// are cancelled: the runtime drops the team's pending wakes.
	TeamWorkEnds(team, inc string)
}
