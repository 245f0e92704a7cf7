package mcpserver_test

import (
	"bufio"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"mailroom/internal/core"
	"mailroom/internal/httpapi"
	"mailroom/internal/mcpserver"
	"mailroom/internal/testkit"
)

// newFullEnv serves the REST API and /mcp from one server, as the command
// does (internal/app), so that a test sees a session in the team
// document and on the event stream.
func newFullEnv(t *testing.T, configure ...func(*mcpserver.Options)) *env {
	t.Helper()
	svc := testkit.OpenService(t, t.TempDir())
	log := slog.New(slog.DiscardHandler)
	rest, err := httpapi.NewHandler(svc, httpapi.Options{AdminToken: adminToken, Logger: log})
	if err != nil {
		t.Fatal(err)
	}
	opts := mcpserver.Options{AdminToken: adminToken, Logger: log}
	for _, c := range configure {
		c(&opts)
	}
	h, err := mcpserver.New(svc, opts)
	if err != nil {
		t.Fatal(err)
	}
	mux := http.NewServeMux()
	mux.Handle(mcpserver.Path, h)
	mux.Handle("/", rest)
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	e := &env{t: t, svc: svc, h: h, srv: srv, endpoint: srv.URL + mcpserver.Path, tokens: map[string]map[string]string{}}
	e.newTeam("demo", nil)
	return e
}

// benchTeam creates team "bench" with a workspace and a reader, and
// returns the reader's token.
func (e *env) benchTeam() string {
	e.t.Helper()
	_, created, err := e.svc.CreateTeam(core.AsAdmin(e.t.Context()), core.TeamSpec{Name: "bench", Workspace: true,
		Members: []core.MemberSpec{{Name: "reader", Role: "runs the program"}}})
	if err != nil {
		e.t.Fatal(err)
	}
	for _, m := range created {
		if m.Name == "reader" {
			return m.Token
		}
	}
	e.t.Fatal("the team was created without its reader")
	return ""
}

// connectWatchingTools connects as token; the channel gets a value for
// every notifications/tools/list_changed.
func (e *env) connectWatchingTools(token string) (*mcp.ClientSession, <-chan struct{}) {
	changed := make(chan struct{}, 8)
	cs := e.connect(token, &mcp.ClientOptions{
		ToolListChangedHandler: func(context.Context, *mcp.ToolListChangedRequest) { changed <- struct{}{} },
	})
	return cs, changed
}

// memberEvents is an admin's event stream of one team, open from the
// moment it is returned, delivering the member events.
func (e *env) memberEvents(team string) <-chan core.MemberView {
	e.t.Helper()
	ctx, cancel := context.WithCancel(e.t.Context())
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, e.srv.URL+"/api/v1/events?team="+team, nil)
	if err != nil {
		e.t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+adminToken)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		e.t.Fatal(err)
	}
	e.t.Cleanup(func() { cancel(); resp.Body.Close() })
	if resp.StatusCode != http.StatusOK {
		e.t.Fatalf("GET events = %d, want 200", resp.StatusCode)
	}
	lines := bufio.NewReader(resp.Body)
	// The opening comment says the stream is subscribed: nothing after it
	// is missed.
	if l, err := lines.ReadString('\n'); err != nil || !strings.HasPrefix(l, ":") {
		e.t.Fatalf("first line = %q (%v), want the opening comment", l, err)
	}
	out := make(chan core.MemberView, 64)
	go func() {
		defer close(out)
		for {
			l, err := lines.ReadString('\n')
			if err != nil {
				return
			}
			data, ok := strings.CutPrefix(strings.TrimSuffix(l, "\n"), "data: ")
			if !ok {
				continue
			}
			var ev struct {
				Type string          `json:"type"`
				Data json.RawMessage `json:"data"`
			}
			if json.Unmarshal([]byte(data), &ev) != nil || ev.Type != core.EventMember || !strings.HasPrefix(string(ev.Data), "{") {
				continue
			}
			var mv core.MemberView
			if json.Unmarshal(ev.Data, &mv) == nil {
				out <- mv
			}
		}
	}()
	return out
}

