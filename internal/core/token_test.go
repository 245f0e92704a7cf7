package core_test

import (
	"context"
	"testing"

	"mailroom/internal/core"
	"mailroom/internal/testkit"
)

// tokenCalls are a member's calls that run a unit of work on its own
// team: sends and consumes (updates), inbox reads and the team document
// (views), and following the team (an event stream's or MCP session's
// start).
func tokenCalls(svc *core.Service, team string) map[string]func(ctx context.Context) error {
	return map[string]func(ctx context.Context) error{
		"send": func(ctx context.Context) error {
			_, err := svc.Send(ctx, core.SendInput{Team: team, To: "lead", Body: "hello"})
			return err
		},
		"consume": func(ctx context.Context) error { _, err := svc.Consume(ctx, team); return err },
		"inbox":   func(ctx context.Context) error { _, err := svc.Inbox(ctx, team, "reader"); return err },
		"read":    func(ctx context.Context) error { _, err := svc.LettersAfter(ctx, team, "reader", ""); return err },
		"team":    func(ctx context.Context) error { _, err := svc.Team(ctx, team); return err },
		"follow": func(ctx context.Context) error {
			l, err := testkit.Hub(svc).FollowTeam(ctx, team)
			if l != nil {
				l.Release()
			}
			return err
		},
	}
}

// principalOf authenticates token as a door does.
func principalOf(t *testing.T, svc *core.Service, token string) core.Principal {
	t.Helper()
	p, err := svc.LookupPrincipal(t.Context(), token)
	if err != nil {
		t.Fatalf("look up a token just created: %v", err)
	}
	return p
}

func readerToken(t *testing.T, created []core.CreatedMember) string {
	t.Helper()
	for _, m := range created {
		if m.Name == "reader" {
			return m.Token
		}
	}
	t.Fatal("no reader among the created members")
	return ""
}

// wantUnknownToken fails unless err is the refusal of an unknown token,
// code and text.
func wantUnknownToken(t *testing.T, what string, err error) {
	t.Helper()
	want := core.UnknownToken()
	if core.ErrorCode(err) != want.Code || core.ErrorMessage(err) != want.Message {
		t.Errorf("%s: error = %v, want %s %q", what, err, want.Code, want.Message)
	}
}

// TestTokenOfDeletedTeam: a caller that authenticated its token before
// its team was deleted, and acts after, is refused as an unknown token
// is, whether a team of the same name was created again meanwhile (with
// the same member names and new tokens) or not; the new team's tokens
// work, and so do callers that carry no token (the wake loop's).
func TestTokenOfDeletedTeam(t *testing.T) {
	svc := openService(t, t.TempDir(), 0)
	ctx := t.Context()
	spec := core.TeamSpec{Name: "demo", Members: []core.MemberSpec{{Name: "reader"}}}
	_, created, err := svc.CreateTeam(ctx, spec)
	if err != nil {
		t.Fatal(err)
	}
	old := principalOf(t, svc, readerToken(t, created))
	calls := tokenCalls(svc, "demo")
	for name, call := range calls {
		if err := call(core.WithPrincipal(ctx, old)); err != nil {
			t.Fatalf("%s with the team's own token: %v", name, err)
		}
	}

	if err := svc.DeleteTeam(core.AsAdmin(ctx), "demo", nil); err != nil {
		t.Fatal(err)
	}
	for name, call := range calls {
		wantUnknownToken(t, name+" after the team was deleted", call(core.WithPrincipal(ctx, old)))
	}

	_, created, err = svc.CreateTeam(ctx, spec)
	if err != nil {
		t.Fatal(err)
	}
	fresh := principalOf(t, svc, readerToken(t, created))
	if fresh.Team != old.Team || fresh.Member != old.Member {
		t.Fatalf("new reader is %s/%s, want %s/%s", fresh.Team, fresh.Member, old.Team, old.Member)
	}
	for name, call := range calls {
		wantUnknownToken(t, name+" after the team was created again", call(core.WithPrincipal(ctx, old)))
		if err := call(core.WithPrincipal(ctx, fresh)); err != nil {
			t.Errorf("%s with the new team's token: %v", name, err)
		}
		if err := call(core.AsMember(ctx, "demo", "reader")); err != nil {
			t.Errorf("%s as the member without a token: %v", name, err)
		}
	}
	// Nothing the refused calls tried was stored: the new lead's inbox
	// holds only the letters of the new token and of the tokenless caller
	// (a consume acts on the reader's own inbox).
	box, err := svc.Inbox(ctx, "demo", "lead")
	if err != nil {
		t.Fatal(err)
	}
	if len(box) != 2 {
		t.Errorf("new lead's inbox holds %d letters, want 2 (the new token's send and the tokenless one)", len(box))
	}
}
