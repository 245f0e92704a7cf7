package web_test

import (
	"net/http"
	"strings"
	"testing"

	"github.com/chromedp/chromedp"
)

// TestPageShowsReservationsLive: the page lists the team's live file
// reservations with holder, kind, patterns and expiry, and follows grants
// and releases as they happen, without a reload.
func TestPageShowsReservationsLive(t *testing.T) {
	s := newAPIServer(t)
	tok := s.createTeam("repo", "alice", "bob")
	ctx := newBrowser(t, 1280, 900)
	openPage(t, ctx, s)
	do(t, ctx, "see no reservations",
		chromedp.WaitVisible(css(`[data-member="alice"][data-status="idle"]`)),
		chromedp.WaitVisible(css(`#reservations-empty`)))
	s.call("POST", "/teams/repo/reservations", tok["alice"], map[string]any{"paths": []string{"internal/store/**", "cmd/main.go"}, "reason": "store rework"}, http.StatusCreated)
	s.call("POST", "/teams/repo/reservations", tok["bob"], map[string]any{"paths": []string{"docs/**"}, "exclusive": false}, http.StatusCreated)
	do(t, ctx, "see both reservations",
		chromedp.WaitVisible(css(`[data-reservation-id="res-1"][data-member="alice"][data-kind="exclusive"]`)),
		chromedp.WaitVisible(css(`[data-reservation-id="res-2"][data-member="bob"][data-kind="shared"]`)))
	got := textOf(t, ctx, `[data-reservation-id="res-1"]`)
	for _, want := range []string{"alice", "internal/store/**", "cmd/main.go", "until", "store rework"} {
		if !strings.Contains(got, want) {
			t.Errorf("res-1 shows %q, want it to show %q", got, want)
		}
	}
	if eval[bool](t, ctx, `!document.getElementById('reservations-empty').hidden`) {
		t.Error("the empty note is shown beside two reservations")
	}
	s.call("DELETE", "/teams/repo/reservations/res-1", tok["lead"], nil, http.StatusOK)
	do(t, ctx, "see res-1 gone",
		chromedp.WaitNotPresent(css(`[data-reservation-id="res-1"]`)),
		chromedp.WaitVisible(css(`[data-reservation-id="res-2"]`)))
}
