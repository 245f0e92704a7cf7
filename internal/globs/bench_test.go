package globs

import (
	"fmt"
	"testing"
)

// benchPatterns returns n patterns of the shapes reservations hold: a
// directory tree, files of one kind under it, one file, alternatives.
func benchPatterns(prefix string, n int) []string {
	out := make([]string, n)
	for i := range out {
		switch i % 4 {
		case 0:
			out[i] = fmt.Sprintf("%s/pkg%d/**", prefix, i)
		case 1:
			out[i] = fmt.Sprintf("%s/pkg%d/**/*_test.go", prefix, i)
		case 2:
			out[i] = fmt.Sprintf("%s/cmd%d/main.go", prefix, i)
		default:
			out[i] = fmt.Sprintf("%s/{web,docs}/page%d.*", prefix, i)
		}
	}
	return out
}

// reservations returns 200 compiled reservations of 32 patterns each,
// none overlapping the request of benchRequest (the grant checks them all).
func reservations(b *testing.B) [][]*Pattern {
	res := make([][]*Pattern, 200)
	for i := range res {
		ps, err := CompileList(benchPatterns(fmt.Sprintf("team/m%d", i), MaxPatterns))
		if err != nil {
			b.Fatal(err)
		}
		res[i] = ps
	}
	return res
}

// BenchmarkOverlapGrant: one grant's question, a 32-pattern request against
// 200 live reservations of 32 patterns each (204,800 pattern pairs).
func BenchmarkOverlapGrant(b *testing.B) {
	res := reservations(b)
	req, err := CompileList(benchPatterns("team/new", MaxPatterns))
	if err != nil {
		b.Fatal(err)
	}
	b.ResetTimer()
	for b.Loop() {
		for _, r := range res {
			if ListsOverlap(req, r) {
				b.Fatal("the request overlaps a reservation")
			}
		}
	}
}

// BenchmarkOverlapGrantCompiling is the same with every pattern compiled
// inside the loop, as a grant that keeps no compiled reservations would.
func BenchmarkOverlapGrantCompiling(b *testing.B) {
	var lists [][]string
	for i := range 200 {
		lists = append(lists, benchPatterns(fmt.Sprintf("team/m%d", i), MaxPatterns))
	}
	reqs := benchPatterns("team/new", MaxPatterns)
	for b.Loop() {
		req, _ := CompileList(reqs)
		for _, l := range lists {
			r, _ := CompileList(l)
			if ListsOverlap(req, r) {
				b.Fatal("the request overlaps a reservation")
			}
		}
	}
}

// BenchmarkMatchPaths: a check of 100 concrete paths against 200
// reservations of 32 patterns each.
func BenchmarkMatchPaths(b *testing.B) {
	res := reservations(b)
	var paths []string
	for i := range 100 {
		paths = append(paths, fmt.Sprintf("team/m%d/pkg%d/sub/file%d.go", i%250, i%32, i))
	}
	b.ResetTimer()
	for b.Loop() {
		hits := 0
		for _, p := range paths {
			for _, r := range res {
				for _, q := range r {
					if q.Match(p) {
						hits++
					}
				}
			}
		}
		if hits == 0 {
			b.Fatal("no path matched")
		}
	}
}

// BenchmarkOverlapGrantSameTree: the grant of BenchmarkOverlapGrant when
// every pattern starts with the same directory and has a `**`, so no
// pattern pair is told apart by its literal start and each needs the
// search over pairs of states (no pair overlaps: the file names differ).
func BenchmarkOverlapGrantSameTree(b *testing.B) {
	res := make([][]*Pattern, 200)
	for i := range res {
		var ps []string
		for j := range MaxPatterns {
			ps = append(ps, fmt.Sprintf("src/**/r%d_%d*.go", i, j))
		}
		res[i], _ = CompileList(ps)
	}
	var qs []string
	for k := range MaxPatterns {
		qs = append(qs, fmt.Sprintf("src/**/q%d.go", k))
	}
	req, err := CompileList(qs)
	if err != nil {
		b.Fatal(err)
	}
	b.ResetTimer()
	for b.Loop() {
		for _, r := range res {
			if ListsOverlap(req, r) {
				b.Fatal("the request overlaps a reservation")
			}
		}
	}
}
