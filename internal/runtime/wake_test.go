package runtime_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"mailroom/internal/core"
	"mailroom/internal/runtime"
	"mailroom/internal/testkit"
)

// The rule of waking (core/wake.go) as the waker applies it (waker.go),
// through a real file store. A wake's
// window is a manual timer here, fired by the test, so that nothing
// depends on how fast this machine is; a look at a member is reported on
// a channel, so that a member not woken is seen not to be.

// manualTimer is a window the test ends with fire.
type manualTimer struct {
	f       func()
	stopped bool
	mu      sync.Mutex
}

func (m *manualTimer) Stop() bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	was := !m.stopped
	m.stopped = true
	return was
}

func (m *manualTimer) fire() {
	m.mu.Lock()
	stopped := m.stopped
	m.stopped = true
	m.mu.Unlock()
	if !stopped {
		m.f()
	}
}

// woken is one woken turn as the turn function saw it.
type woken struct {
	trigger core.Trigger
	// attached are the letter lines the turn's first request carried
	// beyond the committed history.
	attached []string
	release  chan turnEnd
}

// turnEnd tells a woken turn how to end.
type turnEnd struct {
	status  string
	err     error
	tokens  int64
	between func() // runs after the first prepare, before the answer
}

type wakeRig struct {
	t      *testing.T
	dir    string
	svc    *core.Service
	max    int
	waker  *runtime.Waker
	stop   context.CancelFunc
	timers chan *manualTimer
	turns  chan *woken
	built  chan string
}

// newWakeRig opens a store with team demo (lead, reader, reviewer; a real
// model named, so that wake is allowed), reader with wake set, and starts
// waking with max slots (0: the default).
func newWakeRig(t *testing.T, limits *core.Limits, max int) *wakeRig {
	t.Helper()
	dir := t.TempDir()
	svc := testkit.OpenServiceWith(t, dir, core.Options{})
	r := &wakeRig{t: t, dir: dir, svc: svc, max: max}
	_, _, err := svc.CreateTeam(t.Context(), core.TeamSpec{Name: "demo", Limits: limits,
		Model: &core.ModelSettings{Provider: "anthropic", Name: "m"},
		Members: []core.MemberSpec{
			{Name: "lead"}, {Name: "reader", Wake: true}, {Name: "reviewer"},
		}})
	if err != nil {
		t.Fatal(err)
	}
	r.start()
	return r
}

// start starts waking on r.svc with fresh hooks.
func (r *wakeRig) start() {
	r.timers = make(chan *manualTimer, 100)
	r.turns = make(chan *woken, 100)
	r.built = make(chan string, 100)
	ctx, cancel := context.WithCancel(context.Background())
	r.stop = cancel
	r.t.Cleanup(cancel)
	r.waker = runtime.NewWaker(r.svc, runtime.WakeConfig{Stopping: ctx, MaxRunning: r.max, Build: r.build(r.svc)})
	runtime.SetWakeHooks(r.waker, func(_ time.Duration, f func()) interface{ Stop() bool } {
		m := &manualTimer{f: f}
		r.timers <- m
		return m
	}, nil)
	r.waker.Start()
}

// build makes woken turns of svc that report themselves on r.turns and
// end as the test tells them.
func (r *wakeRig) build(svc *core.Service) runtime.WakeBuilder {
	return func(ctx context.Context, team, member string) (core.ModelRef, core.TurnFunc, error) {
		r.built <- member
		return core.ModelRef{Provider: "anthropic", Name: "m"}, func(ctx context.Context, h []core.Entry) (core.TurnOutcome, error) {
			w := &woken{release: make(chan turnEnd)}
			if tr := core.TurnFrom(ctx); tr != nil {
				w.trigger = tr.Document().Trigger
			}
			cand, err := svc.PrepareInbox(ctx, team, member, h)
			if err != nil {
				return core.TurnOutcome{}, err
			}
			for _, e := range cand[len(h):] {
				w.attached = append(w.attached, e.Text)
			}
			r.turns <- w
			var end turnEnd
			select {
			case end = <-w.release:
			case <-ctx.Done():
				return core.TurnOutcome{}, ctx.Err()
			}
			if end.tokens > 0 {
				core.TurnFrom(ctx).RecordModelRequest(ctx, core.TurnStep{Usage: core.Usage{InputTokens: end.tokens}})
			}
			if end.err != nil {
				return core.TurnOutcome{}, end.err
			}
			if end.between != nil {
				end.between()
			}
			status := end.status
			if status == "" {
				status = core.TurnAnswered
			}
			return core.TurnOutcome{Status: status, Text: "ok", Messages: append(cand, core.Entry{Role: "assistant", Text: "ok"})}, nil
		}, nil
	}
}

