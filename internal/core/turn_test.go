package core_test

import (
	"context"
	"errors"
	"sync"
	"testing"

	"mailroom/internal/core"
)

// TestRunTeammate covers the run_teammate teaching area of SPEC §9.1.
func TestRunTeammate(t *testing.T) {
	t.Run("OKFirst", func(t *testing.T) {
		f := newFixture(t, nil)
		var received []core.Entry
		res, err := f.svc.RunTurn(t.Context(), "demo", "reader", func(ctx context.Context, h []core.Entry) (core.TurnOutcome, error) {
			received = h
			return answer("保存补充说明，仍没有运行。")(ctx, h)
		})
		if err != nil || res != (core.TurnResult{Member: "reader", Status: "answered", Text: "保存补充说明，仍没有运行。"}) {
			t.Fatalf("%+v %v", res, err)
		}
		if len(received) != 0 {
			t.Fatalf("turn received %d entries, want 0", len(received))
		}
		m := f.member("reader")
		if m.HistoryLength != 2 || m.Status != "idle" || m.Turns != 1 || m.Active {
			t.Fatalf("%+v", m)
		}
	})
	t.Run("OKContinued", func(t *testing.T) {
		f := newFixture(t, nil)
		first := func(_ context.Context, h []core.Entry) (core.TurnOutcome, error) {
			return core.TurnOutcome{Status: "answered", Text: "ok", Messages: append(h, core.UserText("先前读取main.py。"), core.Entry{Role: "assistant", Text: "已保存源码；没有运行。"})}, nil
		}
		if _, err := f.svc.RunTurn(t.Context(), "demo", "reader", first); err != nil {
			t.Fatal(err)
		}
		var received []core.Entry
		_, err := f.svc.RunTurn(t.Context(), "demo", "reader", func(ctx context.Context, h []core.Entry) (core.TurnOutcome, error) {
			received = h
			return answer("again")(ctx, h)
		})
		if err != nil || len(received) != 2 || received[0].Text != "先前读取main.py。" {
			t.Fatalf("received %+v, %v", received, err)
		}
		if m := f.member("reader"); m.HistoryLength != 4 || m.Turns != 2 || m.Status != "idle" {
			t.Fatalf("%+v", m)
		}
	})
	t.Run("ErrBusy", func(t *testing.T) {
		f := newFixture(t, nil)
		release, done := holdTurn(t, f, "reader")
		called := false
		_, err := f.svc.RunTurn(t.Context(), "demo", "reader", func(ctx context.Context, h []core.Entry) (core.TurnOutcome, error) {
			called = true
			return answer("x")(ctx, h)
		})
		wantCode(t, err, core.CodeMemberUnavailable)
		if called {
			t.Fatal("callback ran for a busy member")
		}
		close(release)
		<-done
	})
	t.Run("ErrExhausted", func(t *testing.T) {
		f := newFixture(t, nil)
		for range 2 {
			if _, err := f.svc.RunTurn(t.Context(), "demo", "reader", answer("x")); err != nil {
				t.Fatal(err)
			}
		}
		_, err := f.svc.RunTurn(t.Context(), "demo", "reader", func(context.Context, []core.Entry) (core.TurnOutcome, error) {
			t.Fatal("callback ran for an exhausted member")
			return core.TurnOutcome{}, nil
		})
		wantCode(t, err, core.CodeMemberUnavailable)
	})
	t.Run("OKFailed", func(t *testing.T) {
		f := newFixture(t, nil)
		res, err := f.svc.RunTurn(t.Context(), "demo", "reader", func(context.Context, []core.Entry) (core.TurnOutcome, error) {
			return core.TurnOutcome{}, errors.New("教学轮次失败")
		})
		if err != nil || res.Status != "failed" || res.Text == "" || res.Text == "教学轮次失败" {
			t.Fatalf("%+v %v (internal text must not be returned)", res, err)
		}
		m := f.member("reader")
		if m.Status != "failed" || m.Turns != 1 || m.HistoryLength != 0 || m.Active {
			t.Fatalf("%+v", m)
		}
		_, err = f.svc.RunTurn(t.Context(), "demo", "reader", answer("x"))
		wantCode(t, err, core.CodeMemberUnavailable)
	})
	t.Run("OKStopped", func(t *testing.T) {
		f := newFixture(t, nil)
		res, err := f.svc.RunTurn(t.Context(), "demo", "reader", func(ctx context.Context, h []core.Entry) (core.TurnOutcome, error) {
			o, _ := answer("保存补充说明，仍没有运行。")(ctx, h)
			o.Status = core.TurnCallLimit
			return o, nil
		})
		if err != nil || res.Status != "call_limit" || res.Text != "保存补充说明，仍没有运行。" {
			t.Fatalf("%+v %v", res, err)
		}
		if m := f.member("reader"); m.Status != "stopped" || m.HistoryLength != 2 {
			t.Fatalf("%+v", m)
		}
	})
	t.Run("OKUnboundedHistoryFails", func(t *testing.T) {
		f := newFixture(t, nil)
		res, _ := f.svc.RunTurn(t.Context(), "demo", "reader", func(context.Context, []core.Entry) (core.TurnOutcome, error) {
			return core.TurnOutcome{Status: "answered", Messages: make([]core.Entry, 81)}, nil
		})
		if res.Status != "failed" || f.member("reader").HistoryLength != 0 {
			t.Fatalf("%+v", res)
		}
	})
	t.Run("OKUnknownStatusFails", func(t *testing.T) {
		f := newFixture(t, nil)
		res, _ := f.svc.RunTurn(t.Context(), "demo", "reader", func(context.Context, []core.Entry) (core.TurnOutcome, error) {
			return core.TurnOutcome{Status: "whatever"}, nil
		})
		if res.Status != "failed" || f.member("reader").Status != "failed" {
			t.Fatalf("%+v", res)
		}
	})
	t.Run("OKTextTruncated", func(t *testing.T) {
		f := newFixture(t, nil)
		long := make([]rune, 700)
		for i := range long {
			long[i] = '字'
		}
		res, _ := f.svc.RunTurn(t.Context(), "demo", "reader", answer(string(long)))
		if core.Length(res.Text) != 600 {
			t.Fatalf("text length %d", core.Length(res.Text))
		}
	})
	t.Run("ErrUnknownMember", func(t *testing.T) {
		f := newFixture(t, nil)
		_, err := f.svc.RunTurn(t.Context(), "demo", "ghost", answer("x"))
		wantCode(t, err, core.CodeNotFound)
	})
	t.Run("OKLeadNotCapped", func(t *testing.T) {
		f := newFixture(t, nil)
		for range 3 {
			if _, err := f.svc.RunTurn(t.Context(), "demo", "lead", answer("x")); err != nil {
				t.Fatal(err)
			}
		}
		if m := f.member("lead"); m.HistoryLength != 6 || m.Status != "idle" {
			t.Fatalf("%+v", m)
		}
	})
	t.Run("OKOccupancyReleasedAfterPanic", func(t *testing.T) {
		f := newFixture(t, nil)
		func() {
			defer func() { _ = recover() }()
			_, _ = f.svc.RunTurn(t.Context(), "demo", "reader", func(context.Context, []core.Entry) (core.TurnOutcome, error) {
				panic("interrupted")
			})
		}()
		if m := f.member("reader"); m.Active || m.Status != "stopped" {
			t.Fatalf("%+v", m)
		}
	})
}

