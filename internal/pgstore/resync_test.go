package pgstore_test

import (
	"encoding/json"
	"testing"
	"time"

	"mailroom/internal/core"
	"mailroom/internal/pgstore"
	"mailroom/internal/pgtest"
	"mailroom/internal/testkit"
)

// TestListenerReconnectResyncs: what another replica stores while a
// replica's LISTEN connection is gone is announced to nobody. Once the
// listener is connected again, the replica delivers a resync: every
// waiter looks at the database again (a held read gets the letter, a
// host-permission wait sees its decision) and goes on waiting when
// nothing it waits for happened, and the event bus, which feeds the event
// stream, carries the resync.
//
// Replica A here is a bare store whose writes announce nothing, so that
// the only way B can learn of them is the resync.
func TestListenerReconnectResyncs(t *testing.T) {
	ctx := t.Context()
	admin := core.AsAdmin(ctx)
	url := pgtest.New(t)
	storeA := open(t, url)
	svcB := testkit.Serve(t, open(t, url), core.Options{})
	resyncs := make(chan struct{}, 10)
	cancel := testkit.Hub(svcB).Subscribe(func(ev core.Event) {
		if ev.Type == core.EventResync {
			resyncs <- struct{}{}
		}
	})
	defer cancel()
	if _, _, err := svcB.CreateTeam(admin, core.TeamSpec{Name: "demo", Members: []core.MemberSpec{{Name: "reader", Role: "read"}}}); err != nil {
		t.Fatal(err)
	}

	// dropListener ends B's LISTEN connection, the only one in this
	// database.
	dropListener := func() {
		t.Helper()
		pgtest.DropListeners(ctx, t, url)
	}
	awaitResync := func(when string) {
		t.Helper()
		select {
		case <-resyncs:
		case <-ctx.Done():
			t.Fatalf("%s: B's bus never carried a resync", when)
		}
	}

	type read struct {
		msgs []core.Message
		err  error
	}
	reads := make(chan read, 1)
	go func() {
		msgs, err := testkit.Hub(svcB).WaitInbox(admin, "demo", "reader", "", core.MaxWait)
		reads <- read{msgs, err}
	}()
	asked := make(chan core.Permission, 1)
	answers := make(chan core.HostAnswer, 1)
	go func() {
		ans, err := svcB.AskHost(admin, "demo", "reader", "run_main", json.RawMessage(`{}`), "req-1", func(p core.Permission) { asked <- p })
		if err != nil {
			t.Errorf("AskHost: %v", err)
		}
		answers <- ans
	}()
	var perm core.Permission
	select {
	case perm = <-asked:
	case <-ctx.Done():
		t.Fatal("AskHost never asked")
	}
	waitFor := func(what string, cond func() bool) {
		t.Helper()
		for !cond() {
			select {
			case <-ctx.Done():
				t.Fatalf("never: %s", what)
			case <-time.After(10 * time.Millisecond): // polling interval, not synchronisation
			}
		}
	}
	permKey := "permission:" + perm.ID // the waiters' key of a permission
	waitFor("the reader waits on B", func() bool { return testkit.Hub(svcB).Waiting("demo", "reader") == 1 })

	// A reconnection with nothing missed: both waiters look again and
	// wait on; the permission is not settled as expired.
	dropListener()
	awaitResync("after the first reconnection")
	waitFor("the read waits again after the resync", func() bool { return testkit.Hub(svcB).Waiting("demo", "reader") == 1 })
	waitFor("the permission wait waits again after the resync", func() bool { return testkit.Hub(svcB).Waiting("demo", permKey) == 1 })
	ps, err := svcB.Permissions(admin, "demo")
	if err != nil || len(ps) != 1 || ps[0].Status != core.PermissionPending {
		t.Fatalf("permissions after a resync with nothing missed = %+v, %v; want %s still pending", ps, err, perm.ID)
	}
	select {
	case r := <-reads:
		t.Fatalf("the read answered %+v, %v with nothing to read", r.msgs, r.err)
	default:
	}

	// A letter and a decision stored on A while B does not listen.
	if _, err := send(ctx, storeA, "demo", "lead", "reader", "sent while B was not listening"); err != nil {
		t.Fatal(err)
	}
	if err := core.Update(ctx, storeA, "demo", func(tx core.TeamTx) error {
		st := tx.State()
		now := time.Now().UTC()
		by := "admin"
		for i := range st.Permissions {
			if st.Permissions[i].ID == perm.ID {
				st.Permissions[i].Status, st.Permissions[i].DecidedAt, st.Permissions[i].DecidedBy = core.PermissionAllowed, &now, &by
			}
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	dropListener()
	awaitResync("after the second reconnection")
	r := <-reads
	if r.err != nil || len(r.msgs) != 1 || r.msgs[0].ID != "reader-1" || r.msgs[0].Body != "sent while B was not listening" {
		t.Fatalf("the held read answered %+v, %v; want reader-1, stored on A while B did not listen", r.msgs, r.err)
	}
	ans := <-answers
	if !ans.Allowed || ans.Permission == nil || ans.Permission.Status != core.PermissionAllowed {
		t.Fatalf("AskHost answered %+v; want the decision stored on A: allowed", ans)
	}
}

var _ core.Notifier = (*pgstore.Store)(nil)
