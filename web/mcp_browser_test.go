package web_test

import (
	"bytes"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/chromedp/chromedp"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// bearerTransport sends a member token with every request of an MCP
// client.
type bearerTransport struct{ token string }

func (b bearerTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+b.token)
	return http.DefaultTransport.RoundTrip(r)
}

// connectMCP opens an MCP session as the member whose token is given, with
// the SDK's own client, as an agent outside Mailroom would.
func (s *apiServer) connectMCP(token string) *mcp.ClientSession {
	s.t.Helper()
	client := mcp.NewClient(&mcp.Implementation{Name: "browser-test", Version: "1"}, nil)
	cs, err := client.Connect(s.t.Context(), &mcp.StreamableClientTransport{
		Endpoint:   s.url + "/mcp",
		HTTPClient: &http.Client{Transport: bearerTransport{token}},
		MaxRetries: -1,
	}, nil)
	if err != nil {
		s.t.Fatalf("connect to /mcp: %v", err)
	}
	s.t.Cleanup(func() { _ = cs.Close() })
	return cs
}

// TestPageShowsMCPSeen: once an agent outside Mailroom makes MCP requests
// as reader (here with protocol 2026-07-28, which has no sessions), the
// page shows an MCP badge on reader, live from the event stream and
// without a reload, from the member's mcp_last_seen; a minute after the
// last request the badge goes.
func TestPageShowsMCPSeen(t *testing.T) {
	s := newAPIServer(t)
	tok := s.createTeam("outside", "reader")
	ctx := newBrowser(t, 1280, 900)
	openPage(t, ctx, s)
	do(t, ctx, "see the team",
		chromedp.WaitVisible(css(`[data-member="lead"][data-status="idle"]`)),
		chromedp.WaitVisible(css(`[data-member="reader"][data-status="idle"]`)),
	)
	if n := eval[int](t, ctx, `document.querySelectorAll('.mcp').length`); n != 0 {
		t.Fatalf("MCP badges before any request = %d, want 0", n)
	}
	eval[chromedp.Void](t, ctx, `window.__samePage = true`)

	cs := s.connectMCP(tok["reader"])
	if _, err := cs.ListTools(t.Context(), nil); err != nil {
		t.Fatal(err)
	}
	do(t, ctx, "see reader's MCP badge",
		chromedp.WaitVisible(css(`[data-member="reader"] .mcp[data-mcp-seen]`)))
	if got := textOf(t, ctx, `[data-member="reader"] .mcp`); strings.TrimSpace(strings.TrimPrefix(got, "⇄")) != "MCP" {
		t.Errorf("reader's badge text = %q, want MCP", got)
	}
	if n := eval[int](t, ctx, `document.querySelectorAll('[data-member="lead"] .mcp').length`); n != 0 {
		t.Errorf("MCP badges on lead = %d, want 0: only reader made requests", n)
	}
	shot, err := chromedp.Run(ctx, chromedp.Screenshot(css(`#members`)))
	if err != nil {
		t.Fatalf("screenshot: %v", err)
	}
	if !bytes.HasPrefix(shot, []byte("\x89PNG\r\n\x1a\n")) {
		t.Fatalf("screenshot of the members is not a PNG (%d bytes)", len(shot))
	}
	// Kept with `go test -artifacts -outputdir DIR` to look at.
	if err := os.WriteFile(filepath.Join(t.ArtifactDir(), "mcp-badge.png"), shot, 0o644); err != nil {
		t.Fatal(err)
	}

	// A minute later (the page's clock moved on) the badge goes.
	eval[chromedp.Void](t, ctx, `(() => { const now = Date.now; Date.now = () => now() + 61000; })()`)
	do(t, ctx, "see the badge go", chromedp.WaitNotPresent(css(`[data-member="reader"] .mcp`)))
	if !eval[bool](t, ctx, `window.__samePage === true`) {
		t.Error("the page reloaded instead of updating in place")
	}
}
