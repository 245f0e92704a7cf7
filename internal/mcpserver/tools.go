package mcpserver

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/url"
	"path/filepath"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"mailroom/internal/agent"
	"mailroom/internal/core"
	"mailroom/internal/workspace"
)

// DefaultWait is wait_for_mail's wait when the call names none.
const DefaultWait = agent.DefaultWait

// session is one MCP session: the member it acts as and that member's
// server. Every tool comes from the registry (agent.Registry), the same
// one the agent loop takes its tools from, and runs as s.me; the member
// never comes from a tool's input.
type session struct {
	svc    *core.Service
	log    *slog.Logger
	me     Member
	server *mcp.Server
	// principal is me by the token that opened the session; life is the
	// life of me's team, which the session ends with (endWithTeam).
	principal core.Principal
	life      *core.TeamLife
	// calls counts the session's requests being served, which are
	// answered before a session whose team was deleted is closed.
	calls inflight

	// ctx ends with the session; it bounds the subscription watchers.
	ctx    context.Context
	cancel context.CancelFunc
	mu     sync.Mutex
	subs   map[string]*watcher // resource URI → its watcher

	// workspaces is the root of the teams' workspaces ("" offers none).
	workspaces string
	// programs runs run_main's program (nil: workspace.Default()).
	programs *workspace.Runner
	// toolsMu orders the rebuilds of the tool set; tools is the names
	// offered now.
	toolsMu sync.Mutex
	tools   map[string]bool
	// teamChanged is rung when the team's limits changed (a team event);
	// stopEvents ends that subscription.
	teamChanged chan struct{}
	stopEvents  func()
}

// newSession builds the server of a session opened by me. workspaces is
// the root of the teams' workspaces; empty means none is offered.
func newSession(ctx context.Context, svc *core.Service, log *slog.Logger, p core.Principal, workspaces string, programs *workspace.Runner) (*session, error) {
	me := Member{Team: p.Team, Name: p.Member}
	life, err := svc.FollowTeam(core.WithPrincipal(ctx, p), me.Team)
	if err != nil {
		return nil, err
	}
	s := &session{svc: svc, log: log, me: me, principal: p, life: life, subs: map[string]*watcher{}, workspaces: workspaces, programs: programs,
		tools: map[string]bool{}, teamChanged: make(chan struct{}, 1)}
	// Subscribed before the team is read, so that no change after the
	// read goes unnoticed. The bus calls this from the publisher: it only
	// rings.
	s.stopEvents = svc.Subscribe(func(ev core.Event) {
		// A resync (events from other replicas may have been missed, a
		// limit change among them) rebuilds as well.
		if (ev.Type == core.EventTeam && ev.Team == me.Team) || ev.Type == core.EventResync {
			select {
			case s.teamChanged <- struct{}{}:
			default: // a rebuild is already due; it reads the team afresh
			}
		}
	})
	view, err := svc.Team(s.as(ctx), me.Team)
	if err != nil {
		s.stopEvents()
		life.Release()
		return nil, err
	}
	// The session's work (its event follower, its waits) outlives the
	// request that opened it, so it has a context of its own, cancelled
	// when the session closes.
	s.ctx, s.cancel = context.WithCancel(context.Background())
	s.server = mcp.NewServer(implementation, &mcp.ServerOptions{
		Instructions: fmt.Sprintf("You are %q, a member of the Mailroom team %q. Letters and requests you send come from you; "+
			"use wait_for_mail to sleep until a letter arrives instead of polling.", me.Name, me.Team),
		Logger:             log,
		SubscribeHandler:   s.subscribe,
		UnsubscribeHandler: s.unsubscribe,
		Capabilities:       &mcp.ServerCapabilities{},
	})
	s.setTools(view)
	go s.followTeam()
	const inboxDescription = "Your own inbox as JSON {\"messages\": [...]}, oldest first. Subscribe to be told of every new letter."
	// The member's own inbox is listed (resources/list), so that a client
	// finds it without knowing the template; the template stays for the
	// clients that read it from resources/templates/list.
	s.server.AddResource(&mcp.Resource{
		Name:        "inbox",
		Title:       "Your inbox",
		Description: inboxDescription,
		MIMEType:    "application/json",
		URI:         s.inboxURI(),
	}, s.readInbox)
	s.server.AddResourceTemplate(&mcp.ResourceTemplate{
		Name:        "inbox",
		Title:       "Your inbox",
		Description: inboxDescription,
		MIMEType:    "application/json",
		URITemplate: "mailroom://teams/{team}/members/{member}/inbox",
	}, s.readInbox)
	return s, nil
}

