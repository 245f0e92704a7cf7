package scenario

import (
	"context"
	"errors"
	"io"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"mailroom/internal/agent"
	"mailroom/internal/core"
	"mailroom/internal/testkit"
)

// heldModel answers no model request until released: a run driven by it
// stays in progress as long as the test wants.
type heldModel struct {
	release chan struct{}
	once    sync.Once
}

func (m *heldModel) Respond(ctx context.Context, _ agent.Request) (agent.Response, error) {
	select {
	case <-m.release:
	case <-ctx.Done():
	}
	return agent.Response{}, errors.New("held model: released")
}

func (m *heldModel) free() { m.once.Do(func() { close(m.release) }) }

// clock is a replica's clock that the test sets: time.Now until set.
type clock struct{ at atomic.Pointer[time.Time] }

func (c *clock) now() time.Time {
	if t := c.at.Load(); t != nil {
		return *t
	}
	return time.Now()
}

func (c *clock) set(t time.Time) { c.at.Store(&t) }

// TestRunInProgressOnAnotherReplica: a run that replica A runs is held by
// A's lease, renewed while it runs, so replica B answers it as in progress
// (ok false, no checks, no outcome) and stores nothing for it, even once
// the lease A took at the start would have expired. When A is gone (its
// store closed: no renewal, no result) B answers the run as interrupted
// once the lease has expired, and stores that.
func TestRunInProgressOnAnotherReplica(t *testing.T) {
	if backend != testkit.BackendPostgres {
		t.Skip("replicas share a database: PostgreSQL only (the file store is one process, TestUnfinishedRunIsInterrupted)")
	}
	ctx := t.Context()
	place := testkit.NewPlace(t, backend)
	storeA := place.OpenStore(t)
	// A short lease, so that A renews it within the test: every second.
	svcA := testkit.Serve(t, storeA, core.Options{Holder: "replica-a", LeaseDuration: 3 * time.Second})
	var clockB clock
	svcB := place.OpenService(t, core.Options{Holder: "replica-b", Now: clockB.now})
	runnerB := NewRunner(svcB, workspaces(t.TempDir()), Config{})

	started := make(chan string, 1)
	runnerA := NewRunner(svcA, workspaces(place.Dir), Config{OnStart: func(runID, _ string) { started <- runID }})
	model := &heldModel{release: make(chan struct{})}
	done := make(chan error, 1)
	go func() {
		_, err := runnerA.Run(context.Background(), AgentTeams, Options{Model: model})
		done <- err
	}()
	t.Cleanup(func() {
		model.free()
		<-done
	})
	var id string
	select {
	case id = <-started:
	case <-ctx.Done():
		t.Fatal("the run on A never started")
	}

	wantInProgress := func(when string) {
		t.Helper()
		doc, err := runnerB.Get(ctx, id)
		if err != nil {
			t.Fatalf("%s: B's Get(%s) = %v, want the run in progress", when, id, err)
		}
		if doc.RunID != id || doc.Team != id || doc.Scenario != AgentTeams || doc.OK || len(doc.Checks) != 0 || doc.Outcome != nil {
			t.Fatalf("%s: B answers %s; want run %s in progress: ok false, no checks, no outcome", when, mustJSON(t, doc), id)
		}
		if stored := storedResult(t, svcB, id); stored != nil {
			t.Fatalf("%s: B stored a result for a run in progress: %s", when, stored)
		}
	}
	wantInProgress("at the start")

	first, err := svcB.Runs().Get(ctx, id)
	if err != nil || first.Lease == nil || first.Lease.Holder != "replica-a" {
		t.Fatalf("stored run = %+v, %v; want a lease held by replica-a", first, err)
	}
	// Wait for A's first renewal, then look with B's clock past the lease
	// A took at the start: only the renewal keeps the run in progress.
	var renewed core.RunDoc
	for renewed = first; !renewed.Lease.Expires.After(first.Lease.Expires); {
		select {
		case <-ctx.Done():
			t.Fatal("A never renewed its run's lease")
		case <-time.After(50 * time.Millisecond): // polling interval, not synchronisation
		}
		if renewed, err = svcB.Runs().Get(ctx, id); err != nil || renewed.Lease == nil {
			t.Fatalf("stored run while A runs it = %+v, %v; want a lease", renewed, err)
		}
	}
	clockB.set(first.Lease.Expires.Add(time.Millisecond))
	wantInProgress("after the first lease's expiry, renewed")

	// A dies: its store is closed, so it renews nothing and stores nothing.
	if c, ok := storeA.(io.Closer); !ok {
		t.Fatalf("store %T cannot be closed", storeA)
	} else if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	last, err := svcB.Runs().Get(ctx, id)
	if err != nil || last.Result != nil || last.Lease == nil {
		t.Fatalf("stored run after A died = %+v, %v; want no result and A's last lease", last, err)
	}
	clockB.set(last.Lease.Expires.Add(-time.Millisecond))
	wantInProgress("before the last lease's expiry")

	clockB.set(last.Lease.Expires.Add(time.Millisecond))
	doc, err := runnerB.Get(ctx, id)
	if err != nil {
		t.Fatalf("B's Get(%s) after the lease expired = %v, want the interrupted run", id, err)
	}
	if doc.OK || len(doc.Checks) == 0 || doc.Checks[0].Name != CheckInterrupted || doc.Checks[0].OK {
		t.Fatalf("B answers %s after the lease expired; want not ok with a failed %s check first", mustJSON(t, doc), CheckInterrupted)
	}
	if stored := storedResult(t, svcB, id); stored == nil {
		t.Fatal("B stored no result for the interrupted run")
	}
}
