package web_test

import (
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"mailroom/internal/app"
	"mailroom/internal/host"
	"mailroom/internal/mail"
	"mailroom/internal/testkit"
	"mailroom/web"
)

// The browser tests drive the real page in headless Chromium against the
// real HTTP handler, core and mailbox store. They need Chromium; CI installs
// it, and without it they fail with a message saying how to get it.
var (
	chromiumPath = flag.String("chromium", envOr("MAILROOM_CHROMIUM", "/usr/bin/chromium"),
		"Chromium binary for the browser tests (env MAILROOM_CHROMIUM)")
	updateScreenshot = flag.Bool("update-screenshot", false,
		"rewrite docs/screenshot.png from TestScreenshot")
)

const browserAdmin = "browser-test-admin-token"

// pageDeadline bounds one whole browser test, so a page that never reaches
// a state fails the test instead of hanging CI; it is not a speed check.
// On a busy machine a scenario run that Chromium renders event by event
// takes well over a minute, so the bound leaves room for that.
const pageDeadline = 3 * time.Minute

func envOr(key, def string) string {
	if v := os.Getenv(key); v != "" {
		return v
	}
	return def
}

// apiServer is the real handler over a fresh data directory, with the page
// embedded and /mcp mounted exactly as the server binary serves them.
type apiServer struct {
	t   *testing.T
	url string
	srv *httptest.Server
}

func newAPIServer(t *testing.T) *apiServer {
	t.Helper()
	return serveApp(t, host.ModelOptions{})
}

// serveApp serves the whole server (internal/app, as the binary wires it)
// over a fresh file store, with models as its turns' models.
func serveApp(t *testing.T, models host.ModelOptions) *apiServer {
	t.Helper()
	dir := t.TempDir()
	store, err := mail.Open(dir)
	if err != nil {
		t.Fatalf("open store: %v", err)
	}
	t.Cleanup(func() { _ = store.Close() })
	testkit.Track(t, dir, store)
	a, err := app.New(t.Context(), store, app.Options{
		AdminToken: browserAdmin,
		Logger:     slog.New(slog.DiscardHandler),
		Static:     web.FS(),
		DataDir:    dir,
		Models:     models,
	})
	if err != nil {
		t.Fatalf("new server: %v", err)
	}
	srv := httptest.NewServer(a.Handler())
	// Registered before the browser, so it runs after the browser is gone
	// and no event stream keeps Close waiting; the server stops before
	// its store closes.
	t.Cleanup(func() {
		srv.Close()
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_ = a.Shutdown(ctx)
	})
	return &apiServer{t: t, url: srv.URL, srv: srv}
}

// call sends one API request and fails the test unless the status is want.
func (s *apiServer) call(method, path, token string, body any, want int) map[string]any {
	s.t.Helper()
	var rd io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			s.t.Fatal(err)
		}
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequest(method, s.url+"/api/v1"+path, rd)
	if err != nil {
		s.t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+token)
	// A fresh connection each time: TestPageReconnectsAfterDrop cuts every
	// open connection, and a reused one would fail the next POST.
	req.Close = true
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		s.t.Fatalf("%s %s: %v", method, path, err)
	}
	defer res.Body.Close()
	raw, err := io.ReadAll(res.Body)
	if err != nil {
		s.t.Fatal(err)
	}
	if res.StatusCode != want {
		s.t.Fatalf("%s %s: status %d, want %d: %s", method, path, res.StatusCode, want, raw)
	}
	doc := map[string]any{}
	if len(raw) > 0 {
		if err := json.Unmarshal(raw, &doc); err != nil {
			s.t.Fatalf("%s %s: decode %q: %v", method, path, raw, err)
		}
	}
	return doc
}

