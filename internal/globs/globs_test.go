package globs

import (
	"errors"
	"strings"
	"testing"

	"github.com/bmatcuk/doublestar/v4"
)

// TestOverlap holds the examples of docs/api.md section K and the shapes
// doublestar allows, each pair checked both ways round.
func TestOverlap(t *testing.T) {
	cases := []struct {
		a, b string
		want bool
	}{
		// docs/api.md section K.
		{"internal/**", "internal/core/x.go", true},
		{"*.go", "cmd/main.go", false},
		{"{a,b}/**", "b/c", true},
		// The brief's shapes.
		{"**", "anything/at/all.txt", true},
		{"**", "*.go", true},
		{"**", "**", true},
		{"a/*/c", "a/b/*", true},
		{"*.go", "*.md", false},
		{"[a-c]*", "b*", true},
		{"[!a]x", "ax", false},
		{"[!a]x", "bx", true},
		{"[^a]x", "ax", false},
		// Literals.
		{"a/b", "a/b", true},
		{"a/b", "a/c", false},
		{"a/b", "a/b/c", false},
		{"a", "a/", false},
		// `*` never crosses `/`.
		{"*", "a/b", false},
		{"*/*", "a/b", true},
		{"*/*", "a/b/c", false},
		{"a*", "*b", true},
		{"a*", "b*", false},
		{"*a*", "*b*", true},
		{"*.go", "main.go", true},
		{"*.go", "main.go.txt", false},
		{"x*y", "x*z", false},
		// `**` as a whole segment crosses any number of them, none too.
		{"**/x.go", "x.go", true},
		{"**/x.go", "a/b/c/x.go", true},
		{"a/**/b", "a/b", true},
		{"a/**/b", "a/x/y/b", true},
		{"a/**/b", "a/x/y/c", false},
		{"a/**", "a", true}, // doublestar: `a/**` matches `a`
		{"a/**", "b/**", false},
		{"a/**", "*/c", true},
		{"**/*.go", "**/*.md", false},
		{"**/*.go", "cmd/**", true},
		{"internal/**", "cmd/**", false},
		{"internal/**/*_test.go", "internal/core/*.go", true},
		{"internal/**/*_test.go", "internal/core/x.go", false},
		// `**` inside a segment is a `*`.
		{"a**", "ab/c", false},
		{"a**", "abc", true},
		{"**.go", "a/b.go", false},
		{"**.go", "b.go", true},
		{"a/**b", "a/x/b", false},
		// `?`.
		{"?", "a", true},
		{"?", "ab", false},
		{"a?c", "abc", true},
		{"a?c", "a/c", false},
		{"??", "*", true},
		{"???", "a?", false},
		// Classes: ranges, escapes, negation, `-` at the edges.
		{"[abc]", "[cde]", true},
		{"[ab]", "[cd]", false},
		{"[a-c]", "[c-e]", true},
		{"[a-c]", "[d-f]", false},
		{"[!a-c]", "[a-c]", false},
		{"[!a-c]", "[a-d]", true},
		{"[-a]", "-", true},
		{"[a-]", "-", true},
		{"[\\]]", "]", true},
		{"[\\-]", "-", true},
		{"[a\\-c]", "b", false},
		{"[z-a]", "z", true},      // a reversed range matches nothing but its
		{"[z-a]", "[!z]", false},  // first rune, read before the `-`
		{"a[/]b", "a/b", true},    // doublestar: a class can match `/`
		{"a[!x]b", "a/b", true},   // and so can a negated one
		{"*[!x]b", "a/b", true},   // after a `*`
		{"[!/]", "/", false},      // not when it excludes it
		{"[[]", "\\[", true},      // `[` in a class
		{"é?", "[é]x", true},      // runes, not bytes
		{"[α-ω]", "[a-z]", false}, // disjoint ranges beyond ASCII
		// Escapes.
		{"\\*", "*", true},
		{"\\*", "a", false},
		{"\\?", "a", false},
		{"a\\/b", "a/b", true},
		{"\\{a,b\\}", "\\{a,b\\}", true},
		{"\\{a,b\\}", "a", false},
		{"\\{a,b\\}", "{a,b}", false},
		// Alternatives, nested, empty, spanning segments.
		{"{a,b}", "b", true},
		{"{a,b}", "c", false},
		{"{a,{b,c}}", "c", true},
		{"{a,{b,c}}", "d", false},
		{"x{,y}", "x", true},
		{"x{,y}", "xy", true},
		{"x{,y}", "xz", false},
		{"{a/b,c}/d", "a/b/d", true},
		{"{a/b,c}/d", "a/d", false},
		{"{**/,}x", "a/b/x", true},
		{"{*.go,*.md}", "README.md", true},
		{"{*.go,*.md}", "a/README.md", false},
		{"src/{a,b}/**/*.{js,ts}", "src/b/x/y.ts", true},
		{"src/{a,b}/**/*.{js,ts}", "src/c/x/y.ts", false},
		{"src/{a,b}/**/*.{js,ts}", "src/*/lib/*.js", true},
		{"[{]a", "\\{a", true}, // `{` in a class opens no alternatives
		{"{[,]}", ",", true},
		{"a,b", "a,b", true}, // a `,` outside braces is literal
	}
	for _, c := range cases {
		for _, pair := range [][2]string{{c.a, c.b}, {c.b, c.a}} {
			if got := Overlap(pair[0], pair[1]); got != c.want {
				t.Errorf("Overlap(%q, %q) = %v, want %v", pair[0], pair[1], got, c.want)
			}
		}
		// A true answer must come with a path both match, per doublestar:
		// every case above is one where the model is exact.
		if c.want {
			w, ok := witness(c.a, c.b)
			if !ok || !MatchPath(c.a, w) || !MatchPath(c.b, w) {
				t.Errorf("witness(%q, %q) = %q, %v: want a path doublestar matches with both", c.a, c.b, w, ok)
			}
		}
	}
}

