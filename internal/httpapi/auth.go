package httpapi

import (
	"context"
	"net/http"

	"mailroom/internal/bearer"
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

// authenticate refuses a request without a known token (401) before
// anything else looks at it, and records the caller for the handlers
// (bearer.Resolver, which the MCP endpoint resolves its tokens with too).
// While the store cannot look tokens up it answers 503
// storage_unavailable.
func authenticate(tokens *bearer.Resolver) func(http.Handler) http.Handler {
	return func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			r, _, err := tokens.Request(r)
			if err != nil {
				writeProblem(w, problemFor(err))
				return
			}
			next.ServeHTTP(w, r)
		})
	}
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
