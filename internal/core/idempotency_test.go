package core_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"mailroom/internal/core"
	"mailroom/internal/mail"
	"mailroom/internal/testkit"
)

// clock is a settable time source for expiry.
type clock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *clock) advance(d time.Duration) {
	c.mu.Lock()
	c.now = c.now.Add(d)
	c.mu.Unlock()
}

// idemFixture is a team over a real store whose service reads the time
// from a clock the test moves; open starts a service as a restart does.
type idemFixture struct {
	t     *testing.T
	dir   string
	clock *clock
	fs    *faultFS
	svc   *core.Service
	store *mail.Store
}

func newIdemFixture(t *testing.T, limits *core.Limits) *idemFixture {
	t.Helper()
	f := &idemFixture{t: t, dir: t.TempDir(), clock: &clock{now: time.Date(2026, 3, 1, 9, 0, 0, 0, time.UTC)}, fs: &faultFS{FS: mail.OS()}}
	f.open()
	_, _, err := f.svc.CreateTeam(t.Context(), core.TeamSpec{Name: "demo", Limits: limits, Members: []core.MemberSpec{
		{Name: "reader", Role: "read the source"},
		{Name: "reviewer", Role: "read the expected value"},
	}})
	if err != nil {
		t.Fatal(err)
	}
	return f
}

func (f *idemFixture) open() *core.Service {
	f.t.Helper()
	store, err := mail.Open(f.dir, mail.WithFS(f.fs), mail.WithClock(f.clock.Now))
	if err != nil {
		f.t.Fatal(err)
	}
	f.t.Cleanup(func() { _ = store.Close() })
	f.store = store
	f.svc = testkit.Serve(f.t, store, core.Options{Now: f.clock.Now})
	return f.svc
}

func (f *idemFixture) path(name string) string { return filepath.Join(f.dir, "teams", "demo", name) }

// read returns a file of the team once the store's write-ahead log is
// checkpointed into the files.
func (f *idemFixture) read(name string) []byte {
	f.t.Helper()
	if err := f.store.Checkpoint(f.t.Context()); err != nil {
		f.t.Fatal(err)
	}
	b, err := os.ReadFile(f.path(name))
	if err != nil {
		f.t.Fatal(err)
	}
	return b
}

func (f *idemFixture) send(body, key string) core.SendResult {
	f.t.Helper()
	r, err := f.svc.Send(core.AsMember(f.t.Context(), "demo", "reviewer"), core.SendInput{Team: "demo", To: "reader", Body: body, IdempotencyKey: key})
	if err != nil {
		f.t.Fatalf("send %q with key %q: %v", body, key, err)
	}
	return r
}

func (f *idemFixture) letters() int {
	f.t.Helper()
	items, err := f.svc.Inbox(f.t.Context(), "demo", "reader")
	if err != nil {
		f.t.Fatal(err)
	}
	return len(items)
}

func logLines(b []byte) int { return bytes.Count(b, []byte{'\n'}) }

// TestKeyedSendLeavesStateAlone: a keyed send appends one line to the
// team's idempotency log and does not rewrite state.json, whatever the
// team remembers; the old code rewrote the whole state twice.
func TestKeyedSendLeavesStateAlone(t *testing.T) {
	f := newIdemFixture(t, nil)
	before := f.read("state.json")
	for i := range 3 {
		f.send(fmt.Sprintf("letter %d", i), fmt.Sprintf("k%d", i))
	}
	if after := f.read("state.json"); !bytes.Equal(after, before) {
		t.Fatalf("state.json changed by keyed sends:\n got %s\nwant %s", after, before)
	}
	if got := logLines(f.read("idempotency.log")); got != 3 {
		t.Fatalf("idempotency log has %d lines, want 3", got)
	}
}

