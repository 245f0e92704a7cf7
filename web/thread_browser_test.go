package web_test

import (
	"net/http"
	"strings"
	"testing"

	"github.com/chromedp/chromedp"
)

// TestPageShowsThreadsAndAcks: a reply names what it answers and its
// thread, which opens in the thread panel in sending order; a letter that
// asks for an ack shows that, then the outcome once given, live; an
// archive shows in the member's archive count and leaves its inbox, live,
// and its letters stay in their thread.
func TestPageShowsThreadsAndAcks(t *testing.T) {
	s := newAPIServer(t)
	tok := s.createTeam("threads", "reader")
	ctx := newBrowser(t, 1280, 900)
	openPage(t, ctx, s)
	do(t, ctx, "see the team", chromedp.WaitVisible(css(`[data-member="reader"][data-status="idle"]`)))

	s.call("POST", "/teams/threads/messages", tok["lead"], map[string]any{"to": "reader", "body": "please build it", "ack_required": true}, http.StatusCreated)
	do(t, ctx, "see an ack wanted",
		chromedp.WaitVisible(css(`[data-letter-id="reader-1"] [data-ack="wanted"]`)))
	s.call("POST", "/teams/threads/messages", tok["reader"], map[string]any{"to": "lead", "body": "built", "in_reply_to": "reader-1"}, http.StatusCreated)
	do(t, ctx, "see the reply's thread",
		chromedp.WaitVisible(css(`[data-letter-id="lead-1"] [data-thread="reader-1"]`)))
	if got := textOf(t, ctx, `[data-letter-id="lead-1"] .letter-thread`); !strings.Contains(got, "re reader-1") || !strings.Contains(got, "thread reader-1") {
		t.Errorf("lead-1's thread link = %q, want it to name reader-1 as answered and as the thread", got)
	}
	s.call("POST", "/teams/threads/members/reader/inbox/reader-1/ack", tok["reader"], map[string]any{"outcome": "done", "note": "green"}, http.StatusOK)
	do(t, ctx, "see the ack's outcome",
		chromedp.WaitVisible(css(`[data-letter-id="reader-1"] [data-ack="done"]`)))
	if got := textOf(t, ctx, `[data-letter-id="reader-1"] [data-ack]`); got != "ack: done (green)" {
		t.Errorf("reader-1's ack = %q, want %q", got, "ack: done (green)")
	}
	clickOf(t, ctx, "open the thread", `[data-letter-id="lead-1"] .letter-thread`)
	do(t, ctx, "see the thread",
		chromedp.WaitVisible(css(`#thread[data-thread="reader-1"] [data-letter-id="lead-1"]`)))
	got := eval[[]string](t, ctx, `[...document.querySelectorAll('#thread-letters [data-letter-id]')].map((e) => e.dataset.letterId)`)
	if strings.Join(got, ",") != "reader-1,lead-1" {
		t.Errorf("thread panel = %v, want reader-1, lead-1", got)
	}
	do(t, ctx, "close the thread",
		chromedp.Click(css(`#thread-close`)),
		chromedp.WaitNotVisible(css(`#thread`)))

	if got := textOf(t, ctx, `[data-member="reader"] .archived`); got != "0" {
		t.Errorf("reader's archive count before any archive = %q, want 0", got)
	}
	s.call("POST", "/teams/threads/messages", tok["lead"], map[string]any{"to": "reader", "body": "and deploy it"}, http.StatusCreated)
	s.call("POST", "/teams/threads/members/reader/inbox/read", tok["reader"], map[string]any{"through": "reader-1"}, http.StatusOK)
	s.call("POST", "/teams/threads/members/reader/inbox/archive", tok["reader"], map[string]any{"through": "reader-1"}, http.StatusOK)
	do(t, ctx, "see reader's archive count, and reader-1 gone from its inbox",
		chromedp.WaitVisible(css(`[data-member="reader"] [data-archived="1"]`)),
		chromedp.WaitNotPresent(css(`[data-member="reader"] [data-letter-id="reader-1"]`)),
		chromedp.WaitVisible(css(`[data-member="reader"] [data-letter-id="reader-2"]`)))
	if got := textOf(t, ctx, `[data-member="reader"] [data-unread]`); !strings.Contains(got, "1 unread") {
		t.Errorf("reader's inbox count = %q, want reader-2 alone unread", got)
	}
	clickOf(t, ctx, "open the thread of an archived letter", `[data-letter-id="lead-1"] .letter-thread`)
	do(t, ctx, "see the archived letter's thread",
		chromedp.WaitVisible(css(`#thread[data-thread="reader-1"] [data-letter-id="reader-1"]`)))
	do(t, ctx, "close the thread again",
		chromedp.Click(css(`#thread-close`)),
		chromedp.WaitNotVisible(css(`#thread`)))

	// An archive that empties the inbox: the next letter (reader-3, its
	// number after the archived ones) shows from its event alone, with
	// every refetch of the page held from here on.
	s.call("POST", "/teams/threads/members/reader/inbox/read", tok["reader"], map[string]any{"through": "reader-2"}, http.StatusOK)
	s.call("POST", "/teams/threads/members/reader/inbox/archive", tok["reader"], map[string]any{"through": "reader-2"}, http.StatusOK)
	do(t, ctx, "see reader's inbox emptied",
		chromedp.WaitVisible(css(`[data-member="reader"] [data-archived="2"]`)),
		chromedp.WaitNotPresent(css(`[data-member="reader"] [data-letter-id="reader-2"]`)))
	if !eval[bool](t, ctx, `(() => { const f = window.fetch; window.fetch = (u, o) => String(u).includes('/events') ? f(u, o) : new Promise(() => {}); return true; })()`) {
		t.Fatal("could not hold the page's refetches")
	}
	s.call("POST", "/teams/threads/messages", tok["lead"], map[string]any{"to": "reader", "body": "and ship it"}, http.StatusCreated)
	do(t, ctx, "see the letter after the archive, from its event",
		chromedp.WaitVisible(css(`[data-member="reader"] [data-letter-id="reader-3"]`)))
}