func (s *session) close() {
	s.stopEvents()
	s.cancel()
	s.life.Release()
}

// sessionDrain bounds how long a session whose team was deleted waits for
// the calls it is serving to be answered before it is closed anyway;
// sessionGrace is how long it stays open after they were: closing it ends
// the client's event stream, and a client that reads that end before the
// answers (which it reads on other connections) would drop them.
const (
	sessionDrain = 2 * time.Second
	sessionGrace = time.Second
)

// endWithTeam closes ss, the SDK's session of s, as soon as s's team is
// deleted: the calls being served answer first (a wait_for_mail with
// not_found, at once), then the session ends and its member no longer
// counts as connected. It returns when the session has ended either way.
func (s *session) endWithTeam(ss *mcp.ServerSession) {
	select {
	case <-s.ctx.Done():
		return
	case <-s.life.Gone():
	}
	timer := time.NewTimer(sessionDrain)
	defer timer.Stop()
	select {
	case <-s.calls.idle():
		timer.Reset(sessionGrace)
		<-timer.C
	case <-timer.C:
	}
	_ = ss.Close()
}

// inflight counts requests being served. (Not a sync.WaitGroup: a request
// may begin while idle is awaited, which a WaitGroup forbids.) The zero
// value is ready.
type inflight struct {
	mu   sync.Mutex
	n    int
	zero chan struct{}
}

// begin counts one request; done ends it.
func (f *inflight) begin() (done func()) {
	f.mu.Lock()
	f.n++
	f.mu.Unlock()
	var once sync.Once
	return func() {
		once.Do(func() {
			f.mu.Lock()
			defer f.mu.Unlock()
			if f.n--; f.n == 0 && f.zero != nil {
				close(f.zero)
				f.zero = nil
			}
		})
	}
}

// idle returns a channel closed once no request is being served.
func (f *inflight) idle() <-chan struct{} {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.n == 0 {
		ch := make(chan struct{})
		close(ch)
		return ch
	}
	if f.zero == nil {
		f.zero = make(chan struct{})
	}
	return f.zero
}

// setTools offers the tools of the registry built from the team as view
// shows it. The tools fit the member: lead has no submit_plan, a teammate
// no request_shutdown, and only a team with a workspace has read_file and
// run_main, whose host gate is the team's host_permission. Every offered
// tool is (re)added, so its schema and its handler carry the team's
// limits of now, and a tool no longer offered is removed; the SDK then
// sends notifications/tools/list_changed to the session.
func (s *session) setTools(view core.TeamView) {
	env := agent.Env{Svc: s.svc, Limits: view.Limits, AskHost: true, Runner: s.programs}
	if view.Workspace && s.workspaces != "" {
		env.Workspace = filepath.Join(s.workspaces, s.me.Team)
	}
	s.toolsMu.Lock()
	defer s.toolsMu.Unlock()
	offered := map[string]bool{}
	for _, tool := range agent.Offered(agent.Registry(env), agent.DoorMCP, s.me.Name, env.Workspace != "") {
		offered[tool.Name] = true
		s.addTool(tool)
	}
	var gone []string
	for name := range s.tools {
		if !offered[name] {
			gone = append(gone, name)
		}
	}
	if len(gone) > 0 {
		s.server.RemoveTools(gone...)
	}
	s.tools = offered
}

