// Package globs holds the path patterns of file reservations (docs/api.md
// section K): their validation, the overlap of two patterns, and the match
// of a pattern against a concrete path. It imports no transport and no
// storage; core wraps its errors as validation_failed.
//
// Patterns are read exactly as github.com/bmatcuk/doublestar/v4 reads them:
// `*` matches a run of characters other than `/`, `**` as a whole segment
// matches any number of directories, `?` one character other than `/`,
// `[...]` a class (`!` or `^` negates it), `{a,b}` alternatives (nested
// too) and `\` escapes the next character.
//
// # Overlap never misses one
//
// Two patterns overlap when some path matches both. Overlap decides that on
// a model of each pattern: a finite automaton over single characters, `/`
// being a character like any other, whose language contains every string
// doublestar.Match accepts for that pattern (and, for the shapes doublestar
// documents, exactly those). The model is built in three steps:
//
//  1. The `{...}` alternatives are expanded into brace-free patterns, as
//     doublestar's matcher does when it meets a `{` (it tries each
//     alternative spliced into the rest of the pattern). Each expansion
//     remembers where a group's text began, because the matcher expands a
//     group only when it reaches it (so in `**{,/}` it first sees a `*`
//     before a `{`), yet keeps it expanded when it backtracks to an earlier
//     `**`; where that matters the model takes both readings.
//     When a pattern has more than maxExpansions expansions, or they need
//     more than maxStates states, the model widens it instead: the part
//     before the last `/` ahead of the first `{`, followed by `**`. A match
//     of the whole pattern starts with a match of that part, so the widened
//     language contains the original one.
//  2. Each expansion is cut into tokens the way the matcher steps through
//     it: a literal (escaped or not), `?` (one rune but `/`), a class (its
//     exact rune set; a negated class and a class naming `/` can match a
//     `/`, as they do in doublestar), `*` (any run without `/`), and `**`
//     where the matcher treats it as a doublestar: at the start of a segment
//     and followed by `/` it matches the empty string or any string ending
//     in `/`; at the start of a segment and ending the pattern it matches
//     anything. Any other `**` is a `*`. The matcher steps over a token only
//     while runes of the path are left; once they are all read it accepts
//     only when the rest of the pattern is "", "*", "**", "/**", "**/" or
//     "/**/" (so `a/**` matches `a` and `a/*` does not). The automaton
//     accepts at those places, and only when it got there by a rune (or
//     read none at all).
//  3. The automata of the expansions are united under one start.
//
// Two models intersect when a string is accepted by both; a breadth-first
// search over pairs of automaton states, following two edges at once when
// their character sets share a rune, finds such a string or exhausts the
// pairs (at most the product of the two state counts; past maxPairs pairs
// it stops and answers true, which bounds the cost of any two patterns).
// Since each model contains all that doublestar matches, a path matching both patterns is
// accepted by both models, and the search finds it: Overlap never reports
// false for patterns that share a path. It may report true where
// doublestar's own matcher, which backtracks greedily, would match neither,
// and for patterns widened in step 1; the tests measure how often.
package globs

import (
	"errors"
	"fmt"
	"strings"
	"unicode/utf8"

	"github.com/bmatcuk/doublestar/v4"
)

// The bounds of docs/api.md section K.
const (
	// MaxPatterns is the most patterns one reservation or check may hold.
	MaxPatterns = 32
	// MaxPatternChars bounds a pattern's length in characters (runes).
	MaxPatternChars = 256
)

// The reasons a pattern is refused. A *PatternError wraps one of them, so
// callers can tell them apart with errors.Is; their texts complete a
// sentence that starts with the pattern's name.
var (
	ErrEmpty        = errors.New("must not be empty")
	ErrTooLong      = fmt.Errorf("must be at most %d characters", MaxPatternChars)
	ErrEncoding     = errors.New("must be valid UTF-8")
	ErrSyntax       = errors.New("is not a valid doublestar glob (check the [ ] classes, { } alternatives and \\ escapes)")
	ErrLeadingSlash = errors.New("must be relative to the repository root, not start with /")
	ErrDotDot       = errors.New("must not have a .. segment")
)

// ErrCount refuses a list with no pattern or more than MaxPatterns;
// ValidateList returns an error that reads as a sentence and wraps it.
var ErrCount = fmt.Errorf("paths must hold 1 to %d patterns", MaxPatterns)

// countError is ErrCount as a sentence, to be shown as it is.
type countError struct{}

func (countError) Error() string { return ErrCount.Error() + "." }
func (countError) Unwrap() error { return ErrCount }

