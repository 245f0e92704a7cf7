package globs

import (
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/bmatcuk/doublestar/v4"
)

// tokens are the pieces generated patterns are made of: the shapes of
// doublestar (literals, `/`, `*`, `**`, `?`, classes plain and negated and
// naming `/`, alternatives plain, empty, nested-free and spanning `/`, an
// escape). Put side by side they also make `***`, `**a`, `a**/` and the
// like, the corners of doublestar's matcher.
var tokens = []string{"a", "b", "/", "*", "**", "?", "{a,b}", "[ab]", "[!a]", "{a,/}", "{,**/}", "[/]", "\\*"}

// pathRunes are the runes of the brute-force paths: two that patterns name,
// one no pattern names, and the separator.
const pathRunes = "abc/"

// paths returns every string over pathRunes of at most n runes, "" too.
func paths(n int) []string {
	out := []string{""}
	level := []string{""}
	for range n {
		var next []string
		for _, p := range level {
			for _, r := range pathRunes {
				next = append(next, p+string(r))
			}
		}
		out = append(out, next...)
		level = next
	}
	return out
}

// accepts runs the model of a pattern on a string.
func accepts(m *nfa, s string) bool {
	cur := closeOver(m, m.starts)
	for _, r := range s {
		var next []int32
		for _, st := range cur {
			for _, e := range m.edges[st] {
				if meets(e.l, label{kind: labelRune, r: r}) {
					next = append(next, e.to)
				}
			}
		}
		cur = closeOver(m, next)
	}
	for _, st := range cur {
		if m.accept[st] {
			return true
		}
	}
	return false
}

func closeOver(m *nfa, from []int32) []int32 {
	seen := map[int32]bool{}
	var out []int32
	stack := append([]int32(nil), from...)
	for len(stack) > 0 {
		s := stack[len(stack)-1]
		stack = stack[:len(stack)-1]
		if !seen[s] {
			seen[s] = true
			out = append(out, s)
			stack = append(stack, m.eps[s]...)
		}
	}
	return out
}

// bruteSet is the set of paths (by index) a pattern matches per doublestar.
type bruteSet []uint64

func matches(t testing.TB, p string, all []string) bruteSet {
	set := make(bruteSet, (len(all)+63)/64)
	m := build(p)
	for i, path := range all {
		ok, err := doublestar.Match(p, path)
		if err != nil {
			t.Fatalf("doublestar.Match(%q, %q): %v", p, path, err)
		}
		if ok {
			set[i/64] |= 1 << (i % 64)
			// The model contains every match: the ground of "never miss".
			// Its literal starts, which Pattern.Match relies on, too.
			if !startsWithOne(m.prefixes, path) {
				t.Errorf("doublestar matches %q with %q but no literal start of the model (%q) begins it", path, p, m.prefixes)
			}
			if !accepts(m, path) {
				t.Errorf("doublestar matches %q with %q but the model of %q does not accept it", path, p, p)
			}
		}
	}
	return set
}

// common returns the index of a path both sets hold, or -1.
func (s bruteSet) common(o bruteSet) int {
	for i := range s {
		if w := s[i] & o[i]; w != 0 {
			for b := range 64 {
				if w&(1<<b) != 0 {
					return i*64 + b
				}
			}
		}
	}
	return -1
}

// tally counts the answers of Overlap against brute force.
type tally struct {
	pairs, overlaps, confirmed, over int
}

// check compares Overlap(a, b) with the brute-force answer: a shared path
// must give true (never miss). A true answer is confirmed when the model's
// witness or a brute-force path is matched by both per doublestar, and is
// counted an over-approximation otherwise.
func (c *tally) check(t testing.TB, a, b string, sa, sb bruteSet, all []string) {
	c.pairs++
	got := Overlap(a, b)
	shared := sa.common(sb)
	if shared >= 0 && !got {
		t.Errorf("Overlap(%q, %q) = false, want true: both match %q", a, b, all[shared])
		return
	}
	if !got {
		return
	}
	c.overlaps++
	if shared >= 0 {
		c.confirmed++
		return
	}
	if w, ok := witness(a, b); ok && MatchPath(a, w) && MatchPath(b, w) {
		c.confirmed++
		return
	}
	c.over++
	if c.over <= 10 {
		w, _ := witness(a, b)
		t.Logf("over: %q %q witness %q (a:%v b:%v)", a, b, w, MatchPath(a, w), MatchPath(b, w))
	}
}

