package core

import (
	"context"
	"encoding/json"
	"slices"
	"strings"
	"unicode"
	"unicode/utf8"
)

// Search over a team's letters (docs/api.md, "Search"). The rule is core's:
// what a query means (ParseSearch), who sees which letter, the limit and the
// snippet. A store answers a typed SearchQuery (Searcher) with its own
// full-text index; a store without one is searched here, by a scan of every
// inbox, with the same meaning.

// Search bounds and default.
const (
	// MaxSearchQuery bounds q, in characters.
	MaxSearchQuery = 500
	// MaxSearchTerms bounds the words and phrases of one query.
	MaxSearchTerms = 16
	// DefaultSearchLimit is the results of a search that names no limit.
	DefaultSearchLimit = 20
	// MaxSearchLimit is the most results one search returns.
	MaxSearchLimit = 100
	// snippetRunes bounds a result's snippet, ellipses excluded.
	snippetRunes = 160
)

// SearchTerm is one word or "quoted phrase" of a query: its words, lower
// case, which a letter's body must hold one after the other.
type SearchTerm struct {
	// Words are the term's words: runs of letters and digits, lower
	// case. A word written with inner punctuation ("foo-bar") is a
	// term of several words, like a phrase.
	Words []string
	// Phrase is true for a "quoted phrase".
	Phrase bool
}

// Text is the term's words joined by one space: what a store's phrase
// search is given.
func (t SearchTerm) Text() string { return strings.Join(t.Words, " ") }

// SearchQuery is a search as a store answers it (Searcher).
type SearchQuery struct {
	Team string
	// Terms all must match a letter's body (SearchTerm).
	Terms []SearchTerm
	// Viewer, when set, limits the results to letters Viewer sent or
	// received; "" is every letter of the team (the admin).
	Viewer string
	// From and To, when set, are the only sender and recipient wanted.
	From, To string
	// Limit is the most letters wanted, 1..MaxSearchLimit.
	Limit int
}

// Visible reports whether m is within q's viewer, sender and recipient.
func (q *SearchQuery) Visible(m Message) bool {
	return (q.Viewer == "" || m.Sender == q.Viewer || m.Recipient == q.Viewer) &&
		(q.From == "" || m.Sender == q.From) && (q.To == "" || m.Recipient == q.To)
}

// Searcher is a store with its own full-text index of letters. SearchLetters
// returns at most q.Limit letters of team q.Team that q.Visible admits and
// whose body matches every term of q (MatchLetter: a term's words appear
// one after the other, case-insensitively; a store's own text analysis may
// differ from MatchLetter's only on tokens other than plain runs of letters
// and digits), best first by the store's relevance. Every letter whose send
// was acknowledged is found. A team that does not exist has no letters.
type Searcher interface {
	SearchLetters(ctx context.Context, q SearchQuery) ([]Message, error)
}

// SearchInput is one search as a door received it.
type SearchInput struct {
	Team string
	Q    string
	From string
	To   string
	// Limit is 0 for the default.
	Limit int
}

// SearchResult is one letter found, with the part of its body around the
// first match.
type SearchResult struct {
	Letter  Message `json:"letter"`
	Snippet string  `json:"snippet"`
}

// ParseSearch reads q: words separated by white space and "quoted
// phrases", all of which must match. An empty or over-long q, an unclosed
// quote, more than MaxSearchTerms terms or a q with no word at all is
// validation_failed, saying which.
func ParseSearch(q string) ([]SearchTerm, error) {
	if Trim(q) == "" {
		return nil, Errorf(CodeValidation, "q must hold at least one word to search for.")
	}
	if !utf8.ValidString(q) {
		return nil, Errorf(CodeValidation, "q must be valid UTF-8.")
	}
	if n := Length(q); n > MaxSearchQuery {
		return nil, Errorf(CodeValidation, "q has %d characters; at most %d are allowed.", n, MaxSearchQuery)
	}
	var terms []SearchTerm
	add := func(text string, phrase bool) {
		if w := SearchWords(text); len(w) > 0 {
			terms = append(terms, SearchTerm{Words: w, Phrase: phrase})
		}
	}
	rest := q
	for rest != "" {
		i := strings.IndexByte(rest, '"')
		if i < 0 {
			for _, f := range strings.Fields(rest) {
				add(f, false)
			}
			break
		}
		for _, f := range strings.Fields(rest[:i]) {
			add(f, false)
		}
		j := strings.IndexByte(rest[i+1:], '"')
		if j < 0 {
			return nil, Errorf(CodeValidation, "q has an unclosed quote: a phrase is written between two double quotes.")
		}
		add(rest[i+1:i+1+j], true)
		rest = rest[i+2+j:]
	}
	if len(terms) == 0 {
		return nil, Errorf(CodeValidation, "q holds no word to search for: a word is made of letters or digits.")
	}
	if len(terms) > MaxSearchTerms {
		return nil, Errorf(CodeValidation, "q has %d words and phrases; at most %d are allowed.", len(terms), MaxSearchTerms)
	}
	return terms, nil
}

