package live_test

import (
	"context"
	"fmt"
	"runtime"
	"testing"
	"time"

	"mailroom/internal/core"
	"mailroom/internal/live"
)

type waitResult struct {
	msgs []core.Message
	err  error
}

// startWait runs WaitInbox in the background and returns once the reader is
// really waiting on the inbox (n readers in all).
func startWait(f *fixture, ctx context.Context, member, after string, wait time.Duration, n int) <-chan waitResult {
	f.t.Helper()
	done := make(chan waitResult, 1)
	go func() {
		msgs, err := f.hub.WaitInbox(ctx, f.team, member, after, wait)
		done <- waitResult{msgs, err}
	}()
	for f.hub.Waiting(f.team, member) < n {
		select {
		case r := <-done:
			f.t.Fatalf("WaitInbox returned before anything was sent: %+v", r)
		default:
			runtime.Gosched()
		}
	}
	return done
}

func TestWaitInboxWokenBySend(t *testing.T) {
	f := newFixture(t, nil)
	f.send("lead", "reader", "first")
	done := startWait(f, t.Context(), "reader", "reader-1", core.MaxWait, 1)
	f.send("reviewer", "reader", "second")
	// The wake happens inside the send: the reader is no longer waiting.
	if n := f.hub.Waiting(f.team, "reader"); n != 0 {
		t.Errorf("readers still waiting after the send: got %d, want 0", n)
	}
	r := <-done
	if r.err != nil {
		t.Fatal(r.err)
	}
	if len(r.msgs) != 1 || r.msgs[0].ID != "reader-2" || r.msgs[0].Body != "second" {
		t.Fatalf("got %+v, want only reader-2 \"second\"", r.msgs)
	}
}

func TestWaitInboxIgnoresOtherInboxes(t *testing.T) {
	f := newFixture(t, nil)
	done := startWait(f, t.Context(), "reader", "", core.MaxWait, 1)
	f.send("lead", "reviewer", "not for reader")
	if n := f.hub.Waiting(f.team, "reader"); n != 1 {
		t.Errorf("readers waiting after a letter to someone else: got %d, want 1", n)
	}
	f.send("lead", "reader", "for reader")
	r := <-done
	if r.err != nil || len(r.msgs) != 1 || r.msgs[0].Body != "for reader" {
		t.Fatalf("got %+v, %v; want the one letter to reader", r.msgs, r.err)
	}
}

func TestWaitInboxTimesOutEmpty(t *testing.T) {
	f := newFixture(t, nil)
	f.send("lead", "reader", "old")
	msgs, err := f.hub.WaitInbox(t.Context(), f.team, "reader", "reader-1", time.Millisecond)
	if err != nil {
		t.Fatal(err)
	}
	if msgs == nil || len(msgs) != 0 {
		t.Fatalf("got %#v, want an empty, non-nil list", msgs)
	}
	if n := f.hub.Waiting(f.team, "reader"); n != 0 {
		t.Errorf("readers left registered after the deadline: got %d, want 0", n)
	}
}

func TestWaitInboxAfter(t *testing.T) {
	f := newFixture(t, nil)
	f.send("lead", "reader", "one")
	f.send("lead", "reader", "two")
	f.send("lead", "reader", "three")
	msgs, err := f.hub.WaitInbox(t.Context(), f.team, "reader", "reader-1", 0)
	if err != nil {
		t.Fatal(err)
	}
	if len(msgs) != 2 || msgs[0].ID != "reader-2" || msgs[1].ID != "reader-3" {
		t.Fatalf("after reader-1: got %+v, want reader-2 and reader-3", msgs)
	}
	all, err := f.hub.WaitInbox(t.Context(), f.team, "reader", "", core.MaxWait)
	if err != nil || len(all) != 3 {
		t.Fatalf("no after: got %d letters (%v), want 3 at once", len(all), err)
	}
	// A letter of another inbox, an unknown id and a malformed one are not
	// letters of this inbox.
	f.send("lead", "reviewer", "elsewhere")
	for _, after := range []string{"reviewer-1", "reader-4", "nonsense"} {
		_, err := f.hub.WaitInbox(t.Context(), f.team, "reader", after, core.MaxWait)
		wantCode(t, err, core.CodeValidation)
	}
	_, err = f.hub.WaitInbox(t.Context(), f.team, "nobody", "", 0)
	wantCode(t, err, core.CodeNotFound)
	_, err = f.hub.WaitInbox(t.Context(), "no-team", "reader", "", 0)
	wantCode(t, err, core.CodeNotFound)
}

