package globs

import (
	"slices"
	"strings"
	"sync"
	"unicode/utf8"
)

// span is a closed range of runes.
type span struct{ lo, hi rune }

// The kinds of edge label: one rune, any rune but `/`, any rune, or a set
// of spans (sorted, disjoint, not adjacent, never empty).
const (
	labelRune = iota
	labelNotSlash
	labelAny
	labelSet
)

// label is the set of runes an edge consumes.
type label struct {
	kind uint8
	r    rune
	set  []span
}

type edge struct {
	l  label
	to int32
}

// nfa is a pattern's model: an automaton over runes with ε-moves (which
// only go forward).
type nfa struct {
	edges  [][]edge
	eps    [][]int32
	accept []bool
	starts []int32
	// prefixes holds, for each expansion, its literal start without a
	// trailing `/`: every path the pattern matches begins with one of them
	// (a path that ends early, as `a` for `a/**`, ends where the rest is
	// "/**" or the like, so at most a `/` short of it). Two patterns whose
	// prefixes all diverge cannot overlap: intersect answers that before
	// it builds anything, which is the common case of a grant.
	prefixes []string
}

func (m *nfa) state(accept bool) int32 {
	m.edges = append(m.edges, nil)
	m.eps = append(m.eps, nil)
	m.accept = append(m.accept, accept)
	return int32(len(m.edges) - 1)
}

func (m *nfa) edge(from, to int32, l label) {
	m.edges[from] = append(m.edges[from], edge{l: l, to: to})
}

func (m *nfa) epsilon(from, to int32) { m.eps[from] = append(m.eps[from], to) }

var (
	anyRune  = label{kind: labelAny}
	notSlash = label{kind: labelNotSlash}
	slash    = label{kind: labelRune, r: '/'}
)

// maxStates bounds the states of a model built from expansions; a larger
// one is widened like a pattern with too many expansions. A brace-free
// pattern of MaxPatternChars needs at most about 2 states a character.
const maxStates = 2048

// build returns the model of a valid pattern (see the package comment).
func build(p string) *nfa {
	seq := parseSeq(p)
	alts, ok := expand(seq, maxExpansions)
	m := &nfa{}
	if ok {
		for _, a := range alts {
			m.starts = append(m.starts, m.add(a))
		}
	}
	if !ok || len(m.edges) > maxStates {
		m = &nfa{}
		alts = []expansion{{s: widen(p, seq)}}
		m.starts = []int32{m.add(alts[0])}
	}
	for _, a := range alts {
		lit := a.s
		if k := strings.IndexAny(lit, "*?[\\"); k >= 0 {
			lit = lit[:k]
		}
		lit = strings.TrimSuffix(lit, "/")
		if !slices.Contains(m.prefixes, lit) {
			m.prefixes = append(m.prefixes, lit)
		}
	}
	return m
}

// prefixesMeet reports whether some prefix of a and some of b could start
// the same path: one is a prefix of the other.
func prefixesMeet(a, b []string) bool {
	for _, x := range a {
		for _, y := range b {
			if strings.HasPrefix(x, y) || strings.HasPrefix(y, x) {
				return true
			}
		}
	}
	return false
}

// zeroLength reports the rests of a pattern that doublestar's matcher lets
// match an exhausted path ("a/**" matches "a", "a/*" does not).
func zeroLength(rest string) bool {
	switch rest {
	case "", "*", "**", "/**", "**/", "/**/":
		return true
	}
	return false
}

// add builds the automaton of one expansion and returns its start. It
// steps through the pattern as doublestar's matcher does, so that `**` is
// a doublestar exactly where the matcher treats it as one, and a state
// accepts exactly where the matcher, its path exhausted, would stop and
// accept: the matcher steps over a token only while runes are left, so an
// accepting state is reached by a rune (or is a start), never by an ε-move
// after the last rune; intersect keeps to that.
//
// Where a group's text begins right after a `*` the matcher first sees a
// `{` there; but having expanded the group it may backtrack before the `*`
// and see the group's text instead. The automaton takes both readings
// there, and accepts at a zero-length rest whether or not a group was in
// it: a union, so never less than the matcher.
func (m *nfa) add(e expansion) int32 {
	start := m.state(zeroLength(e.s))
	m.addFrom(e, 0, start, true)
	return start
}

