package mcpserver_test

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"os"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"mailroom/internal/core"
	"mailroom/internal/testkit"
)

// modernVersion is the protocol without sessions.
const modernVersion = "2026-07-28"

// TestModernProtocol: the SDK's own client speaking 2026-07-28 over HTTP
// gets it (server/discover, no session id), lists and calls the member's
// tools, finds the inbox in resources/list, and the member document
// records it as seen.
func TestModernProtocol(t *testing.T) {
	e := newEnv(t)
	cs, err := e.connectVersion(e.tokens["demo"]["reader"], modernVersion, nil)
	if err != nil {
		t.Fatalf("connect with 2026-07-28: %v", err)
	}
	t.Cleanup(func() { _ = cs.Close() })
	if got := cs.InitializeResult().ProtocolVersion; got != modernVersion {
		t.Fatalf("negotiated protocol = %q, want %q", got, modernVersion)
	}
	if id := cs.ID(); id != "" {
		t.Errorf("session id under 2026-07-28 = %q, want none", id)
	}
	if names := toolNames(t, cs); !slices.Contains(names, "submit_plan") || slices.Contains(names, "request_shutdown") {
		t.Errorf("reader's tools = %v, want submit_plan and no request_shutdown", names)
	}
	lead, err := e.connectVersion(e.tokens["demo"]["lead"], modernVersion, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = lead.Close() })
	var sent struct{ ID string }
	mustCall(t, lead, "send_message", map[string]any{"to": "reader", "body": "hello"}, &sent)
	var in inbox
	mustCall(t, cs, "read_inbox", map[string]any{}, &in)
	if len(in.Messages) != 1 || in.Messages[0].ID != sent.ID {
		t.Fatalf("read_inbox = %+v, want the letter %s", in.Messages, sent.ID)
	}

	res, err := cs.ListResources(t.Context(), nil)
	if err != nil {
		t.Fatal(err)
	}
	const uri = "mailroom://teams/demo/members/reader/inbox"
	if len(res.Resources) != 1 || res.Resources[0].URI != uri {
		t.Fatalf("resources/list = %+v, want reader's inbox %s", res.Resources, uri)
	}
	if e.h.Sessions() != 0 {
		t.Errorf("open sessions after 2026-07-28 calls = %d, want 0", e.h.Sessions())
	}
	view, err := e.svc.Team(core.AsAdmin(t.Context()), "demo")
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range view.Members {
		switch m.Name {
		case "reader", "lead":
			if m.MCPLastSeen == nil || time.Since(*m.MCPLastSeen) > time.Minute {
				t.Errorf("%s's mcp_last_seen = %v, want about now", m.Name, m.MCPLastSeen)
			}
		default:
			if m.MCPLastSeen != nil {
				t.Errorf("%s's mcp_last_seen = %v, want null: it made no request", m.Name, m.MCPLastSeen)
			}
		}
	}
}

// TestRawDiscover: server/discover over plain HTTP lists 2026-07-28 and
// both session versions, with the headers 2026-07-28 requires and no
// session id.
func TestRawDiscover(t *testing.T) {
	e := newEnv(t)
	body := `{"jsonrpc":"2.0","id":1,"method":"server/discover","params":{"_meta":{` +
		`"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{}}}}`
	req, _ := http.NewRequestWithContext(t.Context(), http.MethodPost, e.endpoint, bytes.NewBufferString(body))
	req.Header.Set("Authorization", "Bearer "+e.tokens["demo"]["reader"])
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	req.Header.Set("Mcp-Protocol-Version", modernVersion)
	req.Header.Set("Mcp-Method", "server/discover")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK || resp.Header.Get("Mcp-Session-Id") != "" {
		t.Fatalf("discover: status %d, session id %q; want 200 and none", resp.StatusCode, resp.Header.Get("Mcp-Session-Id"))
	}
	var buf bytes.Buffer
	_, _ = buf.ReadFrom(resp.Body)
	raw := buf.Bytes()
	if i := bytes.Index(raw, []byte("data: ")); i >= 0 {
		raw = raw[i+len("data: "):]
	}
	var out struct {
		Result struct {
			ResultType        string   `json:"resultType"`
			SupportedVersions []string `json:"supportedVersions"`
		} `json:"result"`
	}
	if err := json.NewDecoder(bytes.NewReader(raw)).Decode(&out); err != nil {
		t.Fatalf("discover answer %s: %v", buf.Bytes(), err)
	}
	for _, v := range []string{modernVersion, "2025-11-25", "2025-06-18"} {
		if !slices.Contains(out.Result.SupportedVersions, v) {
			t.Errorf("discover supportedVersions = %v, want %s among them", out.Result.SupportedVersions, v)
		}
	}
	if out.Result.ResultType != "complete" {
		t.Errorf("discover resultType = %q, want complete", out.Result.ResultType)
	}
}

