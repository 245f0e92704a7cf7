package core_test

import (
	"slices"
	"strings"
	"testing"

	"mailroom/internal/core"
)

func TestParseSearch(t *testing.T) {
	for _, tc := range []struct {
		q       string
		want    []core.SearchTerm
		errPart string
	}{
		{q: "Quarterly REPORT", want: []core.SearchTerm{{Words: []string{"quarterly"}}, {Words: []string{"report"}}}},
		{q: `late "the Quarterly report" now`, want: []core.SearchTerm{{Words: []string{"late"}}, {Words: []string{"the", "quarterly", "report"}, Phrase: true}, {Words: []string{"now"}}}},
		{q: "foo-bar", want: []core.SearchTerm{{Words: []string{"foo", "bar"}}}},
		{q: `größe "" -- x`, want: []core.SearchTerm{{Words: []string{"größe"}}, {Words: []string{"x"}}}},
		{q: "", errPart: "at least one word"},
		{q: " \t ", errPart: "at least one word"},
		{q: "-- !! ?", errPart: "no word"},
		{q: `"open phrase`, errPart: "unclosed quote"},
		{q: strings.Repeat("a", 501), errPart: "at most 500"},
		{q: strings.Repeat("a ", 17), errPart: "at most 16"},
	} {
		got, err := core.ParseSearch(tc.q)
		if tc.errPart != "" {
			if core.ErrorCode(err) != core.CodeValidation || !strings.Contains(err.Error(), tc.errPart) {
				t.Errorf("ParseSearch(%.30q) err = %v, want validation_failed saying %q", tc.q, err, tc.errPart)
			}
			continue
		}
		if err != nil || !slices.EqualFunc(got, tc.want, func(a, b core.SearchTerm) bool {
			return a.Phrase == b.Phrase && slices.Equal(a.Words, b.Words)
		}) {
			t.Errorf("ParseSearch(%q) = %+v, %v; want %+v", tc.q, got, err, tc.want)
		}
	}
}

func TestMatchLetter(t *testing.T) {
	terms := func(q string) []core.SearchTerm {
		ts, err := core.ParseSearch(q)
		if err != nil {
			t.Fatal(err)
		}
		return ts
	}
	for _, tc := range []struct {
		q, body string
		want    int
	}{
		{"report", "The REPORT, and the report.", 2},
		{"report late", "the report is late", 2},
		{"report missing", "the report is late", 0},
		{`"report is"`, "the report is late", 1},
		{`"is report"`, "the report is late", 0},
		{"rep", "the report", 0}, // whole words only
		{"foo-bar", "a foo bar b", 1},
		{"maß", "Maß halten", 1},
		{"KELVIN", "273 \u212Aelvin", 1}, // the Kelvin sign lowers to k
		{"kelvin", "273 Kelvin, KELVIN", 2},
		{"kelvin", "273 kelvi", 0},
		{"istanbul", "İSTANBUL", 1}, // İ lowers to i
	} {
		if got := core.MatchLetter(terms(tc.q), tc.body); got != tc.want {
			t.Errorf("MatchLetter(%q, %q) = %d, want %d", tc.q, tc.body, got, tc.want)
		}
	}
}

func TestSnippet(t *testing.T) {
	terms, _ := core.ParseSearch("needle")
	if got := core.Snippet(terms, "short needle here"); got != "short needle here" {
		t.Errorf("short body: got %q", got)
	}
	long := strings.Repeat("hay ", 100) + "the needle " + strings.Repeat("straw ", 100)
	got := core.Snippet(terms, long)
	if !strings.HasPrefix(got, "…") || !strings.HasSuffix(got, "…") || !strings.Contains(got, "needle") {
		t.Errorf("long body: got %q, want … around the needle", got)
	}
	if n := len([]rune(got)); n > 170 {
		t.Errorf("snippet of %d characters, want at most about 160", n)
	}
	if strings.Contains(got, "ha…") || strings.Contains(got, "…ay") {
		t.Errorf("snippet %q cuts a word", got)
	}
}

// TestSearchScan: a store without an index is searched by core's scan,
// which keeps the caller's visibility.
func TestSearchScan(t *testing.T) {
	terms, _ := core.ParseSearch("report")
	q := core.SearchQuery{Team: "t", Terms: terms, Viewer: "alice", Limit: 20}
	inbox := []core.Message{
		{ID: "bob-1", Sender: "alice", Recipient: "bob", Body: "report"},
		{ID: "bob-2", Sender: "lead", Recipient: "bob", Body: "report report"},
		{ID: "bob-3", Sender: "alice", Recipient: "bob", Body: "report, report"},
	}
	var ids []string
	for _, m := range core.ScanLetters(&q, inbox) {
		ids = append(ids, m.ID)
	}
	if !slices.Equal(ids, []string{"bob-3", "bob-1"}) {
		t.Errorf("scan = %v, want [bob-3 bob-1]: alice's letters only, more matches first", ids)
	}
}