// isWordRune reports whether r belongs to a word: a letter, a digit or a
// combining mark.
func isWordRune(r rune) bool {
	return unicode.IsLetter(r) || unicode.IsDigit(r) || unicode.IsMark(r)
}

// SearchWords splits text into its words, lower case: the maximal runs of
// letters, digits and marks.
func SearchWords(text string) []string {
	var out []string
	for f := range strings.FieldsFuncSeq(text, func(r rune) bool { return !isWordRune(r) }) {
		out = append(out, strings.ToLower(f))
	}
	return out
}

// WordSpan is one word of a body, lower case, and where it lies in the
// body's bytes.
type WordSpan struct {
	Word       string
	Start, End int
}

// WordSpans is the words of body as SearchWords splits them, with their
// places: what an index of bodies must take as the words of a letter, so
// that a query's words (SearchWords) find exactly what a scan finds.
func WordSpans(body string) []WordSpan {
	var out []WordSpan
	start := -1
	for i, r := range body {
		if isWordRune(r) {
			if start < 0 {
				start = i
			}
			continue
		}
		if start >= 0 {
			out = append(out, WordSpan{strings.ToLower(body[start:i]), start, i})
			start = -1
		}
	}
	if start >= 0 {
		out = append(out, WordSpan{strings.ToLower(body[start:]), start, len(body)})
	}
	return out
}

// termAt reports whether t's words start at spans[i].
func termAt(spans []WordSpan, i int, t SearchTerm) bool {
	if i+len(t.Words) > len(spans) {
		return false
	}
	for k, w := range t.Words {
		if spans[i+k].Word != w {
			return false
		}
	}
	return true
}

// MatchLetter reports how often the terms occur in body: 0 unless every
// term occurs at least once. It is the meaning of a query and the ranking
// of the search core makes without a store's index (more occurrences
// first).
func MatchLetter(terms []SearchTerm, body string) int {
	if !mayMatch(terms, body) {
		return 0
	}
	spans := WordSpans(body)
	total := 0
	for _, t := range terms {
		n := 0
		for i := range spans {
			if termAt(spans, i, t) {
				n++
			}
		}
		if n == 0 {
			return 0
		}
		total += n
	}
	return total
}

// mayMatch is a quick necessary condition of MatchLetter: where the body
// and a word are ASCII, the word occurs in the body's bytes, ignoring
// case. It spares splitting the bodies of most letters a scan (or the
// file store's tail) walks past. Outside ASCII it says nothing (true), as
// runes such as the Kelvin sign lower to ASCII letters.
func mayMatch(terms []SearchTerm, body string) bool {
	for i := 0; i < len(body); i++ {
		if body[i] >= utf8.RuneSelf {
			return true
		}
	}
	for _, t := range terms {
		for _, w := range t.Words {
			if isASCII(w) && !containsFoldASCII(body, w) {
				return false
			}
		}
	}
	return true
}

func isASCII(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] >= utf8.RuneSelf {
			return false
		}
	}
	return true
}

// containsFoldASCII reports whether s holds w, a lower-case ASCII word,
// in any case.
func containsFoldASCII(s, w string) bool {
	for i := 0; i+len(w) <= len(s); i++ {
		if lowerASCII(s[i]) != w[0] {
			continue
		}
		k := 1
		for k < len(w) && lowerASCII(s[i+k]) == w[k] {
			k++
		}
		if k == len(w) {
			return true
		}
	}
	return false
}

func lowerASCII(c byte) byte {
	if 'A' <= c && c <= 'Z' {
		return c + 'a' - 'A'
	}
	return c
}

// Snippet is the part of body around the first occurrence of any term, at
// most about snippetRunes characters cut at white space, with "…" where
// the body goes on; the start of body when no term occurs.
func Snippet(terms []SearchTerm, body string) string {
	spans := WordSpans(body)
	at := -1
	for i := range spans {
		if slices.ContainsFunc(terms, func(t SearchTerm) bool { return termAt(spans, i, t) }) {
			at = spans[i].Start
			break
		}
	}
	if at < 0 {
		at = 0
	}
	// Start about a third of the window before the match, at a word's
	// start.
	start := at
	for back := 0; start > 0 && back < snippetRunes/3; back++ {
		_, size := utf8.DecodeLastRuneInString(body[:start])
		start -= size
	}
	if start > 0 {
		if k := strings.IndexFunc(body[start:at], unicode.IsSpace); k >= 0 {
			start += k
		}
	}
	end := start
	for n := 0; end < len(body) && n < snippetRunes; n++ {
		_, size := utf8.DecodeRuneInString(body[end:])
		end += size
	}
	if end < len(body) {
		if k := strings.LastIndexFunc(body[at:end], unicode.IsSpace); k > 0 {
			end = at + k
		}
	}
	out := strings.TrimSpace(strings.Join(strings.Fields(body[start:end]), " "))
	if start > 0 {
		out = "…" + out
	}
	if end < len(body) {
		out += "…"
	}
	return out
}

