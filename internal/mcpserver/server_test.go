package mcpserver_test

import (
	"context"
	"encoding/json"
	"net/http"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"mailroom/internal/core"
	"mailroom/internal/mcpserver"
)

func TestToolsListFitsTheMember(t *testing.T) {
	e := newEnv(t)
	common := []string{"check_replies", "list_requests", "mark_read", "read_inbox", "reply_request", "send_message", "team", "wait_for_mail",
		"create_task", "list_tasks", "claim_task", "complete_task", "release_task",
		"reserve_paths", "release_reservation", "list_reservations", "check_paths", "search_mail", "ack_letter", "archive_inbox", "read_archive"}
	wantLead := append(slices.Clone(common), "request_shutdown")
	wantReader := append(slices.Clone(common), "submit_plan")
	slices.Sort(wantLead)
	slices.Sort(wantReader)
	if got := toolNames(t, e.member("demo", "lead")); !slices.Equal(got, wantLead) {
		t.Errorf("lead's tools = %v, want %v", got, wantLead)
	}
	reader := e.member("demo", "reader")
	if got := toolNames(t, reader); !slices.Equal(got, wantReader) {
		t.Errorf("reader's tools = %v, want %v", got, wantReader)
	}
	// The team's limits are stated in the descriptions, not as constraints
	// that the SDK would enforce before core.
	res, err := reader.ListTools(t.Context(), nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, tool := range res.Tools {
		if tool.Name != "send_message" {
			continue
		}
		b, _ := json.Marshal(tool.InputSchema)
		if !strings.Contains(string(b), "600 characters") || strings.Contains(string(b), "maxLength") {
			t.Errorf("send_message schema = %s, want the body limit (600) in a description and no maxLength", b)
		}
	}
}

// TestPlanProtocol runs every tool's success path through the plan and
// shutdown protocols, two members in two sessions.
func TestPlanProtocol(t *testing.T) {
	e := newEnv(t)
	lead, reader := e.member("demo", "lead"), e.member("demo", "reader")

	var team struct {
		Name    string           `json:"name"`
		Members []map[string]any `json:"members"`
	}
	mustCall(t, reader, "team", map[string]any{}, &team)
	if team.Name != "demo" || len(team.Members) != 3 {
		t.Fatalf("team = %+v, want demo with 3 members", team)
	}
	for _, m := range team.Members {
		if _, ok := m["token"]; ok || m["role"] == nil || m["status"] == nil {
			t.Fatalf("team member %v: want name, role and status, no token", m)
		}
	}

	var sent core.SendResult
	mustCall(t, reader, "send_message", map[string]any{"to": "lead", "body": "  starting now \n"}, &sent)
	if sent.ID != "lead-1" || sent.Status != "queued" {
		t.Fatalf("send = %+v, want lead-1 queued", sent)
	}

	var opened core.OpenResult
	mustCall(t, reader, "submit_plan", map[string]any{"plan": "read the source, then report"}, &opened)
	if opened.RequestID != "req-1" || opened.Status != "pending" {
		t.Fatalf("submit_plan = %+v, want req-1 pending", opened)
	}

	var in inbox
	mustCall(t, lead, "read_inbox", map[string]any{}, &in)
	if len(in.Messages) != 2 || in.Messages[0].Sender != "reader" || in.Messages[0].Body != "starting now" {
		t.Fatalf("lead's inbox = %+v, want the trimmed letter and the plan letter from reader", in.Messages)
	}
	mustCall(t, lead, "read_inbox", map[string]any{"after": "lead-1"}, &in)
	if len(in.Messages) != 1 || in.Messages[0].ID != "lead-2" {
		t.Fatalf("lead's inbox after lead-1 = %+v, want lead-2 only", in.Messages)
	}

	var reqs struct {
		Requests []core.Request `json:"requests"`
	}
	mustCall(t, lead, "list_requests", map[string]any{}, &reqs)
	if len(reqs.Requests) != 1 || reqs.Requests[0].Kind != "plan" || reqs.Requests[0].Sender != "reader" {
		t.Fatalf("requests = %+v, want reader's plan", reqs.Requests)
	}

	var replied core.ReplyResult
	mustCall(t, lead, "reply_request", map[string]any{"request_id": "req-1", "approve": true, "feedback": "go ahead"}, &replied)
	if replied.Status != "queued" || replied.Receipt != "reader-1" {
		t.Fatalf("reply = %+v, want queued with receipt reader-1", replied)
	}
	mustCall(t, lead, "reply_request", map[string]any{"request_id": "req-1", "approve": true, "feedback": "go ahead"}, &replied)
	if replied.Status != "already_sent" {
		t.Fatalf("same reply again = %+v, want already_sent", replied)
	}

	var replies struct {
		Results []core.MatchResult `json:"results"`
	}
	mustCall(t, reader, "check_replies", map[string]any{}, &replies)
	if len(replies.Results) != 1 || replies.Results[0].Status != "approved" || replies.Results[0].RequestID != "req-1" {
		t.Fatalf("check_replies = %+v, want req-1 approved", replies.Results)
	}

	mustCall(t, lead, "request_shutdown", map[string]any{"target": "reviewer"}, &opened)
	if opened.RequestID != "req-2" {
		t.Fatalf("request_shutdown = %+v, want req-2", opened)
	}
	r, err := e.svc.Request(t.Context(), "demo", "req-2")
	if err != nil || r.Kind != "shutdown" || r.Target != "reviewer" || r.Payload == "" {
		t.Fatalf("req-2 = %+v (%v), want a shutdown of reviewer with a payload", r, err)
	}
}

func TestRefusals(t *testing.T) {
	e := newEnv(t)
	lead, reader, reviewer := e.member("demo", "lead"), e.member("demo", "reader"), e.member("demo", "reviewer")

	tests := []struct {
		name string
		cs   *mcp.ClientSession
		tool string
		args map[string]any
		code string
	}{
		{"BodyTooLong", reader, "send_message", map[string]any{"to": "lead", "body": strings.Repeat("é", 601)}, "body_length"},
		{"BodyBlank", reader, "send_message", map[string]any{"to": "lead", "body": " \n "}, "body_length"},
		{"UnknownMember", reader, "send_message", map[string]any{"to": "writer", "body": "hi"}, "unknown_member"},
		{"SenderField", reader, "send_message", map[string]any{"to": "lead", "body": "hi", "sender": "reviewer"}, "validation_failed"},
		{"MissingBody", reader, "send_message", map[string]any{"to": "lead"}, "validation_failed"},
		{"WrongType", lead, "reply_request", map[string]any{"request_id": "req-1", "approve": "yes"}, "validation_failed"},
		{"AfterNotALetter", reader, "read_inbox", map[string]any{"after": "lead-1"}, "validation_failed"},
		{"WaitTooLong", reader, "wait_for_mail", map[string]any{"timeout_seconds": 61}, "validation_failed"},
		{"PlanTooLong", reader, "submit_plan", map[string]any{"plan": strings.Repeat("p", 181)}, "body_length"},
		{"FeedbackTooLong", lead, "reply_request", map[string]any{"request_id": "req-9", "approve": true, "feedback": strings.Repeat("f", 121)}, "body_length"},
		{"NoSuchRequest", lead, "reply_request", map[string]any{"request_id": "req-9", "approve": true}, "not_found"},
		{"ShutdownOfLead", lead, "request_shutdown", map[string]any{"target": "lead"}, "wrong_direction"},
		{"ShutdownUnknown", lead, "request_shutdown", map[string]any{"target": "writer"}, "unknown_member"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			wantRefusal(t, tt.cs, tt.tool, tt.args, tt.code)
		})
	}

	t.Run("RequestPendingAndForbidden", func(t *testing.T) {
		mustCall(t, reader, "submit_plan", map[string]any{"plan": "first plan"}, nil)
		wantRefusal(t, reader, "submit_plan", map[string]any{"plan": "second plan"}, "request_pending")
		// Only the target (lead) may answer reader's plan.
		wantRefusal(t, reviewer, "reply_request", map[string]any{"request_id": "req-1", "approve": true}, "forbidden")
		wantRefusal(t, reader, "reply_request", map[string]any{"request_id": "req-1", "approve": true}, "forbidden")
		mustCall(t, lead, "reply_request", map[string]any{"request_id": "req-1", "approve": false, "feedback": "no"}, nil)
		wantRefusal(t, lead, "reply_request", map[string]any{"request_id": "req-1", "approve": true}, "reply_conflict")
	})

	t.Run("MemberClosed", func(t *testing.T) {
		mustCall(t, lead, "request_shutdown", map[string]any{"target": "reviewer", "reason": "done"}, nil)
		mustCall(t, reviewer, "reply_request", map[string]any{"request_id": "req-2", "approve": true}, nil)
		mustCall(t, lead, "check_replies", map[string]any{}, nil)
		wantRefusal(t, lead, "request_shutdown", map[string]any{"target": "reviewer"}, "member_closed")
	})

	t.Run("RequestLimit", func(t *testing.T) {
		limits := core.DefaultLimits()
		limits.Requests = 1
		e.newTeam("small", &limits)
		lead := e.member("small", "lead")
		mustCall(t, lead, "request_shutdown", map[string]any{"target": "reader"}, nil)
		wantRefusal(t, lead, "request_shutdown", map[string]any{"target": "reviewer"}, "request_limit")
	})

	t.Run("InboxFull", func(t *testing.T) {
		limits := core.DefaultLimits()
		limits.InboxMessages = 1
		e.newTeam("tiny", &limits)
		reader := e.member("tiny", "reader")
		mustCall(t, reader, "send_message", map[string]any{"to": "lead", "body": "one"}, nil)
		wantRefusal(t, reader, "send_message", map[string]any{"to": "lead", "body": "two"}, "inbox_full")
	})

	t.Run("ToolOfTheOtherSide", func(t *testing.T) {
		// Not listed, and not callable either.
		if res, err := lead.CallTool(t.Context(), &mcp.CallToolParams{Name: "submit_plan", Arguments: map[string]any{"plan": "x"}}); err == nil && !res.IsError {
			t.Fatalf("lead called submit_plan: %+v", res)
		}
		if res, err := reader.CallTool(t.Context(), &mcp.CallToolParams{Name: "request_shutdown", Arguments: map[string]any{"target": "reviewer"}}); err == nil && !res.IsError {
			t.Fatalf("reader called request_shutdown: %+v", res)
		}
	})
}

