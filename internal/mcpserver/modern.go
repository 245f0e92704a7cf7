package mcpserver

import (
	"context"
	"net/http"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"mailroom/internal/core"
	"mailroom/internal/httpx"
)

// Protocol 2026-07-28 (docs/api.md, section J) has no sessions: no
// initialize, no Mcp-Session-Id, no GET stream. Every request carries its
// protocol version (the MCP-Protocol-Version header, mirrored in the
// body's _meta) and is answered on its own, as the member whose bearer
// token it carries; server/discover tells a client what the server
// speaks, and subscriptions/listen is one long request on which the
// server sends the notifications the client asked for. The SDK serves it
// with its stateless option, which accepts no other version with sessions;
// so /mcp routes each request by its version header: 2026-07-28 (and
// later) to the stateless handler, everything else (2025-06-18,
// 2025-11-25, an initialize without the header) to the handler of
// sessions.
//
// The stateless handler connects a fresh SDK session for each request to
// the server it is given. That server is the member's: its tools fit the
// member and act as it, exactly as a session's. Building it reads the
// team, so it is kept per token while requests come (modernMember) and
// dropped after SessionTimeout without one, or when the team is deleted.

// modernVersion is the first protocol version without sessions.
const modernVersion = "2026-07-28"

// protocolVersionHeader names a request's protocol version.
const protocolVersionHeader = "Mcp-Protocol-Version"

// methodHeader mirrors a 2026-07-28 request's JSON-RPC method; the SDK
// refuses a request whose body names another one (-32020).
const methodHeader = "Mcp-Method"

// listenMethod is the long request of protocol 2026-07-28 that carries
// notifications.
const listenMethod = "subscriptions/listen"

// isModern reports whether r is a request of protocol 2026-07-28 or
// later: versions are dates, so they order as strings.
func isModern(r *http.Request) bool {
	return r.Header.Get(protocolVersionHeader) >= modernVersion
}

// modernMember is the server of one token for stateless requests, shared
// by that token's requests while they come.
type modernMember struct {
	sess *session
	// refs counts the requests being served; idle is the timer that drops
	// the member once none has come for SessionTimeout.
	refs int
	idle *time.Timer
	// dropped is set once the member left h.modern: its session closes
	// when its last request ends.
	dropped bool
}

type modernKey struct{}

// serveModern serves a request of protocol 2026-07-28 as caller c. A
// subscriptions/listen takes a place among the token's and the server's
// sessions while it lasts (429 beyond them), as it holds a stream open as
// long as a session's; it ends, with its result, when the team is
// deleted.
func (h *Handler) serveModern(w http.ResponseWriter, r *http.Request, c caller) {
	ctx := r.Context()
	listen := r.Method == http.MethodPost && r.Header.Get(methodHeader) == listenMethod
	if listen {
		if !h.reserve(c.tokenHash) {
			httpx.Write(w, core.CodeTooManyStreams, "Too many MCP sessions and subscriptions are open for this token or on this server; close one first.")
			return
		}
		defer h.release(c.tokenHash)
	}
	var m *modernMember
	if r.Method == http.MethodPost {
		var err error
		if m, err = h.acquireModern(ctx, c); err != nil {
			code := core.ErrorCode(err)
			if code == core.CodeInternal {
				code = httpx.CodeInternal
			}
			httpx.Write(w, code, core.ErrorMessage(err))
			return
		}
		defer h.releaseModern(c.tokenHash, m)
		if listen {
			// listenCtx is the goroutine's own: ctx is reassigned below.
			listenCtx, cancel := context.WithCancel(ctx)
			defer cancel()
			ctx = listenCtx
			gone := m.sess.life.Gone()
			go func() {
				select {
				case <-gone:
					cancel()
				case <-listenCtx.Done():
				}
			}()
		}
		ctx = context.WithValue(ctx, modernKey{}, m)
	}
	h.stateless.ServeHTTP(w, r.WithContext(ctx))
}

// modernServerFor is the stateless handler's server lookup: the server of
// the request's member. A GET or DELETE has none (the SDK answers 405
// before it needs one); it gets the base server.
func (h *Handler) modernServerFor(r *http.Request) *mcp.Server {
	if m, ok := r.Context().Value(modernKey{}).(*modernMember); ok {
		return m.sess.server
	}
	return h.base
}

// acquireModern returns the member server of c's token, built on its
// first request, and counts one request on it.
func (h *Handler) acquireModern(ctx context.Context, c caller) (*modernMember, error) {
	h.mu.Lock()
	m := h.modern[c.tokenHash]
	if m != nil && !m.sess.life.Ended() {
		m.refs++
		m.idle.Stop()
		h.mu.Unlock()
		return m, nil
	}
	h.mu.Unlock()
	sess, err := newSession(ctx, h.svc, h.hub, h.log, c.principal, h.opts.Workspaces, h.opts.Runner)
	if err != nil {
		return nil, err
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	if cur := h.modern[c.tokenHash]; cur != nil && cur != m && !cur.sess.life.Ended() {
		// Another request built it meanwhile: that one is kept.
		sess.close()
		cur.refs++
		cur.idle.Stop()
		return cur, nil
	}
	if m != nil {
		h.dropModernLocked(c.tokenHash, m)
	}
	m = &modernMember{sess: sess, refs: 1}
	m.idle = time.AfterFunc(h.opts.SessionTimeout, func() { h.expireModern(c.tokenHash, m) })
	m.idle.Stop()
	h.modern[c.tokenHash] = m
	go func() {
		// A deleted team's member is dropped at once: nothing of a new
		// team of the same name is its.
		select {
		case <-sess.life.Gone():
			h.mu.Lock()
			h.dropModernLocked(c.tokenHash, m)
			h.mu.Unlock()
		case <-sess.ctx.Done():
		}
	}()
	return m, nil
}

// releaseModern ends one request on m; the last one starts its idle timer.
func (h *Handler) releaseModern(tokenHash string, m *modernMember) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if m.refs--; m.refs > 0 {
		return
	}
	if m.dropped {
		m.sess.close()
		return
	}
	m.idle.Reset(h.opts.SessionTimeout)
}

// expireModern drops m once it has served no request for SessionTimeout.
func (h *Handler) expireModern(tokenHash string, m *modernMember) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if m.refs == 0 {
		h.dropModernLocked(tokenHash, m)
	}
}

// dropModernLocked takes m out of h.modern and closes its session unless
// requests are still being served on it (the last one closes it); the
// caller holds h.mu.
func (h *Handler) dropModernLocked(tokenHash string, m *modernMember) {
	if m.dropped {
		return
	}
	m.dropped = true
	m.idle.Stop()
	if h.modern[tokenHash] == m {
		delete(h.modern, tokenHash)
	}
	if m.refs == 0 {
		m.sess.close()
	}
}
