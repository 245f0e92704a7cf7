package storetest

import (
	"slices"
	"strings"
	"testing"

	"mailroom/internal/core"
)

// RunSearch checks a store's core.Searcher (docs/api.md, "Search"): every
// term must match, case-insensitively, phrases in order; only the viewer's
// letters; from, to and the limit; a letter found as soon as its unit of
// work committed; another team's letters never. A store that is no
// Searcher is searched by core's scan and skips it.
func RunSearch(t *testing.T, newStore func(t *testing.T) core.Store) {
	t.Run("Search", func(t *testing.T) { testSearch(t, newStore(t)) })
	t.Run("SearchFindsArchived", func(t *testing.T) { testSearchArchived(t, newStore(t)) })
}

// testSearchArchived: a letter its recipient archived is still found, by
// the recipient, its sender and the admin, beside one still in the inbox.
func testSearchArchived(t *testing.T, s core.Store) {
	create(t, s, Team("s", "alice"))
	svc := service(t, s)
	mustSend(t, svc, "s", core.LeadName, "alice", "the zebra crossing is closed")
	mustSend(t, svc, "s", core.LeadName, "alice", "another zebra, still unread")
	markRead(t, svc, "s", "alice", "alice-1")
	mustArchive(t, svc, "s", "alice", "alice-1", 1, 1)
	for _, viewer := range []string{"alice", core.LeadName, ""} {
		ctx := core.AsAdmin(t.Context())
		if viewer != "" {
			ctx = core.AsMember(t.Context(), "s", viewer)
		}
		res, err := svc.Search(ctx, core.SearchInput{Team: "s", Q: "zebra"})
		if err != nil {
			t.Fatalf("search as %q: %v", viewer, err)
		}
		var ids []string
		for _, r := range res {
			ids = append(ids, r.Letter.ID)
		}
		slices.Sort(ids)
		if got := strings.Join(ids, " "); got != "alice-1 alice-2" {
			t.Errorf("search as %q found %q, want the archived alice-1 and alice-2", viewer, got)
		}
	}
}

func testSearch(t *testing.T, s core.Store) {
	srch, ok := s.(core.Searcher)
	if !ok {
		t.Skip("the store has no search index")
	}
	ctx := t.Context()
	create(t, s, Team("s", "alice", "bob"))
	create(t, s, Team("other", "alice"))
	letters := []struct{ from, to, body string }{
		{"lead", "alice", "The Quarterly REPORT is late"},         // alice-1
		{"alice", "bob", "report the budget, then the quarterly"}, // bob-1
		{"bob", "lead", "nothing to see here"},                    // lead-1
		{"lead", "bob", "quarterly report: report report"},        // bob-2
		{"bob", "alice", "Größe und Maß: ünïcode wörds"},          // alice-2
	}
	for _, l := range letters {
		if _, err := send(ctx, s, "s", l.from, l.to, l.body); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := send(ctx, s, "other", "lead", "alice", "quarterly report elsewhere"); err != nil {
		t.Fatal(err)
	}
	search := func(q string, viewer, from, to string, limit int) []string {
		t.Helper()
		terms, err := core.ParseSearch(q)
		if err != nil {
			t.Fatal(err)
		}
		got, err := srch.SearchLetters(ctx, core.SearchQuery{Team: "s", Terms: terms, Viewer: viewer, From: from, To: to, Limit: limit})
		if err != nil {
			t.Fatalf("search %q: %v", q, err)
		}
		ids := make([]string, 0, len(got))
		for _, m := range got {
			ids = append(ids, m.ID)
		}
		return ids
	}
	sorted := func(ids []string) []string { return slices.Sorted(slices.Values(ids)) }
	check := func(name string, got, want []string) {
		t.Helper()
		if !slices.Equal(sorted(got), sorted(want)) {
			t.Errorf("%s: got %v, want %v (any order)", name, got, want)
		}
	}
	check("all words", search("quarterly REPORT", "", "", "", 20), []string{"alice-1", "bob-1", "bob-2"})
	check("phrase", search(`"quarterly report"`, "", "", "", 20), []string{"alice-1", "bob-2"})
	check("phrase and word", search(`"quarterly report" late`, "", "", "", 20), []string{"alice-1"})
	check("no match", search("quarterly missing", "", "", "", 20), nil)
	check("viewer", search("report", "alice", "", "", 20), []string{"alice-1", "bob-1"})
	check("viewer lead", search("report", "lead", "", "", 20), []string{"alice-1", "bob-2"})
	check("from", search("report", "", "lead", "", 20), []string{"alice-1", "bob-2"})
	check("to", search("report", "", "", "bob", 20), []string{"bob-1", "bob-2"})
	check("unicode", search("GRÖSSE maß", "", "", "", 20), nil) // ß is not ss: words as written
	check("unicode words", search("größe ÜNÏCODE", "", "", "", 20), []string{"alice-2"})
	if got := search("report", "", "", "", 2); len(got) != 2 {
		t.Errorf("limit 2: got %v", got)
	}
	if got := search("report", "", "", "", 1); !slices.Equal(got, []string{"bob-2"}) {
		t.Errorf("best first: got %v, want [bob-2] (report three times)", got)
	}
	// A letter is found as soon as its unit of work committed.
	id, err := send(ctx, s, "s", "alice", "lead", "freshly committed zeppelin")
	if err != nil {
		t.Fatal(err)
	}
	check("right after commit", search("zeppelin", "", "", "", 20), []string{id})
	// A team deleted and created again does not find the old letters.
	if err := s.DeleteTeam(ctx, "s"); err != nil {
		t.Fatal(err)
	}
	st := Team("s", "alice", "bob")
	st.Members[0].TokenHash = "s-lead-again"
	create(t, s, st)
	check("team created again", search("zeppelin", "", "", "", 20), nil)
}