// addFrom builds the automaton of e.s[i:] from state cur.
func (m *nfa) addFrom(e expansion, i int, cur int32, segStart bool) {
	p := e.s
	marked := func(i int) bool { return slices.Contains(e.marks, i) }
	for i < len(p) {
		if len(m.edges) > maxStates {
			return // build widens the pattern
		}
		j := i + 1 // the token's end
		var l label
		switch p[i] {
		case '*':
			if j < len(p) && p[j] == '*' {
				if marked(j) {
					// The other reading: a `*` alone, then the next token.
					next := m.state(zeroLength(p[j:]))
					m.loop(cur, next, notSlash)
					m.addFrom(e, j, next, false)
				}
				j++
				if segStart && (j == len(p) || p[j] == '/') && marked(j) {
					// The other reading: `**` a `*`, a `{` after it.
					next := m.state(zeroLength(p[j:]))
					m.loop(cur, next, notSlash)
					m.addFrom(e, j, next, false)
				}
				if segStart && j == len(p) {
					// `**` ending the pattern: anything at all.
					next := m.state(true)
					m.loop(cur, next, anyRune)
					return
				}
				if segStart && p[j] == '/' {
					// `**/`: nothing, or anything that ends in `/`.
					j++
					next := m.state(zeroLength(p[j:]))
					aux := m.state(false)
					m.epsilon(cur, next)
					m.edge(cur, next, slash)
					m.edge(cur, aux, anyRune)
					m.edge(aux, aux, anyRune)
					m.edge(aux, next, slash)
					cur = next
					i = j
					continue // still at a segment's start
				}
			}
			next := m.state(zeroLength(p[j:]))
			m.loop(cur, next, notSlash)
			cur = next
			i = j
			segStart = false
			continue
		case '?':
			l = notSlash
			segStart = false
		case '[':
			l, j = parseClass(p, i)
			segStart = false
		default:
			if p[i] == '\\' {
				i++
			}
			r, n := utf8.DecodeRuneInString(p[i:])
			l = label{kind: labelRune, r: r}
			j = i + n
			segStart = r == '/'
		}
		next := m.state(zeroLength(p[j:]))
		if l.kind != labelSet || len(l.set) > 0 {
			m.edge(cur, next, l)
		}
		cur = next
		i = j
	}
}

// loop adds "zero or more runes of l" between from and to. Its middle
// state accepts as to does: the matcher, its path exhausted inside the
// run, goes on from the token after it.
func (m *nfa) loop(from, to int32, l label) {
	mid := m.state(m.accept[to])
	m.epsilon(from, to)
	m.edge(from, mid, l)
	m.edge(mid, mid, l)
	m.epsilon(mid, to)
}

// parseClass reads the class at p[i] == '[' exactly as doublestar's matcher
// does (ranges lo-hi, `\` escapes, a `-` first or last is literal, `!` or
// `^` negates) and returns its rune set and the index past its `]`.
func parseClass(p string, i int) (label, int) {
	i++
	negate := p[i] == '!' || p[i] == '^'
	if negate {
		i++
	}
	var set []span
	last := utf8.MaxRune
	for i < len(p) && p[i] != ']' {
		r, n := utf8.DecodeRuneInString(p[i:])
		i += n
		if last < utf8.MaxRune && r == '-' && i < len(p) && p[i] != ']' {
			if p[i] == '\\' {
				i++
			}
			hi, n := utf8.DecodeRuneInString(p[i:])
			i += n
			if last <= hi {
				set = append(set, span{last, hi})
			}
			last = utf8.MaxRune
			continue
		}
		if r == '\\' {
			r, n = utf8.DecodeRuneInString(p[i:])
			i += n
		}
		set = append(set, span{r, r})
		last = r
	}
	set = normalize(set)
	if negate {
		set = complement(set)
	}
	return setLabel(set), i + 1
}

