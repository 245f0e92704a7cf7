package core_test

import (
	"context"
	"encoding/json"
	"errors"
	"reflect"
	"strings"
	"sync"
	"testing"

	"mailroom/internal/core"
)

// TestRunTeammate covers the run_teammate teaching area of docs/spec.md §9.1.
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
		// A panic is the lesson's exception: the turn fails, the member
		// is failed with its old history, and the process goes on (a
		// turn may run in a goroutine no one else protects).
		f := newFixture(t, nil)
		if _, err := f.svc.RunTurn(t.Context(), "demo", "reader", answer("first")); err != nil {
			t.Fatal(err)
		}
		want := f.member("reader").HistoryLength
		_, err := f.svc.RunTurn(t.Context(), "demo", "reader", func(context.Context, []core.Entry) (core.TurnOutcome, error) {
			panic("interrupted")
		})
		if err != nil {
			t.Fatalf("got %v, want the panic recovered as a failed turn", err)
		}
		if m := f.member("reader"); m.Active || m.Status != "failed" || m.HistoryLength != want {
			t.Fatalf("reader = %+v, want failed, not active, with its %d history entries", m, want)
		}
		docs, err := f.svc.Turns(t.Context(), "demo")
		if err != nil || len(docs) != 2 || docs[0].Status != core.TurnFailed || docs[0].Text != core.PanicText || docs[0].EndedAt == nil {
			t.Fatalf("turn documents = %+v, %v; want the newest failed with %q", docs, err, core.PanicText)
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

// TestMembersRunConcurrently is docs/spec.md §9.1 group 1: two members' turns are
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

// nested returns a JSON object nested depth levels deep: {"a":{"a":…{}}}.
func nested(depth int) json.RawMessage {
	return json.RawMessage(strings.Repeat(`{"a":`, depth-1) + "{}" + strings.Repeat("}", depth-1))
}

// toolCall returns an assistant entry asking for tool with input.
func toolCall(tool string, input json.RawMessage) core.Entry {
	return core.Entry{Role: "assistant", Blocks: []core.Block{{Type: "tool_use", ID: "reader-t1-1", Name: tool, Input: input}}}
}

// TestTurnOutcomeOutOfBounds: an outcome whose history could not be
// stored and loaded again (a tool input nested deeper than a decoder
// accepts, an entry or a history over the byte bounds) ends the turn
// failed with the old history, and the team loads whole after a restart.
func TestTurnOutcomeOutOfBounds(t *testing.T) {
	for _, tc := range []struct {
		name  string
		entry core.Entry
	}{
		{"ErrDeepInput", toolCall("send_message", nested(9_997))},
		{"ErrJustTooDeep", toolCall("send_message", nested(core.MaxInputDepth+1))},
		{"ErrLargeEntry", core.Entry{Role: "assistant", Text: strings.Repeat("x", core.MaxEntryBytes)}},
		{"ErrInvalidInput", toolCall("send_message", json.RawMessage(`{"a":`))},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t, nil)
			if _, err := f.svc.RunTurn(t.Context(), "demo", "reader", answer("first")); err != nil {
				t.Fatal(err)
			}
			res, err := f.svc.RunTurn(t.Context(), "demo", "reader", func(_ context.Context, h []core.Entry) (core.TurnOutcome, error) {
				return core.TurnOutcome{Status: core.TurnAnswered, Text: "done", Messages: append(h, tc.entry)}, nil
			})
			if err != nil || res.Status != core.TurnFailed || res.Text != string(core.CodeValidation) {
				t.Fatalf("turn = %+v, %v; want failed with text %q", res, err, core.CodeValidation)
			}
			if m := f.member("reader"); m.Status != core.StatusFailed || m.HistoryLength != 2 || m.Turns != 2 {
				t.Fatalf("reader = %+v, want failed with the old history of 2 entries and 2 turns", m)
			}
			view, err := f.reopen().Team(t.Context(), "demo")
			if err != nil || view.Damaged || len(view.Members) != 3 {
				t.Fatalf("after restart: %+v, %v; want the whole team, not damaged", view, err)
			}
		})
	}
	t.Run("OKDeepestKept", func(t *testing.T) {
		f := newFixture(t, nil)
		_, err := f.svc.RunTurn(t.Context(), "demo", "reader", func(_ context.Context, h []core.Entry) (core.TurnOutcome, error) {
			return core.TurnOutcome{Status: core.TurnAnswered, Text: "done", Messages: append(h, toolCall("send_message", nested(core.MaxInputDepth)))}, nil
		})
		if err != nil {
			t.Fatal(err)
		}
		if m := f.member("reader"); m.Status != core.StatusIdle || m.HistoryLength != 1 {
			t.Fatalf("reader = %+v, want idle with 1 entry", m)
		}
		if view, err := f.reopen().Team(t.Context(), "demo"); err != nil || view.Damaged || view.Members[1].HistoryLength != 1 {
			t.Fatalf("after restart: %+v, %v", view, err)
		}
	})
	t.Run("ErrHistoryBytes", func(t *testing.T) {
		// Entries each within MaxEntryBytes that together exceed
		// MaxHistoryBytes; lead has no turn limit, so it takes them all.
		f := newFixture(t, nil)
		big := core.Entry{Role: "assistant", Text: strings.Repeat("x", core.MaxEntryBytes/2)}
		n := core.MaxHistoryBytes/(core.MaxEntryBytes/2) + 1
		res, err := f.svc.RunTurn(t.Context(), "demo", "lead", func(_ context.Context, h []core.Entry) (core.TurnOutcome, error) {
			for range n {
				h = append(h, big)
			}
			return core.TurnOutcome{Status: core.TurnAnswered, Messages: h}, nil
		})
		if err != nil || res.Status != core.TurnFailed {
			t.Fatalf("turn with %d entries of %d bytes = %+v, %v; want failed", n, core.MaxEntryBytes/2, res, err)
		}
		if m := f.member("lead"); m.HistoryLength != 0 {
			t.Fatalf("lead = %+v, want the old, empty history", m)
		}
	})
}

