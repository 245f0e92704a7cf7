package mail

import (
	"fmt"
	"path/filepath"
	"slices"
	"testing"

	"mailroom/internal/core"
)

// FuzzSearchIndexQuery: whatever a member types as a query and whatever a
// letter says, the index never fails on the query (every token it is
// asked is quoted and plain) and never misses a letter that core's own
// matcher (core.MatchLetter) finds, in any script.
func FuzzSearchIndexQuery(f *testing.F) {
	for _, seed := range [][2]string{
		{"the build passed", "build"},
		{"Größe und Maß: ünïcode wörds", `"größe und" maß`},
		{"foo-bar baz", "foo-bar"},
		{"AND OR NOT NEAR", `and "or not" near`},
		{`quote " in "the" body`, `"the body"`},
		{"日本語のテキスト 中文", "中文"},
		{"e\u0301cole école", "e\u0301cole"},
		{"xc3a9 é", "é"},
		{"under_score * star ^caret", "under score star caret"},
	} {
		f.Add(seed[0], seed[1])
	}
	db, err := newSearchIndex(filepath.Join(f.TempDir(), searchDir))
	if err != nil {
		f.Fatal(err)
	}
	f.Cleanup(func() { _ = db.Close() })
	n := 0
	f.Fuzz(func(t *testing.T, body, q string) {
		terms, err := core.ParseSearch(q)
		if err != nil {
			return // refused before any store is asked
		}
		n++
		key := fmt.Sprintf("fuzz/%d", n)
		m := core.Message{ID: "bob-1", Sender: "alice", Recipient: "bob", Body: body}
		if _, err := indexLetters(t.Context(), db, []tailLetter{{key: key, msg: m}}); err != nil {
			t.Fatalf("index %q: %v", body, err)
		}
		id, ok, err := teamIndexID(t.Context(), db, key)
		if err != nil || !ok {
			t.Fatalf("team of the letter just indexed: ok=%v, err=%v", ok, err)
		}
		lo, hi := teamRows(id)
		for _, viewer := range []string{"", "bob", "carol"} {
			sq := core.SearchQuery{Team: "fuzz", Terms: terms, Viewer: viewer, Limit: 20}
			hits, err := searchPage(t.Context(), db, matchExpr(&sq), lo, hi, 20, 0)
			if err != nil {
				t.Fatalf("query %q (%s) failed: %v", q, matchExpr(&sq), err)
			}
			want := sq.Visible(m) && core.MatchLetter(terms, body) > 0
			if want && !slices.Contains(hits, m.ID) {
				t.Fatalf("query %q as %q missed letter %q, which core matches (expr %s)", q, viewer, body, matchExpr(&sq))
			}
			if viewer == "carol" && len(hits) > 0 {
				t.Fatalf("query %q as carol found %v: carol neither sent nor received it", q, hits)
			}
		}
	})
}
