package core_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"mailroom/internal/core"
	"mailroom/internal/mail"
	"mailroom/internal/testkit"
)

// stop makes member stopped (a call_limit turn) or failed (a turn whose
// function errs), keeping the history the turn left.
func stop(t *testing.T, f *fixture, member, status string) {
	t.Helper()
	fn := func(_ context.Context, h []core.Entry) (core.TurnOutcome, error) {
		if status == core.StatusFailed {
			return core.TurnOutcome{}, errors.New("model unavailable")
		}
		return core.TurnOutcome{Status: core.TurnCallLimit, Messages: append(h, core.UserText("work"), core.Entry{Role: "assistant", Text: "partial"})}, nil
	}
	if _, err := f.svc.RunTurn(t.Context(), f.team, member, fn); err != nil {
		t.Fatalf("turn: %v", err)
	}
	if got := f.member(member).Status; got != status {
		t.Fatalf("%s is %s after the turn, want %s", member, got, status)
	}
}

func TestResetMember(t *testing.T) {
	for _, status := range []string{core.StatusStopped, core.StatusFailed} {
		t.Run(status, func(t *testing.T) {
			// lead is never out of turns, so the turn after the reset
			// shows the member usable again.
			f := newFixture(t, nil)
			if _, err := f.svc.RunTurn(t.Context(), f.team, "lead", answer("first")); err != nil {
				t.Fatal(err)
			}
			stop(t, f, "lead", status)
			before := f.member("lead")

			var mu sync.Mutex
			var events []core.Event
			testkit.Hub(f.svc).SetObserver(func(ev core.Event) {
				mu.Lock()
				events = append(events, ev)
				mu.Unlock()
			})
			got, err := f.svc.ResetMember(t.Context(), f.team, "lead")
			if err != nil {
				t.Fatalf("reset: %v", err)
			}
			if got.Status != core.StatusIdle || got.HistoryLength != before.HistoryLength || got.Turns != before.Turns {
				t.Fatalf("reset member = %+v, want idle with history %d and turns %d kept", got, before.HistoryLength, before.Turns)
			}
			mu.Lock()
			if len(events) != 1 || events[0].Type != "member" || events[0].Team != f.team {
				t.Errorf("events = %+v, want one member event", events)
			}
			mu.Unlock()

			// Durable: a restart loads the member idle with its history.
			f.svc = f.reopen()
			if m := f.member("lead"); m.Status != core.StatusIdle || m.HistoryLength != before.HistoryLength {
				t.Fatalf("after restart lead = %+v, want idle with history %d", m, before.HistoryLength)
			}
			if _, err := f.svc.RunTurn(t.Context(), f.team, "lead", answer("again")); err != nil {
				t.Fatalf("turn after reset: %v", err)
			}
		})
	}
}

func TestResetMemberRefusals(t *testing.T) {
	f := newFixture(t, nil)
	ctx := t.Context()

	_, err := f.svc.ResetMember(ctx, f.team, "reader")
	wantCode(t, err, core.CodeMemberUnavailable) // idle

	release, done := holdTurn(t, f, "reviewer")
	_, err = f.svc.ResetMember(ctx, f.team, "reviewer")
	wantCode(t, err, core.CodeMemberUnavailable) // running
	close(release)
	<-done

	_, err = f.svc.ResetMember(ctx, f.team, "nobody")
	wantCode(t, err, core.CodeNotFound)
	_, err = f.svc.ResetMember(ctx, "no-team", "reader")
	wantCode(t, err, core.CodeNotFound)

	// A failed save keeps the member as it was.
	stop(t, f, "reader", core.StatusStopped)
	f.fs.setFailSave(failLog)
	_, err = f.svc.ResetMember(ctx, f.team, "reader")
	f.fs.setFailSave(nil)
	wantCode(t, err, core.CodeStorageFailed)
	if m := f.member("reader"); m.Status != core.StatusStopped {
		t.Fatalf("after a failed save reader is %s, want stopped", m.Status)
	}
}

func TestDeleteTeam(t *testing.T) {
	f := newFixture(t, nil)
	ctx := t.Context()
	f.send("lead", "reader", "a letter")

	released := false
	if err := f.svc.DeleteTeam(ctx, f.team, func() error { released = true; return nil }); err != nil {
		t.Fatalf("delete: %v", err)
	}
	if !released {
		t.Error("the release function was not called")
	}
	if _, err := f.svc.Team(ctx, f.team); core.ErrorCode(err) != core.CodeNotFound {
		t.Fatalf("team after delete: %v, want not_found", err)
	}
	wantCode(t, f.svc.DeleteTeam(ctx, f.team, nil), core.CodeNotFound)
	assertTeamsDir(t, f.dir)

	// Gone after a restart too, and the name can be used again, empty.
	f.svc = f.reopen()
	if got := len(f.svc.Teams(t.Context())); got != 0 {
		t.Fatalf("after restart %d teams, want 0", got)
	}
	if _, _, err := f.svc.CreateTeam(ctx, core.TeamSpec{Name: f.team, Members: []core.MemberSpec{{Name: "reader"}}}); err != nil {
		t.Fatalf("create the name again: %v", err)
	}
	box, err := f.svc.Inbox(ctx, f.team, "reader")
	if err != nil || len(box) != 0 {
		t.Fatalf("new team's reader inbox = %v, %v; want empty", box, err)
	}
}