// DecodeLetter reads one letter from its JSON (an inbox line or a letter
// as a store's index keeps it), whatever fields letters have.
func DecodeLetter(data []byte) (Message, error) {
	var m Message
	err := json.Unmarshal(data, &m)
	return m, err
}

// Search finds the letters of team that match in.Q (ParseSearch), best
// first: for a member, only the letters it sent or received; for the
// admin, all. From, To and Limit (1..MaxSearchLimit, 0: the default)
// narrow it. A store that is a Searcher answers from its index; any other
// is scanned.
func (s *Service) Search(ctx context.Context, in SearchInput) ([]SearchResult, error) {
	if err := CheckReader(ctx, in.Team); err != nil {
		return nil, err
	}
	terms, err := ParseSearch(in.Q)
	if err != nil {
		return nil, err
	}
	if in.Limit == 0 {
		in.Limit = DefaultSearchLimit
	}
	if in.Limit < 1 || in.Limit > MaxSearchLimit {
		return nil, Errorf(CodeValidation, "limit must be between 1 and %d.", MaxSearchLimit)
	}
	for _, name := range []string{in.From, in.To} {
		if name != "" && !ValidName(name) {
			return nil, Errorf(CodeValidation, "from and to must be member names.")
		}
	}
	q := SearchQuery{Team: in.Team, Terms: terms, From: in.From, To: in.To, Limit: in.Limit}
	if p, ok := PrincipalFrom(ctx); ok && !p.Admin {
		q.Viewer = p.Member
	}
	var found []Message
	searcher, indexed := s.store.(Searcher)
	// The view confirms the team and the caller's token; a store with an
	// index is asked after it, so that a search never holds the team.
	err = s.view(ctx, in.Team, false, func(u *unit) error {
		if indexed {
			return nil
		}
		found, err = scanLetters(u, &q)
		return err
	})
	if err != nil {
		return nil, err
	}
	if indexed {
		if found, err = searcher.SearchLetters(ctx, q); err != nil {
			return nil, asStoreError(err)
		}
		// The store's answer is held to core's rule all the same.
		found = slices.DeleteFunc(found, func(m Message) bool { return !q.Visible(m) })
		found = found[:min(len(found), q.Limit)]
	}
	out := make([]SearchResult, 0, len(found))
	for _, m := range found {
		out = append(out, SearchResult{Letter: m, Snippet: Snippet(terms, m.Body)})
	}
	return out, nil
}

// scanLetters searches every inbox and archive of u's team: the search
// of a store without an index.
func scanLetters(u *unit, q *SearchQuery) ([]Message, error) {
	inboxes := make([][]Message, 0, len(u.st.Members))
	for _, member := range u.st.Members {
		archived, err := u.tx.LoadArchive(member.Name)
		if err != nil {
			return nil, asStoreError(err)
		}
		items, err := u.tx.LoadInbox(member.Name)
		if err != nil {
			return nil, asStoreError(err)
		}
		inboxes = append(inboxes, archived, items)
	}
	return ScanLetters(q, inboxes...), nil
}

// ScanLetters is q answered from the letters of a team's inboxes, one
// letter at a time: the letters q.Visible admits and every term matches,
// ranked by MatchLetter (more occurrences first), ties in the order given,
// at most q.Limit. It is the search of a store without an index, and what
// an index's answer must agree with.
func ScanLetters(q *SearchQuery, inboxes ...[]Message) []Message {
	type hit struct {
		m     Message
		score int
	}
	var hits []hit
	for _, items := range inboxes {
		for _, m := range items {
			if !q.Visible(m) {
				continue
			}
			if n := MatchLetter(q.Terms, m.Body); n > 0 {
				hits = append(hits, hit{m, n})
			}
		}
	}
	slices.SortStableFunc(hits, func(a, b hit) int { return b.score - a.score })
	out := make([]Message, 0, min(len(hits), q.Limit))
	for _, h := range hits[:min(len(hits), q.Limit)] {
		out = append(out, h.m)
	}
	return out
}