// TestActsOnlyAsItself: the token that opened the session is the only
// identity; no input names another member and one's inbox is one's own.
func TestActsOnlyAsItself(t *testing.T) {
	e := newEnv(t)
	reader := e.member("demo", "reader")
	wantRefusal(t, reader, "send_message", map[string]any{"to": "reviewer", "body": "hi", "sender": "lead"}, "validation_failed")
	mustCall(t, reader, "send_message", map[string]any{"to": "reviewer", "body": "hi"}, nil)
	msgs, err := e.svc.Inbox(t.Context(), "demo", "reviewer")
	if err != nil || len(msgs) != 1 || msgs[0].Sender != "reader" {
		t.Fatalf("reviewer's inbox = %+v (%v), want one letter from reader", msgs, err)
	}
	if _, err := reader.ReadResource(t.Context(), &mcp.ReadResourceParams{URI: "mailroom://teams/demo/members/reviewer/inbox"}); err == nil {
		t.Fatal("reader read reviewer's inbox resource")
	}
	if err := reader.Subscribe(t.Context(), &mcp.SubscribeParams{URI: "mailroom://teams/demo/members/reviewer/inbox"}); err == nil {
		t.Fatal("reader subscribed to reviewer's inbox")
	}
	// A member of another team reads and writes only its own team.
	e.newTeam("other", nil)
	other := e.member("other", "reader")
	mustCall(t, other, "send_message", map[string]any{"to": "reviewer", "body": "hello"}, nil)
	if msgs, _ := e.svc.Inbox(t.Context(), "demo", "reviewer"); len(msgs) != 1 {
		t.Fatalf("demo's reviewer got %d letters, want still 1", len(msgs))
	}
}