// TestTurnSaveFailureRollsBack: when the save of a turn's outcome fails,
// the turn answers storage_failed and memory is what a restart from the
// disk loads: the old history, the attempt counted. With the disk still
// failing the member is stopped, as a restart would find it; once a save
// succeeds it is idle again and can take a turn.
func TestTurnSaveFailureRollsBack(t *testing.T) {
	failingTurn := func(f *fixture, failSave func(string) bool) {
		f.t.Helper()
		if _, err := f.svc.RunTurn(f.t.Context(), "demo", "reader", answer("first")); err != nil {
			f.t.Fatal(err)
		}
		_, err := f.svc.RunTurn(f.t.Context(), "demo", "lead", func(ctx context.Context, h []core.Entry) (core.TurnOutcome, error) {
			f.fs.setFailSave(failSave) // after the claim, before the commit
			return answer("lost")(ctx, h)
		})
		wantCode(f.t, err, core.CodeStorageFailed)
	}
	members := func(t *testing.T, svc *core.Service) []core.MemberView {
		t.Helper()
		v, err := svc.Team(t.Context(), "demo")
		if err != nil || v.Damaged {
			t.Fatalf("team: %+v, %v", v, err)
		}
		return v.Members
	}

	t.Run("OKDiskStillFailing", func(t *testing.T) {
		f := newFixture(t, nil)
		failingTurn(f, failLog)
		inMemory := members(t, f.svc)
		if lead := inMemory[0]; lead.Status != core.StatusStopped || lead.Turns != 1 || lead.HistoryLength != 0 || lead.Active {
			t.Fatalf("lead in memory = %+v, want stopped, 1 turn, the old empty history", lead)
		}
		if reloaded := members(t, f.reopen()); !reflect.DeepEqual(inMemory, reloaded) {
			t.Fatalf("memory and disk differ:\nmemory %+v\nreload %+v", inMemory, reloaded)
		}
		// The next write saves memory first, and fails while it cannot.
		_, err := f.svc.Send(core.AsMember(t.Context(), "demo", "reader"), core.SendInput{Team: "demo", To: "lead", Body: "hello"})
		wantCode(t, err, core.CodeStorageFailed)
		f.fs.setFailSave(nil)
		f.send("reader", "lead", "hello")
		if st := f.readState(); st.Members[0].Status != core.StatusStopped {
			t.Fatalf("state.json has lead %q, want stopped", st.Members[0].Status)
		}
	})
	t.Run("OKOneFailure", func(t *testing.T) {
		f := newFixture(t, nil)
		var once sync.Once
		failingTurn(f, func(p string) bool {
			fail := false
			if failLog(p) {
				once.Do(func() { fail = true })
			}
			return fail
		})
		inMemory := members(t, f.svc)
		if lead := inMemory[0]; lead.Status != core.StatusIdle || lead.Turns != 1 || lead.HistoryLength != 0 {
			t.Fatalf("lead in memory = %+v, want idle, 1 turn, the old empty history", lead)
		}
		if reloaded := members(t, f.reopen()); !reflect.DeepEqual(inMemory, reloaded) {
			t.Fatalf("memory and disk differ:\nmemory %+v\nreload %+v", inMemory, reloaded)
		}
		if _, err := f.svc.RunTurn(t.Context(), "demo", "lead", answer("again")); err != nil {
			t.Fatalf("lead's next turn: %v", err)
		}
	})
}