// normalize sorts spans and merges those that touch.
func normalize(set []span) []span {
	slices.SortFunc(set, func(a, b span) int { return int(a.lo - b.lo) })
	var out []span
	for _, s := range set {
		if n := len(out); n > 0 && s.lo <= out[n-1].hi+1 {
			out[n-1].hi = max(out[n-1].hi, s.hi)
			continue
		}
		out = append(out, s)
	}
	return out
}

func complement(set []span) []span {
	var out []span
	next := rune(0)
	for _, s := range set {
		if s.lo > next {
			out = append(out, span{next, s.lo - 1})
		}
		next = s.hi + 1
	}
	if next <= utf8.MaxRune {
		out = append(out, span{next, utf8.MaxRune})
	}
	return out
}

// setLabel gives a normalized set its cheapest label.
func setLabel(set []span) label {
	switch {
	case len(set) == 1 && set[0].lo == set[0].hi:
		return label{kind: labelRune, r: set[0].lo}
	case len(set) == 1 && set[0] == span{0, utf8.MaxRune}:
		return anyRune
	case len(set) == 2 && set[0] == span{0, '/' - 1} && set[1] == span{'/' + 1, utf8.MaxRune}:
		return notSlash
	}
	return label{kind: labelSet, set: set}
}

// spans returns the label's set as spans.
func (l label) spans() []span {
	switch l.kind {
	case labelRune:
		return []span{{l.r, l.r}}
	case labelNotSlash:
		return []span{{0, '/' - 1}, {'/' + 1, utf8.MaxRune}}
	case labelAny:
		return []span{{0, utf8.MaxRune}}
	}
	return l.set
}

// meets reports whether two labels share a rune.
func meets(a, b label) bool {
	if a.kind > b.kind {
		a, b = b, a
	}
	switch a.kind {
	case labelRune:
		switch b.kind {
		case labelRune:
			return a.r == b.r
		case labelNotSlash:
			return a.r != '/'
		case labelAny:
			return true
		}
		return inSet(b.set, a.r)
	case labelNotSlash:
		if b.kind == labelSet {
			return len(b.set) > 1 || b.set[0] != span{'/', '/'}
		}
		return true
	case labelAny:
		return true
	}
	_, ok := shared(a.set, b.set)
	return ok
}

func inSet(set []span, r rune) bool {
	for _, s := range set {
		if r < s.lo {
			return false
		}
		if r <= s.hi {
			return true
		}
	}
	return false
}

// shared returns the spans two sets have in common, and whether any.
func shared(a, b []span) ([]span, bool) {
	var out []span
	for i, j := 0, 0; i < len(a) && j < len(b); {
		lo, hi := max(a[i].lo, b[j].lo), min(a[i].hi, b[j].hi)
		if lo <= hi {
			out = append(out, span{lo, hi})
		}
		if a[i].hi < b[j].hi {
			i++
		} else {
			j++
		}
	}
	return out, len(out) > 0
}

// pick returns a rune both labels hold, preferring a plain letter, for the
// witness paths the tests check with doublestar.
func pick(a, b label) rune {
	both, _ := shared(a.spans(), b.spans())
	for _, r := range "abcxyz.-_0" {
		if inSet(both, r) {
			return r
		}
	}
	for _, s := range both {
		for r := s.lo; r <= s.hi; r++ {
			if utf8.ValidRune(r) {
				return r
			}
		}
	}
	return both[0].lo
}

// maxPairs bounds the pairs of states one intersect visits. Past it the
// answer is "they overlap": a safe answer, and one that keeps a grant's
// cost bounded whatever 32 patterns of 256 characters a client sends.
const maxPairs = 1 << 16

// pairSet is the set of visited pairs: a bitset while the product of the
// state counts is small, a map beyond.
type pairSet struct {
	bits []uint64
	m    map[int64]struct{}
}

// has reports whether k is in the set.
func (s pairSet) has(k int64) bool {
	if s.bits == nil {
		_, ok := s.m[k]
		return ok
	}
	return s.bits[k/64]&(1<<(k%64)) != 0
}

