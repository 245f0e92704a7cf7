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
	// ends holds each pattern's lastSegment, beside pats.
	ends [][]segmentStart
	// sorted is every start of every pattern, in byte order, so that the
	// starts equal to a string, and those that begin with it, are runs of
	// it found by binary search.
	sorted []prefixEntry
	// exact maps a start to its entries in sorted: a check looks up every
	// leading part of each path, faster in a map. It is built by the
	// first check of the index, as a grant changes the live set and so
	// the index, and would pay for a map it never reads.
	exactOnce sync.Once
	exact     map[string][]int32
}

// segmentStart is what a pattern says of the last segment of every path
// it matches: when ok, that segment begins with lit. It is ok only for a
// pattern whose `/` are all literal and whose last segment has no `**`:
// no class (one may match a `/`), no alternatives (one may hold a `/`),
// no escape, and no `/` at its end. Then the pattern's last `/` matches
// the path's last one and its last segment the path's last segment, so
// the literal start of that segment starts the path's. Two such patterns
// whose literal starts do not meet (neither begins with the other) share
// no path, and a path whose last segment begins with neither cannot
// match: the question the index leaves when every pattern is under one
// tree with a `**` (src/**/a*.go and src/**/b*.go), answered without the
// automata.
type segmentStart struct {
	ok  bool
	lit string
}

func lastSegment(pattern string) segmentStart {
	if pattern == "" || strings.ContainsAny(pattern, "[]{}\\") || strings.HasSuffix(pattern, "/") {
		return segmentStart{}
	}
	seg := pattern[strings.LastIndexByte(pattern, '/')+1:]
	if strings.Contains(seg, "**") {
		return segmentStart{}
	}
	if k := strings.IndexAny(seg, "*?"); k >= 0 {
		seg = seg[:k]
	}
	return segmentStart{ok: true, lit: seg}
}

// meet reports whether some last segment could begin with both.
func (a segmentStart) meet(b segmentStart) bool {
	return !a.ok || !b.ok || strings.HasPrefix(a.lit, b.lit) || strings.HasPrefix(b.lit, a.lit)
}

type prefixEntry struct {
	prefix   string
	res, pat int32
}

// buildIndex indexes live. The reservations old indexed that are still
// live keep their compiled patterns and their entries, already in order,
// so that a grant or a release, which changes one reservation, costs a
// merge instead of a sort of every pattern's starts.
func buildIndex(live []Reservation, old *resIndex) *resIndex {
	ix := &resIndex{res: live, pats: make([][]*globs.Pattern, len(live)), ends: make([][]segmentStart, len(live))}
	// renumber maps an index of old's reservations to one of live's,
	// or -1 for one no longer live.
	var renumber []int32
	if old != nil {
		at := make(map[string]int, len(old.res))
		for i := range old.res {
			at[old.res[i].ID] = i
		}
		renumber = make([]int32, len(old.res))
		for i := range renumber {
			renumber[i] = -1
		}
		for i := range live {
			if j, ok := at[live[i].ID]; ok && sameReservation(&old.res[j], &live[i]) {
				renumber[j] = int32(i)
				ix.pats[i], ix.ends[i] = old.pats[j], old.ends[j]
			}
		}
	}
	var added []prefixEntry
	for i, r := range live {
		if ix.pats[i] != nil {
			continue
		}
		ix.pats[i] = compiledList(r.Paths)
		ix.ends[i] = make([]segmentStart, len(r.Paths))
		for j, p := range r.Paths {
			ix.ends[i][j] = lastSegment(p)
		}
		for j, p := range ix.pats[i] {
			for _, pre := range p.Prefixes() {
				added = append(added, prefixEntry{prefix: pre, res: int32(i), pat: int32(j)})
			}
		}
	}
	byPrefix := func(a, b prefixEntry) int { return strings.Compare(a.prefix, b.prefix) }
	slices.SortFunc(added, byPrefix)
	var kept []prefixEntry
	if old != nil {
		kept = make([]prefixEntry, 0, len(old.sorted))
		for _, e := range old.sorted {
			if n := renumber[e.res]; n >= 0 {
				e.res = n
				kept = append(kept, e)
			}
		}
	}
	ix.sorted = make([]prefixEntry, 0, len(kept)+len(added))
	for len(kept) > 0 && len(added) > 0 {
		if byPrefix(added[0], kept[0]) < 0 {
			ix.sorted, added = append(ix.sorted, added[0]), added[1:]
		} else {
			ix.sorted, kept = append(ix.sorted, kept[0]), kept[1:]
		}
	}
	ix.sorted = append(append(ix.sorted, kept...), added...)
	return ix
}

