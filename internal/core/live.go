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
// process runs, whose goroutines and counts are the runtime's.
type Work interface {
	// TurnBegan is called once a turn was claimed (its lease committed),
	// before it runs: the runtime renews its lease (Turn.RenewLease)
	// until it is Done, and counts it until then, so that a stopping
	// server waits for it before the store closes.
	TurnBegan(tr *Turn)
	// TeamWorkEnds is called when what this process does for incarnation
	// inc of team ("" any) must end (EndTeamWork), before the team's turns
	// are cancelled: the runtime drops the team's pending wakes. It must
	// not block and must not call back into the Service.
	TeamWorkEnds(team, inc string)
}

// noWork is the Work of a Service built without one.
type noWork struct{}

func (noWork) TurnBegan(*Turn)             {}
func (noWork) TeamWorkEnds(string, string) {}
