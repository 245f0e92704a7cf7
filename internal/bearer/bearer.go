// Package bearer resolves the bearer token of a request into its caller,
// the core.Principal that then travels in the request's context. Every
// door (the REST API, the MCP endpoint) resolves its tokens here, once per
// request, so that a token names the same caller and fails the same way
// whichever door it came through; the doors only choose how to answer a
// refusal.
package bearer

import (
	"context"
	"crypto/sha256"
	"crypto/subtle"
	"net/http"
	"strings"

	"mailroom/internal/core"
)

// Token reads the token from the Authorization header only: a token in a
// query string ends up in access logs and browser history. It is "" when
// the header names no bearer token.
func Token(r *http.Request) string {
	scheme, token, ok := strings.Cut(r.Header.Get("Authorization"), " ")
	if !ok || !strings.EqualFold(scheme, "Bearer") {
		return ""
	}
	return strings.TrimSpace(token)
}

// Members looks member tokens up: core.Service.LookupPrincipal.
type Members interface {
	LookupPrincipal(ctx context.Context, token string) (core.Principal, error)
}

// Resolver resolves tokens: the admin token, compared by hash in constant
// time so that neither its length nor its prefix leaks by timing, and
// the members' tokens, which the store looks up by their hash.
type Resolver struct {
	adminHash [sha256.Size]byte
	members   Members
}

// NewResolver returns the resolver of adminToken and of the member tokens
// members knows.
func NewResolver(adminToken string, members Members) *Resolver {
	return &Resolver{adminHash: sha256.Sum256([]byte(adminToken)), members: members}
}

// Resolve returns the caller token names: the admin's principal for the
// admin token, the member's for a member token (carrying the token's
// hash, so that the call's units of work confirm it and per-token bounds
// count by it). An empty or unknown token is core.UnknownToken(). While
// the store cannot look tokens up the error is its storage_unavailable,
// so that a door answers 503 rather than tell a client its token is bad.
func (r *Resolver) Resolve(ctx context.Context, token string) (core.Principal, error) {
	unknown := core.UnknownToken()
	if token == "" {
		return core.Principal{}, unknown
	}
	sum := sha256.Sum256([]byte(token))
	if subtle.ConstantTimeCompare(sum[:], r.adminHash[:]) == 1 {
		return core.AdminPrincipal(), nil
	}
	// The lookup keeps ctx's values but not its end: net/http cancels a
	// request's context when its client half-closes the connection after
	// sending the request, a client that must still be answered
	// (docs/api.md, "Half-closed clients"); a lookup cut short would
	// answer it 503.
	p, err := r.members.LookupPrincipal(context.WithoutCancel(ctx), token)
	switch {
	case err == nil:
		return p, nil
	case core.ErrorCode(err) == core.CodeStorageUnavailable:
		return core.Principal{}, err
	default:
		return core.Principal{}, unknown
	}
}

// Request resolves req's bearer token and returns req with the caller in
// its context (core.WithPrincipal), as every handler after it reads it.
func (r *Resolver) Request(req *http.Request) (*http.Request, core.Principal, error) {
	p, err := r.Resolve(req.Context(), Token(req))
	if err != nil {
		return req, core.Principal{}, err
	}
	return req.WithContext(core.WithPrincipal(req.Context(), p)), p, nil
}
