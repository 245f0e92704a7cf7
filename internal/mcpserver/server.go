// Package mcpserver is Mailroom's Model Context Protocol endpoint: an agent
// running anywhere (Claude Code, Codex, Cursor, any MCP host) joins a team
// as one member, with that member's token, and reads and sends mail, opens
// and answers plan and shutdown requests, matches replies and waits for
// letters, under exactly the rules of the REST API (docs/spec.md §4).
//
// It speaks Streamable HTTP through the official Go SDK: protocol
// 2026-07-28 without sessions (modern.go) and 2025-06-18 and 2025-11-25
// with sessions, on one URL. Each session gets
// its own mcp.Server bound to the member whose token opened it, so the tool
// list fits the member (lead has no submit_plan, a teammate no
// request_shutdown, only a team with a workspace has read_file and
// run_main) and every tool acts as that member and no other. The tools are
// those of agent.Registry, which the agent loop uses too.
package mcpserver

import (
	"bytes"
	"context"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/auth"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"mailroom/internal/bearer"
	"mailroom/internal/core"
	"mailroom/internal/httpx"
	"mailroom/internal/workspace"
)

// Path is where the endpoint is mounted.
const Path = "/mcp"

// Defaults of Options.
const (
	DefaultSessionTimeout      = 30 * time.Minute
	DefaultMaxSessionsPerToken = 8
	DefaultMaxSessions         = 1024
)

// Options configure New.
type Options struct {
	// AdminToken is refused (403): the admin is not a member.
	AdminToken string
	// Logger receives failures; nil discards them.
	Logger *slog.Logger
	// SessionTimeout closes a session that has had no request for this
	// long; 0 means DefaultSessionTimeout.
	SessionTimeout time.Duration
	// MaxSessionsPerToken and MaxSessions bound the open sessions of one
	// token and of the whole server, like event streams; 0 means the
	// default.
	MaxSessionsPerToken int
	MaxSessions         int
	// Workspaces is the root of the teams' workspaces (each team's is
	// <Workspaces>/<team>/): members of a team with a workspace are offered
	// read_file and run_main there. Empty offers them to no one.
	Workspaces string
	// Runner runs run_main's program; nil means workspace.Default(). A
	// server passes the one its REST door's turns use, so that one
	// program runs per team whichever door asked.
	Runner *workspace.Runner
}

// Handler serves /mcp. It checks, in this order, the Origin (against DNS
// rebinding), the bearer token (401, and 403 for the admin token), the body
// size (413), that the body is not a JSON-RPC batch (400) and, for a
// request that may open a session, the session bounds (429); then the SDK
// serves the protocol.
type Handler struct {
	svc    *core.Service
	log    *slog.Logger
	opts   Options
	tokens *bearer.Resolver
	sdk    http.Handler
	// stateless serves the requests of protocol 2026-07-28 (modern.go).
	stateless http.Handler
	// base answers the SDK's per-request questions (protocol versions) for
	// requests of a session that already exists; it has no tools.
	base *mcp.Server

	mu       sync.Mutex
	total    int
	perToken map[string]int // token hash → open sessions
	// live is the open sessions by their SDK session id; sdkSessions the
	// SDK's side of each, which Close closes.
	live        map[string]*session
	sdkSessions map[string]*mcp.ServerSession
	// modern is the member servers of stateless requests by token hash.
	modern map[string]*modernMember
	// closed is set by Close: no session opens any more. ending counts
	// the goroutines that see a session's end (opened), which Close
	// waits for.
	closed bool
	ending sync.WaitGroup
}

