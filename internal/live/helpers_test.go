package live_test

import (
	"testing"

	"mailroom/internal/core"
	"mailroom/internal/live"
	"mailroom/internal/testkit"
)

// fixture is the lesson team (lead, reader, reviewer) over a real file
// store, with the live hub the server wires around its Service.
type fixture struct {
	t    *testing.T
	svc  *core.Service
	hub  *live.Hub
	team string
}

// newFixture opens a real store in a temp dir and creates the lesson team
// with the lesson limits unless limits is given.
func newFixture(t *testing.T, limits *core.Limits) *fixture {
	t.Helper()
	svc := testkit.OpenService(t, t.TempDir())
	f := &fixture{t: t, svc: svc, hub: testkit.Hub(svc), team: "demo"}
	_, _, err := svc.CreateTeam(core.AsAdmin(t.Context()), core.TeamSpec{Name: "demo", Limits: limits, Members: []core.MemberSpec{
		{Name: "lead", Role: "summarise read-only evidence"},
		{Name: "reader", Role: "read the source"},
		{Name: "reviewer", Role: "read the expected value"},
	}})
	if err != nil {
		t.Fatal(err)
	}
	return f
}

func (f *fixture) send(sender, recipient, body string) core.SendResult {
	f.t.Helper()
	r, err := f.svc.Send(core.AsMember(f.t.Context(), f.team, sender), core.SendInput{Team: f.team, To: recipient, Body: body})
	if err != nil {
		f.t.Fatalf("send %s→%s: %v", sender, recipient, err)
	}
	return r
}

func wantCode(t *testing.T, err error, code core.Code) {
	t.Helper()
	if got := core.ErrorCode(err); got != code {
		t.Fatalf("error = %v (code %q), want code %q", err, got, code)
	}
}