// add records k and reports whether it was new.
func (s pairSet) add(k int64) bool {
	if s.bits == nil {
		if _, ok := s.m[k]; ok {
			return false
		}
		s.m[k] = struct{}{}
		return true
	}
	if s.bits[k/64]&(1<<(k%64)) != 0 {
		return false
	}
	s.bits[k/64] |= 1 << (k % 64)
	return true
}

// node is a queued pair of states (a's times len(b) plus b's), and
// whether an ε-move reached it.
type node struct {
	k   int64
	eps bool
}

// scratch is the reusable memory of one intersect.
type scratch struct {
	bits  []uint64
	queue []node
}

var scratchPool = sync.Pool{New: func() any { return new(scratch) }}

// intersect searches the pairs of states of a and b, breadth first, for a
// pair where both accept; with witness it also returns the string that
// leads there. From a pair it follows an ε-move of either side alone, or a
// rune edge of each side whose labels share a rune, so a pair costs its
// edges and not the product of two ε-closures. A pair reached by an ε-move
// does not accept (see add): it is kept apart from the same pair reached
// by runes, which may. Each is visited once; past maxPairs the search
// stops and reports an overlap (with no witness).
func intersect(a, b *nfa, witness bool) (string, bool) {
	if !prefixesMeet(a.prefixes, b.prefixes) {
		return "", false
	}
	nb := int64(len(b.edges))
	total := int64(len(a.edges)) * nb
	var byRune, byEps pairSet
	var queue []node
	if total <= 1<<16 {
		// The common case: bitsets and a queue taken from a pool, so a
		// grant's thousands of questions allocate next to nothing.
		sc := scratchPool.Get().(*scratch)
		words := int((total + 63) / 64)
		if cap(sc.bits) < 2*words {
			sc.bits = make([]uint64, 2*words)
		} else {
			sc.bits = sc.bits[:2*words]
			clear(sc.bits)
		}
		byRune, byEps = pairSet{bits: sc.bits[:words]}, pairSet{bits: sc.bits[words:]}
		queue = sc.queue[:0]
		defer func() {
			if cap(queue) <= maxPairs {
				sc.queue = queue[:0]
			}
			scratchPool.Put(sc)
		}()
	} else {
		byRune, byEps = pairSet{m: map[int64]struct{}{}}, pairSet{m: map[int64]struct{}{}}
	}
	type step struct {
		parent int
		r      rune // -1 for an ε-move
	}
	var steps []step // with witness: how each queued pair was reached
	visit := func(pa, pb int32, eps bool, parent int, r rune) {
		k := int64(pa)*nb + int64(pb)
		if eps {
			if byRune.has(k) || !byEps.add(k) {
				return
			}
		} else if !byRune.add(k) {
			return
		}
		if witness {
			steps = append(steps, step{parent: parent, r: r})
		}
		queue = append(queue, node{k, eps})
	}
	for _, sa := range a.starts {
		for _, sb := range b.starts {
			visit(sa, sb, false, -1, -1)
		}
	}
	for head := 0; head < len(queue); head++ {
		if len(queue) > maxPairs {
			return "", true
		}
		k := queue[head].k
		sa, sb := int32(k/nb), int32(k%nb)
		if !queue[head].eps && a.accept[sa] && b.accept[sb] {
			if !witness {
				return "", true
			}
			var rs []rune
			for i := head; steps[i].parent >= 0; i = steps[i].parent {
				if steps[i].r >= 0 {
					rs = append(rs, steps[i].r)
				}
			}
			slices.Reverse(rs)
			return string(rs), true
		}
		for _, ta := range a.eps[sa] {
			visit(ta, sb, true, head, -1)
		}
		for _, tb := range b.eps[sb] {
			visit(sa, tb, true, head, -1)
		}
		for _, ea := range a.edges[sa] {
			for _, eb := range b.edges[sb] {
				if !meets(ea.l, eb.l) {
					continue
				}
				var r rune
				if witness {
					r = pick(ea.l, eb.l)
				}
				visit(ea.to, eb.to, false, head, r)
			}
		}
	}
	return "", false
}
