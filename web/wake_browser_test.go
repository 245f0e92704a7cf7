package web_test

import (
	"bytes"
	"context"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"mailroom/internal/agent"
	"mailroom/internal/host"
	"mailroom/internal/providertest"
)

// newModelAPIServer is newAPIServer with the fake Messages API as the
// provider its turns may use.
func newModelAPIServer(t *testing.T, fake *providertest.Server) *apiServer {
	t.Helper()
	const key = "sk-browser-wake-test"
	env := map[string]string{agent.EnvAnthropicKey: key, agent.EnvAnthropicBase: fake.URL()}
	return serveApp(t, host.ModelOptions{
		Lookup:   func(name string) (string, bool) { v, ok := env[name]; return v, ok },
		Provider: agent.ProviderOptions{MaxRetries: -1, HTTPClient: fake.Client(), RequestTimeout: time.Minute},
	})
}

// openWakeCrew serves team crew (lead, reader with wake, reviewer; no
// wake delay, 5 turns) on the fake Messages API and opens the page on it
// once it shows reader's wake badge. It returns the fake, the server,
// the members' tokens and the page.
func openWakeCrew(t *testing.T) (*providertest.Server, *apiServer, map[string]string, context.Context) {
	t.Helper()
	fake := providertest.NewAnthropic(t, "sk-browser-wake-test")
	s := newModelAPIServer(t, fake)
	doc := s.call("POST", "/teams", browserAdmin, map[string]any{
		"name":    "crew",
		"model":   map[string]any{"provider": "anthropic", "name": "claude-test"},
		"members": []map[string]any{{"name": "reader", "wake": true}, {"name": "reviewer"}},
		"limits":  map[string]any{"wake_delay_ms": 0, "turns": 5},
	}, http.StatusCreated)
	tok := map[string]string{}
	for _, m := range doc["members"].([]any) {
		mm := m.(map[string]any)
		tok[mm["name"].(string)] = mm["token"].(string)
	}
	ctx := newBrowser(t, 1280, 900)
	openPage(t, ctx, s)
	do(t, ctx, "see reader's wake badge",
		chromedp.WaitVisible(css(`[data-member="reader"] .wake[data-wake="on"]`)))
	return fake, s, tok, ctx
}

// TestPageShowsWake: a member woken on mail carries a wake badge; when a
// letter wakes it the page says, live, which letters woke its turn; a
// turn that fails holds the wake, and the badge says so.
func TestPageShowsWake(t *testing.T) {
	fake, s, tok, ctx := openWakeCrew(t)
	if n := eval[int](t, ctx, `document.querySelectorAll('[data-member="reviewer"] .wake, [data-member="lead"] .wake').length`); n != 0 {
		t.Errorf("wake badges on members without wake = %d, want 0", n)
	}
	eval[chromedp.Void](t, ctx, `window.__samePage = true`)

	// The first woken turn stalls at its model request until it is
	// cancelled, so the page sees it running.
	fake.Push(providertest.Reply{Stall: true})
	s.call("POST", "/teams/crew/messages", tok["lead"], map[string]string{"to": "reader", "body": "Read main.py."}, http.StatusCreated)
	do(t, ctx, "see the turn woken by reader-1",
		chromedp.WaitVisible(css(`[data-member="reader"] .woken[data-woken-by="reader-1"]`)))
	if got := textOf(t, ctx, `[data-member="reader"] .woken`); !strings.Contains(got, "woken by reader-1") {
		t.Errorf("woken text = %q, want \"woken by reader-1\"", got)
	}
	shot, err := chromedp.Run(ctx, chromedp.Screenshot(css(`#members`)))
	if err != nil {
		t.Fatalf("screenshot: %v", err)
	}
	if !bytes.HasPrefix(shot, []byte("\x89PNG\r\n\x1a\n")) {
		t.Fatalf("screenshot of the members is not a PNG (%d bytes)", len(shot))
	}
	// Kept with `go test -artifacts -outputdir DIR` to look at.
	if err := os.WriteFile(filepath.Join(t.ArtifactDir(), "wake.png"), shot, 0o644); err != nil {
		t.Fatal(err)
	}
	s.call("POST", "/teams/crew/turns/reader-t1/cancel", browserAdmin, nil, http.StatusOK)
	do(t, ctx, "see the wake held after the cancelled turn",
		chromedp.WaitVisible(css(`[data-member="reader"] .wake[data-wake="held"]`)))
	if got := textOf(t, ctx, `[data-member="reader"] .wake`); !strings.Contains(got, "wake held") {
		t.Errorf("badge text = %q, want \"wake held\"", got)
	}
	if !eval[bool](t, ctx, `window.__samePage === true`) {
		t.Error("the page reloaded instead of updating in place")
	}
}