// PatternError says which pattern of a list was refused and why. Its text
// names the pattern by its place, never by its content, so it may be shown
// to a client as it is.
type PatternError struct {
	// Index is the pattern's place in its list (from 0), or -1 for a
	// pattern validated on its own.
	Index int
	// Err is one of the Err* reasons above.
	Err error
}

// Error reads as a sentence, e.g. "paths[2] must not have a .. segment.".
func (e *PatternError) Error() string {
	if e.Index < 0 {
		return fmt.Sprintf("The pattern %v.", e.Err)
	}
	return fmt.Sprintf("paths[%d] %v.", e.Index, e.Err)
}

// Unwrap exposes the reason to errors.Is.
func (e *PatternError) Unwrap() error { return e.Err }

// Validate checks one pattern against docs/api.md section K: not empty, at
// most MaxPatternChars characters of valid UTF-8, valid doublestar syntax,
// no leading `/` and no `..` segment in any of its alternatives. The error,
// when there is one, is a *PatternError with Index -1.
func Validate(pattern string) error {
	if err := validate(pattern); err != nil {
		return &PatternError{Index: -1, Err: err}
	}
	return nil
}

// ValidateList checks a list of patterns: 1 to MaxPatterns of them, each as
// Validate says. The first refusal is returned: one wrapping ErrCount, or a
// *PatternError naming the pattern's index.
func ValidateList(patterns []string) error {
	if len(patterns) < 1 || len(patterns) > MaxPatterns {
		return countError{}
	}
	for i, p := range patterns {
		if err := validate(p); err != nil {
			return &PatternError{Index: i, Err: err}
		}
	}
	return nil
}

func validate(p string) error {
	switch {
	case p == "":
		return ErrEmpty
	case !utf8.ValidString(p):
		return ErrEncoding
	case utf8.RuneCountInString(p) > MaxPatternChars:
		return ErrTooLong
	case !doublestar.ValidatePattern(p):
		return ErrSyntax
	}
	return checkSegments(parseSeq(p))
}

// Pattern is a validated pattern with its automaton built once, for the
// many overlap questions of a reservation's grant.
type Pattern struct {
	src string
	m   *nfa
}

// Compile validates pattern as Validate does and builds its model.
func Compile(pattern string) (*Pattern, error) {
	if err := Validate(pattern); err != nil {
		return nil, err
	}
	return &Pattern{src: pattern, m: build(pattern)}, nil
}

// CompileList validates patterns as ValidateList does and compiles each.
func CompileList(patterns []string) ([]*Pattern, error) {
	if err := ValidateList(patterns); err != nil {
		return nil, err
	}
	out := make([]*Pattern, len(patterns))
	for i, p := range patterns {
		out[i] = &Pattern{src: p, m: build(p)}
	}
	return out, nil
}

// String returns the pattern as it was written.
func (p *Pattern) String() string { return p.src }

// Overlaps reports whether some path could match both p and q. It never
// reports false when one does (see the package comment).
func (p *Pattern) Overlaps(q *Pattern) bool {
	_, ok := intersect(p.m, q.m, false)
	return ok
}

// Match reports whether the concrete path matches p, as doublestar.Match.
// A path that starts with none of the pattern's literal starts cannot
// match (see nfa.prefixes) and is refused without running the matcher.
func (p *Pattern) Match(path string) bool {
	for _, pre := range p.m.prefixes {
		if strings.HasPrefix(path, pre) {
			return doublestar.MatchUnvalidated(p.src, path)
		}
	}
	return false
}

// ListsOverlap reports whether some pattern of a overlaps some pattern of b:
// two reservations' lists conflict exactly then.
func ListsOverlap(a, b []*Pattern) bool {
	for _, p := range a {
		for _, q := range b {
			if p.Overlaps(q) {
				return true
			}
		}
	}
	return false
}

// Overlap reports whether some path could match both patterns. It needs
// valid doublestar syntax but not the rules of section K; a pattern that is
// not valid doublestar (never the case for a stored reservation) is taken
// to overlap everything, so that a mistake errs on the side of a conflict.
func Overlap(a, b string) bool {
	if !compilable(a) || !compilable(b) {
		return true
	}
	_, ok := intersect(build(a), build(b), false)
	return ok
}

// MatchPath reports whether a concrete path matches pattern, exactly as
// doublestar.Match reads it; an invalid pattern matches nothing.
func MatchPath(pattern, path string) bool {
	ok, err := doublestar.Match(pattern, path)
	return ok && err == nil
}

func compilable(p string) bool {
	return utf8.ValidString(p) && doublestar.ValidatePattern(p)
}
