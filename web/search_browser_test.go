package web_test

import (
	"net/http"
	"strings"
	"testing"

	"github.com/chromedp/chromedp"
)

// TestPageSearchesLetters: the search box asks the server for the team's
// letters that match and lists them best first, each with sender →
// recipient, its snippet (text, never markup) and a link that opens its
// thread; a query the server refuses says why; another team clears it.
func TestPageSearchesLetters(t *testing.T) {
	s := newAPIServer(t)
	tok := s.createTeam("finds", "reader")
	s.createTeam("other", "reader")
	s.call("POST", "/teams/finds/messages", tok["lead"], map[string]any{"to": "reader", "body": "the quarterly report is due <b>friday</b>"}, http.StatusCreated)
	s.call("POST", "/teams/finds/messages", tok["reader"], map[string]any{"to": "lead", "body": "the report is attached", "in_reply_to": "reader-1"}, http.StatusCreated)
	s.call("POST", "/teams/finds/messages", tok["lead"], map[string]any{"to": "reader", "body": "nothing about it"}, http.StatusCreated)
	ctx := newBrowser(t, 1280, 900)
	openPage(t, ctx, s)
	do(t, ctx, "show team finds",
		chromedp.SetValue(css(`#team-select`), "finds"),
		chromedp.Evaluate[chromedp.Void](`document.getElementById('team-select').dispatchEvent(new Event('change'))`),
		chromedp.WaitVisible(css(`[data-letter-id="reader-2"]`)))

	do(t, ctx, "search for report",
		chromedp.SetValue(css(`#search-input`), "REPORT"),
		chromedp.Click(css(`#search-button`)),
		chromedp.WaitVisible(css(`#search-summary[data-count="2"]`)))
	got := eval[[]string](t, ctx, `[...document.querySelectorAll('#search-results [data-letter-id]')].map((e) => e.dataset.letterId).sort()`)
	if strings.Join(got, ",") != "lead-1,reader-1" {
		t.Errorf("results = %v, want lead-1 and reader-1", got)
	}
	first := textOf(t, ctx, `#search-results [data-letter-id="reader-1"]`)
	for _, want := range []string{"lead → reader", "the quarterly report is due <b>friday</b>", "thread reader-1"} {
		if !strings.Contains(first, want) {
			t.Errorf("reader-1's result shows %q, want it to show %q", first, want)
		}
	}
	if n := eval[int](t, ctx, `document.querySelectorAll('#search-results b').length`); n != 0 {
		t.Errorf("a snippet's <b> became %d elements, want it shown as text", n)
	}
	if got := textOf(t, ctx, `#search-results [data-letter-id="lead-1"] .search-route`); got != "reader → lead" {
		t.Errorf("lead-1's route = %q, want %q", got, "reader → lead")
	}

	do(t, ctx, "open a result's thread",
		chromedp.Click(css(`#search-results [data-letter-id="lead-1"] .letter-thread`)),
		chromedp.WaitVisible(css(`#thread[data-thread="reader-1"] [data-letter-id="lead-1"]`)))

	do(t, ctx, "search for a phrase no letter holds",
		chromedp.SetValue(css(`#search-input`), `"report is due friday"`),
		chromedp.Click(css(`#search-button`)),
		chromedp.WaitVisible(css(`#search-summary[data-count="0"]`)))
	if eval[bool](t, ctx, `!document.getElementById('search-results').hidden`) {
		t.Error("the results list is shown for no result")
	}
	do(t, ctx, "search for punctuation only",
		chromedp.SetValue(css(`#search-input`), `?!`),
		chromedp.Click(css(`#search-button`)),
		chromedp.WaitVisible(css(`#search-summary[data-state="refused"]`)))
	if got := textOf(t, ctx, `#search-summary`); !strings.HasPrefix(got, "Not searched: ") {
		t.Errorf("refused search says %q, want the server's reason after \"Not searched: \"", got)
	}

	do(t, ctx, "search again, then switch teams",
		chromedp.SetValue(css(`#search-input`), "report"),
		chromedp.Click(css(`#search-button`)),
		chromedp.WaitVisible(css(`#search-summary[data-count="2"]`)),
		chromedp.SetValue(css(`#team-select`), "other"),
		chromedp.Evaluate[chromedp.Void](`document.getElementById('team-select').dispatchEvent(new Event('change'))`),
		chromedp.WaitNotVisible(css(`#search-summary`)))
	if n := eval[int](t, ctx, `document.querySelectorAll('#search-results li').length`); n != 0 {
		t.Errorf("%d results of team finds stay shown for team other, want none", n)
	}
}