// TestPageShowsTaskWake: a member woken by a task assigned to it: the
// page says, live, which task woke its turn.
func TestPageShowsTaskWake(t *testing.T) {
	fake, s, tok, ctx := openWakeCrew(t)
	fake.Push(providertest.Reply{Stall: true})
	s.call("POST", "/teams/crew/tasks", tok["lead"], map[string]any{"title": "Read main.py", "assignee": "reader"}, http.StatusCreated)
	do(t, ctx, "see the turn woken by task-1",
		chromedp.WaitVisible(css(`[data-member="reader"] .woken[data-woken-by="task-1"]`)))
	if got := textOf(t, ctx, `[data-member="reader"] .woken`); !strings.Contains(got, "woken by task-1") {
		t.Errorf("woken text = %q, want \"woken by task-1\"", got)
	}
	s.call("POST", "/teams/crew/turns/reader-t1/cancel", browserAdmin, nil, http.StatusOK)
}

// TestPageShowsTurnsAndResets: after a woken turn is cancelled, the page
// lists reader's turn with its outcome and reason, keeps "woken by"
// across a reload, offers Reset for the held wake, and the button
// releases it.
func TestPageShowsTurnsAndResets(t *testing.T) {
	fake, s, tok, ctx := openWakeCrew(t)
	fake.Push(providertest.Reply{Stall: true})
	s.call("POST", "/teams/crew/messages", tok["lead"], map[string]string{"to": "reader", "body": "Read main.py."}, http.StatusCreated)
	do(t, ctx, "see the turn woken by reader-1",
		chromedp.WaitVisible(css(`[data-member="reader"] .woken[data-woken-by="reader-1"]`)))
	s.call("POST", "/teams/crew/turns/reader-t1/cancel", browserAdmin, nil, http.StatusOK)
	do(t, ctx, "see the cancelled turn and the Reset button",
		chromedp.WaitVisible(css(`[data-member="reader"] .turn[data-turn-id="reader-t1"][data-outcome="cancelled"]`)),
		chromedp.WaitVisible(css(`[data-member="reader"] button[data-reset="reader"]`)),
	)
	if got := textOf(t, ctx, `[data-member="reader"] .turn[data-turn-id="reader-t1"]`); !strings.Contains(got, "cancelled") || !strings.Contains(got, "—") {
		t.Errorf("turn line = %q, want its outcome cancelled and a reason after —", got)
	}
	if n := eval[int](t, ctx, `document.querySelectorAll('[data-member="reviewer"] button[data-reset]').length`); n != 0 {
		t.Errorf("Reset buttons on idle reviewer = %d, want 0", n)
	}

	do(t, ctx, "reload the page",
		chromedp.Reload(),
		chromedp.WaitVisible(css(`#team-title:not([data-loading])`)),
		chromedp.WaitVisible(css(`[data-member="reader"] .woken[data-woken-by="reader-1"]`)),
	)
	// Released, the wake takes reader-1 up again: that turn stalls too,
	// so the page sees the wake on and reader running.
	fake.Push(providertest.Reply{Stall: true})
	clickOf(t, ctx, "reset reader from the page", `[data-member="reader"] button[data-reset="reader"]`)
	do(t, ctx, "see reader woken again",
		chromedp.WaitVisible(css(`[data-member="reader"] .wake[data-wake="on"]`)),
		chromedp.WaitVisible(css(`[data-member="reader"][data-status="running"]`)),
	)
	if n := eval[int](t, ctx, `document.querySelectorAll('[data-member="reader"] button[data-reset]').length`); n != 0 {
		t.Errorf("Reset buttons after the reset = %d, want 0", n)
	}
	s.call("POST", "/teams/crew/turns/reader-t2/cancel", browserAdmin, nil, http.StatusOK)
}