// followTeam rebuilds the tools each time the team's limits change, until
// the session ends: a session may live for hours, and its schemas must
// state the limits core applies now (docs/api.md, section B).
func (s *session) followTeam() {
	for {
		select {
		case <-s.ctx.Done():
			return
		case <-s.teamChanged:
		}
		view, err := s.svc.Team(s.as(s.ctx), s.me.Team)
		if err != nil {
			// A deleted team ends the session at its next request (the
			// token is gone); anything else keeps the tools it had.
			s.log.WarnContext(s.ctx, "mcp tools not rebuilt", "code", core.ErrorCode(err))
			continue
		}
		s.setTools(view)
	}
}

// as returns ctx carrying the session's member as the caller (by the
// token that opened the session) and the life of its team, so that core's
// waits for the session end when the team is deleted.
func (s *session) as(ctx context.Context) context.Context {
	return core.WithTeamLife(core.WithPrincipal(ctx, s.principal), s.life)
}

// inboxOutput is the inbox resource's content.
type inboxOutput struct {
	Messages []core.Message `json:"messages"`
}

// Refusal is the structured content of a refused call: code is the REST
// error word (or, for run_main's gates and a failed program, the word
// agent names for them).
type Refusal struct {
	Code   string `json:"code"`
	Detail string `json:"detail"`
	// Conflicts is set with reservation_conflict only, as in the REST
	// problem document: the reservations the refused grant clashed with.
	Conflicts []core.ReservationConflict `json:"conflicts,omitempty"`
}

// addTool registers one tool of the registry. The registry's handler
// decodes and checks the arguments itself (unknown fields, missing fields
// and wrong types are validation_failed) and makes the core call; the
// result is its structured value and short text, and a refusal carries
// the code of core or of the tool.
func (s *session) addTool(tool agent.Tool) {
	s.server.AddTool(&mcp.Tool{Name: tool.Name, Description: tool.Description, InputSchema: tool.InputSchema},
		func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			// The session's member is the caller of every tool: core
			// checks its rights exactly as for a REST call with its token.
			ctx = s.as(ctx)
			if s.life.Ended() {
				// The team was deleted: nothing of a new team of the same
				// name is this session's.
				return s.refuse(ctx, tool.Name, core.Errorf(core.CodeNotFound, "The team was deleted.")), nil
			}
			res, err := tool.Handler(ctx, req.Params.Arguments)
			if err != nil {
				return s.refuse(ctx, tool.Name, err), nil
			}
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: res.Text}}, StructuredContent: res.Value}, nil
		})
}

// refuse turns a refusal into a tool result with isError and its code: a
// tool's own refusal as the tool words it, a core error with its REST
// error word; a failure that is not a domain error is logged and answered
// with a generic text, as REST does.
func (s *session) refuse(ctx context.Context, tool string, err error) *mcp.CallToolResult {
	var r Refusal
	var te *agent.ToolError
	if errors.As(err, &te) {
		r = Refusal{Code: string(te.Code), Detail: te.Message}
	} else {
		code := core.ErrorCode(err)
		if code == core.CodeInternal {
			code = "internal_error"
		}
		r = Refusal{Code: string(code), Detail: core.ErrorMessage(err)}
		var rc *core.ReservationConflicts
		if code == core.CodeReservationConflict && errors.As(err, &rc) {
			r.Conflicts = rc.Conflicts
		}
		if code == "internal_error" || code == core.CodeInboxCorrupt || code == core.CodeStorageFailed {
			s.log.ErrorContext(ctx, "mcp tool failed", "tool", tool, "code", code, "err", err)
		}
	}
	return &mcp.CallToolResult{IsError: true, Content: []mcp.Content{&mcp.TextContent{Text: r.Code + ": " + r.Detail}}, StructuredContent: r}
}