// TestIdempotencyKeySurvivesRestart: after a restart a retry returns the
// first response and stores nothing new (no letter, no log line); another
// body under the same key is idempotency_conflict.
func TestIdempotencyKeySurvivesRestart(t *testing.T) {
	f := newIdemFixture(t, nil)
	first := f.send("hello", "k1")
	open1, err := f.svc.OpenRequest(core.AsMember(t.Context(), "demo", "reader"), core.OpenInput{Team: "demo", Target: "lead", Kind: "plan", Payload: planText, IdempotencyKey: "k2"})
	if err != nil {
		t.Fatal(err)
	}
	logBefore, stateBefore := f.read("idempotency.log"), f.read("state.json")

	f.open()
	if got := f.send("hello", "k1"); got != first {
		t.Fatalf("retry after restart = %+v, want the first response %+v", got, first)
	}
	open2, err := f.svc.OpenRequest(core.AsMember(t.Context(), "demo", "reader"), core.OpenInput{Team: "demo", Target: "lead", Kind: "plan", Payload: planText, IdempotencyKey: "k2"})
	if err != nil || open2 != open1 {
		t.Fatalf("open retry after restart = %+v, %v; want %+v", open2, err, open1)
	}
	_, err = f.svc.Send(core.AsMember(t.Context(), "demo", "reviewer"), core.SendInput{Team: "demo", To: "reader", Body: "another body", IdempotencyKey: "k1"})
	wantCode(t, err, core.CodeIdempotencyConflict)
	if n := f.letters(); n != 1 {
		t.Fatalf("reader has %d letters, want 1", n)
	}
	if got := f.read("idempotency.log"); !bytes.Equal(got, logBefore) {
		t.Fatalf("idempotency log changed by retries:\n got %s\nwant %s", got, logBefore)
	}
	if got := f.read("state.json"); !bytes.Equal(got, stateBefore) {
		t.Fatalf("state.json changed by retries")
	}
}

// TestIdempotencyExpiry: a key is remembered for IdempotencyTTL, at run
// time and after a restart; once expired, the same key is a new write.
func TestIdempotencyExpiry(t *testing.T) {
	f := newIdemFixture(t, nil)
	first := f.send("hello", "k1")
	f.clock.advance(core.IdempotencyTTL - time.Second)
	if got := f.send("hello", "k1"); got != first {
		t.Fatalf("retry within the TTL = %+v, want %+v", got, first)
	}
	f.open()
	if got := f.send("hello", "k1"); got != first {
		t.Fatalf("retry within the TTL after a restart = %+v, want %+v", got, first)
	}
	f.clock.advance(time.Second)
	f.open()
	if got := f.send("other body", "k1"); got.ID != "reader-2" {
		t.Fatalf("send with an expired key = %+v, want a new letter reader-2", got)
	}
	f.clock.advance(core.IdempotencyTTL)
	if got := f.send("third body", "k1"); got.ID != "reader-3" {
		t.Fatalf("send with a key expired at run time = %+v, want a new letter reader-3", got)
	}
}

// TestIdempotencyLogTornTail: a last line without its newline (an append
// cut short) is removed at start, the records before it are kept, and the
// log goes on from there.
func TestIdempotencyLogTornTail(t *testing.T) {
	f := newIdemFixture(t, nil)
	first := f.send("hello", "k1")
	whole := f.read("idempotency.log")
	torn := append(bytes.Clone(whole), []byte(`{"member":"reviewer","key":"k2","fingerp`)...)
	if err := os.WriteFile(f.path("idempotency.log"), torn, 0o600); err != nil {
		t.Fatal(err)
	}
	f.open()
	if got := f.read("idempotency.log"); !bytes.Equal(got, whole) {
		t.Fatalf("log after start:\n got %q\nwant %q", got, whole)
	}
	if got := f.send("hello", "k1"); got != first {
		t.Fatalf("retry after the repair = %+v, want %+v", got, first)
	}
	if got := f.send("second", "k2"); got.ID != "reader-2" {
		t.Fatalf("send with the torn line's key = %+v, want a new letter reader-2", got)
	}
	if got := logLines(f.read("idempotency.log")); got != 2 {
		t.Fatalf("log has %d lines, want 2", got)
	}
}