// TestOverlapWidened: a pattern with more expansions than the model keeps
// is widened to its part before the braces, never narrowed.
func TestOverlapWidened(t *testing.T) {
	big := "src/x/" + strings.Repeat("{a,b}", 10) // 1024 expansions
	cases := []struct {
		other string
		want  bool
	}{
		{"src/x/abababaaab", true},
		{"src/x/ab", true}, // widened: the exact answer is false
		{"src/y/*", false},
		{"cmd/**", false},
	}
	for _, c := range cases {
		if got := Overlap(big, c.other); got != c.want {
			t.Errorf("Overlap(%q, %q) = %v, want %v", big, c.other, got, c.want)
		}
	}
	if w := widen(big, parseSeq(big)); w != "src/x/**" {
		t.Errorf("widen(%q) = %q, want %q", big, w, "src/x/**")
	}
}

// TestOverlapBounded: however long and starry two patterns are, one
// question stays within maxPairs and answers true when it gives up.
func TestOverlapBounded(t *testing.T) {
	a := strings.Repeat("*a", 120)
	b := strings.Repeat("*b", 120)
	if !Overlap(a, b) {
		t.Errorf("Overlap(%q…, %q…) = false, want true", a[:8], b[:8])
	}
	c := strings.Repeat("**/", 80) + "x"
	d := strings.Repeat("**/", 80) + "y"
	if Overlap(c, d) {
		t.Errorf("Overlap(%q…, %q…) = true, want false", c[:9], d[:9])
	}
}

// TestOverlapInvalid: a pattern doublestar refuses (never a stored one) is
// taken to overlap everything.
func TestOverlapInvalid(t *testing.T) {
	for _, p := range []string{"[", "{a", "a\\", "[]", "[!]", "}"} {
		if !Overlap(p, "x") {
			t.Errorf("Overlap(%q, \"x\") = false, want true for an invalid pattern", p)
		}
	}
}

func TestValidate(t *testing.T) {
	cases := []struct {
		p    string
		want error
	}{
		{"internal/**", nil},
		{"cmd/main.go", nil},
		{"{a,b}/**", nil},
		{"a/.x/b..c/...", nil},
		{"a/[.][.]/b", nil}, // a class is no literal `..`
		{strings.Repeat("é", MaxPatternChars), nil},
		{"", ErrEmpty},
		{strings.Repeat("a", MaxPatternChars+1), ErrTooLong},
		{"a\xffb", ErrEncoding},
		{"/etc/passwd", ErrLeadingSlash},
		{"\\/etc", ErrLeadingSlash},
		{"{a,/b}", ErrLeadingSlash},
		{"{,}/b", ErrLeadingSlash},
		{"..", ErrDotDot},
		{"../x", ErrDotDot},
		{"a/../b", ErrDotDot},
		{"a/..", ErrDotDot},
		{"a/\\.\\./b", ErrDotDot},
		{"a/{x,..}/b", ErrDotDot},
		{"a/.{.,x}/b", ErrDotDot},
		{"a/{.,x}{.,y}", ErrDotDot},
		{"[", ErrSyntax},
		{"[]", ErrSyntax},
		{"[!]", ErrSyntax},
		{"{a,b", ErrSyntax},
		{"a}", ErrSyntax},
		{"a\\", ErrSyntax},
	}
	for _, c := range cases {
		err := Validate(c.p)
		if !errors.Is(err, c.want) || (c.want == nil) != (err == nil) {
			t.Errorf("Validate(%q) = %v, want %v", c.p, err, c.want)
		}
		var pe *PatternError
		if err != nil && (!errors.As(err, &pe) || pe.Index != -1) {
			t.Errorf("Validate(%q) = %#v, want a *PatternError with Index -1", c.p, err)
		}
		if err != nil && strings.Contains(err.Error(), c.p) && len(c.p) > 2 {
			t.Errorf("Validate(%q) = %q: the message must not repeat the pattern", c.p, err)
		}
	}
	// The syntax check is doublestar's own.
	for _, c := range cases {
		if c.want == ErrSyntax && doublestar.ValidatePattern(c.p) {
			t.Errorf("doublestar.ValidatePattern(%q) = true, want false", c.p)
		}
	}
}

