package live

import (
	"context"
	"sync"
	"time"

	"mailroom/internal/core"
)

// When a member last made an MCP request. Every request to /mcp, of any
// protocol version (sessions or the stateless 2026-07-28), is made with a
// member's token; the member document carries the time of the last one as
// mcp_last_seen, and the status page shows the members seen in the last
// minute (docs/api.md, section J).
//
// The times are kept in memory, never written to the store: an agent may
// make several requests a second, and a store write for each (a
// transaction, on PostgreSQL a round trip and a WAL record) would cost more
// than the request itself. A member event announces a member's time, to
// this process's subscribers and, with a Notifier store, to the other
// replicas, which keep the latest time they heard of; an event goes out at
// most once per SeenAnnounceEvery per member, so what the page and the
// other replicas know may be that much older than the last request. A
// process that restarts has forgotten its times (null until the next
// request).

// SeenAnnounceEvery is how often, at most, a member event announces that
// a member made MCP requests.
const SeenAnnounceEvery = 10 * time.Second

// seenTimes is the last MCP request per member as this process knows it:
// its own requests and what other replicas announced. The zero value is
// ready.
type seenTimes struct {
	mu sync.Mutex
	at map[memberRef]time.Time
	// announced is when this process last announced a member's time.
	announced map[memberRef]time.Time
}

// of returns member's time, nil when none is known.
func (c *seenTimes) of(team, member string) *time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.ofLocked(memberRef{team, member})
}

func (c *seenTimes) ofLocked(k memberRef) *time.Time {
	t, ok := c.at[k]
	if !ok {
		return nil
	}
	return &t
}

// merge keeps t when it is later than what is known of k, and returns
// the time known now.
func (c *seenTimes) merge(k memberRef, t *time.Time) *time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	if t != nil && t.After(c.at[k]) {
		if c.at == nil {
			c.at = map[memberRef]time.Time{}
		}
		c.at[k] = *t
	}
	return c.ofLocked(k)
}

// record sets k's time to now and reports whether it is due to be
// announced.
func (c *seenTimes) record(k memberRef, now time.Time) (announce bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.at == nil {
		c.at, c.announced = map[memberRef]time.Time{}, map[memberRef]time.Time{}
	}
	if now.After(c.at[k]) {
		c.at[k] = now
	}
	if last, ok := c.announced[k]; ok && now.Sub(last) < SeenAnnounceEvery {
		return false
	}
	c.announced[k] = now
	return true
}

// drop forgets a deleted team's times.
func (c *seenTimes) drop(team string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	dropTeam(c.at, team)
	dropTeam(c.announced, team)
}

// SeenMCP records that the caller, a member, made an MCP request now. The
// first request, and then one every SeenAnnounceEvery at most, is
// announced with a member event carrying the member's document, to this
// process's subscribers and to the other replicas. It writes nothing to
// the store.
func (h *Hub) SeenMCP(ctx context.Context, team, member string) error {
	if err := core.CheckSelf(ctx, team, member); err != nil {
		return err
	}
	now := h.svc.Now().UTC().Truncate(time.Millisecond)
	if !h.seen.record(memberRef{team, member}, now) {
		return nil
	}
	mv, err := h.svc.MemberView(ctx, team, member)
	if err != nil {
		return err
	}
	h.Publish(core.Event{Type: core.EventMember, Team: team, Data: mv})
	return nil
}
