package bearer_test

import (
	"context"
	"log/slog"
	"net/http/httptest"
	"testing"

	"mailroom/internal/bearer"
	"mailroom/internal/core"
	"mailroom/internal/mail"
)

const adminToken = "admin-secret"

// TestResolve: the admin token, a member's token, an unknown one and none
// resolve as both doors need them, and Request puts the caller in the
// request's context.
func TestResolve(t *testing.T) {
	ctx := context.Background()
	store, err := mail.Open(t.TempDir(), mail.WithLogger(slog.New(slog.DiscardHandler)))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = store.Close() })
	svc := core.NewService(store, core.Options{Logger: slog.New(slog.DiscardHandler)})
	if err := svc.Open(ctx); err != nil {
		t.Fatal(err)
	}
	_, created, err := svc.CreateTeam(core.AsAdmin(ctx), core.TeamSpec{Name: "alpha", Members: []core.MemberSpec{{Name: "dev", Role: "writes code"}}})
	if err != nil {
		t.Fatal(err)
	}
	var token string
	for _, m := range created {
		if m.Name == "dev" {
			token = m.Token
		}
	}
	tokens := bearer.NewResolver(adminToken, svc)

	p, err := tokens.Resolve(ctx, adminToken)
	if err != nil || !p.Admin {
		t.Errorf("Resolve(admin token) = %+v, %v; want the admin", p, err)
	}
	p, err = tokens.Resolve(ctx, token)
	if err != nil || p.Admin || p.Team != "alpha" || p.Member != "dev" || p.TokenHash() == "" {
		t.Errorf("Resolve(member token) = %+v, %v; want alpha/dev with the token's hash", p, err)
	}
	want := core.UnknownToken()
	for _, bad := range []string{"", "mr_not-a-token", adminToken + "x"} {
		_, err := tokens.Resolve(ctx, bad)
		if core.ErrorCode(err) != want.Code || core.ErrorMessage(err) != want.Message {
			t.Errorf("Resolve(%q) = %v, want %v", bad, err, want)
		}
	}

	req := httptest.NewRequest("GET", "/", nil)
	req.Header.Set("Authorization", "bearer  "+token+" ")
	got, p, err := tokens.Request(req)
	if err != nil {
		t.Fatalf("Request: %v", err)
	}
	if inCtx, ok := core.PrincipalFrom(got.Context()); !ok || inCtx != p || p.Member != "dev" {
		t.Errorf("Request's context carries %+v (%v), want %+v", inCtx, ok, p)
	}
	for header, want := range map[string]string{"Bearer abc": "abc", "Basic abc": "", "Bearer": "", "": ""} {
		req := httptest.NewRequest("GET", "/", nil)
		req.Header.Set("Authorization", header)
		if got := bearer.Token(req); got != want {
			t.Errorf("Token(%q) = %q, want %q", header, got, want)
		}
	}
}