func (r *wakeRig) send(from, to, body string) string {
	r.t.Helper()
	res, err := r.svc.Send(core.AsMember(r.t.Context(), "demo", from), core.SendInput{Team: "demo", To: to, Body: body})
	if err != nil {
		r.t.Fatalf("send %s→%s: %v", from, to, err)
	}
	return res.ID
}

// settled waits until no wake is in progress (every look at a member is
// done and found it not wakeable) and checks that no window opened. A
// member found wakeable keeps its window open: that fails here.
func (r *wakeRig) settled() {
	r.t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for runtime.WakeEntries(r.waker) != 0 {
		if time.Now().After(deadline) {
			r.t.Fatal("a wake stays in progress: the member was found wakeable")
		}
		time.Sleep(2 * time.Millisecond)
	}
	select {
	case <-r.timers:
		r.t.Fatal("a wake window opened")
	default:
	}
}

func (r *wakeRig) timer() *manualTimer {
	r.t.Helper()
	select {
	case m := <-r.timers:
		return m
	case <-time.After(30 * time.Second):
		r.t.Fatal("no wake window opened")
	}
	return nil
}

func (r *wakeRig) turn() *woken {
	r.t.Helper()
	select {
	case w := <-r.turns:
		return w
	case <-time.After(30 * time.Second):
		r.t.Fatal("no woken turn ran")
	}
	return nil
}

func (r *wakeRig) member(name string) core.MemberView {
	r.t.Helper()
	return testkit.MemberOf(r.t, r.svc, "demo", name)
}

// waitEnded waits until the member's latest turn has ended and returns
// its document.
func (r *wakeRig) waitEnded(member string) core.TurnDoc {
	r.t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) {
		docs, err := r.svc.Turns(r.t.Context(), "demo")
		if err != nil {
			r.t.Fatal(err)
		}
		for _, d := range docs {
			if d.Member == member {
				if d.Status != core.TurnRunning && !r.member(member).Active {
					return d
				}
				break
			}
		}
		time.Sleep(5 * time.Millisecond)
	}
	r.t.Fatalf("the turn of %s did not end", member)
	return core.TurnDoc{}
}

func letterLine(id, from, to, body string) string {
	return core.HistoryText(core.Message{ID: id, Sender: from, Recipient: to, Body: body})
}

// TestWakeBurstIsOneTurn: letters that arrive within the window a first
// letter opened wake the member once, with every one of them attached
// before its first model request and named, in inbox order, as its
// trigger; no prompt is added.
func TestWakeBurstIsOneTurn(t *testing.T) {
	r := newWakeRig(t, nil, 0)
	ids := []string{r.send("lead", "reader", "one"), r.send("reviewer", "reader", "two"), r.send("lead", "reader", "three")}
	r.timer().fire()
	w := r.turn()
	if w.trigger.Kind != core.TriggerMail || !slices.Equal(w.trigger.Letters, ids) {
		t.Errorf("trigger = %+v, want mail with %v", w.trigger, ids)
	}
	want := []string{letterLine("reader-1", "lead", "reader", "one"), letterLine("reader-2", "reviewer", "reader", "two"), letterLine("reader-3", "lead", "reader", "three")}
	if !slices.Equal(w.attached, want) {
		t.Errorf("attached = %q, want exactly the three [team-message] lines %q", w.attached, want)
	}
	w.release <- turnEnd{}
	doc := r.waitEnded("reader")
	if doc.Status != core.TurnAnswered || doc.TurnID != "reader-t1" {
		t.Errorf("turn = %s %s, want reader-t1 answered", doc.TurnID, doc.Status)
	}
	// After the turn the member is looked at again: nothing unattended.
	r.settled()
}