func (c tally) report(t *testing.T, what string) {
	t.Logf("%s: %d pairs, %d overlap; %d confirmed by a path doublestar matches with both, %d over-approximated (%.2f%% of the overlaps)",
		what, c.pairs, c.overlaps, c.confirmed, c.over, 100*float64(c.over)/float64(max(c.overlaps, 1)))
}

// TestOverlapExhaustive compares Overlap with brute force over every pair
// of patterns of one or two tokens, on every path of up to 6 runes.
func TestOverlapExhaustive(t *testing.T) {
	all := paths(6)
	var pats []string
	for _, x := range tokens {
		pats = append(pats, x)
		for _, y := range tokens {
			pats = append(pats, x+y)
		}
	}
	sets := make([]bruteSet, len(pats))
	for i, p := range pats {
		sets[i] = matches(t, p, all)
	}
	// exact: the shapes where the model is exactly doublestar's matcher.
	// A group right after a `*` is read both ways, and a zero-length rest
	// accepts even with a group in it that the matcher has not expanded
	// (`/{,**/}` and the empty path): see nfa.add.
	var c, exact tally
	for i, a := range pats {
		for j, b := range pats {
			c.check(t, a, b, sets[i], sets[j], all)
			if !strings.Contains(a+b, "*{") && !strings.Contains(a+b, "/{,**/}") {
				exact.check(t, a, b, sets[i], sets[j], all)
			}
		}
	}
	c.report(t, "patterns of 1-2 tokens")
	exact.report(t, "patterns of 1-2 tokens of the exact shapes")
	if exact.over > 0 {
		t.Errorf("%d over-approximations among patterns of 1-2 tokens of the exact shapes, want 0", exact.over)
	}
	if rate := float64(c.over) / float64(c.overlaps); rate > 0.01 {
		t.Errorf("over-approximated %.2f%% of the overlaps of patterns of 1-2 tokens, want at most 1%%", 100*rate)
	}
}

// TestOverlapRandom does the same for random pairs of 3 to 6 tokens.
func TestOverlapRandom(t *testing.T) {
	all := paths(6)
	rng := rand.New(rand.NewPCG(28, 1))
	gen := func() string {
		var sb strings.Builder
		for range 3 + rng.IntN(4) {
			sb.WriteString(tokens[rng.IntN(len(tokens))])
		}
		return sb.String()
	}
	var c tally
	for range 200 {
		a, b := gen(), gen()
		c.check(t, a, b, matches(t, a, all), matches(t, b, all), all)
	}
	c.report(t, "random patterns of 3-6 tokens")
}

// FuzzOverlap builds two patterns of up to 6 tokens from the fuzzer's bytes
// and checks Overlap against brute force over every path of up to 5 runes:
// never a miss, and every doublestar match inside the model.
func FuzzOverlap(f *testing.F) {
	f.Add([]byte{3, 2, 0}, []byte{0, 2, 1})
	f.Add([]byte{4, 2, 3}, []byte{6, 2, 4})
	f.Add([]byte{10, 0}, []byte{11, 1, 4})
	f.Add([]byte{4, 0, 2, 4}, []byte{9, 5})
	all := paths(5)
	f.Fuzz(func(t *testing.T, x, y []byte) {
		if len(x) > 6 || len(y) > 6 {
			return
		}
		gen := func(bs []byte) string {
			var sb strings.Builder
			for _, b := range bs {
				sb.WriteString(tokens[int(b)%len(tokens)])
			}
			return sb.String()
		}
		a, b := gen(x), gen(y)
		var c tally
		c.check(t, a, b, matches(t, a, all), matches(t, b, all), all)
	})
}

// startsWithOne reports whether path starts with one of prefixes.
func startsWithOne(prefixes []string, path string) bool {
	for _, pre := range prefixes {
		if strings.HasPrefix(path, pre) {
			return true
		}
	}
	return false
}
