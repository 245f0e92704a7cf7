package pgstore_test

import (
	"context"
	"fmt"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/jackc/pgx/v5"

	"mailroom/internal/core"
	"mailroom/internal/pgstore"
	"mailroom/internal/pgtest"
	"mailroom/internal/testkit"
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
	c.stmts = append(c.stmts, strings.Join(strings.Fields(d.SQL), " "))
	c.mu.Unlock()
	return ctx
}
func (c *counter) TraceQueryEnd(context.Context, *pgx.Conn, pgx.TraceQueryEndData) {}

// eventsBatch marks the context of a batch of events.
type eventsBatch struct{}

func (c *counter) TraceBatchStart(ctx context.Context, _ *pgx.Conn, d pgx.TraceBatchStartData) context.Context {
	for _, q := range d.Batch.QueuedQueries {
		if strings.Contains(q.SQL, "pg_notify") {
			// The events, sent after the commit by another goroutine.
			return context.WithValue(ctx, eventsBatch{}, true)
		}
	}
	c.mu.Lock()
	c.trips++
	c.stmts = append(c.stmts, "-- batch")
	c.mu.Unlock()
	return ctx
}
func (c *counter) TraceBatchQuery(ctx context.Context, _ *pgx.Conn, d pgx.TraceBatchQueryData) {
	if ctx.Value(eventsBatch{}) != nil {
		return
	}
	c.mu.Lock()
	c.stmts = append(c.stmts, "   "+strings.Join(strings.Fields(d.SQL), " "))
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

// The statements of a unit of work (the reads, writes and commit).
var (
	// A team this replica has not committed on: the lock and what it
	// guards in one batch, the writes and COMMIT in the other.
	lockedSend = []string{
		"-- batch",
		"   BEGIN",
		"   SELECT incarnation, version, state FROM teams WHERE name = $1 FOR UPDATE",
		"   SELECT request_id, doc FROM requests WHERE team = $1 ORDER BY seq",
		"   SELECT permission_id, doc FROM permissions WHERE team = $1 ORDER BY seq",
		"   SELECT name, letters, inbox_bytes, read_through FROM members WHERE team = $1",
		"-- batch",
		"   WITH counted AS (UPDATE members SET letters = letters + 1, inbox_bytes = inbox_bytes + $7 WHERE team = $1 AND name = $2), bumped AS (UPDATE teams SET version = version + 1 WHERE name = $1) INSERT INTO letters (team, member, seq, sender, body, line, counted) VALUES ($1, $2, $3, $4, $5, $6, true)",
		"   SELECT version FROM teams WHERE name = $1",
		"   COMMIT",
	}
	// A team this replica's last unit of work left: one batch.
	cachedSend = []string{
		"-- batch",
		"   BEGIN",
		"   SELECT mailroom_lock_team($1, $2, $3)",
		"   WITH counted AS (UPDATE members SET letters = letters + 1, inbox_bytes = inbox_bytes + $7 WHERE team = $1 AND name = $2), bumped AS (UPDATE teams SET version = version + 1 WHERE name = $1) INSERT INTO letters (team, member, seq, sender, body, line, counted) VALUES ($1, $2, $3, $4, $5, $6, true)",
		"   SELECT version FROM teams WHERE name = $1",
		"   COMMIT",
	}
)

func sameStatements(t *testing.T, what string, got, want []string) {
	t.Helper()
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("%s ran\n%s\nwant\n%s", what, strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

// TestSendRoundTrips: a send through core reads no letter and rewrites
// no state when only a letter was added. On a team this replica has not
// worked on it is two round trips; after that one, the row's lock checking
// that the team is still what the replica's last unit of work left. When
// another replica changed the team meanwhile, the check refuses and the
// send runs again under the lock, numbered from the stored count; a team
// deleted and created again is never taken for the one remembered.
func TestSendRoundTrips(t *testing.T) {
	c := &counter{}
	url := pgtest.New(t)
	s, err := pgstore.Open(context.Background(), url, pgstore.Options{Tracer: c})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	svc := testkit.Serve(t, s, core.Options{})
	ctx := context.Background()
	other := open(t, url)
	svc2 := testkit.Serve(t, other, core.Options{})
	limits := core.DefaultLimits()
	limits.InboxMessages = 100
	spec := core.TeamSpec{Name: "rt", Limits: &limits, Members: []core.MemberSpec{{Name: "a", Role: "r"}, {Name: "b", Role: "r"}}}
	if _, _, err := svc.CreateTeam(core.AsAdmin(ctx), spec); err != nil {
		t.Fatal(err)
	}
	actx := core.WithPrincipal(ctx, core.Principal{Team: "rt", Member: "a"})
	sendAs := func(svc *core.Service, want string) {
		t.Helper()
		res, err := svc.Send(actx, core.SendInput{Team: "rt", To: "b", Body: "hello"})
		if err != nil {
			t.Fatal(err)
		}
		if res.ID != want {
			t.Fatalf("id %s, want %s", res.ID, want)
		}
	}
	c.reset()
	sendAs(svc, "b-1")
	n, stmts := c.reset()
	sameStatements(t, "the first send", stmts, lockedSend)
	if n != 2 {
		t.Errorf("the first send took %d round trips, want 2", n)
	}
	for i := 2; i <= 20; i++ {
		sendAs(svc, "b-"+strconv.Itoa(i))
		n, stmts = c.reset()
		sameStatements(t, "send "+strconv.Itoa(i), stmts, cachedSend)
		if n != 1 {
			t.Errorf("send %d took %d round trips, want 1", i, n)
		}
	}

	// Another replica sends: this one's memory of the team is stale.
	sendAs(svc2, "b-21")
	c.reset()
	sendAs(svc, "b-22")
	n, stmts = c.reset()
	// The refused batch stops at the lock (the rest of the pipeline is
	// skipped by the server), its transaction is rolled back, and the
	// send runs again under the lock.
	refused := append(append(append([]string(nil), cachedSend[:3]...), "ROLLBACK"), lockedSend...)
	sameStatements(t, "the send after another replica's", stmts, refused)
	if n != 4 {
		t.Errorf("the send after another replica's took %d round trips, want 4", n)
	}
	// For a while after, the team is read under the lock.
	sendAs(svc, "b-23")
	n, stmts = c.reset()
	sameStatements(t, "the send after a refusal", stmts, lockedSend)
	if n != 2 {
		t.Errorf("the send after a refusal took %d round trips, want 2", n)
	}
	msgs, err := svc.Inbox(core.WithPrincipal(ctx, core.Principal{Team: "rt", Member: "b"}), "rt", "b")
	if err != nil || len(msgs) != 23 {
		t.Fatalf("inbox: %d letters, %v", len(msgs), err)
	}
	for i, m := range msgs {
		if m.ID != "b-"+strconv.Itoa(i+1) {
			t.Fatalf("letter %d is %s", i+1, m.ID)
		}
	}

	// The other replica deletes the team and creates it again; this
	// replica remembers the old one, at its last version.
	defer pgstore.SetRefusedFor(0)()
	c.reset()
	sendAs(svc, "b-24")
	sendAs(svc, "b-25")
	if n, _ = c.reset(); n != 3 {
		t.Errorf("two sends once the refusal is over took %d round trips, want 2 + 1", n)
	}
	if err := svc2.DeleteTeam(core.AsAdmin(ctx), "rt", nil); err != nil {
		t.Fatal(err)
	}
	if _, _, err := svc2.CreateTeam(core.AsAdmin(ctx), spec); err != nil {
		t.Fatal(err)
	}
	c.reset()
	sendAs(svc, "b-1")
	n, stmts = c.reset()
	sameStatements(t, "the send to the new team", stmts, refused)
	if n != 4 {
		t.Errorf("the send to the new team took %d round trips, want 4", n)
	}
}

// TestCachedUnitNeedingTheDatabase: a unit of work on the remembered team
// that reads what the cache does not hold (here an idempotency record)
// takes the team's lock on condition that the team is still the one
// remembered (mailroom_lock_team), reads, and its answer is the stored
// one: nothing is written.
func TestCachedUnitNeedingTheDatabase(t *testing.T) {
	c := &counter{}
	s, err := pgstore.Open(context.Background(), pgtest.New(t), pgstore.Options{Tracer: c})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	svc := testkit.Serve(t, s, core.Options{})
	ctx := context.Background()
	if _, _, err := svc.CreateTeam(core.AsAdmin(ctx), core.TeamSpec{Name: "k", Members: []core.MemberSpec{{Name: "a", Role: "r"}, {Name: "b", Role: "r"}}}); err != nil {
		t.Fatal(err)
	}
	actx := core.WithPrincipal(ctx, core.Principal{Team: "k", Member: "a"})
	for i, want := range []string{"b-1", "b-2", "b-2", "b-3"} {
		key := "key-1" // sends 1 and 2, the second a replay
		if i == 0 || i == 3 {
			key = ""
		}
		res, err := svc.Send(actx, core.SendInput{Team: "k", To: "b", Body: "hello", IdempotencyKey: key})
		if err != nil {
			t.Fatal(i, err)
		}
		if res.ID != want {
			t.Errorf("send %d: id %s, want %s", i, res.ID, want)
		}
	}
	c.reset()
	if res, err := svc.Send(actx, core.SendInput{Team: "k", To: "b", Body: "hello", IdempotencyKey: "key-1"}); err != nil || res.ID != "b-2" {
		t.Fatalf("replay: %v %v", res, err)
	}
	_, stmts := c.reset()
	locked := false
	for _, st := range stmts {
		locked = locked || strings.Contains(st, "mailroom_lock_team")
		if strings.Contains(st, "INSERT") || strings.Contains(st, "FOR UPDATE") {
			t.Errorf("a replay ran %q, want no write and no read of the team again", st)
		}
	}
	if !locked {
		t.Errorf("a replay ran %q, want the read under mailroom_lock_team", stmts)
	}
}

// sendCounted appends one letter numbered from the stored count, as
// core's send does, so that the replica may run it on what it remembers.
func sendCounted(ctx context.Context, s *pgstore.Store, team, sender, to, body string) (string, error) {
	var id string
	err := core.Update(ctx, s, team, func(tx core.TeamTx) error {
		n, err := tx.(core.InboxCounter).InboxLen(to)
		if err != nil {
			return err
		}
		id = fmt.Sprintf("%s-%d", to, n+1)
		return tx.AppendLetter(core.Message{ID: id, Sender: sender, Recipient: to, Body: body})
	})
	return id, err
}

// TestCachedSendsAcrossReplicas: sends that each replica runs on what it
// remembers, from two replicas and many goroutines on the same teams
// (every refusal remembered again at once, so that refusals are many):
// the acknowledged ids are 1..n without gaps or duplicates, every
// acknowledged letter is stored, and the stored counts are the letters'.
func TestCachedSendsAcrossReplicas(t *testing.T) {
	defer pgstore.SetRefusedFor(0)()
	ctx := context.Background()
	url := pgtest.New(t)
	c := &counter{}
	a, err := pgstore.Open(ctx, url, pgstore.Options{Tracer: c})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { a.Close() })
	b := open(t, url)
	const teams, senders, each = 3, 12, 15
	for i := range teams {
		st := newTeam(fmt.Sprintf("cached-%d", i), "reader")
		st.Limits.InboxMessages = 1000
		st.Limits.InboxBytes = 1 << 20
		if err := a.CreateTeam(ctx, st); err != nil {
			t.Fatal(err)
		}
	}
	var mu sync.Mutex
	ids := map[string][]int{}
	var wg sync.WaitGroup
	for i := range senders {
		wg.Go(func() {
			team := fmt.Sprintf("cached-%d", i%teams)
			for j := range each {
				s := a
				if (i+j)%3 == 0 {
					s = b
				}
				id, err := sendCounted(ctx, s, team, "lead", "reader", fmt.Sprintf("letter %d.%d", i, j))
				if err != nil {
					t.Error(err)
					return
				}
				n, _ := strconv.Atoi(strings.TrimPrefix(id, "reader-"))
				mu.Lock()
				ids[team] = append(ids[team], n)
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	_, stmts := c.reset()
	var cachedUnits, rollbacks int
	for _, st := range stmts {
		cachedUnits += strings.Count(st, "mailroom_lock_team")
		rollbacks += strings.Count(st, "ROLLBACK")
	}
	t.Logf("replica a: %d units of work on what it remembered, %d rolled back", cachedUnits, rollbacks)
	if cachedUnits == 0 {
		t.Error("no unit of work ran on what the replica remembered")
	}
	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	for i := range teams {
		team := fmt.Sprintf("cached-%d", i)
		got := ids[team]
		sort.Ints(got)
		want := senders / teams * each
		if len(got) != want {
			t.Fatalf("%s: %d letters acknowledged, want %d", team, len(got), want)
		}
		for k, n := range got {
			if n != k+1 {
				t.Fatalf("%s: ids are not 1..n without gaps or duplicates: position %d holds %d", team, k+1, n)
			}
		}
		var rows, maxSeq, letters, bytes, lineBytes int
		if err := conn.QueryRow(ctx, `SELECT count(*), max(seq), sum(octet_length(line)),
			(SELECT letters FROM members WHERE team = $1 AND name = 'reader'),
			(SELECT inbox_bytes FROM members WHERE team = $1 AND name = 'reader')
			FROM letters WHERE team = $1 AND member = 'reader'`, team).Scan(&rows, &maxSeq, &lineBytes, &letters, &bytes); err != nil {
			t.Fatal(err)
		}
		if rows != want || maxSeq != want || letters != want || bytes != lineBytes {
			t.Errorf("%s: %d rows up to seq %d of %d bytes; stored count %d letters, %d bytes", team, rows, maxSeq, lineBytes, letters, bytes)
		}
	}
}