// New returns the /mcp handler over svc.
func New(svc *core.Service, opts Options) (*Handler, error) {
	if svc == nil {
		return nil, errors.New("mcpserver: nil service")
	}
	if opts.AdminToken == "" {
		return nil, errors.New("mcpserver: empty admin token")
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	if opts.SessionTimeout <= 0 {
		opts.SessionTimeout = DefaultSessionTimeout
	}
	if opts.MaxSessionsPerToken <= 0 {
		opts.MaxSessionsPerToken = DefaultMaxSessionsPerToken
	}
	if opts.MaxSessions <= 0 {
		opts.MaxSessions = DefaultMaxSessions
	}
	h := &Handler{
		svc:         svc,
		log:         opts.Logger,
		opts:        opts,
		tokens:      bearer.NewResolver(opts.AdminToken, svc),
		base:        mcp.NewServer(implementation, nil),
		perToken:    map[string]int{},
		live:        map[string]*session{},
		sdkSessions: map[string]*mcp.ServerSession{},
		modern:      map[string]*modernMember{},
	}
	streamable := mcp.NewStreamableHTTPHandler(h.serverFor, &mcp.StreamableHTTPOptions{
		Logger:         opts.Logger,
		SessionTimeout: opts.SessionTimeout,
		// The body was already read whole and bounded by ServeHTTP.
		MaxRequestBodyBytes: httpx.MaxBodyBytes + 1,
	})
	// The SDK keeps a session to the identity that opened it: a later
	// request with another token is refused (403). The identity is the
	// token's hash, handed over in the SDK's TokenInfo.
	h.sdk = auth.RequireBearerToken(func(ctx context.Context, _ string, _ *http.Request) (*auth.TokenInfo, error) {
		c, ok := ctx.Value(callerKey{}).(caller)
		if !ok {
			return nil, auth.ErrInvalidToken
		}
		return &auth.TokenInfo{UserID: c.tokenHash}, nil
	}, &auth.RequireBearerTokenOptions{AllowMissingExpiration: true})(streamable)
	// Requests of protocol 2026-07-28 have no session to keep to an
	// identity: each one is its token's, checked by ServeHTTP.
	h.stateless = mcp.NewStreamableHTTPHandler(h.modernServerFor, &mcp.StreamableHTTPOptions{
		Stateless:           true,
		Logger:              opts.Logger,
		MaxRequestBodyBytes: httpx.MaxBodyBytes + 1,
		// A call whose client went away (a wait_for_mail given up) ends
		// with it, as a REST read does.
		PropagateRequestCancellation: true,
	})
	return h, nil
}

var implementation = &mcp.Implementation{Name: "mailroom", Title: "Mailroom", Version: "1"}

// Member is the acting member of a session: resolved from the bearer token
// that opened it, never from a tool's input.
type Member struct {
	Team string
	Name string
}

// caller is who sent one HTTP request to /mcp.
type caller struct {
	member    Member
	tokenHash string
	// principal is the member as core knows it, by its token, so that a
	// session follows exactly the team the token belongs to.
	principal core.Principal
}

type callerKey struct{}

// opening is carried by a request that opens a session, so that the SDK's
// server lookup builds that session's server once and ServeHTTP can find
// the session afterwards.
type opening struct {
	h      *Handler
	caller caller
	server *mcp.Server
	sess   *session
	// settled runs opened once, at the answer's first byte or after it.
	settled sync.Once
}

type openingKey struct{}

// ServeHTTP implements http.Handler.
func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if !sameOrigin(r) {
		httpx.Write(w, core.CodeForbidden, "The Origin header names another host than this server.")
		return
	}
	c, status := h.authenticate(r)
	switch status {
	case http.StatusUnauthorized:
		httpx.Write(w, core.CodeUnauthorized, "A valid member token is required in the Authorization header.")
		return
	case http.StatusForbidden:
		httpx.Write(w, core.CodeForbidden, "The admin token is not a member; connect with a member token.")
		return
	case http.StatusServiceUnavailable:
		httpx.Write(w, core.CodeStorageUnavailable, "The database cannot be reached; try again shortly.")
		return
	}
	// The caller travels in the request's context from here, resolved
	// once: the tools of a session act as the principal it was opened by.
	r = r.WithContext(core.WithPrincipal(r.Context(), c.principal))
	if r.Body != nil {
		body, err := io.ReadAll(io.LimitReader(r.Body, httpx.MaxBodyBytes+1))
		if err != nil {
			httpx.Write(w, core.CodeValidation, "The request body could not be read.")
			return
		}
		if len(body) > httpx.MaxBodyBytes {
			httpx.Write(w, httpx.CodeBodyTooLarge, "The request body is over 1 MiB.")
			return
		}
		if r.Method == http.MethodPost && isBatch(body) {
			// One request, one message: a batch would carry any number of
			// tool calls (and initializes) past every per-call bound.
			httpx.Write(w, core.CodeValidation, "JSON-RPC batches are not accepted; send one message per request.")
			return
		}
		r.Body = io.NopCloser(bytes.NewReader(body))
	}
	// Every request counts as the member being seen, whatever its
	// protocol: the member document's mcp_last_seen and the page's badge.
	if err := h.svc.SeenMCP(r.Context(), c.member.Team, c.member.Name); err != nil {
		h.log.DebugContext(r.Context(), "mcp request not recorded as seen", "code", core.ErrorCode(err))
	}
	if isModern(r) {
		h.serveModern(w, r, c)
		return
	}
	ctx := context.WithValue(r.Context(), callerKey{}, c)
	if id := r.Header.Get(sessionIDHeader); r.Method != http.MethodPost || id != "" {
		if r.Method == http.MethodPost {
			// A call of a session: counted, so that a session whose team
			// is deleted answers its calls before it is closed.
			done := h.calling(id)
			defer done()
		}
		h.sdk.ServeHTTP(w, r.WithContext(ctx))
		return
	}
	// The SDK opens a session for every POST without a session id (the
	// same header lookup as here) and keeps it once it has answered an
	// initialize; what the body says is the SDK's to decide, never a second
	// parse of ours. So each such request takes a place first, and opened
	// gives it back unless the SDK's own record shows a live, initialized
	// session.
	if !h.reserve(c.tokenHash) {
		httpx.Write(w, core.CodeTooManyStreams, "Too many MCP sessions are open for this token or on this server; close one first.")
		return
	}
	op := &opening{h: h, caller: c}
	sw := &settlingWriter{ResponseWriter: w, settle: func() { op.settled.Do(func() { h.opened(op) }) }}
	h.sdk.ServeHTTP(sw, r.WithContext(context.WithValue(ctx, openingKey{}, op)))
	sw.settle()
}

