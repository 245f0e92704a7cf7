package pgstore

import (
	"sync"
	"time"

	"mailroom/internal/core"
)

// A replica remembers what its last unit of work on a team committed,
// and runs the next one on it without reading the team first: the
// unit's one round trip begins the transaction, locks the row with
// mailroom_lock_team (migration 00006), which aborts the transaction
// unless the row is still the incarnation and version remembered, writes
// and commits. A refusal (another replica or unit of work changed the
// team meanwhile, or anything else the database refused) costs that round
// trip, and the unit of work runs again as before, on the team read
// under the lock: the remembered state decides a write only when the
// database has confirmed, under the lock, that it is current ("No stale
// decisions", docs/storage.md).
//
// The task board is remembered too, once a unit of work has read it: every
// write of a task bumps the team's version (tasks.go), so a board changed
// by another replica refuses the remembered one like any other change.
//
// What a unit of work does not hold in memory (an inbox's letters, an
// idempotency record, the turn documents, a board not read yet) needs the database: a unit
// that asks for it is not committed from the cache but runs again under
// the lock (fn may run more than once, core.Store.UpdateTeam).

// maxCached bounds the teams a replica remembers.
const maxCached = 10000

// refusedFor is how long a team whose remembered state was refused is
// not remembered again. A team whose units of work alternate between
// replicas (a load balancer that spreads one team's clients), or run
// concurrently on one, would be refused again and again: each refusal
// costs a round trip and a rollback more than reading under the lock.
var refusedFor = 5 * time.Second

// cached is a team as a committed unit of work left it: the stored text
// of its state, requests and permissions, and its inbox counts.
type cached struct {
	incarnation, version int64
	state                []byte
	requests             []storedDoc
	permissions          []storedDoc
	counts               map[string]inboxCount
	// tasks is the task board as committed, nil when the unit of work
	// that left this entry did not read it. Never changed in place.
	tasks []core.Task
	// decoded is state with its requests and permissions: the state the
	// committing unit of work encoded (commit), never changed after. Each
	// unit gets its own core.TeamState.UnitCopy of it, so a cached unit of
	// work decodes no text (decoding was a fifth of a cached send's CPU).
	decoded *core.TeamState
}

// storedDoc is one request or permission row: its id and document.
type storedDoc struct {
	id  string
	doc []byte
}

// teamCache is the teams a replica remembers, each used by one unit of
// work at a time (busy): a second one on the same team meanwhile reads
// the team under the lock rather than race the first to a refusal.
type teamCache struct {
	mu      sync.Mutex
	teams   map[string]*cached
	busy    map[string]bool
	refused map[string]time.Time // when a team's entry was last refused
}

func newTeamCache() *teamCache {
	return &teamCache{teams: map[string]*cached{}, busy: map[string]bool{}, refused: map[string]time.Time{}}
}

// take returns team's entry, now busy, or nil when there is none or it is
// busy.
func (c *teamCache) take(team string) *cached {
	c.mu.Lock()
	defer c.mu.Unlock()
	e := c.teams[team]
	if e == nil || c.busy[team] {
		return nil
	}
	c.busy[team] = true
	return e
}

// done ends take's use of team's entry.
func (c *teamCache) done(team string) {
	c.mu.Lock()
	delete(c.busy, team)
	c.mu.Unlock()
}

// put remembers e, unless what is remembered is newer (the units of work
// of one team commit in turn, but finish here in any order).
func (c *teamCache) put(team string, e *cached) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if at, ok := c.refused[team]; ok {
		if time.Since(at) < refusedFor {
			return
		}
		delete(c.refused, team)
	}
	if old := c.teams[team]; old != nil && old.incarnation == e.incarnation && old.version > e.version {
		return
	}
	if _, ok := c.teams[team]; !ok && len(c.teams) >= maxCached {
		for name := range c.teams { // any one
			delete(c.teams, name)
			break
		}
	}
	c.teams[team] = e
}

// refuse drops team's entry and remembers none for refusedFor.
func (c *teamCache) refuse(team string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	delete(c.teams, team)
	if len(c.refused) >= maxCached {
		clear(c.refused)
	}
	c.refused[team] = time.Now()
}

// forget drops team's entry.
func (c *teamCache) forget(team string) {
	c.mu.Lock()
	delete(c.teams, team)
	c.mu.Unlock()
}

// cachedTeam is a unit of work's private copy of e.
func cachedTeam(t *teamTx, e *cached) {
	st := e.decoded // core copies it before any change
	t.orig = loaded{requests: make(map[string][]byte, len(e.requests)), permissions: make(map[string][]byte, len(e.permissions)), leases: map[string]core.Lease{}}
	for _, d := range e.requests {
		t.orig.requests[d.id] = d.doc
	}
	for _, d := range e.permissions {
		t.orig.permissions[d.id] = d.doc
	}
	t.orig.wake = map[string]bool{}
	for _, m := range st.Members {
		if m.Lease != nil {
			t.orig.leases[m.Name] = *m.Lease
		}
		if m.Wake {
			t.orig.wake[m.Name] = true
		}
	}
	t.counts = make(map[string]inboxCount, len(e.counts))
	for k, v := range e.counts {
		t.counts[k] = v
	}
	t.st = st
	t.state, t.remembered = e.state, e.decoded
	t.tasks = e.tasks
	t.incarnation, t.version = e.incarnation, e.version
	t.fromCache = true
}