// nextMember returns the next member event of member.
func nextMember(t *testing.T, events <-chan core.MemberView, member string, want func(core.MemberView) bool) core.MemberView {
	t.Helper()
	// Other member events of member come between (one announces that it
	// made MCP requests, mcp_last_seen): the first that is wanted counts.
	timeout := time.After(10 * time.Second)
	var last *core.MemberView
	for {
		select {
		case mv, ok := <-events:
			if !ok {
				t.Fatalf("the event stream ended before a member event of %s", member)
			}
			if mv.Name == member {
				if want(mv) {
					return mv
				}
				last = &mv
			}
		case <-timeout:
			t.Fatalf("no wanted member event of %s within 10 s; the last was %+v", member, last)
		}
	}
}

// sessionsAre wants a member event with n sessions.
func sessionsAre(n int) func(core.MemberView) bool {
	return func(mv core.MemberView) bool { return mv.MCPSessions == n }
}

// teamSessions reads mcp_sessions of every member from GET /teams/{team}
// as token.
func (e *env) teamSessions(team, token string) map[string]int {
	e.t.Helper()
	req, err := http.NewRequestWithContext(e.t.Context(), http.MethodGet, e.srv.URL+"/api/v1/teams/"+team, nil)
	if err != nil {
		e.t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+token)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		e.t.Fatal(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		e.t.Fatal(err)
	}
	if resp.StatusCode != http.StatusOK {
		e.t.Fatalf("GET team = %d %s, want 200", resp.StatusCode, body)
	}
	var doc struct {
		Members []struct {
			Name        string `json:"name"`
			MCPSessions *int   `json:"mcp_sessions"`
		} `json:"members"`
	}
	if err := json.Unmarshal(body, &doc); err != nil {
		e.t.Fatalf("team document %s: %v", body, err)
	}
	got := map[string]int{}
	for _, m := range doc.Members {
		if m.MCPSessions == nil {
			e.t.Fatalf("member %s has no mcp_sessions in %s", m.Name, body)
		}
		got[m.Name] = *m.MCPSessions
	}
	return got
}

// TestSessionsInTeamDocumentAndEvents: opening a session with the SDK's
// client shows in the team document and is announced with a member event;
// closing it takes it away again, for the admin and for a member alike.
func TestSessionsInTeamDocumentAndEvents(t *testing.T) {
	e := newFullEnv(t)
	events := e.memberEvents("demo")
	want := func(step string, wantCounts map[string]int) {
		t.Helper()
		for _, tok := range []string{adminToken, e.tokens["demo"]["lead"]} {
			got := e.teamSessions("demo", tok)
			for name, n := range wantCounts {
				if got[name] != n {
					t.Errorf("%s: team document mcp_sessions of %s = %d, want %d (all: %v)", step, name, got[name], n, got)
				}
			}
		}
	}
	want("before any session", map[string]int{"lead": 0, "reader": 0, "reviewer": 0})

	first := e.member("demo", "reader")
	if mv := nextMember(t, events, "reader", sessionsAre(1)); mv.MCPSessions != 1 {
		t.Fatalf("member event after the first session opened: mcp_sessions = %d, want 1", mv.MCPSessions)
	}
	want("one session", map[string]int{"lead": 0, "reader": 1, "reviewer": 0})

	second := e.member("demo", "reader")
	if mv := nextMember(t, events, "reader", sessionsAre(2)); mv.MCPSessions != 2 {
		t.Fatalf("member event after the second session opened: mcp_sessions = %d, want 2", mv.MCPSessions)
	}
	want("two sessions", map[string]int{"reader": 2})

	// A member event for another reason carries the count too: reader
	// agrees to shut down, and its member event (now closed) still says
	// two sessions.
	lead := e.member("demo", "lead")
	if mv := nextMember(t, events, "lead", sessionsAre(1)); mv.MCPSessions != 1 {
		t.Fatalf("member event after lead's session opened: mcp_sessions = %d, want 1", mv.MCPSessions)
	}
	var opened struct {
		RequestID string `json:"request_id"`
	}
	mustCall(t, lead, "request_shutdown", map[string]any{"target": "reader"}, &opened)
	mustCall(t, first, "reply_request", map[string]any{"request_id": opened.RequestID, "approve": true}, nil)
	if mv := nextMember(t, events, "reader", func(mv core.MemberView) bool { return mv.Status == core.StatusClosed }); mv.Status != core.StatusClosed || mv.MCPSessions != 2 {
		t.Fatalf("member event of the shutdown: status %s, mcp_sessions %d; want %s, 2", mv.Status, mv.MCPSessions, core.StatusClosed)
	}
	want("shut down", map[string]int{"lead": 1, "reader": 2, "reviewer": 0})

	if err := first.Close(); err != nil {
		t.Fatal(err)
	}
	if mv := nextMember(t, events, "reader", sessionsAre(1)); mv.MCPSessions != 1 {
		t.Fatalf("member event after one session closed: mcp_sessions = %d, want 1", mv.MCPSessions)
	}
	want("one closed", map[string]int{"lead": 1, "reader": 1})

	if err := second.Close(); err != nil {
		t.Fatal(err)
	}
	if mv := nextMember(t, events, "reader", sessionsAre(0)); mv.MCPSessions != 0 {
		t.Fatalf("member event after the last session closed: mcp_sessions = %d, want 0", mv.MCPSessions)
	}
	if err := lead.Close(); err != nil {
		t.Fatal(err)
	}
	if mv := nextMember(t, events, "lead", sessionsAre(0)); mv.MCPSessions != 0 {
		t.Fatalf("member event after lead's session closed: mcp_sessions = %d, want 0", mv.MCPSessions)
	}
	want("all closed", map[string]int{"lead": 0, "reader": 0, "reviewer": 0})
}

