package core

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"mailroom/internal/globs"
)

// TestIndexAgreesWithBruteForce: the index's answers, a grant's clashes
// and a check's holders, are exactly those of asking every pattern of
// every reservation, on random reservations of patterns that share starts
// often (a few short segments, stars, double stars and alternatives).
func TestIndexAgreesWithBruteForce(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 28))
	segs := []string{"a", "b", "ab", "src", "*", "**", "{a,b}", "x*.go", "a?", "[ab]"}
	pattern := func() string {
		n := 1 + rng.IntN(3)
		s := ""
		for i := range n {
			if i > 0 {
				s += "/"
			}
			s += segs[rng.IntN(len(segs))]
		}
		return s
	}
	pathSegs := []string{"a", "b", "ab", "src", "x1.go", "xa.go", "c"}
	path := func() string {
		n := 1 + rng.IntN(4)
		s := ""
		for i := range n {
			if i > 0 {
				s += "/"
			}
			s += pathSegs[rng.IntN(len(pathSegs))]
		}
		return s
	}
	members := []string{"m1", "m2", "m3"}
	// Each round keeps some reservations of the one before, drops the
	// others and adds new ones, as grants and releases do; its index is
	// built from the previous round's (incremental) and from nothing, and
	// both must answer as brute force does.
	var live []Reservation
	var prev *resIndex
	seq := 0
	for round := range 200 {
		var next []Reservation
		for _, r := range live {
			if rng.IntN(3) > 0 {
				next = append(next, r)
			}
		}
		for range rng.IntN(6) {
			var ps []string
			for range 1 + rng.IntN(4) {
				ps = append(ps, pattern())
			}
			seq++
			next = append(next, Reservation{ID: fmt.Sprintf("res-%d", seq), Member: members[rng.IntN(3)], Paths: ps, Exclusive: rng.IntN(2) == 0})
		}
		live = next
		ix := buildIndex(live, prev)
		if round%2 == 0 {
			ix = buildIndex(live, nil)
		}
		prev = ix
		for range 10 {
			var req []string
			for range 1 + rng.IntN(4) {
				req = append(req, pattern())
			}
			me, exclusive := members[rng.IntN(3)], rng.IntN(2) == 0
			pats := compiledList(req)
			var want []int
			for i := range live {
				if live[i].clashes(me, exclusive, pats) {
					want = append(want, i)
				}
			}
			if got := ix.clashing(me, exclusive, pats); !slices.Equal(got, want) {
				t.Fatalf("round %d: %s (exclusive %v) %q clashes with %v by the index, %v by brute force; live %+v", round, me, exclusive, req, got, want, live)
			}
			p := path()
			want = nil
			for i := range live {
				if live[i].Member != me && slices.ContainsFunc(live[i].Paths, func(q string) bool { return globs.MatchPath(q, p) }) {
					want = append(want, i)
				}
			}
			if got := ix.holding(me, p); !slices.Equal(got, want) {
				t.Fatalf("round %d: %s held by %v by the index, %v by brute force; live %+v", round, p, got, want, live)
			}
		}
	}
}

// benchLive is 200 live reservations of 32 patterns each, under
// directories of their own (tree true: all under src/**, told apart only
// by their file names, the index's worst case).
func benchLive(tree bool) []Reservation {
	var live []Reservation
	for k := range 200 {
		var ps []string
		for i := range 32 {
			if tree {
				ps = append(ps, fmt.Sprintf("src/**/r%d_%d*.go", k, i))
				continue
			}
			base := fmt.Sprintf("svc%d/part%d", k, i)
			ps = append(ps, []string{base + "/**", base + "/**/*_test.go", base + "/cmd/main.go", base + "/{web,docs}/page.*"}[i%4])
		}
		live = append(live, Reservation{ID: fmt.Sprintf("res-%d", k+1), Member: fmt.Sprintf("m%d", k%20), Paths: ps, Exclusive: true})
	}
	return live
}