func TestValidateList(t *testing.T) {
	many := make([]string, MaxPatterns+1)
	for i := range many {
		many[i] = "a"
	}
	if err := ValidateList(many[:MaxPatterns]); err != nil {
		t.Errorf("ValidateList(%d patterns) = %v, want nil", MaxPatterns, err)
	}
	for _, list := range [][]string{nil, {}, many} {
		err := ValidateList(list)
		if !errors.Is(err, ErrCount) {
			t.Errorf("ValidateList(%d patterns) = %v, want ErrCount", len(list), err)
		}
		if err != nil && err.Error() != "paths must hold 1 to 32 patterns." {
			t.Errorf("ValidateList(%d patterns).Error() = %q, want %q", len(list), err, "paths must hold 1 to 32 patterns.")
		}
	}
	err := ValidateList([]string{"a", "b/**", "../c"})
	var pe *PatternError
	if !errors.As(err, &pe) || pe.Index != 2 || !errors.Is(err, ErrDotDot) {
		t.Fatalf("ValidateList(…, \"../c\") = %v, want a *PatternError at index 2 wrapping ErrDotDot", err)
	}
	if got, want := err.Error(), "paths[2] must not have a .. segment."; got != want {
		t.Errorf("error text = %q, want %q", got, want)
	}
	if _, err := CompileList([]string{"a", "/b"}); !errors.Is(err, ErrLeadingSlash) {
		t.Errorf("CompileList(…, \"/b\") = %v, want ErrLeadingSlash", err)
	}
}

func TestCompiled(t *testing.T) {
	ps, err := CompileList([]string{"internal/core/**", "docs/api.md"})
	if err != nil {
		t.Fatalf("CompileList: %v", err)
	}
	qs, err := CompileList([]string{"cmd/**", "docs/*.md"})
	if err != nil {
		t.Fatalf("CompileList: %v", err)
	}
	rs, err := CompileList([]string{"cmd/**", "web/**"})
	if err != nil {
		t.Fatalf("CompileList: %v", err)
	}
	if !ListsOverlap(ps, qs) {
		t.Errorf("ListsOverlap(%v, %v) = false, want true", ps, qs)
	}
	if ListsOverlap(ps, rs) {
		t.Errorf("ListsOverlap(%v, %v) = true, want false", ps, rs)
	}
	if got := ps[0].String(); got != "internal/core/**" {
		t.Errorf("String() = %q, want %q", got, "internal/core/**")
	}
	if _, err := Compile("a/../b"); !errors.Is(err, ErrDotDot) {
		t.Errorf("Compile(\"a/../b\") = %v, want ErrDotDot", err)
	}
}

func TestMatchPath(t *testing.T) {
	cases := []struct {
		p, path string
		want    bool
	}{
		{"internal/**", "internal/core/x.go", true},
		{"internal/**", "internal", true},
		{"*.go", "cmd/main.go", false},
		{"**/*.go", "cmd/main.go", true},
		{"{a,b}/**", "b/c", true},
		{"[", "[", false}, // invalid: matches nothing
	}
	for _, c := range cases {
		if got := MatchPath(c.p, c.path); got != c.want {
			t.Errorf("MatchPath(%q, %q) = %v, want %v", c.p, c.path, got, c.want)
		}
		if p, err := Compile(c.p); err == nil {
			if got := p.Match(c.path); got != c.want {
				t.Errorf("Compile(%q).Match(%q) = %v, want %v", c.p, c.path, got, c.want)
			}
		}
	}
}

// witness returns a string both models accept, when there is one; for the
// shapes where the model is exact, doublestar matches it with both.
func witness(a, b string) (string, bool) {
	return intersect(build(a), build(b), true)
}

// TestPrefixesBoundMatches: every path a pattern matches begins with one
// of its Prefixes, and patterns whose prefixes do not meet never overlap.
func TestPrefixesBoundMatches(t *testing.T) {
	for _, tc := range []struct {
		pattern string
		paths   []string
	}{
		{"internal/**", []string{"internal", "internal/a/b.go"}},
		{"{a,b}/**", []string{"a/x", "b"}},
		{"*.go", []string{"main.go"}},
		{"cmd/main.go", []string{"cmd/main.go"}},
		{"docs/{api,spec}.md", []string{"docs/api.md", "docs/spec.md"}},
	} {
		p, err := Compile(tc.pattern)
		if err != nil {
			t.Fatal(err)
		}
		for _, path := range tc.paths {
			if !p.Match(path) {
				t.Fatalf("%s does not match %s", tc.pattern, path)
			}
			ok := false
			for _, pre := range p.Prefixes() {
				if strings.HasPrefix(path, pre) {
					ok = true
				}
			}
			if !ok {
				t.Errorf("%s matches %s, which begins with none of its prefixes %q", tc.pattern, path, p.Prefixes())
			}
		}
	}
}