// settlingWriter settles a request's session place (Handler.opened) just
// before the first byte of the answer goes out: by then the SDK has
// handled the request, so its record tells whether a session was opened,
// and a client that sends its next request on seeing the answer (an
// initialize right after a discovery probe) finds the probe's place free
// already.
type settlingWriter struct {
	http.ResponseWriter
	settle func()
}

func (w *settlingWriter) WriteHeader(code int) {
	w.settle()
	w.ResponseWriter.WriteHeader(code)
}

func (w *settlingWriter) Write(p []byte) (int, error) {
	w.settle()
	return w.ResponseWriter.Write(p)
}

// Flush lets the SDK stream its answer (Server-Sent Events).
func (w *settlingWriter) Flush() {
	w.settle()
	if f, ok := w.ResponseWriter.(http.Flusher); ok {
		f.Flush()
	}
}

// Unwrap gives http.ResponseController the connection's writer.
func (w *settlingWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

// sessionIDHeader is the header of the Streamable HTTP transport that
// names a request's session.
const sessionIDHeader = "Mcp-Session-Id"

// isBatch reports whether a body is a JSON array: a JSON-RPC batch, which
// the SDK would serve as many calls in one request. JSON may begin with
// whitespace only, so the first other byte decides.
func isBatch(body []byte) bool {
	trimmed := bytes.TrimLeft(body, " \t\r\n")
	return len(trimmed) > 0 && trimmed[0] == '['
}

// authenticate resolves the bearer token (bearer.Resolver, as the REST
// API does): 0 for a member, 401 for none or an unknown token, 403 for the
// admin token, 503 while the store cannot look tokens up.
func (h *Handler) authenticate(r *http.Request) (caller, int) {
	p, err := h.tokens.Resolve(r.Context(), bearer.Token(r))
	switch {
	case core.ErrorCode(err) == core.CodeStorageUnavailable:
		return caller{}, http.StatusServiceUnavailable // the store cannot tell now
	case err != nil:
		return caller{}, http.StatusUnauthorized
	case p.Admin:
		return caller{}, http.StatusForbidden
	}
	return caller{member: Member{Team: p.Team, Name: p.Member}, tokenHash: p.TokenHash(), principal: p}, 0
}

// sameOrigin refuses a browser page of another site talking to this server
// (DNS rebinding): a request may come without Origin (any non-browser
// client), but an Origin must name the host the request was sent to.
func sameOrigin(r *http.Request) bool {
	origin := r.Header.Get("Origin")
	if origin == "" {
		return true
	}
	u, err := url.Parse(origin)
	if err != nil || u.Host == "" {
		return false
	}
	return strings.EqualFold(u.Host, r.Host)
}

// serverFor is the SDK's server lookup, called on every request: a request
// that opens a session gets a new server bound to its caller; any other
// gets the base server, whose only use is the protocol version check.
func (h *Handler) serverFor(r *http.Request) *mcp.Server {
	op, ok := r.Context().Value(openingKey{}).(*opening)
	if !ok {
		return h.base
	}
	if op.server == nil {
		sess, err := newSession(r.Context(), h.svc, h.log, op.caller.principal, h.opts.Workspaces, h.opts.Runner)
		if err != nil {
			h.log.WarnContext(r.Context(), "mcp session not opened", "code", core.ErrorCode(err))
			return nil
		}
		op.sess, op.server = sess, sess.server
	}
	return op.server
}

// reserve takes one session slot of tokenHash and of the server.
func (h *Handler) reserve(tokenHash string) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.total >= h.opts.MaxSessions || h.perToken[tokenHash] >= h.opts.MaxSessionsPerToken {
		return false
	}
	h.total++
	h.perToken[tokenHash]++
	return true
}

