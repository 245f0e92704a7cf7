package pgstore_test

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"os"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"mailroom/internal/core"
	"mailroom/internal/pgstore"
	"mailroom/internal/pgtest"
)

func TestMain(m *testing.M) { os.Exit(pgtest.Main(m)) }

func open(t *testing.T, url string) *pgstore.Store {
	t.Helper()
	s, err := pgstore.Open(context.Background(), url, pgstore.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

func hash(tok string) string {
	h := sha256.Sum256([]byte(tok))
	return hex.EncodeToString(h[:])
}

func newTeam(name string, members ...string) *core.TeamState {
	st := &core.TeamState{Name: name, CreatedAt: time.Now().UTC().Truncate(time.Microsecond), Limits: core.DefaultLimits(), Requests: []core.Request{}}
	for _, m := range append([]string{"lead"}, members...) {
		st.Members = append(st.Members, core.MemberState{Name: m, Status: core.StatusIdle, TokenHash: hash(name + "/" + m), History: []core.Entry{}})
	}
	return st
}

// send appends one letter from sender to to, numbered from the inbox as
// core does.
func send(ctx context.Context, s *pgstore.Store, team, sender, to, body string) (string, error) {
	var id string
	err := core.Update(ctx, s, team, func(tx core.TeamTx) error {
		prev, err := tx.LoadInbox(to)
		if err != nil {
			return err
		}
		id = fmt.Sprintf("%s-%d", to, len(prev)+1)
		return tx.AppendLetter(core.Message{ID: id, Sender: sender, Recipient: to, Body: body})
	})
	return id, err
}

// TestReplicasStartTogether: several processes opening one new database at
// once apply the schema once, under the advisory lock, and all work.
func TestReplicasStartTogether(t *testing.T) {
	url := pgtest.New(t)
	var wg sync.WaitGroup
	errs := make([]error, 4)
	for i := range errs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			s, err := pgstore.Open(context.Background(), url, pgstore.Options{})
			if err == nil {
				_, err = s.ListTeams(context.Background())
				s.Close()
			}
			errs[i] = err
		}()
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Errorf("replica %d: %v", i, err)
		}
	}
}

// TestTeamLifecycle: create, token lookup, duplicate name, list, delete
// with everything of the team.
func TestTeamLifecycle(t *testing.T) {
	ctx := context.Background()
	s := open(t, pgtest.New(t))
	if err := s.CreateTeam(ctx, newTeam("demo", "reader")); err != nil {
		t.Fatal(err)
	}
	if err := s.CreateTeam(ctx, newTeam("demo")); core.ErrorCode(err) != core.CodeTeamExists {
		t.Fatalf("second create: %v, want team_exists", err)
	}
	team, member, err := s.LookupToken(ctx, hash("demo/reader"))
	if err != nil || team != "demo" || member != "reader" {
		t.Fatalf("lookup: %q %q %v", team, member, err)
	}
	if _, _, err := s.LookupToken(ctx, hash("nobody")); core.ErrorCode(err) != core.CodeNotFound {
		t.Fatalf("unknown token: %v", err)
	}
	if _, err := send(ctx, s, "demo", "lead", "reader", "hello"); err != nil {
		t.Fatal(err)
	}
	list, err := s.ListTeams(ctx)
	if err != nil || len(list) != 1 || list[0].Name != "demo" || list[0].Members != 2 {
		t.Fatalf("list: %+v %v", list, err)
	}
	if err := s.DeleteTeam(ctx, "demo"); err != nil {
		t.Fatal(err)
	}
	if err := s.DeleteTeam(ctx, "demo"); core.ErrorCode(err) != core.CodeNotFound {
		t.Fatalf("delete again: %v", err)
	}
	if _, _, err := s.LookupToken(ctx, hash("demo/reader")); core.ErrorCode(err) != core.CodeNotFound {
		t.Fatalf("token after delete: %v", err)
	}
	// The name is free again, with an empty inbox.
	if err := s.CreateTeam(ctx, newTeam("demo", "reader")); err != nil {
		t.Fatal(err)
	}
	if id, err := send(ctx, s, "demo", "lead", "reader", "again"); err != nil || id != "reader-1" {
		t.Fatalf("first letter after re-create: %q %v", id, err)
	}
}

