// Package storetest is the contract every core.Store keeps, as tests:
// a backend's own test calls Run with a function that opens a fresh,
// empty store. See docs/storage.md.
package storetest

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"mailroom/internal/core"
)

// Option tunes Run.
type Option func(*options)

type options struct {
	reopen func(t *testing.T, s core.Store) core.Store
}

// WithReopen gives Run a way to close a store and open it again on the
// same data, so that cases check what survives a restart.
func WithReopen(reopen func(t *testing.T, s core.Store) core.Store) Option {
	return func(o *options) { o.reopen = reopen }
}

// Run runs the whole suite against stores made by newStore; each subtest
// gets a store of its own.
func Run(t *testing.T, newStore func(t *testing.T) core.Store, opts ...Option) {
	var o options
	for _, f := range opts {
		f(&o)
	}
	t.Run("CreateListDelete", func(t *testing.T) { testCreateListDelete(t, newStore(t)) })
	t.Run("Tokens", func(t *testing.T) { testTokens(t, newStore(t)) })
	t.Run("CommitAndRollback", func(t *testing.T) { testCommitRollback(t, newStore(t)) })
	t.Run("Reservations", func(t *testing.T) { RunReservations(t, newStore) })
	t.Run("ChangeSetCommit", func(t *testing.T) { testChangeSetCommit(t, newStore(t)) })
	t.Run("LeaseOnlyChange", func(t *testing.T) { testLeaseOnlyChange(t, newStore(t)) })
	t.Run("ConcurrentUnits", func(t *testing.T) { testConcurrentUnits(t, newStore(t)) })
	t.Run("LettersWithoutGaps", func(t *testing.T) { testLetters(t, newStore(t)) })
	t.Run("InboxBytes", func(t *testing.T) { testInboxBytes(t, newStore(t)) })
	t.Run("ConcurrentUpdatesSerialise", func(t *testing.T) { testConcurrent(t, newStore(t)) })
	t.Run("Idempotency", func(t *testing.T) { testIdempotency(t, newStore(t)) })
	t.Run("TurnDocuments", func(t *testing.T) { testTurns(t, newStore(t)) })
	t.Run("Leases", func(t *testing.T) { testLeases(t, newStore(t)) })
	t.Run("Runs", func(t *testing.T) { testRuns(t, newStore(t)) })
	t.Run("RunLeases", func(t *testing.T) { testRunLeases(t, newStore(t)) })
	t.Run("ReadCursors", func(t *testing.T) { testReadCursors(t, newStore(t)) })
	RunTasks(t, newStore)
	RunUnicode(t, newStore)
	RunMail(t, newStore)
	RunArchive(t, newStore, o.reopen)
	RunSearch(t, newStore)
	t.Run("MemberWake", func(t *testing.T) { testMemberWake(t, newStore(t)) })
}

// Team returns the state of a fresh team: lead and the given members,
// each with the token hash "<team>-<member>".
func Team(name string, members ...string) *core.TeamState {
	st := &core.TeamState{Name: name, CreatedAt: time.Now().UTC().Truncate(time.Millisecond), Limits: core.DefaultLimits(), Requests: []core.Request{}, HostPermission: core.HostAsk}
	for _, m := range append([]string{core.LeadName}, members...) {
		st.Members = append(st.Members, core.MemberState{Name: m, Status: core.StatusIdle, History: []core.Entry{}, TokenHash: name + "-" + m})
	}
	return st
}

func create(t *testing.T, s core.Store, st *core.TeamState) {
	t.Helper()
	if err := s.CreateTeam(t.Context(), st); err != nil {
		t.Fatalf("CreateTeam(%s): %v", st.Name, err)
	}
}

func wantCode(t *testing.T, err error, code core.Code) {
	t.Helper()
	if core.ErrorCode(err) != code {
		t.Fatalf("err = %v, want %s", err, code)
	}
}

// send appends the next letter of to's inbox in one unit of work.
func send(ctx context.Context, s core.Store, team, from, to, body string) (string, error) {
	var id string
	err := core.Update(ctx, s, team, func(tx core.TeamTx) error {
		items, err := tx.LoadInbox(to)
		if err != nil {
			return err
		}
		id = fmt.Sprintf("%s-%d", to, len(items)+1)
		return tx.AppendLetter(core.Message{ID: id, Sender: from, Recipient: to, Body: body})
	})
	return id, err
}

