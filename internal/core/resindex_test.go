package core

import (
	"fmt"
	"math/rand/v2"
	"slices"
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