// TestWakeAgainForLetterDuringTurn: a letter that lands after the turn's
// last model request is still unattended when the turn ends answered:
// it wakes the member again, for that letter alone.
func TestWakeAgainForLetterDuringTurn(t *testing.T) {
	limits := core.DefaultLimits()
	limits.Turns = 5
	r := newWakeRig(t, &limits, 0)
	r.send("lead", "reader", "first")
	r.timer().fire()
	w := r.turn()
	var late string
	w.release <- turnEnd{between: func() { late = r.send("reviewer", "reader", "late") }}
	r.waitEnded("reader")
	r.timer().fire()
	w2 := r.turn()
	if !slices.Equal(w2.trigger.Letters, []string{late}) {
		t.Errorf("second trigger = %v, want [%s]", w2.trigger.Letters, late)
	}
	if want := []string{letterLine(late, "reviewer", "reader", "late")}; !slices.Equal(w2.attached, want) {
		t.Errorf("second turn attached %q, want %q", w2.attached, want)
	}
	w2.release <- turnEnd{}
	if doc := r.waitEnded("reader"); doc.TurnID != "reader-t2" || doc.Status != core.TurnAnswered {
		t.Errorf("second turn = %s %s, want reader-t2 answered", doc.TurnID, doc.Status)
	}
}

// TestWakeHeldAfterUnansweredTurn: after a woken turn ending failed,
// cancelled, call_limit or budget_exhausted the member's wake is held: a
// new letter does not wake it, until a reset (or a PATCH setting wake)
// releases the hold.
func TestWakeHeldAfterUnansweredTurn(t *testing.T) {
	cases := []struct {
		name string
		end  func(r *wakeRig, w *woken)
	}{
		{"failed", func(_ *wakeRig, w *woken) { w.release <- turnEnd{err: errors.New("boom")} }},
		{"call_limit", func(_ *wakeRig, w *woken) { w.release <- turnEnd{status: core.TurnCallLimit} }},
		{"budget_exhausted", func(_ *wakeRig, w *woken) { w.release <- turnEnd{status: core.TurnBudgetExhausted} }},
		{"cancelled", func(r *wakeRig, _ *woken) {
			if _, err := r.svc.CancelTurn(r.t.Context(), "demo", "reader-t1"); err != nil {
				r.t.Fatal(err)
			}
		}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			limits := core.DefaultLimits()
			limits.Turns = 5
			r := newWakeRig(t, &limits, 0)
			r.send("lead", "reader", "first")
			r.timer().fire()
			tc.end(r, r.turn())
			doc := r.waitEnded("reader")
			if doc.Status != tc.name {
				t.Fatalf("turn ended %s, want %s", doc.Status, tc.name)
			}
			if m := r.member("reader"); !m.WakeHeld {
				t.Fatalf("member = %+v, want wake_held", m)
			}
			// The turn's end and a new letter: neither wakes it.
			r.send("lead", "reader", "second")
			r.settled()
			if _, err := r.svc.ResetMember(core.AsAdmin(t.Context()), "demo", "reader"); err != nil {
				t.Fatalf("reset of a held member: %v", err)
			}
			if m := r.member("reader"); m.WakeHeld {
				t.Errorf("after reset member = %+v, want the hold released", m)
			}
			r.timer().fire()
			w := r.turn()
			w.release <- turnEnd{}
			if doc := r.waitEnded("reader"); doc.TurnID != "reader-t2" {
				t.Errorf("after reset the turn is %s, want reader-t2", doc.TurnID)
			}
		})
	}
}

// TestWakeHeldReleasedByPatch: a PATCH setting wake releases a hold too.
func TestWakeHeldReleasedByPatch(t *testing.T) {
	limits := core.DefaultLimits()
	limits.Turns = 5
	r := newWakeRig(t, &limits, 0)
	r.send("lead", "reader", "first")
	r.timer().fire()
	r.turn()
	// Cancelled: the member stays idle, its wake held.
	if _, err := r.svc.CancelTurn(t.Context(), "demo", "reader-t1"); err != nil {
		t.Fatal(err)
	}
	r.waitEnded("reader")
	r.settled()
	on := true
	m, err := r.svc.UpdateMember(core.AsAdmin(t.Context()), "demo", "reader", core.MemberUpdate{Wake: &on})
	if err != nil || m.WakeHeld || !m.Wake {
		t.Fatalf("patch = %+v, %v; want wake on and no hold", m, err)
	}
	r.timer().fire()
	w := r.turn()
	if !slices.Equal(w.trigger.Letters, []string{"reader-1"}) {
		t.Errorf("trigger = %v, want the letter the cancelled turn left unattended", w.trigger.Letters)
	}
	w.release <- turnEnd{}
	r.waitEnded("reader")
}