func inbox(t *testing.T, s core.Store, team, member string) []core.Message {
	t.Helper()
	var out []core.Message
	if err := core.View(t.Context(), s, team, func(tx core.TeamTx) error {
		items, err := tx.LoadInbox(member)
		out = append([]core.Message{}, items...)
		return err
	}); err != nil {
		t.Fatal(err)
	}
	return out
}

func state(t *testing.T, s core.Store, team string) *core.TeamState {
	t.Helper()
	var st *core.TeamState
	if err := core.View(t.Context(), s, team, func(tx core.TeamTx) error { st = tx.State(); return nil }); err != nil {
		t.Fatal(err)
	}
	return st
}

func testCreateListDelete(t *testing.T, s core.Store) {
	ctx := t.Context()
	create(t, s, Team("alpha", "reader"))
	wantCode(t, s.CreateTeam(ctx, Team("alpha")), core.CodeTeamExists)
	create(t, s, Team("beta"))
	list, err := s.ListTeams(ctx)
	if err != nil || len(list) != 2 {
		t.Fatalf("ListTeams = %+v, %v; want 2 teams", list, err)
	}
	if n, err := s.CountTeams(ctx); err != nil || n != 2 {
		t.Fatalf("CountTeams = %d, %v; want 2", n, err)
	}
	if st := state(t, s, "alpha"); len(st.Members) != 2 || st.Members[1].Name != "reader" {
		t.Fatalf("alpha = %+v", st)
	}
	if err := s.DeleteTeam(ctx, "alpha"); err != nil {
		t.Fatal(err)
	}
	wantCode(t, core.View(ctx, s, "alpha", func(core.TeamTx) error { return nil }), core.CodeNotFound)
	wantCode(t, core.Update(ctx, s, "alpha", func(core.TeamTx) error { return nil }), core.CodeNotFound)
	wantCode(t, s.DeleteTeam(ctx, "alpha"), core.CodeNotFound)
	if list, _ := s.ListTeams(ctx); len(list) != 1 || list[0].Name != "beta" {
		t.Fatalf("after delete: %+v", list)
	}
	if n, err := s.CountTeams(ctx); err != nil || n != 1 {
		t.Fatalf("CountTeams after delete = %d, %v; want 1", n, err)
	}
	// The name is free again, and the new team starts empty.
	create(t, s, Team("alpha", "reader"))
	if got := inbox(t, s, "alpha", "reader"); len(got) != 0 {
		t.Fatalf("new team's inbox = %+v", got)
	}
}

func testTokens(t *testing.T, s core.Store) {
	ctx := t.Context()
	create(t, s, Team("alpha", "reader"))
	team, member, err := s.LookupToken(ctx, "alpha-reader")
	if err != nil || team != "alpha" || member != "reader" {
		t.Fatalf("LookupToken = %q %q %v", team, member, err)
	}
	_, _, err = s.LookupToken(ctx, "nope")
	wantCode(t, err, core.CodeNotFound)
	if err := s.DeleteTeam(ctx, "alpha"); err != nil {
		t.Fatal(err)
	}
	_, _, err = s.LookupToken(ctx, "alpha-reader")
	wantCode(t, err, core.CodeNotFound)
}

