package pgstore_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"mailroom/internal/core"
	"mailroom/internal/pgstore"
	"mailroom/internal/pgtest"
	"mailroom/internal/testkit"
)

// lookups counts the token lookups c saw reach the database.
func (c *counter) lookups() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	n := 0
	for _, s := range c.stmts {
		if strings.Contains(s, "FROM members WHERE token_hash") {
			n++
		}
	}
	return n
}

// replica is one Mailroom process on the database at url: its store,
// and a Service whose Open started the store's event listener.
func replica(t *testing.T, url string, c *counter) (*pgstore.Store, *core.Service) {
	t.Helper()
	opts := pgstore.Options{}
	if c != nil {
		opts.Tracer = c
	}
	s, err := pgstore.Open(context.Background(), url, opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s, testkit.Serve(t, s, core.Options{})
}

// eventually polls cond until it holds, failing after a bound that only
// a broken store reaches (no timing is asserted).
func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	for !cond() {
		select {
		case <-ctx.Done():
			t.Fatalf("never: %s", what)
		case <-time.After(10 * time.Millisecond): // polling interval, not synchronisation
		}
	}
}

// cacheToken looks token up on s until s remembers it: the event
// listener connects in the background, and nothing is remembered before.
func cacheToken(t *testing.T, s *pgstore.Store, token string) {
	t.Helper()
	want := pgstore.CachedTokens(s) + 1
	eventually(t, "the lookup of "+token+" is remembered", func() bool {
		if _, _, err := s.LookupToken(t.Context(), hash(token)); err != nil {
			t.Fatalf("look up %s: %v", token, err)
		}
		return pgstore.CachedTokens(s) == want
	})
}

// dropMember deletes token's member row behind the stores' backs: from
// then on only a store's memory can still find the token.
func dropMember(t *testing.T, s *pgstore.Store, token string) {
	t.Helper()
	tag, err := s.Pool().Exec(t.Context(), `DELETE FROM members WHERE token_hash = $1`, hash(token))
	if err != nil || tag.RowsAffected() != 1 {
		t.Fatalf("delete the member of %s: %v (%d rows), want 1 row", token, err, tag.RowsAffected())
	}
}

func wantLookup(t *testing.T, s *pgstore.Store, token, team, member string) {
	t.Helper()
	gotTeam, gotMember, err := s.LookupToken(t.Context(), hash(token))
	if err != nil || gotTeam != team || gotMember != member {
		t.Fatalf("look up %s = %s/%s, %v; want %s/%s", token, gotTeam, gotMember, err, team, member)
	}
}

func wantNoMember(t *testing.T, s *pgstore.Store, token string) {
	t.Helper()
	if team, member, err := s.LookupToken(t.Context(), hash(token)); core.ErrorCode(err) != core.CodeNotFound {
		t.Fatalf("look up %s = %s/%s, %v; want not_found", token, team, member, err)
	}
}

// TestTokenLookupsRemembered: a replica answers a token it found before
// without the database; it never remembers a token it did not find; it
// forgets a team's tokens when it deletes the team, and when another
// replica's deletion of it arrives, and only that team's.
func TestTokenLookupsRemembered(t *testing.T) {
	url := pgtest.New(t)
	c := &counter{}
	a, svcA := replica(t, url, nil)
	b, _ := replica(t, url, c)
	ctx := t.Context()
	for _, name := range []string{"demo", "kept", "local"} {
		if err := a.CreateTeam(ctx, newTeam(name, "reader")); err != nil {
			t.Fatal(err)
		}
	}

	cacheToken(t, b, "demo/reader")
	before := c.lookups()
	wantLookup(t, b, "demo/reader", "demo", "reader")
	if got := c.lookups(); got != before {
		t.Errorf("a second lookup of a token sent %d lookups to the database, want none", got-before)
	}
	cacheToken(t, b, "kept/reader")
	dropMember(t, b, "demo/reader")
	dropMember(t, b, "kept/reader")
	wantLookup(t, b, "demo/reader", "demo", "reader") // remembered
	wantLookup(t, b, "kept/reader", "kept", "reader")
	wantNoMember(t, a, "demo/reader") // a never looked it up: the row is gone

	// A miss is not remembered: the token of a team created after it is
	// found at once.
	wantNoMember(t, b, "late/lead")
	if err := a.CreateTeam(ctx, newTeam("late")); err != nil {
		t.Fatal(err)
	}
	wantLookup(t, b, "late/lead", "late", "lead")

	// Another replica's deletion: once its announcement arrives, b no
	// longer finds the team's token (its row is gone, so only b's memory
	// could), and still finds the other team's.
	if err := svcA.DeleteTeam(core.AsAdmin(ctx), "demo", nil); err != nil {
		t.Fatal(err)
	}
	eventually(t, "b forgets the token of the team a deleted", func() bool {
		_, _, err := b.LookupToken(ctx, hash("demo/reader"))
		return core.ErrorCode(err) == core.CodeNotFound
	})
	wantLookup(t, b, "kept/reader", "kept", "reader")

	// Its own deletion: forgotten when DeleteTeam returns.
	cacheToken(t, b, "local/reader")
	dropMember(t, b, "local/reader")
	wantLookup(t, b, "local/reader", "local", "reader")
	if err := b.DeleteTeam(ctx, "local"); err != nil {
		t.Fatal(err)
	}
	wantNoMember(t, b, "local/reader")
	wantLookup(t, b, "kept/reader", "kept", "reader")
}