// TestWakeNotWhen: a member with no turns left, a team whose model tokens
// are spent, a closed member and a member without wake are not woken.
func TestWakeNotWhen(t *testing.T) {
	t.Run("turns limit", func(t *testing.T) {
		limits := core.DefaultLimits()
		limits.Turns = 1
		r := newWakeRig(t, &limits, 0)
		r.send("lead", "reader", "one")
		r.timer().fire()
		r.turn().release <- turnEnd{}
		r.waitEnded("reader")
		r.send("lead", "reader", "two")
		r.settled()
	})
	t.Run("spent budget", func(t *testing.T) {
		limits := core.DefaultLimits()
		limits.Turns, limits.ModelTokens = 5, 100
		r := newWakeRig(t, &limits, 0)
		r.send("lead", "reader", "one")
		r.timer().fire()
		r.turn().release <- turnEnd{tokens: 100}
		if doc := r.waitEnded("reader"); doc.Status != core.TurnAnswered {
			t.Fatalf("turn ended %s, want answered", doc.Status)
		}
		r.send("lead", "reader", "two")
		r.settled()
	})
	t.Run("closed member", func(t *testing.T) {
		r := newWakeRig(t, nil, 0)
		// Closing takes a shutdown request to reader (a letter) and
		// reader's approval; the request letter opens a window first.
		if _, err := r.svc.OpenRequest(core.AsMember(t.Context(), "demo", "lead"), core.OpenInput{Team: "demo", Target: "reader", Kind: core.KindShutdown, Payload: "stop"}); err != nil {
			t.Fatal(err)
		}
		tm := r.timer()
		if _, err := r.svc.Reply(core.AsMember(t.Context(), "demo", "reader"), core.ReplyInput{Team: "demo", RequestID: "req-1", Approve: true}); err != nil {
			t.Fatal(err)
		}
		if m := r.member("reader"); m.Status != core.StatusClosed {
			t.Fatalf("reader = %s, want closed", m.Status)
		}
		tm.fire() // the window ends after the member was closed: dropped
		r.send("lead", "reader", "more")
		r.settled()
		if docs, _ := r.svc.Turns(t.Context(), "demo"); len(docs) != 0 {
			t.Errorf("turns = %+v, want none", docs)
		}
	})
	t.Run("no wake", func(t *testing.T) {
		r := newWakeRig(t, nil, 0)
		r.send("lead", "reviewer", "hello")
		if runtime.WakeInProgress(r.waker, "demo", "reviewer") {
			t.Error("a letter to a member without wake started a wake")
		}
	})
}

// TestWakeStoppingServer: once the server stops, a letter opens no wake,
// queued wakes are dropped, and a woken turn that runs is cancelled: it
// ends failed (interrupted) and holds the wake.
func TestWakeStoppingServer(t *testing.T) {
	r := newWakeRig(t, nil, 1)
	on := true
	if _, err := r.svc.UpdateMember(core.AsAdmin(t.Context()), "demo", "reviewer", core.MemberUpdate{Wake: &on}); err != nil {
		t.Fatal(err)
	}
	r.send("lead", "reader", "one")
	r.timer().fire()
	w := r.turn()
	r.send("lead", "reviewer", "two")
	r.timer().fire()
	if n := r.waker.Queued(); n != 1 {
		t.Fatalf("queued wakes = %d, want 1 (one slot, taken)", n)
	}
	r.stop()
	_ = w
	doc := r.waitEnded("reader")
	if doc.Status != core.TurnFailed || doc.Text != core.InterruptedText {
		t.Errorf("running woken turn ended %s %q, want failed %q", doc.Status, doc.Text, core.InterruptedText)
	}
	if m := r.member("reader"); !m.WakeHeld {
		t.Errorf("reader = %+v, want its wake held after the interruption", m)
	}
	if n := r.waker.Queued(); n != 0 {
		t.Errorf("queued wakes = %d after stopping, want 0", n)
	}
	r.settled()
	r.send("lead", "reviewer", "three")
	if n := runtime.WakeEntries(r.waker); n != 0 {
		t.Errorf("%d wakes in progress on a stopping server, want none", n)
	}
	if docs, _ := r.svc.Turns(t.Context(), "demo"); len(docs) != 1 {
		t.Errorf("%d turns, want only the interrupted one", len(docs))
	}
}

