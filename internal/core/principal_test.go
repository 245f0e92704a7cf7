package core_test

import (
	"context"
	"testing"

	"mailroom/internal/core"
)

// TestRights checks every right in core, where each door (REST, MCP, a
// teammate's tools) meets it: the caller comes from the context, never
// from a parameter, and a refusal comes before any lookup.
func TestRights(t *testing.T) {
	f := newFixture(t, nil)
	if _, _, err := f.svc.CreateTeam(t.Context(), core.TeamSpec{Name: "other"}); err != nil {
		t.Fatal(err)
	}
	f.send("reviewer", "reader", "hello")
	f.open("reader", "lead", core.KindPlan, "a plan")

	bg := t.Context()
	admin := core.AsAdmin(bg)
	reader := core.AsMember(bg, "demo", "reader")
	lead := core.AsMember(bg, "demo", "lead")
	stranger := core.AsMember(bg, "other", "lead")

	type call struct {
		name string
		run  func() error
	}
	send := func(ctx context.Context) func() error {
		return func() error {
			_, err := f.svc.Send(ctx, core.SendInput{Team: "demo", To: "reader", Body: "x"})
			return err
		}
	}
	open := func(ctx context.Context) func() error {
		return func() error {
			_, err := f.svc.OpenRequest(ctx, core.OpenInput{Team: "demo", Target: "lead", Kind: core.KindPlan, Payload: "p"})
			return err
		}
	}
	reply := func(ctx context.Context) func() error {
		return func() error {
			_, err := f.svc.Reply(ctx, core.ReplyInput{Team: "demo", RequestID: "req-1", Approve: true})
			return err
		}
	}
	consume := func(ctx context.Context) func() error {
		return func() error { _, err := f.svc.Consume(ctx, "demo"); return err }
	}
	inbox := func(ctx context.Context, member string) func() error {
		return func() error { _, err := f.svc.Inbox(ctx, "demo", member); return err }
	}
	team := func(ctx context.Context) func() error {
		return func() error { _, err := f.svc.Team(ctx, "demo"); return err }
	}
	requests := func(ctx context.Context) func() error {
		return func() error { _, err := f.svc.Requests(ctx, "demo"); return err }
	}
	create := func(ctx context.Context) func() error {
		return func() error { _, _, err := f.svc.CreateTeam(ctx, core.TeamSpec{Name: "made"}); return err }
	}
	reset := func(ctx context.Context) func() error {
		return func() error { _, err := f.svc.ResetMember(ctx, "demo", "reader"); return err }
	}
	turn := func(ctx context.Context) func() error {
		return func() error {
			_, err := f.svc.RunTurn(ctx, "demo", "reader", func(context.Context, []core.Entry) (core.TurnOutcome, error) {
				t.Error("a refused turn ran")
				return core.TurnOutcome{}, nil
			})
			return err
		}
	}

	tests := []struct {
		call call
		want core.Code
	}{
		// The acts of a member need a member of this team.
		{call{"admin sends", send(admin)}, core.CodeForbidden},
		{call{"stranger sends", send(stranger)}, core.CodeForbidden},
		{call{"no principal sends", send(bg)}, core.CodeUnauthorized},
		{call{"admin opens", open(admin)}, core.CodeForbidden},
		{call{"stranger opens", open(stranger)}, core.CodeForbidden},
		{call{"admin replies", reply(admin)}, core.CodeForbidden},
		{call{"stranger replies", reply(stranger)}, core.CodeForbidden},
		{call{"no principal replies", reply(bg)}, core.CodeUnauthorized},
		{call{"admin consumes", consume(admin)}, core.CodeForbidden},
		{call{"stranger consumes", consume(stranger)}, core.CodeForbidden},
		// An inbox is read by its member or the admin.
		{call{"lead reads reader's inbox", inbox(lead, "reader")}, core.CodeForbidden},
		{call{"stranger reads an inbox", inbox(stranger, "reader")}, core.CodeForbidden},
		{call{"reader reads its inbox", inbox(reader, "reader")}, ""},
		{call{"admin reads an inbox", inbox(admin, "reader")}, ""},
		// The team's documents are read by its members and the admin.
		{call{"stranger reads the team", team(stranger)}, core.CodeForbidden},
		{call{"stranger lists requests", requests(stranger)}, core.CodeForbidden},
		{call{"reader reads the team", team(reader)}, ""},
		{call{"reader lists requests", requests(reader)}, ""},
		// Operating is the admin's.
		{call{"member creates a team", create(lead)}, core.CodeForbidden},
		{call{"member resets a member", reset(lead)}, core.CodeForbidden},
		{call{"member runs a turn", turn(reader)}, core.CodeForbidden},
		// Rights come before existence: a stranger learns nothing.
		{call{"stranger reads a missing inbox", inbox(stranger, "nobody")}, core.CodeForbidden},
		// The sender is the caller: lead acting as itself may reply to
		// the plan addressed to it.
		{call{"lead replies as itself", reply(lead)}, ""},
	}
	for _, tc := range tests {
		err := tc.call.run()
		got := core.Code("")
		if err != nil {
			got = core.ErrorCode(err)
		}
		if got != tc.want {
			t.Errorf("%s: code %q (err %v), want %q", tc.call.name, got, err, tc.want)
		}
	}
}

// TestSenderIsTheCaller checks that the letter's sender is the member the
// context names: there is no other way to say who sends.
func TestSenderIsTheCaller(t *testing.T) {
	f := newFixture(t, nil)
	if _, err := f.svc.Send(core.AsMember(t.Context(), "demo", "reviewer"), core.SendInput{Team: "demo", To: "reader", Body: "from reviewer"}); err != nil {
		t.Fatal(err)
	}
	box, err := f.svc.Inbox(core.AsMember(t.Context(), "demo", "reader"), "demo", "reader")
	if err != nil {
		t.Fatal(err)
	}
	if len(box) != 1 || box[0].Sender != "reviewer" {
		t.Fatalf("reader's inbox = %+v, want one letter from reviewer", box)
	}
}
