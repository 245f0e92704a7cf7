package httpapi_test

import (
	"net/http"
	"net/url"
	"slices"
	"strings"
	"testing"

	"mailroom/internal/httpapi"
)

func (e *env) search(tm team, token string, query url.Values) result {
	e.t.Helper()
	return e.get("/api/v1/teams/"+tm.name+"/search?"+query.Encode(), token)
}

func resultIDs(rs []httpapi.SearchResult) []string {
	var ids []string
	for _, r := range rs {
		ids = append(ids, r.Letter.ID)
	}
	slices.Sort(ids)
	return ids
}

// TestSearchMail covers GET /teams/{team}/search on this run's backend:
// a letter is found right after its 201, a member finds only its own
// letters, the admin all, from/to/limit narrow, and bad queries are
// validation_failed with a detail saying why.
func TestSearchMail(t *testing.T) {
	e := newEnv(t)
	tm := e.newTeam("finders", nil)
	other := e.newTeam("elsewhere", nil)
	want(t, e.send(tm, "lead", "reader", "Please read the Quarterly report before Friday."), http.StatusCreated, "")
	want(t, e.send(tm, "reader", "reviewer", "The quarterly numbers look off; check the report twice."), http.StatusCreated, "")
	want(t, e.send(other, "lead", "reader", "quarterly report of another team"), http.StatusCreated, "")
	r := e.send(tm, "reviewer", "lead", "zeppelin sighted over the quarterly report")
	want(t, r, http.StatusCreated, "")

	// Right after the 201.
	r = e.search(tm, tm.tokens["lead"], url.Values{"q": {"ZEPPELIN"}})
	want(t, r, http.StatusOK, "")
	got := decode[httpapi.SearchResults](t, r)
	if len(got.Results) != 1 || got.Results[0].Letter.ID != "lead-1" || !strings.Contains(got.Results[0].Snippet, "zeppelin") {
		t.Fatalf("zeppelin right after its send = %+v, want lead-1 with a snippet holding the word", got)
	}
	for _, tc := range []struct {
		name, token string
		query       url.Values
		want        []string
	}{
		{"AdminAll", adminToken, url.Values{"q": {"quarterly report"}}, []string{"lead-1", "reader-1", "reviewer-1"}},
		{"Phrase", adminToken, url.Values{"q": {`"quarterly report"`}}, []string{"lead-1", "reader-1"}},
		{"MemberOwnOnly", tm.tokens["reader"], url.Values{"q": {"quarterly"}}, []string{"reader-1", "reviewer-1"}},
		{"From", adminToken, url.Values{"q": {"quarterly"}, "from": {"lead"}}, []string{"reader-1"}},
		{"To", adminToken, url.Values{"q": {"quarterly"}, "to": {"reviewer"}}, []string{"reviewer-1"}},
		{"NoMatch", adminToken, url.Values{"q": {"quarterly missing"}}, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := e.search(tm, tc.token, tc.query)
			want(t, r, http.StatusOK, "")
			if ids := resultIDs(decode[httpapi.SearchResults](t, r).Results); !slices.Equal(ids, tc.want) {
				t.Fatalf("results = %v, want %v", ids, tc.want)
			}
		})
	}
	r = e.search(tm, adminToken, url.Values{"q": {"quarterly"}, "limit": {"2"}})
	want(t, r, http.StatusOK, "")
	if n := len(decode[httpapi.SearchResults](t, r).Results); n != 2 {
		t.Fatalf("limit 2: %d results", n)
	}
	for _, tc := range []struct {
		name, token string
		query       url.Values
		status      int
		code        string
		detail      string
	}{
		{"ErrEmpty", adminToken, url.Values{"q": {"   "}}, 400, "validation_failed", "at least one word"},
		{"ErrNoWord", adminToken, url.Values{"q": {"-- !!"}}, 400, "validation_failed", "no word"},
		{"ErrLong", adminToken, url.Values{"q": {strings.Repeat("a ", 260)}}, 400, "validation_failed", "at most 500"},
		{"ErrUnclosed", adminToken, url.Values{"q": {`"quarterly report`}}, 400, "validation_failed", "unclosed quote"},
		{"ErrLimit", adminToken, url.Values{"q": {"x"}, "limit": {"101"}}, 400, "validation_failed", ""},
		{"ErrOtherTeam", other.tokens["lead"], url.Values{"q": {"x"}}, 403, "forbidden", ""},
		{"ErrNoToken", "", url.Values{"q": {"x"}}, 401, "unauthorized", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := e.search(tm, tc.token, tc.query)
			want(t, r, tc.status, tc.code)
			if tc.detail != "" && !strings.Contains(string(r.body), tc.detail) {
				t.Fatalf("detail of %s = %s, want it to say %q", tc.name, r.body, tc.detail)
			}
		})
	}
	r = e.get("/api/v1/teams/nosuch/search?q=x", adminToken)
	want(t, r, http.StatusNotFound, "not_found")
}