func testCommitRollback(t *testing.T, s core.Store) {
	ctx := t.Context()
	create(t, s, Team("alpha", "reader"))
	boom := errors.New("boom")
	err := core.Update(ctx, s, "alpha", func(tx core.TeamTx) error {
		tx.State().Requests = append(tx.State().Requests, core.Request{ID: "req-1", Kind: core.KindPlan, Sender: "reader", Target: core.LeadName, Payload: "p", Status: core.RequestPending, Receipt: "lead-1"})
		tx.State().Members[1].Status = core.StatusClosed
		if err := tx.AppendLetter(core.Message{ID: "lead-1", Sender: "reader", Recipient: core.LeadName, Body: "plan"}); err != nil {
			return err
		}
		if err := tx.PutIdempotency(core.IdempotencyRecord{Member: "reader", Key: "k", Fingerprint: "f", At: time.Now()}); err != nil {
			return err
		}
		if err := tx.PutTurn(core.TurnDoc{TurnID: "reader-t1", Team: "alpha", Member: "reader", Status: core.TurnRunning, Steps: []core.TurnStep{}}); err != nil {
			return err
		}
		return boom
	})
	if !errors.Is(err, boom) {
		t.Fatalf("UpdateTeam = %v, want fn's error unchanged", err)
	}
	st := state(t, s, "alpha")
	if len(st.Requests) != 0 || st.Members[1].Status != core.StatusIdle {
		t.Fatalf("after a rollback: %+v", st)
	}
	if got := inbox(t, s, "alpha", core.LeadName); len(got) != 0 {
		t.Fatalf("after a rollback the inbox holds %+v", got)
	}
	_ = core.View(ctx, s, "alpha", func(tx core.TeamTx) error {
		if _, ok, _ := tx.Idempotency("reader", "k"); ok {
			t.Error("a rolled back idempotency record is remembered")
		}
		if docs, _ := tx.Turns(); len(docs) != 0 {
			t.Errorf("a rolled back turn document is stored: %+v", docs)
		}
		return nil
	})
	// The same unit of work, committed: everything together.
	if err := core.Update(ctx, s, "alpha", func(tx core.TeamTx) error {
		tx.State().Requests = append(tx.State().Requests, core.Request{ID: "req-1", Kind: core.KindPlan, Sender: "reader", Target: core.LeadName, Payload: "p", Status: core.RequestPending, Receipt: "lead-1"})
		return tx.AppendLetter(core.Message{ID: "lead-1", Sender: "reader", Recipient: core.LeadName, Body: "plan"})
	}); err != nil {
		t.Fatal(err)
	}
	if st := state(t, s, "alpha"); len(st.Requests) != 1 || st.Requests[0].Receipt != "lead-1" {
		t.Fatalf("after a commit: %+v", st.Requests)
	}
	if got := inbox(t, s, "alpha", core.LeadName); len(got) != 1 || got[0].Body != "plan" {
		t.Fatalf("after a commit the inbox holds %+v", got)
	}
	// A view changes nothing, and cannot append.
	err = core.View(ctx, s, "alpha", func(tx core.TeamTx) error {
		tx.State().Requests = nil
		if tx.AppendLetter(core.Message{ID: "lead-2", Sender: "reader", Recipient: core.LeadName, Body: "x"}) == nil {
			t.Error("a view appended a letter")
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if st := state(t, s, "alpha"); len(st.Requests) != 1 {
		t.Fatalf("a view changed the state: %+v", st.Requests)
	}
}

func testLetters(t *testing.T, s core.Store) {
	ctx := t.Context()
	create(t, s, Team("alpha", "reader"))
	for i := 1; i <= 3; i++ {
		id, err := send(ctx, s, "alpha", "reader", core.LeadName, fmt.Sprintf("letter %d", i))
		if err != nil || id != fmt.Sprintf("lead-%d", i) {
			t.Fatalf("send %d = %q, %v", i, id, err)
		}
	}
	// A letter that does not follow the inbox is refused.
	err := core.Update(ctx, s, "alpha", func(tx core.TeamTx) error {
		return tx.AppendLetter(core.Message{ID: "lead-7", Sender: "reader", Recipient: core.LeadName, Body: "gap"})
	})
	if err == nil {
		t.Fatal("a letter out of sequence was accepted")
	}
	// The inbox's byte limit refuses before anything is stored.
	big := Team("beta", "reader")
	big.Limits.InboxBytes = 200
	create(t, s, big)
	_, err = send(ctx, s, "beta", "reader", core.LeadName, string(make([]byte, 0))+fmt.Sprintf("%0300d", 0))
	wantCode(t, err, core.CodeInboxFull)
	if got := inbox(t, s, "beta", core.LeadName); len(got) != 0 {
		t.Fatalf("after inbox_full the inbox holds %+v", got)
	}
	got := inbox(t, s, "alpha", core.LeadName)
	if len(got) != 3 || got[2].Body != "letter 3" {
		t.Fatalf("inbox = %+v", got)
	}
}

func testInboxBytes(t *testing.T, s core.Store) {
	ctx := t.Context()
	create(t, s, Team("alpha", "reader"))
	raw := func(member string) []byte {
		t.Helper()
		var out []byte
		if err := core.View(ctx, s, "alpha", func(tx core.TeamTx) error {
			b, err := tx.InboxBytes(member)
			out = append([]byte{}, b...)
			return err
		}); err != nil {
			t.Fatal(err)
		}
		return out
	}
	if got := raw("reader"); len(got) != 0 {
		t.Fatalf("empty inbox = %q, want no bytes", got)
	}
	var want []byte
	for _, body := range []string{"plain", "ünïcode \u2028 \"quoted\" 😀 <&>"} {
		id, err := send(ctx, s, "alpha", core.LeadName, "reader", body)
		if err != nil {
			t.Fatal(err)
		}
		want = append(want, core.EncodeInboxLine(core.Message{ID: id, Sender: core.LeadName, Recipient: "reader", Body: body})...)
	}
	if got := raw("reader"); string(got) != string(want) {
		t.Fatalf("inbox bytes:\n got %q\nwant %q", got, want)
	}
	// Inside a unit of work, the letter appended in it is included.
	if err := core.Update(ctx, s, "alpha", func(tx core.TeamTx) error {
		msg := core.Message{ID: "reader-3", Sender: core.LeadName, Recipient: "reader", Body: "third"}
		if err := tx.AppendLetter(msg); err != nil {
			return err
		}
		b, err := tx.InboxBytes("reader")
		if err != nil {
			return err
		}
		if w := append(append([]byte{}, want...), core.EncodeInboxLine(msg)...); string(b) != string(w) {
			t.Errorf("inbox bytes in the unit:\n got %q\nwant %q", b, w)
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if got := raw(core.LeadName); len(got) != 0 {
		t.Fatalf("lead's inbox = %q", got)
	}
}

func testConcurrent(t *testing.T, s core.Store) {
	ctx := t.Context()
	st := Team("alpha", "reader")
	st.Limits.InboxMessages, st.Limits.InboxBytes = 1000, 1<<20
	create(t, s, st)
	const n = 40
	var wg sync.WaitGroup
	ids := make(chan string, n)
	for i := range n {
		wg.Go(func() {
			// A letter and a counter in the state, in one unit of work.
			var id string
			err := core.Update(ctx, s, "alpha", func(tx core.TeamTx) error {
				tx.State().Members[0].Turns++
				items, err := tx.LoadInbox("reader")
				if err != nil {
					return err
				}
				id = fmt.Sprintf("reader-%d", len(items)+1)
				return tx.AppendLetter(core.Message{ID: id, Sender: core.LeadName, Recipient: "reader", Body: fmt.Sprintf("b%d", i)})
			})
			if err != nil {
				t.Error(err)
			}
			ids <- id
		})
	}
	wg.Wait()
	close(ids)
	seen := map[string]bool{}
	for id := range ids {
		if seen[id] {
			t.Fatalf("id %s given twice", id)
		}
		seen[id] = true
	}
	got := inbox(t, s, "alpha", "reader")
	wantNumbered(t, got)
	if len(got) != n || state(t, s, "alpha").Members[0].Turns != n {
		t.Fatalf("%d letters, counter %d; want %d of each (a lost update)", len(got), state(t, s, "alpha").Members[0].Turns, n)
	}
}

func testIdempotency(t *testing.T, s core.Store) {
	ctx := t.Context()
	create(t, s, Team("alpha", "reader"))
	at := time.Now().UTC().Truncate(time.Millisecond)
	result, _ := json.Marshal(core.SendResult{ID: "lead-1", Status: "queued"})
	err := core.Update(ctx, s, "alpha", func(tx core.TeamTx) error {
		if err := tx.AppendLetter(core.Message{ID: "lead-1", Sender: "reader", Recipient: core.LeadName, Body: "hi"}); err != nil {
			return err
		}
		return tx.PutIdempotency(core.IdempotencyRecord{Member: "reader", Key: "k1", Fingerprint: "fp", Result: result, At: at})
	})
	if err != nil {
		t.Fatal(err)
	}
	_ = core.View(ctx, s, "alpha", func(tx core.TeamTx) error {
		r, ok, err := tx.Idempotency("reader", "k1")
		if err != nil || !ok || r.Fingerprint != "fp" || string(r.Result) != string(result) || !r.At.Equal(at) {
			t.Errorf("Idempotency = %+v, %v, %v", r, ok, err)
		}
		if _, ok, _ := tx.Idempotency(core.LeadName, "k1"); ok {
			t.Error("a key is scoped to its member")
		}
		return nil
	})
}

func testTurns(t *testing.T, s core.Store) {
	ctx := t.Context()
	create(t, s, Team("alpha", "reader"))
	doc := func(id, status string) core.TurnDoc {
		return core.TurnDoc{TurnID: id, Team: "alpha", Member: "reader", Status: status, Steps: []core.TurnStep{}, StartedAt: time.Now().UTC().Truncate(time.Millisecond)}
	}
	for _, d := range []core.TurnDoc{doc("reader-t1", core.TurnAnswered), doc("reader-t2", core.TurnRunning)} {
		if err := core.Update(ctx, s, "alpha", func(tx core.TeamTx) error { return tx.PutTurn(d) }); err != nil {
			t.Fatal(err)
		}
	}
	if err := core.Update(ctx, s, "alpha", func(tx core.TeamTx) error {
		if err := tx.PutTurn(doc("reader-t2", core.TurnFailed)); err != nil {
			return err
		}
		return tx.DeleteTurn("reader-t1")
	}); err != nil {
		t.Fatal(err)
	}
	_ = core.View(ctx, s, "alpha", func(tx core.TeamTx) error {
		docs, err := tx.Turns()
		if err != nil || len(docs) != 1 || docs[0].TurnID != "reader-t2" || docs[0].Status != core.TurnFailed {
			t.Errorf("Turns = %+v, %v", docs, err)
		}
		return nil
	})
}

func testLeases(t *testing.T, s core.Store) {
	ctx := t.Context()
	create(t, s, Team("alpha", "reader"))
	exp := time.Now().Add(time.Minute).UTC().Truncate(time.Millisecond)
	if err := core.Update(ctx, s, "alpha", func(tx core.TeamTx) error {
		m := tx.State().Member("reader")
		m.Status, m.Lease = core.StatusRunning, &core.Lease{Holder: "h1", Expires: exp}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	m := state(t, s, "alpha").Member("reader")
	if m.Lease == nil || m.Lease.Holder != "h1" || !m.Lease.Expires.Equal(exp) || !m.Lease.Live(time.Now()) {
		t.Fatalf("lease = %+v", m.Lease)
	}
	if m.Lease.Live(exp.Add(time.Second)) {
		t.Fatal("a lease holds past its expiry")
	}
	// Renewed, then released.
	later := exp.Add(time.Minute)
	_ = core.Update(ctx, s, "alpha", func(tx core.TeamTx) error {
		tx.State().Member("reader").Lease = &core.Lease{Holder: "h1", Expires: later}
		return nil
	})
	if l := state(t, s, "alpha").Member("reader").Lease; l == nil || !l.Expires.Equal(later) {
		t.Fatalf("renewed lease = %+v", l)
	}
	_ = core.Update(ctx, s, "alpha", func(tx core.TeamTx) error {
		m := tx.State().Member("reader")
		m.Lease, m.Status = nil, core.StatusIdle
		return nil
	})
	if m := state(t, s, "alpha").Member("reader"); m.Lease != nil || m.Status != core.StatusIdle {
		t.Fatalf("released: %+v", m)
	}
}

func testRuns(t *testing.T, s core.Store) {
	ctx := t.Context()
	_, err := s.GetRun(ctx, "agent-teams-1")
	wantCode(t, err, core.CodeNotFound)
	if err := s.PutRun(ctx, core.RunDoc{ID: "agent-teams-1"}); err != nil {
		t.Fatal(err)
	}
	if r, err := s.GetRun(ctx, "agent-teams-1"); err != nil || r.Result != nil {
		t.Fatalf("claimed run = %+v, %v", r, err)
	}
	res := json.RawMessage(`{"run_id":"agent-teams-1","ok":true}`)
	if err := s.PutRun(ctx, core.RunDoc{ID: "agent-teams-1", Result: res}); err != nil {
		t.Fatal(err)
	}
	if r, err := s.GetRun(ctx, "agent-teams-1"); err != nil || string(r.Result) != string(res) {
		t.Fatalf("finished run = %+v, %v", r, err)
	}
	if ids, err := s.ListRuns(ctx); err != nil || len(ids) != 1 || ids[0] != "agent-teams-1" {
		t.Fatalf("ListRuns = %v, %v", ids, err)
	}
	if err := s.DeleteRun(ctx, "agent-teams-1"); err != nil {
		t.Fatal(err)
	}
	if err := s.DeleteRun(ctx, "agent-teams-1"); err != nil {
		t.Fatalf("deleting a missing run: %v", err)
	}
	_, err = s.GetRun(ctx, "agent-teams-1")
	wantCode(t, err, core.CodeNotFound)
}

// testRunLeases: a claimed run carries its lease; only its holder renews
// it, and only while the run has no result; a result drops the lease; a
// missing or deleted run renews nothing.
func testRunLeases(t *testing.T, s core.Store) {
	ctx := t.Context()
	const id = "team-protocols-1"
	sameLease := func(got *core.Lease, want core.Lease) bool {
		return got != nil && got.Holder == want.Holder && got.Expires.Equal(want.Expires)
	}
	first := core.Lease{Holder: "h1", Expires: time.Now().Add(time.Minute).UTC().Truncate(time.Millisecond)}
	if err := s.PutRun(ctx, core.RunDoc{ID: id, Lease: &first}); err != nil {
		t.Fatal(err)
	}
	if r, err := s.GetRun(ctx, id); err != nil || r.Result != nil || !sameLease(r.Lease, first) {
		t.Fatalf("claimed run = %+v, %v; want no result and lease %+v", r, err, first)
	}

	later := core.Lease{Holder: "h1", Expires: first.Expires.Add(time.Minute)}
	if ok, err := s.RenewRun(ctx, id, later); err != nil || !ok {
		t.Fatalf("RenewRun by its holder = %v, %v; want true", ok, err)
	}
	if r, err := s.GetRun(ctx, id); err != nil || !sameLease(r.Lease, later) {
		t.Fatalf("renewed run = %+v, %v; want lease %+v", r.Lease, err, later)
	}
	other := core.Lease{Holder: "h2", Expires: later.Expires.Add(time.Hour)}
	if ok, err := s.RenewRun(ctx, id, other); err != nil || ok {
		t.Fatalf("RenewRun by another holder = %v, %v; want false", ok, err)
	}
	if r, err := s.GetRun(ctx, id); err != nil || !sameLease(r.Lease, later) {
		t.Fatalf("after another holder's renewal: lease %+v, %v; want %+v", r.Lease, err, later)
	}
	if ok, err := s.RenewRun(ctx, "agent-teams-9", later); err != nil || ok {
		t.Fatalf("RenewRun of a missing run = %v, %v; want false", ok, err)
	}

	res := json.RawMessage(`{"run_id":"team-protocols-1","ok":false}`)
	if err := s.PutRun(ctx, core.RunDoc{ID: id, Result: res, Lease: &later}); err != nil {
		t.Fatal(err)
	}
	if r, err := s.GetRun(ctx, id); err != nil || string(r.Result) != string(res) || r.Lease != nil {
		t.Fatalf("finished run = %+v, %v; want its result and no lease", r, err)
	}
	if ok, err := s.RenewRun(ctx, id, later); err != nil || ok {
		t.Fatalf("RenewRun of a finished run = %v, %v; want false", ok, err)
	}
	if r, err := s.GetRun(ctx, id); err != nil || string(r.Result) != string(res) || r.Lease != nil {
		t.Fatalf("finished run after a renewal = %+v, %v; want its result and no lease", r, err)
	}

	// A run claimed without a lease (stored by an older version, or
	// imported) has none, and nobody renews it.
	if err := s.PutRun(ctx, core.RunDoc{ID: "agent-teams-2"}); err != nil {
		t.Fatal(err)
	}
	if r, err := s.GetRun(ctx, "agent-teams-2"); err != nil || r.Lease != nil {
		t.Fatalf("unleased run = %+v, %v; want no lease", r, err)
	}
	if ok, err := s.RenewRun(ctx, "agent-teams-2", later); err != nil || ok {
		t.Fatalf("RenewRun of an unleased run = %v, %v; want false", ok, err)
	}

	if err := s.PutRun(ctx, core.RunDoc{ID: "agent-teams-3", Lease: &first}); err != nil {
		t.Fatal(err)
	}
	if err := s.DeleteRun(ctx, "agent-teams-3"); err != nil {
		t.Fatal(err)
	}
	if ok, err := s.RenewRun(ctx, "agent-teams-3", later); err != nil || ok {
		t.Fatalf("RenewRun of a deleted run = %v, %v; want false", ok, err)
	}
	if _, err := s.GetRun(ctx, "agent-teams-3"); core.ErrorCode(err) != core.CodeNotFound {
		t.Fatalf("deleted run: %v, want not_found", err)
	}
}

// readThrough is member's read cursor as a view sees it.
func readThrough(t *testing.T, s core.Store, team, member string) int {
	t.Helper()
	var n int
	if err := core.View(t.Context(), s, team, func(tx core.TeamTx) error {
		var err error
		n, err = tx.ReadThrough(member)
		return err
	}); err != nil {
		t.Fatalf("ViewTeam(%s): %v", team, err)
	}
	return n
}

// testReadCursors: a cursor starts at 0, moves with its unit of work and
// only then, is private to its member, cannot be moved by a view, commits
// with a letter of the same unit, and goes with its team.
func testReadCursors(t *testing.T, s core.Store) {
	ctx := t.Context()
	create(t, s, Team("cur", "reader"))
	for range 3 {
		if _, err := send(ctx, s, "cur", "lead", "reader", "hello"); err != nil {
			t.Fatal(err)
		}
	}
	if got := readThrough(t, s, "cur", "reader"); got != 0 {
		t.Fatalf("fresh cursor = %d, want 0", got)
	}
	errBoom := errors.New("boom")
	err := core.Update(ctx, s, "cur", func(tx core.TeamTx) error {
		if err := tx.SetReadThrough("reader", 3); err != nil {
			return err
		}
		if n, err := tx.ReadThrough("reader"); err != nil || n != 3 {
			t.Errorf("inside the unit: ReadThrough = %d, %v; want 3, nil", n, err)
		}
		return errBoom
	})
	if !errors.Is(err, errBoom) {
		t.Fatalf("UpdateTeam = %v, want fn's error", err)
	}
	if got := readThrough(t, s, "cur", "reader"); got != 0 {
		t.Fatalf("cursor after a failed unit = %d, want 0", got)
	}
	if err := core.Update(ctx, s, "cur", func(tx core.TeamTx) error { return tx.SetReadThrough("reader", 2) }); err != nil {
		t.Fatal(err)
	}
	if got := readThrough(t, s, "cur", "reader"); got != 2 {
		t.Fatalf("cursor = %d, want 2", got)
	}
	if got := readThrough(t, s, "cur", "lead"); got != 0 {
		t.Fatalf("lead's cursor = %d, want 0 (cursors are per member)", got)
	}
	if err := core.View(ctx, s, "cur", func(tx core.TeamTx) error { return tx.SetReadThrough("reader", 3) }); err == nil {
		t.Fatal("SetReadThrough inside ViewTeam succeeded, want an error")
	}
	// A letter and a cursor in one unit commit together.
	if err := core.Update(ctx, s, "cur", func(tx core.TeamTx) error {
		if err := tx.AppendLetter(core.Message{ID: "reader-4", Sender: "lead", Recipient: "reader", Body: "four"}); err != nil {
			return err
		}
		return tx.SetReadThrough("reader", 4)
	}); err != nil {
		t.Fatal(err)
	}
	if got, n := readThrough(t, s, "cur", "reader"), len(inbox(t, s, "cur", "reader")); got != 4 || n != 4 {
		t.Fatalf("cursor, letters = %d, %d; want 4, 4", got, n)
	}
	if err := s.DeleteTeam(ctx, "cur"); err != nil {
		t.Fatal(err)
	}
	create(t, s, Team("cur", "reader"))
	if got := readThrough(t, s, "cur", "reader"); got != 0 {
		t.Fatalf("cursor of a team created again = %d, want 0", got)
	}
}

// testMemberWake: a member's own model, wake and held wake are stored
// with the team and read back after later units of work; a woken turn's
// trigger is kept with its document; a store that lists the members with
// wake set (core.WakeLister) lists exactly those.
func testMemberWake(t *testing.T, s core.Store) {
	ctx := t.Context()
	st := Team("alpha", "reader", "reviewer")
	st.Member("reader").Wake = true
	st.Member("reader").Model = &core.ModelSettings{Provider: "openai", Name: "llama3.2", MaxTokens: 512}
	create(t, s, st)
	create(t, s, Team("beta", "reader"))
	listed := func() []core.MemberRef {
		l, ok := s.(core.WakeLister)
		if !ok {
			return nil
		}
		refs, err := l.WakeMembers(ctx)
		if err != nil {
			t.Fatal(err)
		}
		return refs
	}
	if _, ok := s.(core.WakeLister); ok {
		if got := listed(); len(got) != 1 || got[0] != (core.MemberRef{Team: "alpha", Member: "reader"}) {
			t.Errorf("WakeMembers after create = %+v, want alpha/reader", got)
		}
	}
	trigger := core.Trigger{Kind: core.TriggerMail, Letters: []string{"reader-1", "reader-2"}}
	if err := core.Update(ctx, s, "alpha", func(tx core.TeamTx) error {
		m := tx.State().Member("reader")
		m.WakeHeld = true
		tx.State().Member("reviewer").Wake = true
		return tx.PutTurn(core.TurnDoc{TurnID: "reader-t1", Team: "alpha", Member: "reader", Status: core.TurnFailed, Steps: []core.TurnStep{}, Trigger: trigger, StartedAt: time.Now().UTC().Truncate(time.Millisecond)})
	}); err != nil {
		t.Fatal(err)
	}
	// Another unit of work that changes nothing of the members.
	if _, err := send(ctx, s, "alpha", "lead", "reader", "hello"); err != nil {
		t.Fatal(err)
	}
	got := state(t, s, "alpha")
	r, v := got.Member("reader"), got.Member("reviewer")
	if !r.Wake || !r.WakeHeld || r.Model == nil || *r.Model != (core.ModelSettings{Provider: "openai", Name: "llama3.2", MaxTokens: 512}) {
		t.Errorf("reader = wake %v held %v model %+v, want wake, held, openai llama3.2 512", r.Wake, r.WakeHeld, r.Model)
	}
	if !v.Wake || v.WakeHeld || v.Model != nil {
		t.Errorf("reviewer = wake %v held %v model %+v, want wake only", v.Wake, v.WakeHeld, v.Model)
	}
	if err := core.View(ctx, s, "alpha", func(tx core.TeamTx) error {
		docs, err := tx.Turns()
		if err != nil {
			return err
		}
		if len(docs) != 1 || docs[0].Trigger.Kind != core.TriggerMail || fmt.Sprint(docs[0].Trigger.Letters) != fmt.Sprint(trigger.Letters) {
			t.Errorf("turns = %+v, want reader-t1 with trigger %+v", docs, trigger)
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if _, ok := s.(core.WakeLister); ok {
		got := listed()
		want := map[core.MemberRef]bool{{Team: "alpha", Member: "reader"}: true, {Team: "alpha", Member: "reviewer"}: true}
		if len(got) != 2 || !want[got[0]] || !want[got[1]] || got[0] == got[1] {
			t.Errorf("WakeMembers = %+v, want alpha/reader and alpha/reviewer", got)
		}
		_ = core.Update(ctx, s, "alpha", func(tx core.TeamTx) error {
			tx.State().Member("reader").Wake = false
			return nil
		})
		if got := listed(); len(got) != 1 || got[0] != (core.MemberRef{Team: "alpha", Member: "reviewer"}) {
			t.Errorf("WakeMembers after wake off = %+v, want alpha/reviewer", got)
		}
	}
}

// wantNumbered fails unless the letters are <recipient>-1 to -n in order:
// no gap, no duplicate.
func wantNumbered(t *testing.T, got []core.Message) {
	t.Helper()
	for i, m := range got {
		if want := fmt.Sprintf("%s-%d", m.Recipient, i+1); m.ID != want {
			t.Fatalf("letter %d is %s, want %s: a gap or a duplicate", i+1, m.ID, want)
		}
	}
}