func (h *Handler) release(tokenHash string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.total--
	if h.perToken[tokenHash]--; h.perToken[tokenHash] <= 0 {
		delete(h.perToken, tokenHash)
	}
}

// opened keeps the slot reserved for op while its session lives: the SDK
// closes a session on DELETE, on idle timeout or when initialization fails.
func (h *Handler) opened(op *opening) {
	var ss *mcp.ServerSession
	if op.server != nil {
		for s := range op.server.Sessions() {
			ss = s
		}
	}
	// A first request that is not an initialize (a probe, a malformed
	// body) leaves no session, or one the SDK has already closed: its
	// place is given back now, not after the session's end is noticed.
	if ss == nil || ss.InitializeParams() == nil {
		if op.sess != nil {
			op.sess.close()
		}
		h.release(op.caller.tokenHash)
		return
	}
	// The member counts as connected from here until the session ends:
	// the team document and a member event show it (docs/api.md, section
	// B). A member that cannot be counted (its team just deleted) still
	// has its session; the next request's token check ends it.
	me := op.caller.member
	sess := op.sess
	// The count lives as long as the session, past the request that
	// opened it (whose context ends with its answer): its own context.
	end, err := h.svc.OpenMCPSession(sess.as(context.Background()), me.Team, me.Name)
	if err != nil {
		h.log.Warn("mcp session not counted", "code", core.ErrorCode(err))
		end = func() {}
	}
	ended := func() {
		end()
		sess.close()
		h.mu.Lock()
		delete(h.live, ss.ID())
		delete(h.sdkSessions, ss.ID())
		h.mu.Unlock()
		h.release(op.caller.tokenHash)
	}
	h.mu.Lock()
	if h.closed {
		// The server stops: the session ends at once. It is counted off
		// here; the SDK's side is closed once this answer is out (opened
		// runs inside the SDK's write of it, which a close would wait for).
		h.mu.Unlock()
		ended()
		go func() { _ = ss.Close() }()
		return
	}
	h.live[ss.ID()] = sess
	h.sdkSessions[ss.ID()] = ss
	h.ending.Add(1) // under h.mu with closed unset: never after Close's wait began
	h.mu.Unlock()
	go func() {
		defer h.ending.Done()
		_ = ss.Wait()
		ended()
	}()
	go sess.endWithTeam(ss)
}

// Close ends every session: the open ones are closed, each counted off
// its member (core.Service.OpenMCPSession's end), and the members of
// stateless requests are dropped; a session that opens later ends at
// once. It returns once every session's end has been seen, or with ctx's
// error. The server calls it when it stops, after the last request, so
// that nothing of a session reads the store after it is closed.
func (h *Handler) Close(ctx context.Context) error {
	h.mu.Lock()
	h.closed = true
	open := make([]*mcp.ServerSession, 0, len(h.sdkSessions))
	for _, ss := range h.sdkSessions {
		open = append(open, ss)
	}
	for token, m := range h.modern {
		h.dropModernLocked(token, m)
	}
	h.mu.Unlock()
	for _, ss := range open {
		_ = ss.Close()
	}
	done := make(chan struct{})
	go func() {
		h.ending.Wait()
		close(done)
	}()
	select {
	case <-done:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// calling counts one POST of session id while the SDK serves it; done
// ends the count. An id of no open session counts nothing.
func (h *Handler) calling(id string) (done func()) {
	h.mu.Lock()
	sess := h.live[id]
	h.mu.Unlock()
	if sess == nil {
		return func() {}
	}
	return sess.calls.begin()
}

// Sessions reports the open sessions (for tests and metrics).
func (h *Handler) Sessions() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.total
}