// inboxURI is the resource of one's own inbox.
func (s *session) inboxURI() string {
	return "mailroom://teams/" + s.me.Team + "/members/" + s.me.Name + "/inbox"
}

// ownInbox checks that uri is this member's inbox: another member's inbox
// is not a resource of this session.
func (s *session) ownInbox(uri string) error {
	u, err := url.Parse(uri)
	if err != nil || uri != s.inboxURI() || u.Scheme != "mailroom" {
		return mcp.ResourceNotFoundError(uri)
	}
	return nil
}

func (s *session) readInbox(ctx context.Context, req *mcp.ReadResourceRequest) (*mcp.ReadResourceResult, error) {
	if err := s.ownInbox(req.Params.URI); err != nil {
		return nil, err
	}
	msgs, err := s.svc.WaitInbox(s.as(ctx), s.me.Team, s.me.Name, "", 0)
	if err != nil {
		return nil, fmt.Errorf("%s: %s", core.ErrorCode(err), core.ErrorMessage(err))
	}
	b, err := json.Marshal(inboxOutput{Messages: msgs})
	if err != nil {
		return nil, err
	}
	return &mcp.ReadResourceResult{Contents: []*mcp.ResourceContents{{URI: req.Params.URI, MIMEType: "application/json", Text: string(b)}}}, nil
}

// watcher watches one resource for the SDK sessions subscribed to it: a
// session of protocol 2025-* (resources/subscribe) or, under 2026-07-28,
// each subscriptions/listen, which is an SDK session of its own on the
// server the token's requests share (modern.go). It stops when the last
// one unsubscribes.
type watcher struct {
	cancel context.CancelFunc
	by     map[*mcp.ServerSession]bool
}

// subscribe starts watching one's inbox: each new letter sends
// notifications/resources/updated, woken by the same change notification
// as the long poll.
func (s *session) subscribe(_ context.Context, req *mcp.SubscribeRequest) error {
	if err := s.ownInbox(req.Params.URI); err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if w, ok := s.subs[req.Params.URI]; ok {
		w.by[req.Session] = true
		return nil
	}
	n, changed, stop, release, err := s.svc.WatchInbox(s.as(s.ctx), s.me.Team, s.me.Name)
	if err != nil {
		return fmt.Errorf("%s: %s", core.ErrorCode(err), core.ErrorMessage(err))
	}
	ctx, cancel := context.WithCancel(s.ctx)
	s.subs[req.Params.URI] = &watcher{cancel: cancel, by: map[*mcp.ServerSession]bool{req.Session: true}}
	go s.watch(ctx, req.Params.URI, n, changed, stop, release)
	return nil
}

func (s *session) unsubscribe(_ context.Context, req *mcp.UnsubscribeRequest) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if w, ok := s.subs[req.Params.URI]; ok {
		if delete(w.by, req.Session); len(w.by) == 0 {
			w.cancel()
			delete(s.subs, req.Params.URI)
		}
	}
	return nil
}

// watch tells the subscriber of every letter after the first n, until the
// subscription or the session ends or the server stops.
func (s *session) watch(ctx context.Context, uri string, seen int, changed, stop <-chan struct{}, release func()) {
	for {
		select {
		case <-changed:
		case <-ctx.Done():
			release()
			return
		case <-stop:
			release()
			return
		}
		release()
		if s.life.Ended() {
			return // the team was deleted: its session is ending
		}
		var n int
		var err error
		n, changed, stop, release, err = s.svc.WatchInbox(s.as(ctx), s.me.Team, s.me.Name)
		if err != nil {
			s.log.WarnContext(ctx, "mcp inbox subscription ended", "code", core.ErrorCode(err))
			return
		}
		if n > seen {
			seen = n
			if err := s.server.ResourceUpdated(ctx, &mcp.ResourceUpdatedNotificationParams{URI: uri}); err != nil {
				s.log.DebugContext(ctx, "mcp resource update not sent", "err", err)
			}
		}
	}
}