func TestWaitForMail(t *testing.T) {
	e := newEnv(t)
	lead, reader := e.member("demo", "lead"), e.member("demo", "reader")
	mustCall(t, lead, "send_message", map[string]any{"to": "reader", "body": "old"}, nil)

	type answer struct {
		res *mcp.CallToolResult
		err error
	}
	done := make(chan answer, 1)
	go func() {
		res, err := reader.CallTool(t.Context(), &mcp.CallToolParams{Name: "wait_for_mail", Arguments: map[string]any{"after": "reader-1", "timeout_seconds": 60}})
		done <- answer{res, err}
	}()
	untilWaiting(t, e.svc, "demo", "reader", 1, done)
	mustCall(t, lead, "send_message", map[string]any{"to": "reader", "body": "new"}, nil)
	a := <-done
	if a.err != nil || a.res.IsError {
		t.Fatalf("wait_for_mail: %v %+v", a.err, a.res)
	}
	var in inbox
	decodeContent(t, a.res, &in)
	if len(in.Messages) != 1 || in.Messages[0].Body != "new" || in.Messages[0].Sender != "lead" {
		t.Fatalf("wait_for_mail = %+v, want only the new letter from lead", in.Messages)
	}

	// Nothing new: empty at the deadline.
	mustCall(t, reader, "wait_for_mail", map[string]any{"after": "reader-2", "timeout_seconds": 1}, &in)
	if in.Messages == nil || len(in.Messages) != 0 {
		t.Fatalf("wait_for_mail at its deadline = %#v, want an empty list", in.Messages)
	}
}