// TestInterruptedTurn: a turn whose context ends, and which therefore
// returns an error, ends failed with the text "interrupted"; the member
// keeps its old history and is idle, so it can take its next turn.
func TestInterruptedTurn(t *testing.T) {
	f := newFixture(t, &core.Limits{InboxMessages: 8, InboxBytes: 32000, BodyChars: 600, Requests: 4, PayloadChars: 180, FeedbackChars: 120, Turns: 3, HistoryEntries: 80})
	if _, err := f.svc.RunTurn(t.Context(), "demo", "reader", answer("first")); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	res, err := f.svc.RunTurn(ctx, "demo", "reader", func(ctx context.Context, h []core.Entry) (core.TurnOutcome, error) {
		cancel()
		<-ctx.Done()
		return core.TurnOutcome{}, ctx.Err()
	})
	if err != nil || res != (core.TurnResult{Member: "reader", Status: core.TurnFailed, Text: core.InterruptedText}) {
		t.Fatalf("interrupted turn = %+v, %v; want failed, %q", res, err, core.InterruptedText)
	}
	if m := f.member("reader"); m.Status != core.StatusIdle || m.Active || m.HistoryLength != 2 || m.Turns != 2 {
		t.Fatalf("reader = %+v, want idle, not active, the old 2 entries, 2 turns", m)
	}
	if m := f.reopen(); m == nil {
		t.Fatal("reopen")
	} else if v, err := m.Team(t.Context(), "demo"); err != nil || v.Members[1].Status != core.StatusIdle {
		t.Fatalf("after restart: %+v, %v; want reader idle", v, err)
	}
	if res, err := f.svc.RunTurn(t.Context(), "demo", "reader", answer("after")); err != nil || res.Status != core.TurnAnswered {
		t.Fatalf("next turn = %+v, %v", res, err)
	}
	// An error while the context is still live is an ordinary failure.
	_, _ = f.svc.RunTurn(t.Context(), "demo", "lead", func(context.Context, []core.Entry) (core.TurnOutcome, error) {
		return core.TurnOutcome{}, errors.New("model down")
	})
	if m := f.member("lead"); m.Status != core.StatusFailed {
		t.Fatalf("lead after a model error = %+v, want failed", m)
	}
}