func TestWaitInboxEndsWithContext(t *testing.T) {
	f := newFixture(t, nil)
	ctx, cancel := context.WithCancel(t.Context())
	done := startWait(f, ctx, "reader", "", core.MaxWait, 1)
	cancel()
	r := <-done
	if r.err != nil || len(r.msgs) != 0 {
		t.Fatalf("got %+v, %v; want nothing and no error", r.msgs, r.err)
	}
	if n := f.hub.Waiting(f.team, "reader"); n != 0 {
		t.Errorf("readers left registered after the client left: got %d, want 0", n)
	}
}

func TestStopWaitingReleasesEveryReader(t *testing.T) {
	f := newFixture(t, nil)
	const n = 200
	var dones []<-chan waitResult
	for i := range n {
		dones = append(dones, startWait(f, t.Context(), "reader", "", core.MaxWait, i+1))
	}
	f.hub.StopWaiting()
	for _, d := range dones {
		if r := <-d; r.err != nil || len(r.msgs) != 0 {
			t.Fatalf("got %+v, %v; want nothing and no error", r.msgs, r.err)
		}
	}
	if got := f.hub.Waiting(f.team, "reader"); got != 0 {
		t.Errorf("readers left registered after StopWaiting: got %d, want 0", got)
	}
	// A wait begun after the stop answers at once with what there is.
	f.send("lead", "reader", "late")
	msgs, err := f.hub.WaitInbox(t.Context(), f.team, "reader", "reader-1", core.MaxWait)
	if err != nil || len(msgs) != 0 {
		t.Fatalf("after stop: got %+v, %v; want nothing at once", msgs, err)
	}
}

func TestWatchInboxSignalsNextLetter(t *testing.T) {
	f := newFixture(t, nil)
	n, changed, _, release, err := f.hub.WatchInbox(t.Context(), f.team, "reader")
	if err != nil {
		t.Fatal(err)
	}
	defer release()
	if n != 0 {
		t.Fatalf("letters = %d, want 0", n)
	}
	select {
	case <-changed:
		t.Fatal("signalled before any letter")
	default:
	}
	f.send("lead", "reader", "hello")
	<-changed
	n2, _, _, release2, err := f.hub.WatchInbox(t.Context(), f.team, "reader")
	if err != nil {
		t.Fatal(err)
	}
	release2()
	if n2 != 1 {
		t.Fatalf("letters after the send = %d, want 1", n2)
	}
}

// TestSubscribersSeeInboxChannelClosed: a subscriber sees a letter's
// event only after the inbox's channel is closed, whichever subscribers
// came before it. The HTTP layer rings the reads it holds from such a
// subscriber; a read rung before its channel closed waited to its
// deadline (seen across replicas, where the event arrives by NOTIFY).
func TestSubscribersSeeInboxChannelClosed(t *testing.T) {
	f := newFixture(t, nil)
	// Several subscribers, so that any order other than the subscription
	// order would put one of them before core's waiters.
	var seen []bool
	var watch <-chan struct{}
	for range 8 {
		cancel := f.hub.Subscribe(func(ev core.Event) {
			if ev.Type != core.EventMessage {
				return
			}
			select {
			case <-watch:
				seen = append(seen, true)
			default:
				seen = append(seen, false)
			}
		})
		defer cancel()
	}
	for i := range 10 { // two inboxes: the fixture's hold few letters
		to := []string{"reader", "reviewer"}[i%2]
		_, changed, _, release, err := f.hub.WatchInbox(t.Context(), f.team, to)
		if err != nil {
			t.Fatal(err)
		}
		watch, seen = changed, nil
		f.send("lead", to, "letter")
		release()
		for j, closed := range seen {
			if !closed {
				t.Fatalf("send %d: subscriber %d saw the letter before the inbox's channel was closed", i, j)
			}
		}
		if len(seen) != 8 {
			t.Fatalf("send %d: %d subscribers saw the letter, want 8", i, len(seen))
		}
	}
}

// TestBusOrderAndCancel: subscribers are called in the order they
// subscribed, and one that cancels is called no more while the others go on.
func TestBusOrderAndCancel(t *testing.T) {
	var b live.Bus
	var got []int
	cancels := make([]func(), 5)
	for i := range 5 {
		cancels[i] = b.Subscribe(func(core.Event) { got = append(got, i) })
	}
	b.Publish(core.Event{Type: "x"})
	cancels[2]()
	cancels[2]() // twice is harmless
	b.Publish(core.Event{Type: "x"})
	want := []int{0, 1, 2, 3, 4, 0, 1, 3, 4}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("calls: got %v, want %v", got, want)
	}
}