// TestSessionVersionsStillServed: clients of 2025-06-18 and 2025-11-25 get
// sessions on the same URL, as before.
func TestSessionVersionsStillServed(t *testing.T) {
	e := newEnv(t)
	for _, v := range []string{"2025-06-18", "2025-11-25"} {
		cs, err := e.connectVersion(e.tokens["demo"]["reader"], v, nil)
		if err != nil {
			t.Fatalf("connect with %s: %v", v, err)
		}
		if got := cs.InitializeResult().ProtocolVersion; got != v {
			t.Errorf("negotiated = %q, want %q", got, v)
		}
		if cs.ID() == "" {
			t.Errorf("%s: no session id", v)
		}
		var in inbox
		mustCall(t, cs, "read_inbox", map[string]any{}, &in)
		res, err := cs.ListResources(t.Context(), nil)
		if err != nil || len(res.Resources) != 1 {
			t.Errorf("%s: resources/list = %+v, %v; want the inbox", v, res, err)
		}
		if n := e.h.Sessions(); n != 1 {
			t.Errorf("%s: open sessions = %d, want 1", v, n)
		}
		_ = cs.Close()
		deadline := time.Now().Add(5 * time.Second)
		for e.h.Sessions() != 0 && time.Now().Before(deadline) {
			time.Sleep(10 * time.Millisecond)
		}
	}
}

// TestListenNotifiesNewLetters: under 2026-07-28, subscriptions/listen on
// one's inbox delivers notifications/resources/updated for each letter,
// measured from the send's return (the REST 201) to the notification's
// arrival. MAILROOM_LISTEN_LETTERS sets how many letters (default 20).
func TestListenNotifiesNewLetters(t *testing.T) {
	e := newEnv(t)
	limits := core.DefaultLimits()
	limits.InboxMessages, limits.InboxBytes = 10000, 10<<20
	e.newTeam("wide", &limits)
	updated := make(chan time.Time, 16)
	cs, err := e.connectVersion(e.tokens["wide"]["reader"], modernVersion, &mcp.ClientOptions{
		ResourceUpdatedHandler: func(_ context.Context, req *mcp.ResourceUpdatedNotificationRequest) {
			updated <- time.Now()
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cs.Close() })
	const uri = "mailroom://teams/wide/members/reader/inbox"
	go func() { _ = cs.Subscribe(context.Background(), &mcp.SubscribeParams{URI: uri}) }()
	deadline := time.Now().Add(10 * time.Second)
	for testkit.Hub(e.svc).Waiting("wide", "reader") < 1 {
		if time.Now().After(deadline) {
			t.Fatal("the listen did not start watching reader's inbox within 10 s")
		}
		time.Sleep(time.Millisecond)
	}
	n := 20
	if s := os.Getenv("MAILROOM_LISTEN_LETTERS"); s != "" {
		n, _ = strconv.Atoi(s)
	}
	lead := core.AsMember(t.Context(), "wide", "lead")
	var lat []time.Duration
	for i := range n {
		if _, err := e.svc.Send(lead, core.SendInput{Team: "wide", To: "reader", Body: "letter " + strconv.Itoa(i)}); err != nil {
			t.Fatal(err)
		}
		sent := time.Now()
		select {
		case at := <-updated:
			lat = append(lat, at.Sub(sent))
		case <-time.After(10 * time.Second):
			t.Fatalf("letter %d: no notifications/resources/updated within 10 s", i)
		}
	}
	slices.Sort(lat)
	p := func(q float64) time.Duration { return lat[int(q*float64(len(lat)-1))] }
	t.Logf("subscriptions/listen: send → notification over %d letters: p50 %v, p99 %v, max %v", n, p(0.5), p(0.99), lat[len(lat)-1])
	// A generous bound for a loaded machine; the contract's 100 ms is
	// measured in BENCHMARKS.md.
	if p(0.5) > time.Second {
		t.Errorf("median send → notification = %v, want well under 1 s", p(0.5))
	}
}

// TestWaitForMailDefaultsToUnread: wait_for_mail with no arguments returns
// at once while unread letters wait, and once they are read sleeps until a
// new letter arrives; with after, after decides.
func TestWaitForMailDefaultsToUnread(t *testing.T) {
	e := newEnv(t)
	reader := e.member("demo", "reader")
	lead := e.member("demo", "lead")
	mustCall(t, lead, "send_message", map[string]any{"to": "reader", "body": "one"}, nil)
	var in inbox
	mustCall(t, reader, "wait_for_mail", map[string]any{}, &in)
	if len(in.Messages) != 1 {
		t.Fatalf("wait_for_mail {} with an unread letter = %+v, want it at once", in.Messages)
	}
	mustCall(t, reader, "mark_read", map[string]any{"through": in.Messages[0].ID}, nil)

	type answer struct {
		res *mcp.CallToolResult
		err error
	}
	done := make(chan answer, 1)
	go func() {
		res, err := reader.CallTool(t.Context(), &mcp.CallToolParams{Name: "wait_for_mail", Arguments: map[string]any{}})
		done <- answer{res, err}
	}()
	untilWaiting(t, e.svc, "demo", "reader", 1, done)
	mustCall(t, lead, "send_message", map[string]any{"to": "reader", "body": "two"}, nil)
	a := <-done
	if a.err != nil || a.res.IsError {
		t.Fatalf("wait_for_mail {}: %v %+v", a.err, a.res)
	}
	decodeContent(t, a.res, &in)
	if len(in.Messages) != 1 || in.Messages[0].Body != "two" {
		t.Fatalf("wait_for_mail {} after reading = %+v, want only the new letter", in.Messages)
	}
	// With after, unread_only defaults to false: the letters after it,
	// read or not.
	mustCall(t, reader, "mark_read", map[string]any{"through": in.Messages[0].ID}, nil)
	mustCall(t, reader, "wait_for_mail", map[string]any{"after": "reader-1", "timeout_seconds": 1}, &in)
	if len(in.Messages) != 1 || in.Messages[0].ID != "reader-2" {
		t.Fatalf("wait_for_mail after reader-1 = %+v, want reader-2 although it is read", in.Messages)
	}
}