// TestStaleTokenRefusedAcrossReplicas: replica A deletes a team and
// creates one of the same name with new tokens, and replica B hears of
// neither (A here is a bare store, which announces nothing), so B's
// memory still finds the old token, and B's last unit of work on the team
// is of the old team. A send through core with the old token is refused
// as an unknown token is (401), and stores nothing; the new team's token
// sends.
func TestStaleTokenRefusedAcrossReplicas(t *testing.T) {
	url := pgtest.New(t)
	a := open(t, url)
	b, svcB := replica(t, url, nil)
	ctx := t.Context()
	if err := a.CreateTeam(ctx, newTeam("demo", "reader")); err != nil {
		t.Fatal(err)
	}
	cacheToken(t, b, "demo/reader")
	principal := func(svc *core.Service, token string) context.Context {
		t.Helper()
		p, err := svc.LookupPrincipal(t.Context(), token)
		if err != nil {
			t.Fatalf("look up %s: %v", token, err)
		}
		return core.WithPrincipal(ctx, p)
	}
	sendAs := func(ctx context.Context) error {
		_, err := svcB.Send(ctx, core.SendInput{Team: "demo", To: "lead", Body: "hello"})
		return err
	}
	old := principal(svcB, "demo/reader")
	if err := sendAs(old); err != nil { // B now remembers the old team too
		t.Fatalf("send with the team's token: %v", err)
	}

	if err := a.DeleteTeam(ctx, "demo"); err != nil {
		t.Fatal(err)
	}
	again := newTeam("demo", "reader")
	for i := range again.Members {
		again.Members[i].TokenHash = hash("again/" + again.Members[i].Name)
	}
	if err := a.CreateTeam(ctx, again); err != nil {
		t.Fatal(err)
	}
	wantLookup(t, b, "demo/reader", "demo", "reader") // stale, as B heard nothing

	err := sendAs(principal(svcB, "demo/reader"))
	want := core.UnknownToken()
	if core.ErrorCode(err) != want.Code || core.ErrorMessage(err) != want.Message {
		t.Fatalf("send with the old team's token = %v; want %s %q", err, want.Code, want.Message)
	}
	if err := sendAs(principal(svcB, "again/reader")); err != nil {
		t.Fatalf("send with the new team's token: %v", err)
	}
	box, err := svcB.Inbox(core.AsAdmin(ctx), "demo", "lead")
	if err != nil || len(box) != 1 {
		t.Fatalf("new team's lead inbox = %v, %v; want the new token's one letter", box, err)
	}
}

// TestLostListenerForgetsTokens: when a replica's event listener loses
// its connection, deletions may go unheard, so the replica forgets every
// token; once it listens again it remembers lookups again.
func TestLostListenerForgetsTokens(t *testing.T) {
	url := pgtest.New(t)
	s, svc := replica(t, url, nil)
	ctx := t.Context()
	resyncs := make(chan struct{}, 10)
	cancel := testkit.Hub(svc).Subscribe(func(ev core.Event) {
		if ev.Type == core.EventResync {
			resyncs <- struct{}{}
		}
	})
	defer cancel()
	if err := s.CreateTeam(ctx, newTeam("demo", "reader")); err != nil {
		t.Fatal(err)
	}
	cacheToken(t, s, "demo/reader")
	dropMember(t, s, "demo/reader")
	wantLookup(t, s, "demo/reader", "demo", "reader") // remembered

	pgtest.DropListeners(ctx, t, url)
	eventually(t, "the replica forgets the token once its listener is lost", func() bool {
		_, _, err := s.LookupToken(ctx, hash("demo/reader"))
		return core.ErrorCode(err) == core.CodeNotFound
	})
	if n := pgstore.CachedTokens(s); n != 0 {
		t.Fatalf("%d tokens remembered after the listener was lost, want 0", n)
	}
	select {
	case <-resyncs:
	case <-ctx.Done():
		t.Fatal("the listener never connected again")
	}
	wantLookup(t, s, "demo/lead", "demo", "lead")
	if n := pgstore.CachedTokens(s); n != 1 {
		t.Fatalf("%d tokens remembered after a lookup once listening again, want 1", n)
	}
}
