package web_test

import (
	"net/http"
	"strings"
	"testing"

	"github.com/chromedp/chromedp"
)

// TestPageShowsReadCursor: a member's card counts its unread letters and
// marks the read ones, following letters and cursor moves live.
func TestPageShowsReadCursor(t *testing.T) {
	s := newAPIServer(t)
	tok := s.createTeam("cursor", "reader")
	ctx := newBrowser(t, 1280, 900)
	openPage(t, ctx, s)
	do(t, ctx, "see the team",
		chromedp.WaitVisible(css(`[data-member="reader"][data-status="idle"] [data-unread="0"]`)))
	for _, body := range []string{"one", "two"} {
		s.call("POST", "/teams/cursor/messages", tok["lead"], map[string]any{"to": "reader", "body": body}, http.StatusCreated)
	}
	do(t, ctx, "see two unread letters",
		chromedp.WaitVisible(css(`[data-member="reader"] [data-unread="2"]`)),
		chromedp.WaitVisible(css(`[data-member="reader"] [data-letter-id="reader-2"][data-read="false"]`)))
	if got := textOf(t, ctx, `[data-member="reader"] [data-unread]`); !strings.Contains(got, "2 unread") {
		t.Errorf("reader's inbox stat = %q, want it to say 2 unread", got)
	}
	s.call("POST", "/teams/cursor/members/reader/inbox/read", tok["reader"], map[string]any{"through": "reader-1"}, http.StatusOK)
	do(t, ctx, "see reader-1 read",
		chromedp.WaitVisible(css(`[data-member="reader"] [data-unread="1"]`)),
		chromedp.WaitVisible(css(`[data-member="reader"] [data-letter-id="reader-1"][data-read="true"]`)),
		chromedp.WaitVisible(css(`[data-member="reader"] [data-letter-id="reader-2"][data-read="false"]`)))
	s.call("POST", "/teams/cursor/messages", tok["lead"], map[string]any{"to": "reader", "body": "three"}, http.StatusCreated)
	do(t, ctx, "see a new letter counted unread",
		chromedp.WaitVisible(css(`[data-member="reader"] [data-unread="2"]`)),
		chromedp.WaitVisible(css(`[data-member="reader"] [data-letter-id="reader-3"][data-read="false"]`)))
}
