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

// TestPageShowsMCPSessions: while an agent outside Mailroom holds an MCP
// session as reader, the page shows an MCP badge on reader (with the count
// when there are several), and takes it away when the sessions close,
// live from the event stream and without a reload.
func TestPageShowsMCPSessions(t *testing.T) {
	s := newAPIServer(t)
	tok := s.createTeam("outside", "reader")
	ctx := newBrowser(t, 1280, 900)
	openPage(t, ctx, s)
	do(t, ctx, "see the team",
		chromedp.WaitVisible(css(`[data-member="lead"][data-status="idle"]`)),
		chromedp.WaitVisible(css(`[data-member="reader"][data-status="idle"]`)),
	)
	if n := eval[int](t, ctx, `document.querySelectorAll('.mcp').length`); n != 0 {
		t.Fatalf("MCP badges before any session = %d, want 0", n)
	}
	eval[chromedp.Void](t, ctx, `window.__samePage = true`)

	first := s.connectMCP(tok["reader"])
	do(t, ctx, "see reader's MCP badge",
		chromedp.WaitVisible(css(`[data-member="reader"] .mcp[data-mcp-sessions="1"]`)))
	if got := textOf(t, ctx, `[data-member="reader"] .mcp`); strings.TrimSpace(strings.TrimPrefix(got, "⇄")) != "MCP" {
		t.Errorf("reader's badge text = %q, want MCP", got)
	}
	if n := eval[int](t, ctx, `document.querySelectorAll('[data-member="lead"] .mcp').length`); n != 0 {
		t.Errorf("MCP badges on lead = %d, want 0: only reader is connected", n)
	}

	second := s.connectMCP(tok["reader"])
	do(t, ctx, "see reader's badge count two sessions",
		chromedp.WaitVisible(css(`[data-member="reader"] .mcp[data-mcp-sessions="2"]`)))
	if got := textOf(t, ctx, `[data-member="reader"] .mcp`); !strings.Contains(got, "MCP ×2") {
		t.Errorf("reader's badge text = %q, want MCP ×2", got)
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

	if err := first.Close(); err != nil {
		t.Fatal(err)
	}
	do(t, ctx, "see the count go down to one",
		chromedp.WaitVisible(css(`[data-member="reader"] .mcp[data-mcp-sessions="1"]`)))
	if err := second.Close(); err != nil {
		t.Fatal(err)
	}
	do(t, ctx, "see the badge go", chromedp.WaitNotPresent(css(`[data-member="reader"] .mcp`)))
	if !eval[bool](t, ctx, `window.__samePage === true`) {
		t.Error("the page reloaded instead of updating in place")
	}
}