// BenchmarkIndexGrant: a grant's overlap question, 32 patterns against
// 200 live reservations of 32 (compare globs' BenchmarkOverlapGrant, which
// asks all 204,800 pairs).
func BenchmarkIndexGrant(b *testing.B) {
	for _, tree := range []bool{false, true} {
		b.Run(fmt.Sprintf("sameTree=%v", tree), func(b *testing.B) {
			ix := buildIndex(benchLive(tree), nil)
			var req []string
			for i := range 32 {
				if tree {
					req = append(req, fmt.Sprintf("src/**/q%d.go", i))
				} else {
					req = append(req, fmt.Sprintf("svc999/part%d/**", i))
				}
			}
			pats := compiledList(req)
			for b.Loop() {
				if got := ix.clashing("lead", true, pats); len(got) != 0 {
					b.Fatalf("clashes with %v", got)
				}
			}
		})
	}
}

// BenchmarkIndexCheckSameTree: a check of 100 paths under src/ against
// the same-tree reservations, where every path meets every pattern's
// start (the check's worst case: 640,000 matches).
func BenchmarkIndexCheckSameTree(b *testing.B) {
	ix := buildIndex(benchLive(true), nil)
	var paths []string
	for i := range 100 {
		paths = append(paths, fmt.Sprintf("src/pkg%d/file%d.go", i%7, i))
	}
	for b.Loop() {
		for _, p := range paths {
			ix.holding("lead", p)
		}
	}
}

// BenchmarkIndexCheck: a check of 100 paths, 10 of them held.
func BenchmarkIndexCheck(b *testing.B) {
	ix := buildIndex(benchLive(false), nil)
	var paths []string
	for i := range 100 {
		if i%10 == 0 {
			paths = append(paths, fmt.Sprintf("svc%d/part%d/internal/file%d.go", i, 4*(i%8), i))
		} else {
			paths = append(paths, fmt.Sprintf("free/dir%d/file%d.go", i%7, i))
		}
	}
	for b.Loop() {
		n := 0
		for _, p := range paths {
			n += len(ix.holding("lead", p))
		}
		if n != 10 {
			b.Fatalf("%d held, want 10", n)
		}
	}
}

// BenchmarkIndexRebuild: the index after one grant, built from the one
// before (a merge) and from nothing.
func BenchmarkIndexRebuild(b *testing.B) {
	live := benchLive(false)
	old := buildIndex(live[:199], nil)
	b.Run("merge", func(b *testing.B) {
		for b.Loop() {
			buildIndex(live, old)
		}
	})
	b.Run("scratch", func(b *testing.B) {
		for b.Loop() {
			buildIndex(live, nil)
		}
	})
}

// TestLastSegmentNeverMisses: for every pattern of up to three tokens and
// every path of up to six runes over a, b and /, a path doublestar
// matches begins its last segment with the pattern's segmentStart, so
// two patterns sharing a path always meet.
func TestLastSegmentNeverMisses(t *testing.T) {
	tokens := []string{"a", "b", "ab", "/", "*", "**", "?", "a*", "*b", "[ab]", "{a,b/a}"}
	var patterns []string
	var gen func(p string, n int)
	gen = func(p string, n int) {
		if p != "" && globs.Validate(p) == nil {
			patterns = append(patterns, p)
		}
		if n == 0 {
			return
		}
		for _, tok := range tokens {
			gen(p+tok, n-1)
		}
	}
	gen("", 3)
	paths := []string{""}
	for n := 1; n <= 6; n++ {
		for _, p := range paths {
			if len(p) == n-1 {
				for _, r := range []string{"a", "b", "/"} {
					paths = append(paths, p+r)
				}
			}
		}
	}
	matched := map[string][]int{}
	for _, p := range patterns {
		end := lastSegment(p)
		for i, path := range paths {
			if !globs.MatchPath(p, path) {
				continue
			}
			matched[p] = append(matched[p], i)
			if last := path[strings.LastIndexByte(path, '/')+1:]; end.ok && !strings.HasPrefix(last, end.lit) {
				t.Fatalf("%q matches %q, whose last segment does not begin with %q", p, path, end.lit)
			}
		}
	}
	for _, a := range patterns {
		for _, b := range patterns {
			if !lastSegment(a).meet(lastSegment(b)) && slices.ContainsFunc(matched[a], func(i int) bool { return slices.Contains(matched[b], i) }) {
				t.Fatalf("%q and %q share a path but their last segments do not meet", a, b)
			}
		}
	}
	t.Logf("%d patterns, %d paths", len(patterns), len(paths))
}