// TestWakeRacesRequestedTurn: a woken turn and a requested turn of the
// same member claim it in units of work: exactly one runs, and the
// request that lost is refused with member_unavailable.
func TestWakeRacesRequestedTurn(t *testing.T) {
	for range 5 {
		r := newWakeRig(t, nil, 0)
		r.send("lead", "reader", "one")
		tm := r.timer()
		var tr *core.Turn
		var err error
		done := make(chan struct{})
		go func() {
			defer close(done)
			tr, err = r.svc.BeginTurn(core.AsAdmin(t.Context()), "demo", "reader", core.ModelRef{})
		}()
		tm.fire()
		<-done
		if err == nil {
			// The requested turn attends the letter, as a woken one
			// would: else the waker, which found reader busy, wakes it
			// for the still unread letter once this turn ends.
			attend := func(ctx context.Context, h []core.Entry) (core.TurnOutcome, error) {
				cand, err := r.svc.PrepareInbox(ctx, "demo", "reader", h)
				if err != nil {
					return core.TurnOutcome{}, err
				}
				return core.TurnOutcome{Status: core.TurnAnswered, Text: "requested", Messages: append(cand, core.Entry{Role: "assistant", Text: "ok"})}, nil
			}
			if _, rerr := tr.Run(core.AsAdmin(t.Context()), attend); rerr != nil {
				t.Fatal(rerr)
			}
		} else {
			wantCode(t, err, core.CodeMemberUnavailable)
			r.turn().release <- turnEnd{}
		}
		r.waitEnded("reader")
		docs, _ := r.svc.Turns(t.Context(), "demo")
		if len(docs) != 1 {
			t.Fatalf("%d turns ran, want exactly one", len(docs))
		}
		if wantKind := map[bool]string{true: core.TriggerRequest, false: core.TriggerMail}[err == nil]; docs[0].Trigger.Kind != wantKind {
			t.Errorf("the turn's trigger = %s, want %s", docs[0].Trigger.Kind, wantKind)
		}
	}
}

// TestWakeAfterRestart: nothing of a wake is stored; a member with an
// unattended letter is woken when the server starts again.
func TestWakeAfterRestart(t *testing.T) {
	r := newWakeRig(t, nil, 0)
	r.send("lead", "reader", "before the crash")
	r.timer() // the window opened, and the process dies before it ends
	r.stop()
	r.svc = testkit.OpenServiceWith(t, r.dir, core.Options{})
	r.start()
	r.timer().fire()
	w := r.turn()
	if !slices.Equal(w.trigger.Letters, []string{"reader-1"}) {
		t.Errorf("trigger after restart = %v, want [reader-1]", w.trigger.Letters)
	}
	w.release <- turnEnd{}
	r.waitEnded("reader")
}

// TestWakeQueueOrder: with one slot, queued wakes run oldest letter first.
func TestWakeQueueOrder(t *testing.T) {
	r := newWakeRig(t, nil, 1)
	on := true
	if _, err := r.svc.UpdateMember(core.AsAdmin(t.Context()), "demo", "reviewer", core.MemberUpdate{Wake: &on}); err != nil {
		t.Fatal(err)
	}
	if _, err := r.svc.UpdateMember(core.AsAdmin(t.Context()), "demo", "lead", core.MemberUpdate{Wake: &on}); err != nil {
		t.Fatal(err)
	}
	r.send("reviewer", "reader", "first")
	readerWindow := r.timer()
	readerWindow.fire()
	running := r.turn()
	r.send("reader", "lead", "second")
	leadWindow := r.timer()
	r.send("lead", "reviewer", "third")
	reviewerWindow := r.timer()
	reviewerWindow.fire() // its window ends first, but its letter came last
	leadWindow.fire()
	if n := r.waker.Queued(); n != 2 {
		t.Fatalf("queued = %d, want 2", n)
	}
	running.release <- turnEnd{}
	next := r.turn()
	if next.trigger.Letters[0] != "lead-1" {
		t.Errorf("next woken turn is for %v, want lead's (its letter is older)", next.trigger.Letters)
	}
	next.release <- turnEnd{}
	last := r.turn()
	if last.trigger.Letters[0] != "reviewer-1" {
		t.Errorf("last woken turn is for %v, want reviewer's", last.trigger.Letters)
	}
	last.release <- turnEnd{}
}