// sameReservation reports whether a and b hold the same patterns for the
// same member in the same way (expiry does not matter to the index).
func sameReservation(a, b *Reservation) bool {
	return a.ID == b.ID && a.Member == b.Member && a.Exclusive == b.Exclusive && slices.Equal(a.Paths, b.Paths)
}

// exactMap returns exact, built on first use.
func (ix *resIndex) exactMap() map[string][]int32 {
	ix.exactOnce.Do(func() {
		ix.exact = make(map[string][]int32, len(ix.sorted))
		for k, e := range ix.sorted {
			ix.exact[e.prefix] = append(ix.exact[e.prefix], int32(k))
		}
	})
	return ix.exact
}

// from returns the first entry of sorted whose start is not below x.
func (ix *resIndex) from(x string) int {
	return sort.Search(len(ix.sorted), func(k int) bool { return ix.sorted[k].prefix >= x })
}

// same reports whether ix indexes exactly live: the same reservations
// with the same holders, kinds and patterns (expiry does not matter).
func (ix *resIndex) same(live []Reservation) bool {
	if len(ix.res) != len(live) {
		return false
	}
	for i := range live {
		if !sameReservation(&ix.res[i], &live[i]) {
			return false
		}
	}
	return true
}

// meeting calls fn with each entry whose start meets start x: x begins
// with it, or it begins with x. An entry may come twice.
func (ix *resIndex) meeting(x string, fn func(prefixEntry)) {
	for i := 0; i < len(x); i++ {
		for k := ix.from(x[:i]); k < len(ix.sorted) && ix.sorted[k].prefix == x[:i]; k++ {
			fn(ix.sorted[k])
		}
	}
	for k := ix.from(x); k < len(ix.sorted) && strings.HasPrefix(ix.sorted[k].prefix, x); k++ {
		fn(ix.sorted[k])
	}
}

// clashing returns, in id order, the indexed reservations a grant of
// patterns (by member, exclusive) would clash with (Reservation.clashes).
func (ix *resIndex) clashing(member string, exclusive bool, patterns []*globs.Pattern) []int {
	clash := make([]bool, len(ix.res))
	for _, q := range patterns {
		end := lastSegment(q.String())
		for _, x := range q.Prefixes() {
			ix.meeting(x, func(e prefixEntry) {
				r := &ix.res[e.res]
				if clash[e.res] || r.Member == member || (!exclusive && !r.Exclusive) || !end.meet(ix.ends[e.res][e.pat]) {
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
	exact := ix.exactMap()
	last := path[strings.LastIndexByte(path, '/')+1:]
	for i := 0; i <= len(path); i++ {
		for _, k := range exact[path[:i]] {
			e := ix.sorted[k]
			if ix.res[e.res].Member == member || slices.Contains(out, int(e.res)) {
				continue
			}
			if end := ix.ends[e.res][e.pat]; end.ok && !strings.HasPrefix(last, end.lit) {
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
	ix = buildIndex(live, ix)
	indexCache.mu.Lock()
	if indexCache.m == nil || len(indexCache.m) >= cachedIndexes {
		indexCache.m = map[string]*resIndex{}
	}
	indexCache.m[team] = ix
	indexCache.mu.Unlock()
	return ix
}