// TestIdempotencyLogDamaged: a complete line that is not a record is not
// repaired: dropping a record could repeat a send, so the team is served
// as damaged.
func TestIdempotencyLogDamaged(t *testing.T) {
	f := newIdemFixture(t, nil)
	f.send("hello", "k1")
	log := append(f.read("idempotency.log"), []byte("not json\n")...)
	if err := os.WriteFile(f.path("idempotency.log"), log, 0o600); err != nil {
		t.Fatal(err)
	}
	f.open()
	v, err := f.svc.Team(t.Context(), "demo")
	if err != nil || !v.Damaged {
		t.Fatalf("team view = damaged %v, %v; want damaged", v.Damaged, err)
	}
	_, err = f.svc.Send(core.AsMember(t.Context(), "demo", "reviewer"), core.SendInput{Team: "demo", To: "reader", Body: "hello", IdempotencyKey: "k1"})
	wantCode(t, err, core.CodeInboxCorrupt)
}

// TestIdempotencyRecordWithoutLetter: a record whose letter never reached
// the inbox (the process died between the two) is not a remembered write:
// the key is free after a restart, and the send happens.
func TestIdempotencyRecordWithoutLetter(t *testing.T) {
	f := newIdemFixture(t, nil)
	f.send("hello", "k1")
	var rec core.IdempotencyRecord
	if err := json.Unmarshal(f.read("idempotency.log"), &rec); err != nil {
		t.Fatal(err)
	}
	rec.Key = "k2"
	rec.Fingerprint = core.Fingerprint("send", "reader", "never stored")
	rec.Letter = &core.Message{ID: "reader-2", Sender: "reviewer", Recipient: "reader", Body: "never stored"}
	rec.Result = []byte(`{"id":"reader-2","status":"queued"}`)
	line, _ := json.Marshal(rec)
	log := append(f.read("idempotency.log"), append(line, '\n')...)
	if err := os.WriteFile(f.path("idempotency.log"), log, 0o600); err != nil {
		t.Fatal(err)
	}
	f.open()
	if n := f.letters(); n != 1 {
		t.Fatalf("reader has %d letters after the restart, want 1", n)
	}
	if got := f.send("never stored", "k2"); got.ID != "reader-2" {
		t.Fatalf("send = %+v, want reader-2", got)
	}
	if n := f.letters(); n != 2 {
		t.Fatalf("reader has %d letters, want 2: the send must have happened", n)
	}
}

// TestIdempotencyLetterFailureAfterLog: when the inbox file refuses a
// letter whose record (with its idempotency record) is already durable in
// the write-ahead log, the send answers storage_failed, but the write did
// happen: a retry with the key, before or after a restart, gets the first
// response and stores nothing new, and the letter reaches its file.
func TestIdempotencyLetterFailureAfterLog(t *testing.T) {
	for _, restart := range []bool{false, true} {
		t.Run(fmt.Sprintf("restart=%v", restart), func(t *testing.T) {
			f := newIdemFixture(t, nil)
			f.fs.setFailSave(failInbox)
			_, err := f.svc.Send(core.AsMember(t.Context(), "demo", "reviewer"), core.SendInput{Team: "demo", To: "reader", Body: "hello", IdempotencyKey: "k1"})
			wantCode(t, err, core.CodeStorageFailed)
			f.fs.setFailSave(nil)
			if restart {
				f.open()
			}
			if got := f.send("hello", "k1"); got.ID != "reader-1" {
				t.Fatalf("retry = %+v, want the first response reader-1", got)
			}
			if n := f.letters(); n != 1 {
				t.Fatalf("reader has %d letters, want 1", n)
			}
			if got := string(f.read("inboxes/reader.jsonl")); !strings.Contains(got, `"hello"`) || logLines([]byte(got)) != 1 {
				t.Fatalf("reader's inbox file = %q, want the one letter", got)
			}
			f.open()
			if got := f.send("hello", "k1"); got.ID != "reader-1" {
				t.Fatalf("retry after a restart = %+v, want the first response reader-1", got)
			}
			if n := f.letters(); n != 1 {
				t.Fatalf("reader has %d letters after a restart, want 1", n)
			}
		})
	}
}