// holdTurn starts a turn of member that blocks until release is closed.
// It returns once the turn is running.
func holdTurn(t *testing.T, f *fixture, member string) (release chan struct{}, done chan core.TurnResult) {
	t.Helper()
	started := make(chan struct{})
	release = make(chan struct{})
	done = make(chan core.TurnResult, 1)
	go func() {
		res, err := f.svc.RunTurn(context.Background(), f.team, member, func(ctx context.Context, h []core.Entry) (core.TurnOutcome, error) {
			close(started)
			<-release
			return answer("held")(ctx, h)
		})
		if err != nil {
			t.Error(err)
		}
		done <- res
	}()
	<-started
	return release, done
}

// TestMembersRunConcurrently is SPEC §9.1 group 1: two members' turns are
// in progress at the same moment (a gate only both together can pass).
func TestMembersRunConcurrently(t *testing.T) {
	f := newFixture(t, nil)
	var gate sync.WaitGroup
	gate.Add(2)
	run := func(member string) chan error {
		errc := make(chan error, 1)
		go func() {
			_, err := f.svc.RunTurn(t.Context(), "demo", member, func(ctx context.Context, h []core.Entry) (core.TurnOutcome, error) {
				gate.Done()
				gate.Wait() // returns only when the other turn is running too
				return answer(member)(ctx, h)
			})
			errc <- err
		}()
		return errc
	}
	a, b := run("reader"), run("reviewer")
	if err := <-a; err != nil {
		t.Fatal(err)
	}
	if err := <-b; err != nil {
		t.Fatal(err)
	}
}

// TestTurnDoesNotHoldLock: mail to a member whose turn is running is
// stored while the turn waits (model turns run outside the lock).
func TestTurnDoesNotHoldLock(t *testing.T) {
	f := newFixture(t, nil)
	release, done := holdTurn(t, f, "reader")
	f.send("reviewer", "reader", "while you work")
	if m := f.member("reader"); !m.Active || m.Status != "running" || m.InboxLength != 1 {
		t.Fatalf("%+v", m)
	}
	close(release)
	<-done
	if m := f.member("reader"); m.Active || m.Status != "idle" {
		t.Fatalf("%+v", m)
	}
}
