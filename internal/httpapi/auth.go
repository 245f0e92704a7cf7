package httpapi

import (
	"context"
	"crypto/sha256"
	"crypto/subtle"
	"net/http"
	"strings"

	"mailroom/internal/core"
)

// principal is who a bearer token belongs to: the admin, or one member of
// one team.
type principal struct {
	admin  bool
	team   string
	member string
}

type principalKey struct{}

func withPrincipal(ctx context.Context, p principal) context.Context {
	return context.WithValue(ctx, principalKey{}, p)
}

// principalFrom returns the caller. The authenticate middleware guarantees
// one on every /api/v1 route; its absence is a wiring bug and fails closed.
func principalFrom(ctx context.Context) (principal, error) {
	p, ok := ctx.Value(principalKey{}).(principal)
	if !ok {
		return principal{}, core.Errorf(core.CodeUnauthorized, "A bearer token is required.")
	}
	return p, nil
}

// bearerToken reads the token from the Authorization header only: a token in
// a query string ends up in access logs and browser history.
func bearerToken(r *http.Request) string {
	scheme, token, ok := strings.Cut(r.Header.Get("Authorization"), " ")
	if !ok || !strings.EqualFold(scheme, "Bearer") {
		return ""
	}
	return strings.TrimSpace(token)
}

// authenticator resolves tokens. The admin token is compared by hash in
// constant time so that neither its length nor its prefix leaks by timing.
type authenticator struct {
	adminHash [sha256.Size]byte
	svc       *core.Service
}

func newAuthenticator(adminToken string, svc *core.Service) *authenticator {
	return &authenticator{adminHash: sha256.Sum256([]byte(adminToken)), svc: svc}
}

func (a *authenticator) resolve(token string) (principal, bool) {
	if token == "" {
		return principal{}, false
	}
	sum := sha256.Sum256([]byte(token))
	if subtle.ConstantTimeCompare(sum[:], a.adminHash[:]) == 1 {
		return principal{admin: true}, true
	}
	team, member, ok := a.svc.Authenticate(token)
	if !ok {
		return principal{}, false
	}
	return principal{team: team, member: member}, true
}

// middleware refuses a request without a known token (401) before anything
// else looks at it, and records the caller for the handlers.
func (a *authenticator) middleware(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		p, ok := a.resolve(bearerToken(r))
		if !ok {
			writeProblem(w, newProblem(core.CodeUnauthorized, "A valid bearer token is required in the Authorization header."))
			return
		}
		next.ServeHTTP(w, r.WithContext(withPrincipal(r.Context(), p)))
	})
}

// The rights of each route. Each returns a forbidden error when the caller
// may not act; handlers call exactly one of them before core.

func forbidden(msg string) error { return core.Errorf(core.CodeForbidden, "%s", msg) }

// requireAdmin admits the admin token only.
func requireAdmin(ctx context.Context) error {
	p, err := principalFrom(ctx)
	if err != nil {
		return err
	}
	if !p.admin {
		return forbidden("Only the admin token may do this.")
	}
	return nil
}

// requireReader admits the admin or any member of team.
func requireReader(ctx context.Context, team string) error {
	p, err := principalFrom(ctx)
	if err != nil {
		return err
	}
	if !p.admin && p.team != team {
		return forbidden("The token belongs to another team.")
	}
	return nil
}

// requireMember admits a member of team and returns its name: the sender or
// actor of a write is always the token's member, never a body field.
func requireMember(ctx context.Context, team string) (string, error) {
	p, err := principalFrom(ctx)
	if err != nil {
		return "", err
	}
	if p.admin {
		return "", forbidden("The admin token is not a member; use a member token.")
	}
	if p.team != team {
		return "", forbidden("The token belongs to another team.")
	}
	return p.member, nil
}

// requireSelf admits only member of team itself.
func requireSelf(ctx context.Context, team, member string) error {
	me, err := requireMember(ctx, team)
	if err != nil {
		return err
	}
	if me != member {
		return forbidden("A member may only act on its own inbox.")
	}
	return nil
}

// requireSelfOrAdmin admits the admin or member of team itself.
func requireSelfOrAdmin(ctx context.Context, team, member string) error {
	p, err := principalFrom(ctx)
	if err != nil {
		return err
	}
	if p.admin {
		return nil
	}
	return requireSelf(ctx, team, member)
}