// TestIdempotencyCompaction: once the log holds more dead lines (expired
// records) than live ones it is rewritten with the live ones only, and
// every live key still answers with its first response, also after a
// restart.
func TestIdempotencyCompaction(t *testing.T) {
	limits := core.DefaultLimits()
	limits.InboxMessages = 1000
	limits.InboxBytes = 1 << 20
	f := newIdemFixture(t, &limits)
	const old, fresh = 60, 40
	for i := range old {
		f.send(fmt.Sprintf("old %d", i), fmt.Sprintf("old-%d", i))
	}
	f.clock.advance(core.IdempotencyTTL)
	want := map[string]core.SendResult{}
	for i := range fresh {
		key := fmt.Sprintf("new-%d", i)
		want[key] = f.send(fmt.Sprintf("new %d", i), key)
	}
	if got := logLines(f.read("idempotency.log")); got >= old+fresh {
		t.Fatalf("log has %d lines after %d expired and %d live records, want it compacted", got, old, fresh)
	}
	check := func(when string) {
		for i := range fresh {
			key := fmt.Sprintf("new-%d", i)
			if got := f.send(fmt.Sprintf("new %d", i), key); got != want[key] {
				t.Fatalf("%s: retry of %s = %+v, want %+v", when, key, got, want[key])
			}
		}
		if n := f.letters(); n != old+fresh {
			t.Fatalf("%s: reader has %d letters, want %d", when, n, old+fresh)
		}
	}
	check("after compaction")
	f.open()
	check("after a restart")
}

// TestIdempotencyFromOlderStateFile: records an older version kept in
// state.json are moved into the log at start and still answer retries.
func TestIdempotencyFromOlderStateFile(t *testing.T) {
	f := newIdemFixture(t, nil)
	first := f.send("hello", "k1")
	var rec core.IdempotencyRecord
	if err := json.Unmarshal(f.read("idempotency.log"), &rec); err != nil {
		t.Fatal(err)
	}
	rec.Letter = nil // older records carry no letter
	var st map[string]any
	if err := json.Unmarshal(f.read("state.json"), &st); err != nil {
		t.Fatal(err)
	}
	st["idempotency"] = []core.IdempotencyRecord{rec}
	data, _ := json.Marshal(st)
	if err := os.WriteFile(f.path("state.json"), data, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Remove(f.path("idempotency.log")); err != nil {
		t.Fatal(err)
	}
	f.open()
	if strings.Contains(string(f.read("state.json")), `"idempotency"`) {
		t.Fatalf("state.json still holds idempotency records after start")
	}
	f.open()
	if got := f.send("hello", "k1"); got != first {
		t.Fatalf("retry = %+v, want %+v", got, first)
	}
	if n := f.letters(); n != 1 {
		t.Fatalf("reader has %d letters, want 1", n)
	}
}

// TestAuthenticateDoesNotWaitForTeamLock: token lookup reads only the
// token map, so it answers while a write holds the team's lock. (The old
// lookup took the team's lock and waited for it.)
func TestAuthenticateDoesNotWaitForTeamLock(t *testing.T) {
	f := newIdemFixture(t, nil)
	_, created, err := f.svc.CreateTeam(t.Context(), core.TeamSpec{Name: "busy", Members: []core.MemberSpec{{Name: "reader", Role: "reads"}}})
	if err != nil {
		t.Fatal(err)
	}
	release := core.HoldTeamLock(f.svc, "busy")
	defer release()
	type result struct {
		team, member string
		ok           bool
	}
	done := make(chan result, 1)
	go func() {
		p, err := f.svc.LookupPrincipal(t.Context(), created[1].Token)
		done <- result{p.Team, p.Member, err == nil}
	}()
	select {
	case got := <-done:
		if want := (result{"busy", "reader", true}); got != want {
			t.Fatalf("LookupPrincipal = %+v, want %+v", got, want)
		}
	case <-time.After(time.Minute): // a bound on a hang, not a timing check
		t.Fatal("LookupPrincipal waited for the team's lock")
	}
	if _, err := f.svc.LookupPrincipal(t.Context(), "mr_not-a-token"); core.ErrorCode(err) != core.CodeNotFound {
		t.Fatalf("an unknown token: %v, want not_found", err)
	}
}