// TestDeleteTeamTokens: a deleted team's tokens no longer authenticate,
// before and after a restart, while another team's still do.
func TestDeleteTeamTokens(t *testing.T) {
	dir := t.TempDir()
	svc := openService(t, dir, 0)
	ctx := t.Context()
	_, gone, err := svc.CreateTeam(ctx, core.TeamSpec{Name: "gone"})
	if err != nil {
		t.Fatal(err)
	}
	_, kept, err := svc.CreateTeam(ctx, core.TeamSpec{Name: "kept"})
	if err != nil {
		t.Fatal(err)
	}
	if err := svc.DeleteTeam(ctx, "gone", nil); err != nil {
		t.Fatal(err)
	}
	for _, s := range []*core.Service{svc, openService(t, dir, 0)} {
		if p, err := s.LookupPrincipal(ctx, gone[0].Token); err == nil {
			t.Errorf("a deleted team's token authenticates as %s/%s", p.Team, p.Member)
		}
		if _, err := s.LookupPrincipal(ctx, kept[0].Token); err != nil {
			t.Errorf("another team's token no longer authenticates: %v", err)
		}
	}
}

func TestDeleteTeamRefusals(t *testing.T) {
	f := newFixture(t, nil)
	ctx := t.Context()

	// A release that fails cancels the deletion.
	err := f.svc.DeleteTeam(ctx, f.team, func() error { return core.StorageError(errInjected) })
	wantCode(t, err, core.CodeStorageFailed)
	if _, err := f.svc.Team(ctx, f.team); err != nil {
		t.Fatalf("team after a cancelled delete: %v", err)
	}

	// A store that cannot move the team away keeps it whole.
	f.fs.setFailSave(func(p string) bool { return strings.Contains(filepath.Base(p), ".trash-") })
	err = f.svc.DeleteTeam(ctx, f.team, nil)
	f.fs.setFailSave(nil)
	wantCode(t, err, core.CodeStorageFailed)
	f.send("lead", "reader", "still writable")
	f.svc = f.reopen()
	if v, err := f.svc.Team(ctx, f.team); err != nil || v.Damaged {
		t.Fatalf("team after a failed delete and a restart: %+v, %v; want whole", v, err)
	}
}

// TestDeleteTeamInterrupted: a deletion cut short after its rename (the
// trash left behind) loads as no team at all, and start-up removes the
// trash.
func TestDeleteTeamInterrupted(t *testing.T) {
	f := newFixture(t, nil)
	f.send("lead", "reader", "a letter")
	teams := filepath.Join(f.dir, "teams")
	if err := os.Rename(filepath.Join(teams, f.team), filepath.Join(teams, ".trash-"+f.team+"-0123456789ab")); err != nil {
		t.Fatal(err)
	}
	f.svc = f.reopen()
	if got := f.svc.Teams(t.Context()); len(got) != 0 {
		t.Fatalf("teams = %+v, want none", got)
	}
	assertTeamsDir(t, f.dir)
}

func TestTeamLimit(t *testing.T) {
	dir := t.TempDir()
	svc := openService(t, dir, 2)
	ctx := t.Context()
	for _, name := range []string{"one", "two"} {
		if _, _, err := svc.CreateTeam(ctx, core.TeamSpec{Name: name}); err != nil {
			t.Fatalf("create %s: %v", name, err)
		}
	}
	if err := svc.TeamRoom(t.Context(), 1); core.ErrorCode(err) != core.CodeTeamLimit {
		t.Fatalf("TeamRoom(1) at the limit = %v, want team_limit", err)
	}
	_, _, err := svc.CreateTeam(ctx, core.TeamSpec{Name: "three"})
	wantCode(t, err, core.CodeTeamLimit)
	if _, err := os.Stat(filepath.Join(dir, "teams", "three")); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("a refused team left files: %v", err)
	}

	// Teams loaded at start count too.
	svc = openService(t, dir, 2)
	_, _, err = svc.CreateTeam(ctx, core.TeamSpec{Name: "three"})
	wantCode(t, err, core.CodeTeamLimit)

	if err := svc.DeleteTeam(ctx, "one", nil); err != nil {
		t.Fatal(err)
	}
	if err := svc.TeamRoom(t.Context(), 1); err != nil {
		t.Fatalf("TeamRoom(1) after a delete = %v", err)
	}
	if err := svc.TeamRoom(t.Context(), 2); core.ErrorCode(err) != core.CodeTeamLimit {
		t.Fatalf("TeamRoom(2) with room for one = %v, want team_limit", err)
	}
	if _, _, err := svc.CreateTeam(ctx, core.TeamSpec{Name: "three"}); err != nil {
		t.Fatalf("create after a delete: %v", err)
	}
}

// openService opens a Service over dir with a team limit (0: the default).
func openService(t *testing.T, dir string, maxTeams int) *core.Service {
	t.Helper()
	store, err := mail.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = store.Close() })
	return testkit.Serve(t, store, core.Options{MaxTeams: maxTeams})
}

// assertTeamsDir fails when the teams directory holds anything but team
// directories: a deletion leaves no trash behind.
func assertTeamsDir(t *testing.T, dir string) {
	t.Helper()
	entries, err := os.ReadDir(filepath.Join(dir, "teams"))
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		if strings.HasPrefix(e.Name(), ".") {
			t.Errorf("left in the teams directory: %s", e.Name())
		}
	}
}