func TestInboxResourceSubscription(t *testing.T) {
	e := newEnv(t)
	updated := make(chan string, 4)
	reader := e.connect(e.tokens["demo"]["reader"], &mcp.ClientOptions{
		ResourceUpdatedHandler: func(_ context.Context, req *mcp.ResourceUpdatedNotificationRequest) {
			updated <- req.Params.URI
		},
	})
	lead := e.member("demo", "lead")
	uri := "mailroom://teams/demo/members/reader/inbox"

	tmpl, err := reader.ListResourceTemplates(t.Context(), nil)
	if err != nil || len(tmpl.ResourceTemplates) != 1 || tmpl.ResourceTemplates[0].URITemplate != "mailroom://teams/{team}/members/{member}/inbox" {
		t.Fatalf("resource templates = %+v (%v), want the inbox template", tmpl, err)
	}
	if err := reader.Subscribe(t.Context(), &mcp.SubscribeParams{URI: uri}); err != nil {
		t.Fatal(err)
	}
	untilWaiting(t, e.svc, "demo", "reader", 1, make(chan int))
	mustCall(t, lead, "send_message", map[string]any{"to": "reader", "body": "ping"}, nil)
	if got := <-updated; got != uri {
		t.Fatalf("updated %q, want %q", got, uri)
	}
	res, err := reader.ReadResource(t.Context(), &mcp.ReadResourceParams{URI: uri})
	if err != nil {
		t.Fatal(err)
	}
	var in inbox
	if err := json.Unmarshal([]byte(res.Contents[0].Text), &in); err != nil || len(in.Messages) != 1 || in.Messages[0].Body != "ping" {
		t.Fatalf("inbox resource = %s (%v), want the one letter", res.Contents[0].Text, err)
	}
}

// initialize is a bare initialize request, for the HTTP-level checks.
const initialize = `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"raw","version":"1"}}}`