// TestUnitOfWorkIsAllOrNothing: a function that fails leaves nothing; one
// that succeeds commits letter, request, idempotency record, turn
// document and lease together.
func TestUnitOfWorkIsAllOrNothing(t *testing.T) {
	ctx := context.Background()
	s := open(t, pgtest.New(t))
	if err := s.CreateTeam(ctx, newTeam("demo", "reader")); err != nil {
		t.Fatal(err)
	}
	boom := errors.New("boom")
	err := core.Update(ctx, s, "demo", func(tx core.TeamTx) error {
		if err := tx.AppendLetter(core.Message{ID: "lead-1", Sender: "reader", Recipient: "lead", Body: "plan"}); err != nil {
			return err
		}
		tx.State().Requests = append(tx.State().Requests, core.Request{ID: "req-1", Kind: "plan", Sender: "reader", Target: "lead", Status: "pending"})
		return boom
	})
	if err != boom {
		t.Fatalf("UpdateTeam returned %v, want fn's error unchanged", err)
	}
	expires := time.Now().Add(time.Minute).UTC().Truncate(time.Microsecond)
	err = core.Update(ctx, s, "demo", func(tx core.TeamTx) error {
		if msgs, _ := tx.LoadInbox("lead"); len(msgs) != 0 {
			t.Errorf("rolled-back letter is in the inbox: %+v", msgs)
		}
		if n := len(tx.State().Requests); n != 0 {
			t.Errorf("rolled-back request is registered (%d)", n)
		}
		if err := tx.AppendLetter(core.Message{ID: "lead-1", Sender: "reader", Recipient: "lead", Body: "plan"}); err != nil {
			return err
		}
		st := tx.State()
		st.Requests = append(st.Requests, core.Request{ID: "req-1", Kind: "plan", Sender: "reader", Target: "lead", Status: "pending"})
		st.Member("reader").Lease = &core.Lease{Holder: "r1", Expires: expires}
		if err := tx.PutIdempotency(core.IdempotencyRecord{Member: "reader", Key: "k1", Fingerprint: "f", Result: []byte(`{"ok":true}`), At: time.Now()}); err != nil {
			return err
		}
		return tx.PutTurn(core.TurnDoc{TurnID: "turn-1", Team: "demo", Member: "reader", Status: "running"})
	})
	if err != nil {
		t.Fatal(err)
	}
	err = core.View(ctx, s, "demo", func(tx core.TeamTx) error {
		msgs, err := tx.LoadInbox("lead")
		if err != nil || len(msgs) != 1 || msgs[0].ID != "lead-1" {
			t.Errorf("inbox %+v %v", msgs, err)
		}
		st := tx.State()
		if len(st.Requests) != 1 || st.Requests[0].ID != "req-1" {
			t.Errorf("requests %+v", st.Requests)
		}
		if l := st.Member("reader").Lease; l == nil || l.Holder != "r1" || !l.Expires.Equal(expires) {
			t.Errorf("lease %+v", l)
		}
		r, ok, err := tx.Idempotency("reader", "k1")
		if err != nil || !ok || r.Letter == nil || r.Letter.ID != "lead-1" || string(r.Result) != `{"ok":true}` {
			t.Errorf("idempotency %+v %v %v", r, ok, err)
		}
		docs, err := tx.Turns()
		if err != nil || len(docs) != 1 || docs[0].TurnID != "turn-1" {
			t.Errorf("turns %+v %v", docs, err)
		}
		if err := tx.AppendLetter(core.Message{ID: "lead-2", Sender: "reader", Recipient: "lead", Body: "x"}); err == nil {
			t.Error("a view appended a letter")
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	var holder string
	if err := s.Pool().QueryRow(ctx, `SELECT holder FROM leases WHERE team = 'demo' AND member = 'reader'`).Scan(&holder); err != nil || holder != "r1" {
		t.Errorf("leases table: %q %v", holder, err)
	}
	if err := core.Update(ctx, s, "nope", func(core.TeamTx) error { return nil }); core.ErrorCode(err) != core.CodeNotFound {
		t.Errorf("missing team: %v", err)
	}
}

// TestLetterNumberingAcrossReplicas: two stores on one database (two
// replicas) and many concurrent senders on one inbox give ids 1..n with no
// gap and no duplicate; a full inbox refuses with inbox_full.
func TestLetterNumberingAcrossReplicas(t *testing.T) {
	ctx := context.Background()
	url := pgtest.New(t)
	a, b := open(t, url), open(t, url)
	st := newTeam("busy", "reader")
	st.Limits.InboxMessages = 1000
	st.Limits.InboxBytes = 1 << 20
	if err := a.CreateTeam(ctx, st); err != nil {
		t.Fatal(err)
	}
	const senders, each = 16, 8
	var mu sync.Mutex
	var ids []string
	var wg sync.WaitGroup
	for i := range senders {
		wg.Add(1)
		go func() {
			defer wg.Done()
			s := a
			if i%2 == 1 {
				s = b
			}
			for j := range each {
				id, err := send(ctx, s, "busy", "lead", "reader", fmt.Sprintf("letter %d.%d", i, j))
				if err != nil {
					t.Error(err)
					return
				}
				mu.Lock()
				ids = append(ids, id)
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	sort.Slice(ids, func(i, j int) bool { return seq(ids[i]) < seq(ids[j]) })
	if len(ids) != senders*each {
		t.Fatalf("%d letters acknowledged, want %d", len(ids), senders*each)
	}
	for i, id := range ids {
		if id != "reader-"+strconv.Itoa(i+1) {
			t.Fatalf("ids are not 1..n without gaps or duplicates: position %d holds %s", i, id)
		}
	}
	if err := core.View(ctx, b, "busy", func(tx core.TeamTx) error {
		msgs, err := tx.LoadInbox("reader")
		if err == nil && len(msgs) != senders*each {
			err = fmt.Errorf("inbox holds %d letters", len(msgs))
		}
		return err
	}); err != nil {
		t.Fatal(err)
	}
	// inbox_full at the byte limit, nothing stored.
	small := newTeam("small", "reader")
	small.Limits.InboxBytes = 200
	if err := a.CreateTeam(ctx, small); err != nil {
		t.Fatal(err)
	}
	if _, err := send(ctx, a, "small", "lead", "reader", strings.Repeat("x", 100)); err != nil {
		t.Fatal(err)
	}
	if _, err := send(ctx, a, "small", "lead", "reader", strings.Repeat("y", 100)); core.ErrorCode(err) != core.CodeInboxFull {
		t.Fatalf("over the byte limit: %v, want inbox_full", err)
	}
}

func seq(id string) int {
	n, _ := strconv.Atoi(id[strings.LastIndexByte(id, '-')+1:])
	return n
}

// TestInboxBytesAreTheLessonsFile: the stored lines concatenate to what
// the lesson's save_inbox writes (core.EncodeInboxLine per letter).
func TestInboxBytesAreTheLessonsFile(t *testing.T) {
	ctx := context.Background()
	s := open(t, pgtest.New(t))
	if err := s.CreateTeam(ctx, newTeam("demo", "reader")); err != nil {
		t.Fatal(err)
	}
	bodies := []string{"hello", "ünïcode \u2028 and \"quotes\"\ttab", "😀 emoji"}
	var want []byte
	for i, body := range bodies {
		if _, err := send(ctx, s, "demo", "lead", "reader", body); err != nil {
			t.Fatal(err)
		}
		want = append(want, core.EncodeInboxLine(core.Message{ID: "reader-" + strconv.Itoa(i+1), Sender: "lead", Recipient: "reader", Body: body})...)
	}
	var got []byte
	err := core.View(ctx, s, "demo", func(tx core.TeamTx) error {
		var err error
		got, err = tx.(interface{ InboxBytes(string) ([]byte, error) }).InboxBytes("reader")
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	if string(got) != string(want) {
		t.Fatalf("inbox bytes\n got %q\nwant %q", got, want)
	}
}

// TestRunDocuments: claimed, finished, listed, deleted.
func TestRunDocuments(t *testing.T) {
	ctx := context.Background()
	s := open(t, pgtest.New(t))
	if err := s.PutRun(ctx, core.RunDoc{ID: "run-1"}); err != nil {
		t.Fatal(err)
	}
	if d, err := s.GetRun(ctx, "run-1"); err != nil || d.Result != nil {
		t.Fatalf("claimed run: %+v %v", d, err)
	}
	if err := s.PutRun(ctx, core.RunDoc{ID: "run-1", Result: []byte(`{"ok": true}`)}); err != nil {
		t.Fatal(err)
	}
	if d, err := s.GetRun(ctx, "run-1"); err != nil || string(d.Result) != `{"ok": true}` {
		t.Fatalf("finished run: %s %v", d.Result, err)
	}
	if ids, err := s.ListRuns(ctx); err != nil || len(ids) != 1 {
		t.Fatalf("list: %v %v", ids, err)
	}
	if err := s.DeleteRun(ctx, "run-1"); err != nil {
		t.Fatal(err)
	}
	if _, err := s.GetRun(ctx, "run-1"); core.ErrorCode(err) != core.CodeNotFound {
		t.Fatalf("deleted run: %v", err)
	}
}

// TestEventsCrossReplicas: an event announced by one store reaches the
// other's listener, typed; a store does not hear its own; an event larger
// than a NOTIFY payload travels too.
func TestEventsCrossReplicas(t *testing.T) {
	url := pgtest.New(t)
	a, b := open(t, url), open(t, url)
	got := make(chan core.Event, 10)
	stopB := b.Listen(func(ev core.Event) { got <- ev })
	defer stopB()
	stopA := a.Listen(func(ev core.Event) { t.Errorf("a heard its own event %+v", ev) })
	defer stopA()
	// LISTEN gives no signal the test could wait on: announce a probe on
	// another team until b's listener hears one, then drop the extra ones.
	probe := core.Event{Type: core.EventMessage, Team: "probe", Data: core.Message{ID: "reader-1", Sender: "lead", Recipient: "reader", Body: "probe"}}
	for heard := false; !heard; {
		a.Announce(probe)
		select {
		case ev := <-got:
			heard = ev.Team == "probe"
		case <-time.After(100 * time.Millisecond): // the announce interval, not synchronisation
		case <-t.Context().Done():
			t.Fatal("the listener never heard a probe")
		}
	}
	msg := core.Message{ID: "reader-1", Sender: "lead", Recipient: "reader", Body: "hi"}
	big := core.Message{ID: "reader-2", Sender: "lead", Recipient: "reader", Body: strings.Repeat("ü", 6000)}
	a.Announce(core.Event{Type: core.EventMessage, Team: "demo", Data: msg})
	a.Announce(core.Event{Type: core.EventMessage, Team: "demo", Data: big})
	for _, want := range []core.Message{msg, big} {
		ev := core.Event{Team: "probe"}
		for ev.Team == "probe" {
			select {
			case ev = <-got:
			case <-time.After(5 * time.Second):
				t.Fatal("no event crossed")
			}
		}
		if m, ok := ev.Data.(core.Message); !ok || ev.Team != "demo" || m != want {
			t.Fatalf("event %+v, want team demo with %+v", ev, want)
		}
	}
}

// TestUnreachableAtStart: the error names host and database, never the
// password.
func TestUnreachableAtStart(t *testing.T) {
	port := freeClosedPort(t)
	url := fmt.Sprintf("postgres://mailroom:s3cret-pw@127.0.0.1:%d/maildb?sslmode=disable&connect_timeout=2", port)
	_, err := pgstore.Open(context.Background(), url, pgstore.Options{})
	if err == nil {
		t.Fatal("opened a database nobody serves")
	}
	msg := err.Error()
	if !strings.Contains(msg, "maildb") || !strings.Contains(msg, "127.0.0.1:"+strconv.Itoa(port)) || strings.Contains(msg, "s3cret-pw") {
		t.Fatalf("message %q: want host and database, never the password", msg)
	}
}

// TestDatabaseLostWhileServing: with the server stopped, calls fail with
// storage_unavailable; after it is back, the same store serves again and
// what was acknowledged before is there.
func TestDatabaseLostWhileServing(t *testing.T) {
	ctx := context.Background()
	c := pgtest.Shared(t)
	s := open(t, c.NewDatabase(t))
	if err := s.CreateTeam(ctx, newTeam("demo", "reader")); err != nil {
		t.Fatal(err)
	}
	if _, err := send(ctx, s, "demo", "lead", "reader", "before"); err != nil {
		t.Fatal(err)
	}
	if err := c.Stop("immediate"); err != nil {
		t.Fatal(err)
	}
	restarted := false
	defer func() {
		if !restarted {
			_ = c.Start()
		}
	}()
	if _, err := send(ctx, s, "demo", "lead", "reader", "during"); core.ErrorCode(err) != core.CodeStorageUnavailable {
		t.Fatalf("send while down: %v, want storage_unavailable", err)
	}
	if _, _, err := s.LookupToken(ctx, hash("demo/reader")); core.ErrorCode(err) != core.CodeStorageUnavailable {
		t.Fatalf("lookup while down: %v, want storage_unavailable", err)
	}
	if err := c.Start(); err != nil {
		t.Fatal(err)
	}
	restarted = true
	var id string
	var err error
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(100 * time.Millisecond) {
		if id, err = send(ctx, s, "demo", "lead", "reader", "after"); err == nil {
			break
		}
	}
	if err != nil || id != "reader-2" {
		t.Fatalf("after the restart: %q %v, want reader-2", id, err)
	}
}

// freeClosedPort is a loopback port nothing listens on.
func freeClosedPort(t *testing.T) int {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := ln.Addr().(*net.TCPAddr).Port
	ln.Close()
	return port
}
