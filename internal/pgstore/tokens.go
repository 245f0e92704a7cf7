package pgstore

import "sync"

// A replica remembers the tokens it found, so that the requests of a
// member after its first do not each cost a round trip for the token
// lookup. A token is set when its team is created and never changes; it
// stops naming its member only when its team is deleted. So an entry is
// dropped when a team is deleted, by this replica (DeleteTeam) or by
// another (its core.EventTeamDeleted arrives through the event listener),
// and entries are kept only while the event listener is connected: a
// listener that lost its connection may have missed a deletion, so the
// whole cache is dropped then, and filled again only once the listener
// listens again. A lookup that finds no member is never remembered: a
// token unknown now may be a team's created a moment later on another
// replica, and a miss must not make the cache a store of guesses.
//
// An entry that outlives its team anyway (a notification lost with
// another replica's queue, a connection that dies without saying so)
// cannot act: core checks, inside every unit of work on the caller's own
// team, that the team still has the member with that token
// (core.Principal's token check), so an old token is refused there as an
// unknown one is (docs/storage.md).

// maxTokens bounds the tokens a replica remembers. Only tokens that
// named a member when looked up are remembered, so the cache holds at
// most one entry per member that exists (or existed until a deletion was
// heard): no stream of guessed tokens can fill it. The bound is there
// for a database with more members than that, where the entries are
// about 200 bytes each (tens of MB at the bound); filling it clears it,
// and the tokens in use are looked up again, one round trip each.
const maxTokens = 100_000

// memberRef is the member a token names.
type memberRef struct{ team, member string }

// tokenCache is what the replica's token lookups found.
type tokenCache struct {
	mu     sync.Mutex
	byHash map[string]memberRef
	// byTeam is the hashes remembered of each team, to drop them when
	// the team is deleted.
	byTeam map[string][]string
	// listeners counts the event listeners connected now; entries are
	// added only while there is one.
	listeners int
	// gen counts the invalidations. A lookup reads it before its query
	// and adds what it found only if it has not changed since: a
	// deletion heard between the query and the insertion (the query
	// read the member's row just before the deletion committed) would
	// otherwise leave the deleted team's token behind.
	gen uint64
}

func newTokenCache() *tokenCache {
	return &tokenCache{byHash: map[string]memberRef{}, byTeam: map[string][]string{}}
}

// get returns what hash names if it is remembered; otherwise gen is
// the generation to pass to put with what the database says.
func (c *tokenCache) get(hash string) (ref memberRef, ok bool, gen uint64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	ref, ok = c.byHash[hash]
	return ref, ok, c.gen
}

// put remembers that hash names ref, as a query begun at generation gen
// found: unless something was invalidated since, or no listener is
// connected to hear the deletions that would make it stale.
func (c *tokenCache) put(hash string, ref memberRef, gen uint64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.gen != gen || c.listeners == 0 {
		return
	}
	if _, ok := c.byHash[hash]; ok {
		return
	}
	if len(c.byHash) >= maxTokens {
		clear(c.byHash)
		clear(c.byTeam)
	}
	c.byHash[hash] = ref
	c.byTeam[ref.team] = append(c.byTeam[ref.team], hash)
}

// forgetTeam drops the tokens of team, which was deleted.
func (c *tokenCache) forgetTeam(team string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.gen++
	for _, h := range c.byTeam[team] {
		delete(c.byHash, h)
	}
	delete(c.byTeam, team)
}

// connected counts an event listener that listens now: deletions are
// heard from here on. A lookup whose query began before may have read a
// row whose deletion nobody heard, so it adds nothing (gen).
func (c *tokenCache) connected() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.listeners++
	c.gen++
}

// lost counts an event listener that stopped listening: deletions may
// go unheard, so nothing remembered is trusted any more.
func (c *tokenCache) lost() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.listeners--
	c.forgetAllLocked()
}

// forgetAll drops every token: a notification could not be read, and it
// may have been a deletion.
func (c *tokenCache) forgetAll() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.forgetAllLocked()
}

func (c *tokenCache) forgetAllLocked() {
	c.gen++
	clear(c.byHash)
	clear(c.byTeam)
}

// size is how many tokens are remembered.
func (c *tokenCache) size() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.byHash)
}