// patchTeam sends PATCH /teams/{team} as token and returns the status.
func (e *env) patchTeam(team, token, body string) int {
	e.t.Helper()
	req, err := http.NewRequestWithContext(e.t.Context(), http.MethodPatch, e.srv.URL+"/api/v1/teams/"+team, strings.NewReader(body))
	if err != nil {
		e.t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+token)
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		e.t.Fatal(err)
	}
	defer resp.Body.Close()
	_, _ = io.Copy(io.Discard, resp.Body)
	return resp.StatusCode
}

// toolDescription is what tools/list says of one tool.
func toolDescription(t *testing.T, cs *mcp.ClientSession, name string) string {
	t.Helper()
	res, err := cs.ListTools(t.Context(), nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, tool := range res.Tools {
		if tool.Name == name {
			return tool.Description
		}
	}
	t.Fatalf("tools/list has no %s", name)
	return ""
}

// TestToolsFollowTeamLimits: a session's tools state the team's limits;
// when the admin changes a limit while the session is open, the session
// is sent notifications/tools/list_changed and lists the tool built from
// the new limit.
func TestToolsFollowTeamLimits(t *testing.T) {
	e := newFullEnv(t, func(o *mcpserver.Options) { o.Workspaces = t.TempDir() })
	token := e.benchTeam()
	reader, changed := e.connectWatchingTools(token)
	before := toolNames(t, reader)
	// run_main states how long the host's permission may take.
	if got, want := toolDescription(t, reader, "run_main"), "up to 300 seconds"; !strings.Contains(got, want) {
		t.Fatalf("run_main before the change: %q, want it to say %q", got, want)
	}

	if got := e.patchTeam("bench", token, `{"limits": {"permission_timeout_s": 600}}`); got != http.StatusForbidden {
		t.Fatalf("PATCH team as a member = %d, want 403", got)
	}
	if got := e.patchTeam("bench", adminToken, `{"limits": {"permission_timeout_s": 600}}`); got != http.StatusOK {
		t.Fatalf("PATCH team as the admin = %d, want 200", got)
	}
	select {
	case <-changed:
	case <-t.Context().Done():
		t.Fatal("no notifications/tools/list_changed after the team's limits changed")
	}
	if got, want := toolDescription(t, reader, "run_main"), "up to 600 seconds"; !strings.Contains(got, want) {
		t.Fatalf("run_main after the change: %q, want it to say %q", got, want)
	}
	if got := toolNames(t, reader); !slices.Equal(got, before) {
		t.Errorf("tools after the change = %v, want the same tools as before %v", got, before)
	}
}
