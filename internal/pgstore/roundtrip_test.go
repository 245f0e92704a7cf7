package pgstore_test

import (
	"context"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/jackc/pgx/v5"

	"mailroom/internal/core"
	"mailroom/internal/pgstore"
	"mailroom/internal/pgtest"
)

// counter counts the round trips to the database (a query or a batch)
// and logs their statements.
type counter struct {
	mu    sync.Mutex
	trips int
	stmts []string
}

func (c *counter) TraceQueryStart(ctx context.Context, _ *pgx.Conn, d pgx.TraceQueryStartData) context.Context {
	c.mu.Lock()
	c.trips++
	c.stmts = append(c.stmts, d.SQL)
	c.mu.Unlock()
	return ctx
}
func (c *counter) TraceQueryEnd(context.Context, *pgx.Conn, pgx.TraceQueryEndData) {}
func (c *counter) TraceBatchStart(ctx context.Context, _ *pgx.Conn, d pgx.TraceBatchStartData) context.Context {
	if q := d.Batch.QueuedQueries; len(q) > 0 && strings.Contains(q[0].SQL, "pg_notify") {
		return ctx // the events, sent after the commit by another goroutine
	}
	c.mu.Lock()
	c.trips++
	c.stmts = append(c.stmts, "-- batch")
	c.mu.Unlock()
	return ctx
}
func (c *counter) TraceBatchQuery(_ context.Context, _ *pgx.Conn, d pgx.TraceBatchQueryData) {
	if strings.Contains(d.SQL, "pg_notify") {
		return
	}
	c.mu.Lock()
	c.stmts = append(c.stmts, "   "+d.SQL)
	c.mu.Unlock()
}
func (c *counter) TraceBatchEnd(context.Context, *pgx.Conn, pgx.TraceBatchEndData) {}

func (c *counter) reset() (int, []string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	n, s := c.trips, c.stmts
	c.trips, c.stmts = 0, nil
	return n, s
}

// TestSendRoundTrips: a send through core is two round trips whatever the
// inbox holds: BEGIN, the lock and what it guards in one batch, the writes
// and COMMIT in the other, no read of the inbox's letters and no rewrite of the
// team's state when only a letter was added.
func TestSendRoundTrips(t *testing.T) {
	c := &counter{}
	s, err := pgstore.Open(context.Background(), pgtest.New(t), pgstore.Options{Tracer: c})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	svc := core.NewService(s, core.Options{})
	ctx := context.Background()
	if err := svc.Open(ctx); err != nil {
		t.Fatal(err)
	}
	limits := core.DefaultLimits()
	limits.InboxMessages = 100
	if _, _, err := svc.CreateTeam(core.AsAdmin(ctx), core.TeamSpec{Name: "rt", Limits: &limits, Members: []core.MemberSpec{{Name: "a", Role: "r"}, {Name: "b", Role: "r"}}}); err != nil {
		t.Fatal(err)
	}
	actx := core.WithPrincipal(ctx, core.Principal{Team: "rt", Member: "a"})
	for i := range 20 {
		c.reset()
		res, err := svc.Send(actx, core.SendInput{Team: "rt", To: "b", Body: "hello"})
		if err != nil {
			t.Fatal(i, err)
		}
		if want := "b-" + strconv.Itoa(i+1); res.ID != want {
			t.Fatalf("id %s, want %s", res.ID, want)
		}
	}
	n, stmts := c.reset()
	for _, st := range stmts {
		t.Log(st)
	}
	// BEGIN with the lock and the reads, the writes with COMMIT.
	if n != 2 {
		t.Errorf("a send took %d round trips, want 2", n)
	}
	for _, st := range stmts {
		if strings.Contains(st, "FROM letters") || strings.Contains(st, "UPDATE teams") {
			t.Errorf("a plain send ran %q", st)
		}
	}
	msgs, err := svc.Inbox(core.WithPrincipal(ctx, core.Principal{Team: "rt", Member: "b"}), "rt", "b")
	if err != nil || len(msgs) != 20 || msgs[19].ID != "b-20" {
		t.Fatalf("inbox: %d letters, %v", len(msgs), err)
	}
}
