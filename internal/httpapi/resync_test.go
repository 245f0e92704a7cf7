package httpapi_test

import (
	"net/http"
	"testing"
	"time"

	"mailroom/internal/core"
	"mailroom/internal/httpapi"
	"mailroom/internal/pgstore"
	"mailroom/internal/pgtest"
	"mailroom/internal/testkit"
)

// TestHeldReadWokenByResync (PostgreSQL, replicas): a letter another
// replica stores while this replica's LISTEN connection is gone is
// announced to nobody here. Once the listener is connected again, the
// resync rings every read held off net/http, and the held read answers
// the letter instead of waiting to its deadline.
func TestHeldReadWokenByResync(t *testing.T) {
	if backend != testkit.BackendPostgres {
		t.Skip("PostgreSQL only: the listener of a replica")
	}
	held := &httpapi.HeldReads{}
	e := newEnv(t, func(o *httpapi.Options) { o.HeldReads = held })
	a := e.newTeam("alpha", nil)
	done := e.holdRead(a, "reader", a.tokens["reader"], "wait=60", 1)
	for held.Held("alpha", "reader") < 1 {
		time.Sleep(time.Millisecond) // until the read is off net/http
	}

	// The other replica: a bare store, whose writes announce nothing.
	ctx := t.Context()
	other, err := pgstore.Open(ctx, e.place.DatabaseURL, pgstore.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()
	if err := core.Update(ctx, other, "alpha", func(tx core.TeamTx) error {
		return tx.AppendLetter(core.Message{ID: "reader-1", Sender: "lead", Recipient: "reader", Body: "sent by another replica"})
	}); err != nil {
		t.Fatal(err)
	}
	select {
	case r := <-done:
		t.Fatalf("the held read answered before the resync: %+v", r)
	case <-time.After(100 * time.Millisecond): // nothing announced it; not synchronisation
	}

	// This replica's listener loses its connection and comes back.
	pgtest.DropListeners(ctx, t, e.place.DatabaseURL)
	r := <-done
	if r.err != nil || r.status != http.StatusOK || len(r.inbox.Messages) != 1 || r.inbox.Messages[0].ID != "reader-1" {
		t.Fatalf("the held read after the resync: %+v; want 200 with reader-1", r)
	}
}
