package httpapi

import (
	"context"
	"crypto/sha256"
	"crypto/subtle"
	"net/http"
	"strings"

	"mailroom/internal/core"
)

// principalFrom returns the caller. The authenticate middleware guarantees
// one on every /api/v1 route; its absence is a wiring bug and fails closed
// (core would otherwise treat the call as the in-process host).
func principalFrom(ctx context.Context) (core.Principal, error) {
	p, ok := core.PrincipalFrom(ctx)
	if !ok {
		return core.Principal{}, core.Errorf(core.CodeUnauthorized, "A bearer token is required.")
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

func (a *authenticator) resolve(token string) (core.Principal, error) {
	unknown := core.UnknownToken()
	if token == "" {
		return core.Principal{}, unknown
	}
	sum := sha256.Sum256([]byte(token))
	if subtle.ConstantTimeCompare(sum[:], a.adminHash[:]) == 1 {
		return core.AdminPrincipal(), nil
	}
	p, err := a.svc.TokenPrincipal(token)
	switch {
	case err == nil:
		// By its token: the connections the call opens follow exactly
		// the team the token belongs to, and per-token bounds count it.
		return p, nil
	case core.ErrorCode(err) == core.CodeStorageUnavailable:
		// The store cannot tell (a shared database is down): 503 with
		// Retry-After, not a 401 that tells the client its token is bad.
		return core.Principal{}, err
	default:
		return core.Principal{}, unknown
	}
}

// middleware refuses a request without a known token (401) before anything
// else looks at it, and records the caller for the handlers. While the
// store cannot look tokens up it answers 503 storage_unavailable.
func (a *authenticator) middleware(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		p, err := a.resolve(bearerToken(r))
		if err != nil {
			writeProblem(w, problemFor(err))
			return
		}
		next.ServeHTTP(w, r.WithContext(core.WithPrincipal(r.Context(), p)))
	})
}

// requireAdmin admits the admin token only. Core checks the rights of
// everything it does; this is for the routes whose work is not core's
// (the team list, scenario runs) and for checks that must come before a
// transport's own bookkeeping.
func requireAdmin(ctx context.Context) error {
	if _, err := principalFrom(ctx); err != nil {
		return err
	}
	return core.CheckAdmin(ctx)
}

// requireReader admits the admin or any member of team (the event stream).
func requireReader(ctx context.Context, team string) error {
	if _, err := principalFrom(ctx); err != nil {
		return err
	}
	return core.CheckReader(ctx, team)
}
