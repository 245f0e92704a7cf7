package globs

import "unicode/utf8"

// maxExpansions bounds the brace-free patterns one pattern expands into; a
// pattern with more is widened (see the package comment), so a pattern of
// 256 characters cannot make the model explode.
const maxExpansions = 128

// piece is a part of a pattern: brace-free raw text, or a `{...}` group
// whose alternatives are sequences of pieces themselves.
type piece struct {
	text string
	alts [][]piece
}

// parseSeq splits a valid pattern into pieces. It finds `{`, `,` and `}`
// where doublestar's matcher does: outside escapes and `[...]` classes.
func parseSeq(p string) []piece {
	seq, _ := parseFrom(p, 0, false)
	return seq
}

func parseFrom(p string, i int, inAlt bool) ([]piece, int) {
	var seq []piece
	start := i
	flush := func(end int) {
		if end > start {
			seq = append(seq, piece{text: p[start:end]})
		}
	}
	for i < len(p) {
		switch p[i] {
		case '\\':
			i += 2
		case '[':
			i = classEnd(p, i)
		case '{':
			flush(i)
			var alts [][]piece
			i++
			for i < len(p) {
				alt, j := parseFrom(p, i, true)
				alts = append(alts, alt)
				i = j + 1
				if j >= len(p) || p[j] == '}' {
					break
				}
			}
			seq = append(seq, piece{alts: alts})
			start = i
		case ',', '}':
			if inAlt {
				flush(i)
				return seq, i
			}
			i++
		default:
			i++
		}
	}
	if i > len(p) {
		i = len(p)
	}
	flush(i)
	return seq, i
}

// classEnd returns the index just past the `]` closing the class that
// starts at p[i] == '['; an escaped `]` does not close it.
func classEnd(p string, i int) int {
	for i++; i < len(p); i++ {
		switch p[i] {
		case '\\':
			i++
		case ']':
			return i + 1
		}
	}
	return len(p)
}

// expansion is one brace-free pattern a pattern stands for, with marks:
// the byte offsets in s where the text of a `{...}` group begins. They
// matter because doublestar's matcher expands a group only when it reaches
// it: before that it sees a `{` there, so a `**` just ahead is a `*`, and
// a rest that still holds a group is not one of the rests that match an
// exhausted path.
type expansion struct {
	s     string
	marks []int
}

// expand returns the brace-free patterns seq stands for, or false when
// there would be more than limit of them.
func expand(seq []piece, limit int) ([]expansion, bool) {
	out := []expansion{{}}
	for _, pc := range seq {
		if pc.alts == nil {
			for k := range out {
				out[k].s += pc.text
			}
			continue
		}
		var opts []expansion
		for _, alt := range pc.alts {
			e, ok := expand(alt, limit)
			if !ok || len(opts)+len(e) > limit {
				return nil, false
			}
			opts = append(opts, e...)
		}
		if len(out)*len(opts) > limit {
			return nil, false
		}
		next := make([]expansion, 0, len(out)*len(opts))
		for _, o := range out {
			for _, x := range opts {
				marks := make([]int, 0, len(o.marks)+1+len(x.marks))
				marks = append(marks, o.marks...)
				marks = append(marks, len(o.s))
				for _, m := range x.marks {
					marks = append(marks, len(o.s)+m)
				}
				next = append(next, expansion{s: o.s + x.s, marks: marks})
			}
		}
		out = next
	}
	return out, true
}

// widen returns a brace-free pattern whose language contains that of p:
// p up to its last `/` before the first top-level `{`, followed by `**`.
// A match of p consumes that prefix first, and `**` after a `/` matches any
// rest.
func widen(p string, seq []piece) string {
	k := 0
	if len(seq) > 0 && seq[0].alts == nil {
		k = len(seq[0].text)
	}
	cut := 0
	for i := 0; i < k; {
		switch p[i] {
		case '\\':
			r, n := utf8.DecodeRuneInString(p[i+1:])
			i += 1 + n
			if r == '/' {
				cut = i
			}
		case '[':
			i = classEnd(p, i)
		case '/':
			i++
			cut = i
		default:
			i++
		}
	}
	return p[:cut] + "**"
}

// The states of the segment check: where in the pattern an atom falls.
const (
	segPatternStart = iota // nothing read yet
	segStart               // just after a `/`
	segDot                 // the segment so far is "."
	segDotDot              // the segment so far is ".."
	segOther               // the segment is anything else
)

// checkSegments reports a leading `/` or a `..` segment in any expansion
// of seq. It runs a five-state automaton over the pieces, carrying the set
// of states reachable through the alternatives, so no expansion is built
// and no pattern is too large for it.
func checkSegments(seq []piece) error {
	out, err := walkSegments(seq, 1<<segPatternStart)
	if err != nil {
		return err
	}
	if out&(1<<segDotDot) != 0 {
		return ErrDotDot
	}
	return nil
}

func walkSegments(seq []piece, in uint8) (uint8, error) {
	cur := in
	for _, pc := range seq {
		if pc.alts != nil {
			var next uint8
			for _, alt := range pc.alts {
				o, err := walkSegments(alt, cur)
				if err != nil {
					return 0, err
				}
				next |= o
			}
			cur = next
			continue
		}
		t := pc.text
		for i := 0; i < len(t); {
			var r rune
			literal := true
			switch t[i] {
			case '\\':
				var n int
				r, n = utf8.DecodeRuneInString(t[i+1:])
				i += 1 + n
			case '[':
				literal = false
				i = classEnd(t, i)
			case '*', '?':
				literal = false
				i++
			default:
				var n int
				r, n = utf8.DecodeRuneInString(t[i:])
				i += n
			}
			var next uint8
			for s := segPatternStart; s <= segOther; s++ {
				if cur&(1<<s) == 0 {
					continue
				}
				switch {
				case literal && r == '/':
					if s == segPatternStart {
						return 0, ErrLeadingSlash
					}
					if s == segDotDot {
						return 0, ErrDotDot
					}
					next |= 1 << segStart
				case literal && r == '.':
					switch s {
					case segPatternStart, segStart:
						next |= 1 << segDot
					case segDot:
						next |= 1 << segDotDot
					default:
						next |= 1 << segOther
					}
				default:
					next |= 1 << segOther
				}
			}
			cur = next
		}
	}
	return cur, nil
}