// createTeam makes a team with the given teammates and returns every
// member's token by name.
func (s *apiServer) createTeam(name string, members ...string) map[string]string {
	s.t.Helper()
	specs := []map[string]string{}
	for _, m := range members {
		specs = append(specs, map[string]string{"name": m, "role": "the " + m})
	}
	doc := s.call("POST", "/teams", browserAdmin, map[string]any{"name": name, "members": specs}, http.StatusCreated)
	tokens := map[string]string{}
	list, _ := doc["members"].([]any)
	for _, m := range list {
		mm, _ := m.(map[string]any)
		name, _ := mm["name"].(string)
		tok, _ := mm["token"].(string)
		tokens[name] = tok
	}
	return tokens
}

// newBrowser starts headless Chromium with a fresh profile and returns a
// tab context bounded by pageDeadline.
func newBrowser(t *testing.T, width, height int) context.Context {
	t.Helper()
	if _, err := os.Stat(*chromiumPath); err != nil {
		t.Fatalf("the browser tests need Chromium at %s (%v): install it with `apt-get install chromium`, "+
			"or point -chromium / MAILROOM_CHROMIUM at the binary", *chromiumPath, err)
	}
	profile, err := os.MkdirTemp("", "mailroom-chromium-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { removeProfile(profile) })
	actx, cancelAlloc := chromedp.NewExecAllocator(context.Background(),
		chromedp.ExecPath(*chromiumPath),
		chromedp.Headless,
		chromedp.NoSandbox,
		chromedp.DisableGPU,
		chromedp.Flag("disable-background-networking", true),
		chromedp.Flag("disable-component-update", true),
		chromedp.Flag("disable-sync", true),
		chromedp.NoFirstRun,
		chromedp.UserDataDir(profile),
		chromedp.WindowSize(width, height),
	)
	t.Cleanup(cancelAlloc)
	bctx, cancelTab := chromedp.NewContext(actx)
	t.Cleanup(cancelTab)
	// The first run starts the browser; it must not carry the deadline,
	// which would stop the browser with it (see chromedp.Run).
	if err := chromedp.Do(bctx); err != nil {
		t.Fatalf("start Chromium at %s: %v", *chromiumPath, err)
	}
	ctx, cancel := context.WithTimeout(bctx, pageDeadline)
	t.Cleanup(cancel)
	if err := chromedp.Do(ctx, chromedp.EmulateViewport(int64(width), int64(height))); err != nil {
		t.Fatal(err)
	}
	return ctx
}

// removeProfile deletes the browser profile; Chromium's helpers may still
// write into it for a moment after the browser exits, so it retries.
func removeProfile(dir string) {
	for range 50 {
		if err := os.RemoveAll(dir); err == nil {
			return
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// css is a CSS selector for chromedp queries.
func css(sel string) chromedp.CSS { return chromedp.CSS(sel) }

// do runs browser steps and fails the test with what was being done.
func do(t *testing.T, ctx context.Context, what string, steps ...chromedp.Action[chromedp.Void]) {
	t.Helper()
	if err := chromedp.Do(ctx, steps...); err != nil {
		t.Fatalf("%s: %v", what, err)
	}
}

// eval evaluates a JavaScript expression in the page.
func eval[T any](t *testing.T, ctx context.Context, expr string) T {
	t.Helper()
	v, err := chromedp.Run(ctx, chromedp.Evaluate[T](expr))
	if err != nil {
		t.Fatalf("evaluate %s: %v", expr, err)
	}
	return v
}

// clickOf waits for an element, then finds and clicks it in one
// evaluation: the page rebuilds its lists on every event, so a node found
// by one call (chromedp.Click) may be gone by the next.
func clickOf(t *testing.T, ctx context.Context, what, sel string) {
	t.Helper()
	do(t, ctx, what, chromedp.WaitVisible(css(sel)))
	quoted, err := json.Marshal(sel)
	if err != nil {
		t.Fatal(err)
	}
	if !eval[bool](t, ctx, `(() => { const e = document.querySelector(`+string(quoted)+`); if (!e) return false; e.click(); return true; })()`) {
		t.Fatalf("%s: %s gone before the click", what, sel)
	}
}

// textOf reads an element's text in one evaluation: the page rebuilds its
// lists on every event, so a node found by one call may be gone by the next.
func textOf(t *testing.T, ctx context.Context, sel string) string {
	t.Helper()
	q, err := json.Marshal(sel)
	if err != nil {
		t.Fatal(err)
	}
	expr := fmt.Sprintf(`(() => { const n = document.querySelector(%s); return n ? n.textContent : null; })()`, q)
	s, err := chromedp.Run(ctx, chromedp.Evaluate[*string](expr))
	if err != nil {
		t.Fatalf("text of %s: %v", sel, err)
	}
	if s == nil {
		t.Fatalf("text of %s: no such element", sel)
	}
	return *s
}

func openPage(t *testing.T, ctx context.Context, s *apiServer) {
	t.Helper()
	do(t, ctx, "open the page with the token",
		chromedp.Navigate(s.url+"/#token="+browserAdmin),
		chromedp.WaitVisible(css(`#live[data-live="live"]`)),
		// The first data is in and laid out: a click before it could land
		// where a control was before the page moved it.
		chromedp.WaitVisible(css(`#team-title:not([data-loading])`)),
	)
	if href := eval[string](t, ctx, `location.href`); strings.Contains(href, "token") {
		t.Errorf("the token stays in the address bar: %s", href)
	}
	if got := eval[string](t, ctx, `sessionStorage.getItem('mailroom.token') || ''`); got != browserAdmin {
		t.Errorf("sessionStorage token = %q, want the admin token", got)
	}
}

// TestPageFollowsProtocolLive opens the page, then drives a plan and a
// shutdown request through the API as the members would, and watches the
// page update itself from the event stream at each step, without reloads.
func TestPageFollowsProtocolLive(t *testing.T) {
	s := newAPIServer(t)
	tok := s.createTeam("watch", "reader")
	ctx := newBrowser(t, 1280, 900)
	openPage(t, ctx, s)
	do(t, ctx, "see the team",
		chromedp.WaitVisible(css(`[data-member="lead"][data-status="idle"]`)),
		chromedp.WaitVisible(css(`[data-member="reader"][data-status="idle"]`)),
	)
	// A marker that a reload would lose.
	eval[chromedp.Void](t, ctx, `window.__samePage = true`)

	s.call("POST", "/teams/watch/requests", tok["reader"],
		map[string]any{"kind": "plan", "target": "lead", "payload": "Read the expected value, then run main.py."}, http.StatusCreated)
	do(t, ctx, "see req-1 pending and its letter",
		chromedp.WaitVisible(css(`tr[data-request-id="req-1"][data-state="pending"]`)),
		chromedp.WaitVisible(css(`[data-member="lead"] [data-letter-id="lead-1"][data-kind="plan_request"]`)),
	)
	if got := textOf(t, ctx, `tr[data-request-id="req-1"] .req-state`); !strings.Contains(got, "pending") {
		t.Errorf("req-1 state text = %q, want pending", got)
	}

	s.call("POST", "/teams/watch/requests/req-1/reply", tok["lead"],
		map[string]any{"approve": true, "feedback": "Approves only this plan."}, http.StatusOK)
	do(t, ctx, "see the reply sent but not matched",
		chromedp.WaitVisible(css(`tr[data-request-id="req-1"][data-state="replied"]`)),
		chromedp.WaitVisible(css(`[data-member="reader"] [data-letter-id="reader-1"][data-kind="plan_response"]`)),
	)
	if got := textOf(t, ctx, `tr[data-request-id="req-1"] .req-state`); !strings.Contains(got, "reply sent — not yet matched") {
		t.Errorf("req-1 state text = %q, want the reply-sent wording", got)
	}

	s.call("POST", "/teams/watch/members/reader/inbox/consume", tok["reader"], nil, http.StatusOK)
	do(t, ctx, "see req-1 approved",
		chromedp.WaitVisible(css(`tr[data-request-id="req-1"][data-state="approved"]`)))

	s.call("POST", "/teams/watch/requests", tok["lead"],
		map[string]any{"kind": "shutdown", "target": "reader", "payload": "The work is done."}, http.StatusCreated)
	s.call("POST", "/teams/watch/requests/req-2/reply", tok["reader"],
		map[string]any{"approve": true, "feedback": "Closing at the idle boundary."}, http.StatusOK)
	do(t, ctx, "see reader closed and req-2 waiting for the lead to match",
		chromedp.WaitVisible(css(`[data-member="reader"][data-status="closed"]`)),
		chromedp.WaitVisible(css(`tr[data-request-id="req-2"][data-state="replied"]`)),
	)
	if got := textOf(t, ctx, `[data-member="reader"] .status`); !strings.Contains(got, "closed") {
		t.Errorf("reader badge = %q, want the word closed", got)
	}
	if !eval[bool](t, ctx, `window.__samePage === true`) {
		t.Error("the page reloaded instead of updating in place")
	}
}

// TestPageRunsTeamProtocols starts the team-protocols scenario from the
// page's form (plan approved, host allows, slowed so a person could watch)
// and checks that the page switched to the run's team, showed req-1 go
// through pending, reply sent and approved, showed reader closed, and
// reported the run ok with every check passing.
func TestPageRunsTeamProtocols(t *testing.T) {
	s := newAPIServer(t)
	ctx := newBrowser(t, 1280, 900)
	openPage(t, ctx, s)
	// Record every state req-1's row shows: the middle one lasts only a
	// few steps of the run, too short to poll for reliably.
	eval[chromedp.Void](t, ctx, `(() => {
		window.__req1 = [];
		new MutationObserver(() => {
			const row = document.querySelector('tr[data-request-id="req-1"]');
			const st = row ? row.dataset.state : '';
			if (st && window.__req1[window.__req1.length - 1] !== st) window.__req1.push(st);
		}).observe(document.body, { subtree: true, childList: true, attributes: true });
	})()`)
	do(t, ctx, "start team-protocols from the form",
		chromedp.SetValue(css(`#scenario`), "team-protocols"),
		chromedp.Click(css(`input[name="plan"][value="approve"]`)),
		chromedp.Click(css(`input[name="decision"][value="allow"]`)),
		// 400 ms a step keeps req-1 pending for over a second, long
		// enough for the page to find the run's team on a loaded machine.
		chromedp.SetValue(css(`#step-ms`), "400"),
		chromedp.Evaluate[chromedp.Void](`document.getElementById('step-ms').dispatchEvent(new Event('input'))`),
		chromedp.Click(css(`#run-button`)),
		chromedp.WaitVisible(css(`[data-run-state="running"]`)),
	)
	do(t, ctx, "follow the run live",
		chromedp.WaitVisible(css(`tr[data-request-id="req-1"]`)),
		chromedp.WaitVisible(css(`[data-member="reader"][data-status="closed"]`)),
		chromedp.WaitVisible(css(`tr[data-request-id="req-1"][data-state="approved"]`)),
		chromedp.WaitVisible(css(`[data-run-state="done"]`)),
	)

	if got := eval[string](t, ctx, `document.getElementById('team-select').value`); !strings.HasPrefix(got, "team-protocols-") {
		t.Errorf("selected team = %q, want the run's team", got)
	}
	states := eval[[]string](t, ctx, `window.__req1`)
	if !isSubsequence([]string{"pending", "replied", "approved"}, states) {
		t.Errorf("req-1 showed states %v, want pending, then reply sent, then approved", states)
	}
	if ok := eval[string](t, ctx, `document.querySelector('.result').dataset.ok`); ok != "true" {
		t.Errorf("run result data-ok = %q, want true; result: %s", ok, textOf(t, ctx, `.result`))
	}
	if got := textOf(t, ctx, `.result-head`); !strings.Contains(got, "Run ok") {
		t.Errorf("result headline = %q", got)
	}
	checks := eval[[]map[string]string](t, ctx,
		`[...document.querySelectorAll('.check')].map(c => ({name: c.dataset.check, ok: c.dataset.ok, text: c.textContent}))`)
	if len(checks) == 0 {
		t.Fatal("the result lists no checks")
	}
	for _, c := range checks {
		if c["ok"] != "true" || !strings.Contains(c["text"], "pass") {
			t.Errorf("check %s: ok=%s text=%q, want a pass", c["name"], c["ok"], c["text"])
		}
	}
	if got := textOf(t, ctx, `[data-member="reader"] .status`); !strings.Contains(got, "closed") {
		t.Errorf("reader badge = %q, want the word closed", got)
	}
}

// TestPageRunsAgentTeams starts the agent-teams scenario from the page and
// checks the page followed the run's team and shows what the lesson
// promises: two reports in lead's inbox, reviewer's letter in reader's,
// none in reviewer's, and the run ok with every check passing.
func TestPageRunsAgentTeams(t *testing.T) {
	s := newAPIServer(t)
	ctx := newBrowser(t, 1280, 900)
	openPage(t, ctx, s)
	do(t, ctx, "start agent-teams from the form",
		chromedp.SetValue(css(`#scenario`), "agent-teams"),
		chromedp.Evaluate[chromedp.Void](`document.getElementById('scenario').dispatchEvent(new Event('change'))`),
		chromedp.SetValue(css(`#step-ms`), "0"),
		chromedp.Evaluate[chromedp.Void](`document.getElementById('step-ms').dispatchEvent(new Event('input'))`),
		chromedp.Click(css(`#run-button`)),
		chromedp.WaitVisible(css(`[data-run-state="done"]`)),
	)
	if got := eval[string](t, ctx, `document.getElementById('team-select').value`); !strings.HasPrefix(got, "agent-teams-") {
		t.Errorf("selected team = %q, want the run's team", got)
	}
	if ok := eval[string](t, ctx, `document.querySelector('.result').dataset.ok`); ok != "true" {
		t.Errorf("run result data-ok = %q, want true; result: %s", ok, textOf(t, ctx, `.result`))
	}
	do(t, ctx, "see the mailboxes of the run",
		chromedp.WaitVisible(css(`[data-member="lead"] [data-letter-id="lead-2"]`)),
		chromedp.WaitVisible(css(`[data-member="reader"] [data-letter-id="reader-1"]`)),
	)
	counts := eval[map[string]int](t, ctx, `Object.fromEntries(['lead', 'reader', 'reviewer'].map(m =>
		[m, document.querySelectorAll('[data-member="' + m + '"] [data-letter-id]').length]))`)
	if counts["lead"] != 2 || counts["reader"] != 1 || counts["reviewer"] != 0 {
		t.Errorf("letters shown per member = %v, want lead 2, reader 1, reviewer 0", counts)
	}
}

// isSubsequence reports whether want appears in got in order, with
// anything in between.
func isSubsequence(want, got []string) bool {
	i := 0
	for _, g := range got {
		if i < len(want) && g == want[i] {
			i++
		}
	}
	return i == len(want)
}

// TestPageRendersHostileTextLiterally sends markup as a letter body, a
// request payload and a role, before and after the page loads, and checks
// that it shows up as text and that no handler in it ever ran.
func TestPageRendersHostileTextLiterally(t *testing.T) {
	const hostile = `<img src=x onerror=window.__pwned=1>`
	s := newAPIServer(t)
	s.call("POST", "/teams", browserAdmin, map[string]any{
		"name":    "hostile",
		"members": []map[string]string{{"name": "reader", "role": hostile}},
	}, http.StatusCreated)
	list := s.call("GET", "/teams/hostile", browserAdmin, nil, http.StatusOK)
	if list["name"] != "hostile" {
		t.Fatalf("team view: %v", list)
	}
	// Member tokens are returned only at creation, so use a second team for
	// the letters sent before and after the page opens.
	tok := s.createTeam("letters", "reader")
	s.call("POST", "/teams/letters/messages", tok["reader"], map[string]any{"to": "lead", "body": hostile}, http.StatusCreated)

	ctx := newBrowser(t, 1280, 900)
	openPage(t, ctx, s)
	do(t, ctx, "see the first hostile letter",
		chromedp.WaitVisible(css(`[data-member="lead"] [data-letter-id="lead-1"]`)))

	s.call("POST", "/teams/letters/requests", tok["reader"],
		map[string]any{"kind": "plan", "target": "lead", "payload": hostile}, http.StatusCreated)
	do(t, ctx, "see the hostile payload arrive live",
		chromedp.WaitVisible(css(`tr[data-request-id="req-1"]`)),
		chromedp.WaitVisible(css(`[data-member="lead"] [data-letter-id="lead-2"]`)),
	)

	checks := []struct{ name, sel string }{
		{"letter body", `[data-letter-id="lead-1"] .letter-body`},
		{"protocol payload", `[data-letter-id="lead-2"] .proto-text`},
		{"request table payload", `tr[data-request-id="req-1"] .payload`},
	}
	for _, c := range checks {
		if got := textOf(t, ctx, c.sel); strings.TrimSpace(got) != hostile {
			t.Errorf("%s shows %q, want the literal %q", c.name, got, hostile)
		}
	}
	if n := eval[int](t, ctx, `document.querySelectorAll('main img').length`); n != 0 {
		t.Errorf("the page holds %d <img> elements inside main; markup from the API was parsed", n)
	}

	// The other team carries the markup in a member role.
	do(t, ctx, "switch to the team with the hostile role",
		chromedp.SetValue(css(`#team-select`), "hostile"),
		chromedp.Evaluate[chromedp.Void](`document.getElementById('team-select').dispatchEvent(new Event('change'))`),
		chromedp.WaitVisible(css(`#members[data-team="hostile"] [data-member="reader"] .role`)),
	)
	if got := textOf(t, ctx, `#members[data-team="hostile"] [data-member="reader"] .role`); got != hostile {
		t.Errorf("role shows %q, want the literal %q", got, hostile)
	}
	if got := eval[string](t, ctx, `typeof window.__pwned`); got != "undefined" {
		t.Errorf("window.__pwned is %s: a handler from API data ran", got)
	}
}

// TestPageReconnectsAfterDrop cuts the event stream under the page and
// checks that the indicator said so, that the page came back to live, and
// that a change made while it was away shows up.
func TestPageReconnectsAfterDrop(t *testing.T) {
	s := newAPIServer(t)
	tok := s.createTeam("drop", "reader")
	ctx := newBrowser(t, 1280, 900)
	openPage(t, ctx, s)
	do(t, ctx, "see the team", chromedp.WaitVisible(css(`[data-member="reader"]`)))
	// Record every state the indicator shows; "reconnecting" may last only
	// for one backoff, too short to poll for.
	eval[chromedp.Void](t, ctx, `(() => {
		const live = document.getElementById('live');
		window.__liveStates = [];
		new MutationObserver(() => window.__liveStates.push(live.dataset.live))
			.observe(live, { attributes: true, attributeFilter: ['data-live'] });
	})()`)

	s.srv.CloseClientConnections()
	s.call("POST", "/teams/drop/messages", tok["reader"], map[string]any{"to": "lead", "body": "sent while the page was away"}, http.StatusCreated)
	do(t, ctx, "see the page live again with the letter",
		chromedp.WaitVisible(css(`[data-member="lead"] [data-letter-id="lead-1"]`)),
		chromedp.WaitVisible(css(`#live[data-live="live"]`)),
	)
	states := eval[[]string](t, ctx, `window.__liveStates`)
	if !slices.Contains(states, "reconnecting") {
		t.Errorf("indicator states %v never said reconnecting", states)
	}
	if got := textOf(t, ctx, `#live`); !strings.Contains(got, "live") {
		t.Errorf("indicator text = %q, want live", got)
	}
}

// TestPageAsksForTokenAndShowsErrors opens the page without a token, then
// with a wrong one, and checks the form and the status line.
func TestPageAsksForTokenAndShowsErrors(t *testing.T) {
	s := newAPIServer(t)
	ctx := newBrowser(t, 390, 844)
	// Clicking the button, not form.submit(), which skips submit handlers.
	do(t, ctx, "open without a token and try a wrong one",
		chromedp.Navigate(s.url+"/"),
		chromedp.WaitVisible(css(`#token-form`)),
		chromedp.SendKeys(css(`#token-input`), "wrong-token"),
		chromedp.Click(css(`#token-form button`)),
		chromedp.WaitVisible(css(`#status-line`)),
		chromedp.WaitVisible(css(`#token-form`)),
	)
	if got := textOf(t, ctx, `#status-text`); !strings.Contains(got, "unauthorized") {
		t.Errorf("status line = %q, want it to name the unauthorized error", got)
	}
	do(t, ctx, "connect with the right token",
		chromedp.SendKeys(css(`#token-input`), browserAdmin),
		chromedp.Click(css(`#token-form button`)),
		chromedp.WaitVisible(css(`#team-empty`)),
		chromedp.WaitNotVisible(css(`#status-line`)),
	)
}

// TestScreenshot runs team-protocols from the page and checks that a
// capture of the finished run is a real PNG. With -update-screenshot it
// rewrites docs/screenshot.png for the README:
//
//	go test ./web -run TestScreenshot -update-screenshot
func TestScreenshot(t *testing.T) {
	s := newAPIServer(t)
	ctx := newBrowser(t, 1280, 900)
	openPage(t, ctx, s)
	do(t, ctx, "run team-protocols and see it finish",
		chromedp.Click(css(`input[name="decision"][value="allow"]`)),
		chromedp.SetValue(css(`#step-ms`), "0"),
		chromedp.Evaluate[chromedp.Void](`document.getElementById('step-ms').dispatchEvent(new Event('input'))`),
		chromedp.Click(css(`#run-button`)),
		chromedp.WaitVisible(css(`[data-run-state="done"]`)),
		chromedp.WaitVisible(css(`[data-member="reader"][data-status="closed"]`)),
		chromedp.WaitVisible(css(`tr[data-request-id="req-2"][data-state="approved"]`)),
		// Let the arrival highlight fade, and start at the top.
		chromedp.Evaluate[chromedp.Void](`document.querySelectorAll('.fresh').forEach(n => n.classList.remove('fresh')); window.scrollTo(0, 0)`),
	)
	png, err := chromedp.Run(ctx, chromedp.FullScreenshot(100))
	if err != nil {
		t.Fatalf("screenshot: %v", err)
	}
	checkPNG(t, png)
	if *updateScreenshot {
		path := filepath.Join("..", "docs", "screenshot.png")
		if err := os.WriteFile(path, png, 0o644); err != nil {
			t.Fatalf("write %s: %v", path, err)
		}
		t.Logf("wrote %s (%d bytes)", path, len(png))
	}
}

func checkPNG(t *testing.T, b []byte) {
	t.Helper()
	const minSize = 20 << 10 // a blank page compresses to a few KiB
	if !bytes.HasPrefix(b, []byte("\x89PNG\r\n\x1a\n")) {
		t.Fatalf("screenshot is not a PNG (starts %q)", fmt.Sprintf("%.8x", b))
	}
	if len(b) < minSize {
		t.Errorf("screenshot is %d bytes, want at least %d: the page looks empty", len(b), minSize)
	}
}

// TestPageShowsTaskBoardLive drives a task board through the API as the
// members would and watches the page move each task between the pending,
// in-progress and completed columns, with owner, assignee, blockers and
// result, from the event stream and without reloads.
func TestPageShowsTaskBoardLive(t *testing.T) {
	s := newAPIServer(t)
	tok := s.createTeam("board", "reader", "reviewer")
	ctx := newBrowser(t, 1280, 900)
	openPage(t, ctx, s)
	do(t, ctx, "see the team without tasks",
		chromedp.WaitVisible(css(`[data-member="reader"][data-status="idle"]`)),
		chromedp.WaitVisible(css(`#tasks-empty`)),
	)
	eval[chromedp.Void](t, ctx, `window.__samePage = true`)

	s.call("POST", "/teams/board/tasks", tok["lead"], map[string]any{"title": "Read <b>main.py</b>", "assignee": "reader"}, http.StatusCreated)
	s.call("POST", "/teams/board/tasks", tok["lead"], map[string]any{"title": "Review the answer", "blocked_by": []string{"task-1"}, "needs": []string{"review"}}, http.StatusCreated)
	s.call("PATCH", "/teams/board/members/reviewer", browserAdmin, map[string]any{"skills": []string{"review", "go"}}, http.StatusOK)
	do(t, ctx, "see both tasks pending, task-2 waiting for task-1",
		chromedp.WaitVisible(css(`#board-pending [data-task-id="task-1"][data-status="pending"]`)),
		chromedp.WaitVisible(css(`#board-pending [data-task-id="task-2"][data-blocked="true"]`)),
	)
	if got := textOf(t, ctx, `[data-task-id="task-1"] .task-title`); got != "Read <b>main.py</b>" {
		t.Errorf("task-1 title = %q, want the text shown literally", got)
	}
	if got := textOf(t, ctx, `[data-task-id="task-1"] .task-assignee`); !strings.Contains(got, "for reader") {
		t.Errorf("task-1 assignee = %q, want for reader", got)
	}
	if got := textOf(t, ctx, `[data-task-id="task-2"] .task-blockers`); !strings.Contains(got, "waits for task-1") {
		t.Errorf("task-2 blockers = %q, want waits for task-1", got)
	}
	if got := textOf(t, ctx, `[data-task-id="task-2"] .task-needs`); !strings.Contains(got, "needs review") {
		t.Errorf("task-2 needs = %q, want needs review", got)
	}
	do(t, ctx, "see reviewer's skills, set after the page opened",
		chromedp.WaitVisible(css(`[data-member="reviewer"] .skills`)))
	if got := textOf(t, ctx, `[data-member="reviewer"] .skills`); !strings.Contains(got, "can do review, go") {
		t.Errorf("reviewer's skills = %q, want can do review, go", got)
	}

	s.call("POST", "/teams/board/tasks/task-1/claim", tok["reader"], nil, http.StatusOK)
	do(t, ctx, "see task-1 in progress, owned by reader",
		chromedp.WaitVisible(css(`#board-in_progress [data-task-id="task-1"][data-status="in_progress"]`)))
	if got := textOf(t, ctx, `[data-task-id="task-1"] .task-owner`); !strings.Contains(got, "owner reader") {
		t.Errorf("task-1 owner = %q, want owner reader", got)
	}

	s.call("POST", "/teams/board/tasks/task-1/complete", tok["reader"], map[string]any{"result": "It prints 42."}, http.StatusOK)
	do(t, ctx, "see task-1 completed with its result, task-2 no longer waiting",
		chromedp.WaitVisible(css(`#board-completed [data-task-id="task-1"][data-status="completed"]`)),
		chromedp.WaitVisible(css(`#board-pending [data-task-id="task-2"][data-blocked="false"]`)),
	)
	if got := textOf(t, ctx, `[data-task-id="task-1"] .task-result`); got != "It prints 42." {
		t.Errorf("task-1 result = %q, want It prints 42.", got)
	}
	if got := textOf(t, ctx, `#count-completed`); got != "(1)" {
		t.Errorf("completed count = %q, want (1)", got)
	}

	s.call("DELETE", "/teams/board/tasks/task-2", tok["lead"], nil, http.StatusOK)
	do(t, ctx, "see the deleted task leave the board",
		chromedp.WaitNotPresent(css(`[data-task-id="task-2"]`)))
	if !eval[bool](t, ctx, `window.__samePage === true`) {
		t.Error("the page reloaded instead of updating in place")
	}
}
