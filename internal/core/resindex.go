package core

import (
	"slices"
	"sort"
	"strings"
	"sync"

	"mailroom/internal/globs"
)

// resIndex holds the compiled patterns of a team's live reservations,
// indexed by their literal starts (globs.Pattern.Prefixes). Two patterns
// can overlap only when a start of one begins with a start of the other,
// and a path can match a pattern only when it begins with one of the
// pattern's starts; the index finds those few pairs, so a grant or a
// check asks the automata only about them instead of every pattern of
// every reservation (200 reservations of 32 patterns are 204,800 pairs for
// one grant of 32).
type resIndex struct {
	res  []Reservation
	pats [][]*globs.Pattern
	// sorted is every start of every pattern, in byte order, so that the
	// starts that begin with a given string are one run of it.
	sorted []prefixEntry
	// exact maps a start to its entries in sorted.
	exact map[string][]int32
}

type prefixEntry struct {
	prefix   string
	res, pat int32
}

func buildIndex(live []Reservation) *resIndex {
	ix := &resIndex{res: live, pats: make([][]*globs.Pattern, len(live)), exact: map[string][]int32{}}
	for i, r := range live {
		ix.pats[i] = compiledList(r.Paths)
		for j, p := range ix.pats[i] {
			for _, pre := range p.Prefixes() {
				ix.sorted = append(ix.sorted, prefixEntry{prefix: pre, res: int32(i), pat: int32(j)})
			}
		}
	}
	sort.Slice(ix.sorted, func(a, b int) bool { return ix.sorted[a].prefix < ix.sorted[b].prefix })
	for k, e := range ix.sorted {
		ix.exact[e.prefix] = append(ix.exact[e.prefix], int32(k))
	}
	return ix
}

// same reports whether ix indexes exactly live: the same reservations
// with the same holders, kinds and patterns (expiry does not matter).
func (ix *resIndex) same(live []Reservation) bool {
	if len(ix.res) != len(live) {
		return false
	}
	for i := range live {
		a, b := &ix.res[i], &live[i]
		if a.ID != b.ID || a.Member != b.Member || a.Exclusive != b.Exclusive || !slices.Equal(a.Paths, b.Paths) {
			return false
		}
	}
	return true
}

// meeting calls fn with each entry whose start meets start x: x begins
// with it, or it begins with x. An entry may come twice.
func (ix *resIndex) meeting(x string, fn func(prefixEntry)) {
	for i := 0; i <= len(x); i++ {
		for _, k := range ix.exact[x[:i]] {
			fn(ix.sorted[k])
		}
	}
	k := sort.Search(len(ix.sorted), func(k int) bool { return ix.sorted[k].prefix >= x })
	for ; k < len(ix.sorted) && strings.HasPrefix(ix.sorted[k].prefix, x); k++ {
		fn(ix.sorted[k])
	}
}

// clashing returns, in id order, the indexed reservations a grant of
// patterns (by member, exclusive) would clash with (Reservation.clashes).
func (ix *resIndex) clashing(member string, exclusive bool, patterns []*globs.Pattern) []int {
	clash := make([]bool, len(ix.res))
	for _, q := range patterns {
		for _, x := range q.Prefixes() {
			ix.meeting(x, func(e prefixEntry) {
				r := &ix.res[e.res]
				if clash[e.res] || r.Member == member || (!exclusive && !r.Exclusive) {
					return
				}
				if q.Overlaps(ix.pats[e.res][e.pat]) {
					clash[e.res] = true
				}
			})
		}
	}
	var out []int
	for i, c := range clash {
		if c {
			out = append(out, i)
		}
	}
	return out
}

// holding returns, in id order, the indexed reservations of members other
// than member with a pattern that matches the concrete path.
func (ix *resIndex) holding(member, path string) []int {
	var out []int
	for i := 0; i <= len(path); i++ {
		for _, k := range ix.exact[path[:i]] {
			e := ix.sorted[k]
			if ix.res[e.res].Member == member || slices.Contains(out, int(e.res)) {
				continue
			}
			if ix.pats[e.res][e.pat].Match(path) {
				out = append(out, int(e.res))
			}
		}
	}
	slices.Sort(out)
	return out
}

// indexCache keeps the last index built for each team: between two
// changes of a team's reservations every grant and check uses the same
// one. An entry is used only when it indexes exactly the live
// reservations asked about (same), so it can never be stale; the cache is
// emptied when it holds more than cachedIndexes teams.
var indexCache struct {
	mu sync.Mutex
	m  map[string]*resIndex
}

const cachedIndexes = 1024

// indexFor returns the index of live, the live reservations of team.
func indexFor(team string, live []Reservation) *resIndex {
	indexCache.mu.Lock()
	ix := indexCache.m[team]
	indexCache.mu.Unlock()
	if ix != nil && ix.same(live) {
		return ix
	}
	ix = buildIndex(live)
	indexCache.mu.Lock()
	if indexCache.m == nil || len(indexCache.m) >= cachedIndexes {
		indexCache.m = map[string]*resIndex{}
	}
	indexCache.m[team] = ix
	indexCache.mu.Unlock()
	return ix
}