func (e *env) post(token, origin, body string, header map[string]string) *http.Response {
	e.t.Helper()
	req, err := http.NewRequestWithContext(e.t.Context(), http.MethodPost, e.srv.URL, strings.NewReader(body))
	if err != nil {
		e.t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	if origin != "" {
		req.Header.Set("Origin", origin)
	}
	for k, v := range header {
		req.Header.Set(k, v)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		e.t.Fatal(err)
	}
	e.t.Cleanup(func() { resp.Body.Close() })
	return resp
}

func wantProblem(t *testing.T, resp *http.Response, status int, code string) {
	t.Helper()
	if resp.StatusCode != status {
		t.Fatalf("status = %d, want %d", resp.StatusCode, status)
	}
	var p struct {
		Code string `json:"code"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&p); err != nil || p.Code != code {
		t.Fatalf("problem code = %q (%v), want %q", p.Code, err, code)
	}
}

func TestHTTPRefusals(t *testing.T) {
	e := newEnv(t)
	tok := e.tokens["demo"]["reader"]

	t.Run("NoToken", func(t *testing.T) {
		resp := e.post("", "", initialize, nil)
		if !strings.HasPrefix(resp.Header.Get("WWW-Authenticate"), "Bearer") {
			t.Errorf("WWW-Authenticate = %q, want Bearer", resp.Header.Get("WWW-Authenticate"))
		}
		wantProblem(t, resp, http.StatusUnauthorized, "unauthorized")
	})
	t.Run("UnknownToken", func(t *testing.T) {
		resp := e.post("mr_not-a-token", "", initialize, nil)
		if !strings.HasPrefix(resp.Header.Get("WWW-Authenticate"), "Bearer") {
			t.Errorf("WWW-Authenticate = %q, want Bearer", resp.Header.Get("WWW-Authenticate"))
		}
		wantProblem(t, resp, http.StatusUnauthorized, "unauthorized")
	})
	t.Run("AdminToken", func(t *testing.T) {
		wantProblem(t, e.post(adminToken, "", initialize, nil), http.StatusForbidden, "forbidden")
	})
	t.Run("ForeignOrigin", func(t *testing.T) {
		wantProblem(t, e.post(tok, "http://evil.example", initialize, nil), http.StatusForbidden, "forbidden")
		if _, err := e.tryConnectOrigin(tok, "http://evil.example"); err == nil {
			t.Fatal("a client sending a foreign Origin connected")
		}
	})
	t.Run("SameOrigin", func(t *testing.T) {
		resp := e.post(tok, e.srv.URL, initialize, nil)
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("status = %d, want 200 for the server's own origin", resp.StatusCode)
		}
	})
	t.Run("BodyTooLarge", func(t *testing.T) {
		big := `{"jsonrpc":"2.0","id":1,"method":"ping","params":{"pad":"` + strings.Repeat("x", 1<<20) + `"}}`
		wantProblem(t, e.post(tok, "", big, nil), http.StatusRequestEntityTooLarge, "body_too_large")
	})
	t.Run("OtherTokenOnASession", func(t *testing.T) {
		resp := e.post(tok, "", initialize, nil)
		id := resp.Header.Get("Mcp-Session-Id")
		if resp.StatusCode != http.StatusOK || id == "" {
			t.Fatalf("initialize: status %d, session %q", resp.StatusCode, id)
		}
		ping := `{"jsonrpc":"2.0","id":2,"method":"ping"}`
		other := e.post(e.tokens["demo"]["lead"], "", ping, map[string]string{"Mcp-Session-Id": id, "Mcp-Protocol-Version": "2025-06-18"})
		if other.StatusCode != http.StatusForbidden {
			t.Fatalf("another member's token on the session: status %d, want 403", other.StatusCode)
		}
		same := e.post(tok, "", ping, map[string]string{"Mcp-Session-Id": id, "Mcp-Protocol-Version": "2025-06-18"})
		if same.StatusCode != http.StatusOK {
			t.Fatalf("the session's own token: status %d, want 200", same.StatusCode)
		}
	})
}

func (e *env) tryConnectOrigin(token, origin string) (*mcp.ClientSession, error) {
	client := mcp.NewClient(&mcp.Implementation{Name: "test", Version: "1"}, nil)
	transport := &mcp.StreamableClientTransport{
		Endpoint:   e.srv.URL,
		HTTPClient: &http.Client{Transport: bearer{token: token, origin: origin, base: http.DefaultTransport}},
		MaxRetries: -1,
	}
	return client.Connect(e.t.Context(), transport, nil)
}

func TestSessionBounds(t *testing.T) {
	e := newEnv(t, func(o *mcpserver.Options) {
		o.MaxSessionsPerToken = 2
		o.MaxSessions = 3
	})
	tok := e.tokens["demo"]["reader"]
	first := e.connect(tok, nil)
	e.connect(tok, nil)
	if _, err := e.tryConnect(tok, nil); err == nil {
		t.Fatal("a third session of one token was opened, want it refused")
	}
	wantProblem(t, e.post(tok, "", initialize, nil), http.StatusTooManyRequests, "too_many_streams")
	e.connect(e.tokens["demo"]["lead"], nil)
	wantProblem(t, e.post(e.tokens["demo"]["reviewer"], "", initialize, nil), http.StatusTooManyRequests, "too_many_streams")

	// Closing a session frees its place.
	if err := first.Close(); err != nil {
		t.Fatal(err)
	}
	for e.h.Sessions() > 2 {
		runtime.Gosched() // the place is given back once the session has ended
	}
	e.connect(tok, nil)
}

func TestBadRequestsAreNotSessions(t *testing.T) {
	e := newEnv(t, func(o *mcpserver.Options) { o.MaxSessionsPerToken = 1 })
	tok := e.tokens["demo"]["reader"]
	// A malformed first request opens nothing, so it does not use up the place.
	for range 3 {
		resp := e.post(tok, "", `{"not json`, nil)
		if resp.StatusCode < 400 {
			t.Fatalf("malformed request: status %d, want an error", resp.StatusCode)
		}
	}
	e.connect(tok, nil)
}

// TestIdleSessionExpires: a session with no request for SessionTimeout is
// closed, its place is given back, and a request on it is refused.
func TestIdleSessionExpires(t *testing.T) {
	e := newEnv(t, func(o *mcpserver.Options) {
		o.MaxSessionsPerToken = 1
		o.SessionTimeout = 200 * time.Millisecond
	})
	tok := e.tokens["demo"]["reader"]
	idle := e.connect(tok, nil)
	if got := e.h.Sessions(); got != 1 {
		t.Fatalf("sessions after connecting = %d, want 1", got)
	}
	for start := time.Now(); e.h.Sessions() != 0; time.Sleep(20 * time.Millisecond) { // polling interval
		if time.Since(start) > 30*time.Second {
			t.Fatalf("an idle session is still open after 30 s (timeout 200 ms): %d sessions, want 0", e.h.Sessions())
		}
	}
	// The member no longer counts as connected.
	view, err := e.svc.Team(core.AsAdmin(t.Context()), "demo")
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range view.Members {
		if m.MCPSessions != 0 {
			t.Errorf("member %s after the expiry: mcp_sessions = %d, want 0", m.Name, m.MCPSessions)
		}
	}
	if _, err := idle.ListTools(t.Context(), nil); err == nil {
		t.Error("a request on the expired session succeeded, want it refused")
	}
	// The token's only place is free again.
	e.connect(tok, nil)
}

// TestSessionCapCannotBeBypassed: the session bounds count what the SDK
// opened, so an initialize the SDK accepts counts whatever else its body
// holds (a second "METHOD" member that a case-insensitive decoder would
// read instead), and a JSON-RPC batch is refused before the SDK sees it.
func TestSessionCapCannotBeBypassed(t *testing.T) {
	e := newEnv(t, func(o *mcpserver.Options) {
		o.MaxSessionsPerToken = 2
		o.MaxSessions = 3
	})
	tok := e.tokens["demo"]["reader"]
	disguised := `{"jsonrpc":"2.0","id":1,"method":"initialize","METHOD":"ping","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"raw","version":"1"}}}`
	for i := range 2 {
		resp := e.post(tok, "", disguised, nil)
		if resp.StatusCode != http.StatusOK || resp.Header.Get("Mcp-Session-Id") == "" {
			t.Fatalf("disguised initialize %d: status %d, session %q; want 200 with a session", i+1, resp.StatusCode, resp.Header.Get("Mcp-Session-Id"))
		}
	}
	if got := e.h.Sessions(); got != 2 {
		t.Fatalf("sessions after two disguised initializes = %d, want 2", got)
	}
	wantProblem(t, e.post(tok, "", disguised, nil), http.StatusTooManyRequests, "too_many_streams")
	wantProblem(t, e.post(tok, "", initialize, nil), http.StatusTooManyRequests, "too_many_streams")

	// The server's bound holds the same way.
	wantSession := func(token string) {
		t.Helper()
		if resp := e.post(token, "", disguised, nil); resp.StatusCode != http.StatusOK {
			t.Fatalf("initialize: status %d, want 200", resp.StatusCode)
		}
	}
	wantSession(e.tokens["demo"]["lead"])
	wantProblem(t, e.post(e.tokens["demo"]["reviewer"], "", disguised, nil), http.StatusTooManyRequests, "too_many_streams")
	if got := e.h.Sessions(); got != 3 {
		t.Fatalf("sessions = %d, want the server's 3", got)
	}
}

// TestBatchesRefused: a JSON-RPC batch, with or without a session, is 400
// validation_failed, and opens no session.
func TestBatchesRefused(t *testing.T) {
	e := newEnv(t)
	tok := e.tokens["demo"]["reader"]
	old := strings.Replace(initialize, "2025-06-18", "2025-03-26", 1)
	for _, body := range []string{"[" + initialize + "]", " \n[" + old + "]", "[" + old + "," + old + "]"} {
		wantProblem(t, e.post(tok, "", body, nil), http.StatusBadRequest, "validation_failed")
	}
	if got := e.h.Sessions(); got != 0 {
		t.Fatalf("sessions after batches = %d, want 0", got)
	}
	resp := e.post(tok, "", initialize, nil)
	id := resp.Header.Get("Mcp-Session-Id")
	if resp.StatusCode != http.StatusOK || id == "" {
		t.Fatalf("initialize: status %d, session %q", resp.StatusCode, id)
	}
	calls := `[{"jsonrpc":"2.0","id":2,"method":"ping"},{"jsonrpc":"2.0","id":3,"method":"ping"}]`
	wantProblem(t, e.post(tok, "", calls, map[string]string{"Mcp-Session-Id": id, "Mcp-Protocol-Version": "2025-06-18"}), http.StatusBadRequest, "validation_failed")
}

// TestToolInputsAreStrict: tool inputs are decoded as strictly as REST
// bodies: exact field names, no unknown field, no name twice; nothing is
// sent.
func TestToolInputsAreStrict(t *testing.T) {
	e := newEnv(t)
	reader := e.member("demo", "reader")
	wantRefusal(t, reader, "send_message", map[string]any{"To": "lead", "Body": "hi"}, "validation_failed")
	wantRefusal(t, reader, "send_message", json.RawMessage(`{"to":"lead","body":"hi","body":"twice"}`), "validation_failed")
	wantRefusal(t, reader, "send_message", json.RawMessage(`{"to":"lead","body":"hi","to":"reviewer"}`), "validation_failed")
	msgs, err := e.svc.LettersAfter(core.AsAdmin(t.Context()), "demo", "lead", "")
	if err != nil || len(msgs) != 0 {
		t.Fatalf("lead's inbox = %+v, %v; want empty", msgs, err)
	}
}