// TestWakeScriptedRefused: wake on a member whose model is the scripted
// one is a validation error, at creation and in an update.
func TestWakeScriptedRefused(t *testing.T) {
	svc := testkit.OpenServiceWith(t, t.TempDir(), core.Options{})
	_, _, err := svc.CreateTeam(t.Context(), core.TeamSpec{Name: "demo", Members: []core.MemberSpec{{Name: "reader", Wake: true}}})
	wantCode(t, err, core.CodeValidation)
	_, _, err = svc.CreateTeam(t.Context(), core.TeamSpec{Name: "demo", Members: []core.MemberSpec{{Name: "reader", Wake: true, Model: &core.ModelSettings{Provider: "openai", Name: "m"}}}})
	if err != nil {
		t.Fatalf("wake with the member's own model: %v", err)
	}
	on := true
	_, err = svc.UpdateMember(core.AsAdmin(t.Context()), "demo", "lead", core.MemberUpdate{Wake: &on})
	wantCode(t, err, core.CodeValidation)
	_, err = svc.UpdateMember(core.AsAdmin(t.Context()), "demo", "reader", core.MemberUpdate{Model: &core.ModelSettings{Provider: "scripted"}})
	wantCode(t, err, core.CodeValidation)
	_, err = svc.UpdateMember(core.AsMember(t.Context(), "demo", "reader"), "demo", "reader", core.MemberUpdate{Wake: &on})
	wantCode(t, err, core.CodeForbidden)
}

// TestWakeLeadHasTurnsAlways: the turn limit does not bound lead's woken
// turns, as it does not bound its requested ones.
func TestWakeLeadHasTurnsAlways(t *testing.T) {
	limits := core.DefaultLimits()
	limits.Turns = 1
	r := newWakeRig(t, &limits, 0)
	on := true
	if _, err := r.svc.UpdateMember(core.AsAdmin(t.Context()), "demo", "lead", core.MemberUpdate{Wake: &on}); err != nil {
		t.Fatal(err)
	}
	for i, body := range []string{"first report", "second report"} {
		r.send("reader", "lead", body)
		r.timer().fire()
		r.turn().release <- turnEnd{}
		if doc := r.waitEnded("lead"); doc.Status != core.TurnAnswered || doc.TurnID != fmt.Sprintf("lead-t%d", i+1) {
			t.Fatalf("lead's turn %d = %s %s, want lead-t%d answered", i+1, doc.TurnID, doc.Status, i+1)
		}
	}
}

// TestDeletedTeamWakeNeverFires: a wake whose window is open when its team
// is deleted never fires on a new team of the same name, even for a letter
// to the new team; that letter opens a window of its own.
func TestDeletedTeamWakeNeverFires(t *testing.T) {
	r := newWakeRig(t, nil, 0)
	r.send("lead", "reader", "to the old team")
	old := r.timer()
	ctx := core.AsAdmin(t.Context())
	if err := r.svc.DeleteTeam(ctx, "demo", nil); err != nil {
		t.Fatal(err)
	}
	if _, _, err := r.svc.CreateTeam(ctx, core.TeamSpec{Name: "demo",
		Model:   &core.ModelSettings{Provider: "anthropic", Name: "m"},
		Members: []core.MemberSpec{{Name: "lead"}, {Name: "reader", Wake: true}, {Name: "reviewer"}}}); err != nil {
		t.Fatal(err)
	}
	// A letter to the new team, then the end of the old team's window.
	r.send("lead", "reader", "to the new team")
	old.fire()
	select {
	case w := <-r.turns:
		t.Fatalf("the deleted team's wake fired on the new team: trigger %+v", w.trigger)
	case <-time.After(300 * time.Millisecond):
	}
	r.timer().fire()
	w := r.turn()
	if w.trigger.Kind != core.TriggerMail || len(w.trigger.Letters) != 1 || w.trigger.Letters[0] != "reader-1" {
		t.Errorf("the new team's wake = %+v, want mail [reader-1]", w.trigger)
	}
	w.release <- turnEnd{}
}

// answer is a turn that answers text with the history it was given.
func answer(text string) core.TurnFunc {
	return func(_ context.Context, h []core.Entry) (core.TurnOutcome, error) {
		return core.TurnOutcome{Status: core.TurnAnswered, Text: text,
			Messages: append(h, core.UserText("本轮追问"), core.Entry{Role: "assistant", Text: "依据已有记录补充回答。"})}, nil
	}
}

// wantCode fails the test unless err has code.
func wantCode(t *testing.T, err error, code core.Code) {
	t.Helper()
	if got := core.ErrorCode(err); got != code {
		t.Fatalf("error = %v (code %q), want code %q", err, got, code)
	}
}
