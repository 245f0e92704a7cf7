package mcpserver_test

import (
	"encoding/json"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"runtime"
	"slices"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"mailroom/internal/core"
	"mailroom/internal/mcpserver"
	"mailroom/internal/testkit"
)

const adminToken = "test-admin-token"

// env is the real core over the real file store in a temporary directory,
// served by the MCP handler over httptest.
type env struct {
	t   *testing.T
	svc *core.Service
	h   *mcpserver.Handler
	srv *httptest.Server
	// endpoint is where the MCP handler answers: srv.URL, or srv.URL/mcp
	// when the REST API is served beside it (newFullEnv).
	endpoint string
	tokens   map[string]map[string]string // team → member → token
}

func newEnv(t *testing.T, configure ...func(*mcpserver.Options)) *env {
	t.Helper()
	svc := testkit.OpenService(t, t.TempDir())
	opts := mcpserver.Options{AdminToken: adminToken, Logger: slog.New(slog.DiscardHandler), Live: testkit.Hub(svc)}
	for _, c := range configure {
		c(&opts)
	}
	h, err := mcpserver.New(svc, opts)
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	e := &env{t: t, svc: svc, h: h, srv: srv, endpoint: srv.URL, tokens: map[string]map[string]string{}}
	e.newTeam("demo", nil)
	return e
}

// newTeam creates lead, reader and reviewer.
func (e *env) newTeam(name string, limits *core.Limits) {
	e.t.Helper()
	_, created, err := e.svc.CreateTeam(e.t.Context(), core.TeamSpec{Name: name, Limits: limits, Members: []core.MemberSpec{
		{Name: "reader", Role: "reads the source"},
		{Name: "reviewer", Role: "reads the expected value"},
	}})
	if err != nil {
		e.t.Fatal(err)
	}
	e.tokens[name] = map[string]string{}
	for _, m := range created {
		e.tokens[name][m.Name] = m.Token
	}
}

// bearer adds a token (and optionally an Origin) to every request.
type bearer struct {
	token  string
	origin string
	base   http.RoundTripper
}

func (b bearer) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	if b.token != "" {
		r.Header.Set("Authorization", "Bearer "+b.token)
	}
	if b.origin != "" {
		r.Header.Set("Origin", b.origin)
	}
	return b.base.RoundTrip(r)
}

// connect opens a session as token with the SDK's own client; opts may
// carry notification handlers.
func (e *env) connect(token string, opts *mcp.ClientOptions) *mcp.ClientSession {
	e.t.Helper()
	cs, err := e.tryConnect(token, opts)
	if err != nil {
		e.t.Fatalf("connect: %v", err)
	}
	e.t.Cleanup(func() { _ = cs.Close() })
	return cs
}

// legacyVersion is the protocol of sessions the tests of sessions speak
// (the SDK's client would otherwise speak 2026-07-28, which has none).
const legacyVersion = "2025-11-25"

func (e *env) tryConnect(token string, opts *mcp.ClientOptions) (*mcp.ClientSession, error) {
	return e.connectVersion(token, legacyVersion, opts)
}

// connectVersion connects as token speaking protocol version.
func (e *env) connectVersion(token, version string, opts *mcp.ClientOptions) (*mcp.ClientSession, error) {
	client := mcp.NewClient(&mcp.Implementation{Name: "test", Version: "1"}, opts)
	transport := &mcp.StreamableClientTransport{
		Endpoint:   e.endpoint,
		HTTPClient: &http.Client{Transport: bearer{token: token, base: http.DefaultTransport}},
		MaxRetries: -1,
	}
	return client.Connect(e.t.Context(), transport, &mcp.ClientSessionOptions{ProtocolVersion: version})
}

func (e *env) member(team, name string) *mcp.ClientSession {
	e.t.Helper()
	return e.connect(e.tokens[team][name], nil)
}

// call calls a tool and decodes its structured content into out (when not
// nil). It fails the test on a protocol error; a refusal is returned.
func call(t *testing.T, cs *mcp.ClientSession, tool string, args any, out any) *mcp.CallToolResult {
	t.Helper()
	res, err := cs.CallTool(t.Context(), &mcp.CallToolParams{Name: tool, Arguments: args})
	if err != nil {
		t.Fatalf("call %s: %v", tool, err)
	}
	if out != nil && !res.IsError {
		decodeContent(t, res, out)
	}
	return res
}

func decodeContent(t *testing.T, res *mcp.CallToolResult, out any) {
	t.Helper()
	b, err := json.Marshal(res.StructuredContent)
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, out); err != nil {
		t.Fatalf("decode %s: %v", b, err)
	}
}

// mustCall calls a tool that must succeed.
func mustCall(t *testing.T, cs *mcp.ClientSession, tool string, args any, out any) {
	t.Helper()
	res := call(t, cs, tool, args, out)
	if res.IsError {
		t.Fatalf("call %s: refused %s", tool, textOf(res))
	}
	if textOf(res) == "" {
		t.Errorf("call %s: no short text with the result", tool)
	}
}

// wantRefusal calls a tool that must be refused with code.
func wantRefusal(t *testing.T, cs *mcp.ClientSession, tool string, args any, code string) {
	t.Helper()
	res := call(t, cs, tool, args, nil)
	if !res.IsError {
		t.Fatalf("call %s: got success %v, want refusal %s", tool, res.StructuredContent, code)
	}
	var r mcpserver.Refusal
	decodeContent(t, res, &r)
	if r.Code != code || r.Detail == "" {
		t.Fatalf("call %s: got refusal %+v, want code %s with a detail", tool, r, code)
	}
	if !strings.Contains(textOf(res), code) {
		t.Errorf("call %s: text %q does not name the code %s", tool, textOf(res), code)
	}
}

func textOf(res *mcp.CallToolResult) string {
	var parts []string
	for _, c := range res.Content {
		if tc, ok := c.(*mcp.TextContent); ok {
			parts = append(parts, tc.Text)
		}
	}
	return strings.Join(parts, "\n")
}

func toolNames(t *testing.T, cs *mcp.ClientSession) []string {
	t.Helper()
	res, err := cs.ListTools(t.Context(), nil)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, tool := range res.Tools {
		names = append(names, tool.Name)
	}
	slices.Sort(names)
	return names
}

// untilWaiting returns once n reads wait on member's inbox, or fails the
// test if done is answered first.
func untilWaiting[T any](t *testing.T, svc *core.Service, team, member string, n int, done <-chan T) {
	t.Helper()
	for testkit.Hub(svc).Waiting(team, member) < n {
		select {
		case r := <-done:
			t.Fatalf("answered before anything was sent: %+v", r)
		default:
			runtime.Gosched()
		}
	}
}

type inbox struct {
	Messages []core.Message `json:"messages"`
}
