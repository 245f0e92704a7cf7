package mail_test

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"mailroom/internal/core"
	"mailroom/internal/mail"
)

// The write-ahead log's tests: group commit (counted through the FS seam,
// never timed), replay after a crash at each instant, a power cut that
// drops every write not fsynced, a torn log tail, replay twice, and
// checkpoints.

// walFS is the real file system seen through the store's FS seam. It
// counts the fsyncs of the log's segments, can hold the first of them
// until released, and can stand in for a power cut: every file written
// through it is cut back to what its last fsync covered, and from then on
// every call fails (the process that used it is gone).
type walFS struct {
	mail.FS
	mu      sync.Mutex
	syncs   int
	gate    chan struct{} // when set, the next log fsync waits for it to close
	dead    bool
	synced  map[string][]byte // path → what its last fsync (or its opening) covered
	failDir string            // while set, opening a file for appending under it fails
}

func newWalFS() *walFS { return &walFS{FS: mail.OS(), synced: map[string][]byte{}} }

func isLog(path string) bool {
	return strings.Contains(path, string(filepath.Separator)+"wal"+string(filepath.Separator))
}

func (w *walFS) isDead() bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.dead
}

func (w *walFS) OpenFile(name string, flag int, perm fs.FileMode) (mail.File, error) {
	if w.isDead() {
		return nil, errInjected
	}
	w.mu.Lock()
	fail := w.failDir != "" && flag&os.O_APPEND != 0 && strings.HasPrefix(name, w.failDir)
	w.mu.Unlock()
	if fail {
		return nil, errInjected
	}
	f, err := w.FS.OpenFile(name, flag, perm)
	if err != nil {
		return nil, err
	}
	if flag&(os.O_WRONLY|os.O_RDWR) != 0 {
		w.mu.Lock()
		if _, ok := w.synced[name]; !ok {
			if b, err := os.ReadFile(name); err == nil {
				w.synced[name] = b
			}
		}
		w.mu.Unlock()
	}
	return &walFile{File: f, w: w}, nil
}

func (w *walFS) CreateTemp(dir, pattern string) (mail.File, error) {
	if w.isDead() {
		return nil, errInjected
	}
	return w.FS.CreateTemp(dir, pattern) // fsynced before their rename
}

func (w *walFS) Rename(o, n string) error {
	if w.isDead() {
		return errInjected
	}
	w.mu.Lock()
	delete(w.synced, n) // a replaced file was fsynced whole before
	w.mu.Unlock()
	return w.FS.Rename(o, n)
}

func (w *walFS) Remove(name string) error {
	if w.isDead() {
		return errInjected
	}
	return w.FS.Remove(name)
}

func (w *walFS) SyncDir(name string) error {
	if w.isDead() {
		return errInjected
	}
	return w.FS.SyncDir(name)
}

// logSyncs is how many fsyncs of the log returned so far.
func (w *walFS) logSyncs() int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.syncs
}

// powerCut puts every file written through w back to what its last fsync
// covered (appended bytes go, and so do bytes written over the file's
// old ones, as the log writes its records into zeros) and makes w fail
// every later call.
func (w *walFS) powerCut(t *testing.T) {
	t.Helper()
	w.mu.Lock()
	defer w.mu.Unlock()
	w.dead = true
	for path, b := range w.synced {
		if _, err := os.Stat(path); err != nil {
			continue
		}
		if err := os.WriteFile(path, b, 0o600); err != nil {
			t.Fatal(err)
		}
	}
}

type walFile struct {
	mail.File
	w *walFS
}

func (f *walFile) Write(p []byte) (int, error) {
	if f.w.isDead() {
		return 0, errInjected
	}
	return f.File.Write(p)
}

func (f *walFile) WriteAt(p []byte, off int64) (int, error) {
	if f.w.isDead() {
		return 0, errInjected
	}
	return f.File.WriteAt(p, off)
}

func (f *walFile) Sync() error {
	if f.w.isDead() {
		return errInjected
	}
	if isLog(f.Name()) {
		f.w.mu.Lock()
		gate := f.w.gate
		f.w.gate = nil
		f.w.mu.Unlock()
		if gate != nil {
			<-gate
		}
	}
	if err := f.File.Sync(); err != nil {
		return err
	}
	b, err := os.ReadFile(f.Name())
	f.w.mu.Lock()
	defer f.w.mu.Unlock()
	if err == nil {
		f.w.synced[f.Name()] = b
	}
	if isLog(f.Name()) {
		f.w.syncs++
	}
	return nil
}

// walService opens a store over data with fsys and a service over it.
// The store is not closed at the end: a test that abandons it stands in
// for a process killed.
func walService(t *testing.T, data string, fsys mail.FS, opts ...mail.Option) (*core.Service, *mail.Store) {
	t.Helper()
	s, err := mail.Open(data, append([]mail.Option{mail.WithFS(fsys)}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	svc := core.NewService(s, core.Options{})
	if err := svc.Open(ctx); err != nil {
		t.Fatal(err)
	}
	return svc, s
}

// walLimits let an inbox take every letter a test sends.
func walLimits() core.Limits {
	l := core.DefaultLimits()
	l.InboxMessages = 1000
	l.InboxBytes = 1 << 20
	return l
}

func walTeam(t *testing.T, svc *core.Service, name string) {
	t.Helper()
	limits := walLimits()
	if _, _, err := svc.CreateTeam(core.AsAdmin(ctx), core.TeamSpec{Name: name, Limits: &limits, Members: []core.MemberSpec{
		{Name: "reader", Role: "read"}, {Name: "reviewer", Role: "review"},
	}}); err != nil {
		t.Fatal(err)
	}
}

func walSend(svc *core.Service, team, from, to, body, key string) (core.SendResult, error) {
	return svc.Send(core.AsMember(ctx, team, from), core.SendInput{Team: team, To: to, Body: body, IdempotencyKey: key})
}

// canonical is what the lesson's save_inbox writes for msgs.
func canonical(msgs []core.Message) []byte {
	var out []byte
	for _, m := range msgs {
		out = append(out, core.EncodeInboxLine(m)...)
	}
	return out
}

// checkInbox checks that member's inbox file holds exactly the bodies, in
// order, in the lesson's bytes.
func checkInbox(t *testing.T, data, team, member string, bodies []string) {
	t.Helper()
	got, err := os.ReadFile(inboxPath(data, team, member))
	if errors.Is(err, fs.ErrNotExist) && len(bodies) == 0 {
		return
	}
	if err != nil {
		t.Fatal(err)
	}
	msgs, err := core.DecodeInbox(got, core.InboxRules{Recipient: member, Limits: walLimits(), IsMember: func(string) bool { return true }})
	if err != nil {
		t.Fatalf("%s's inbox: %v", member, err)
	}
	if len(msgs) != len(bodies) {
		t.Fatalf("%s's inbox holds %d letters, want %d", member, len(msgs), len(bodies))
	}
	for i, m := range msgs {
		if m.Body != bodies[i] || m.ID != fmt.Sprintf("%s-%d", member, i+1) {
			t.Fatalf("%s's letter %d = %+v, want body %q", member, i+1, m, bodies[i])
		}
	}
	wantBytes(t, member+"'s inbox bytes", got, canonical(msgs))
}

func segments(t *testing.T, data string) []string {
	t.Helper()
	names := dirNames(t, filepath.Join(data, "wal"))
	return names
}

// TestWALGroupCommit: units of work that arrive while the log's fsync
// runs share the next one; on one team too (a team's next unit does not
// wait for the previous one's fsync). Counted, not timed: the first fsync
// is held until every writer's record is queued.
func TestWALGroupCommit(t *testing.T) {
	for _, teams := range []int{1, 16} {
		t.Run(fmt.Sprintf("teams=%d", teams), func(t *testing.T) {
			wfs := newWalFS()
			data := t.TempDir()
			svc, s := walService(t, data, wfs)
			t.Cleanup(func() { _ = s.Close() })
			for i := range teams {
				walTeam(t, svc, fmt.Sprintf("t%d", i))
			}
			// A first letter makes the log's segment and its space (one
			// fsync of zeros; see walChunk), so that what follows counts
			// record fsyncs only.
			if _, err := walSend(svc, "t0", "reviewer", "lead", "warm-up", ""); err != nil {
				t.Fatal(err)
			}
			gate := make(chan struct{})
			wfs.mu.Lock()
			wfs.gate = gate
			wfs.mu.Unlock()
			const writers = 32
			base := mail.WALQueued(s)
			errs := make(chan error, writers+1)
			// The first send's fsync is held at the gate...
			go func() {
				_, err := walSend(svc, "t0", "reviewer", "reader", "first", "")
				errs <- err
			}()
			for mail.WALQueued(s) < base+1 {
				time.Sleep(time.Millisecond)
			}
			// ...while every other writer queues its record.
			for i := range writers {
				go func() {
					_, err := walSend(svc, fmt.Sprintf("t%d", i%teams), "reviewer", "reader", fmt.Sprintf("letter %d", i), "")
					errs <- err
				}()
			}
			for mail.WALQueued(s) < base+1+writers {
				time.Sleep(time.Millisecond)
			}
			before := wfs.logSyncs()
			close(gate)
			for range writers + 1 {
				if err := <-errs; err != nil {
					t.Fatal(err)
				}
			}
			if got := wfs.logSyncs() - before; got != 2 {
				t.Fatalf("%d sends made %d log fsyncs, want 2 (the held one and one for all the others)", writers+1, got)
			}
			n := 0
			for i := range teams {
				items, err := svc.Inbox(ctx, fmt.Sprintf("t%d", i), "reader")
				if err != nil {
					t.Fatal(err)
				}
				n += len(items)
			}
			if n != writers+1 {
				t.Fatalf("%d letters stored, want %d", n, writers+1)
			}
		})
	}
}

// TestWALCrowdedLeaderGathers: a lone writer leads at once, with no
// yield; once records queue beside a batch, the next leader first lets
// ready goroutines run, and a record one of them queues meanwhile shares
// its fsync. Counted through the FS seam and the yield seam, not timed.
func TestWALCrowdedLeaderGathers(t *testing.T) {
	wfs := newWalFS()
	svc, s := walService(t, t.TempDir(), wfs)
	t.Cleanup(func() { _ = s.Close() })
	var mu sync.Mutex
	yields := 0
	var hook func()
	mail.SetWALYield(s, func() {
		mu.Lock()
		yields++
		h := hook
		hook = nil
		mu.Unlock()
		if h != nil {
			h()
		}
	})
	walTeam(t, svc, "t")
	for i := range 3 {
		if _, err := walSend(svc, "t", "reviewer", "lead", fmt.Sprintf("alone %d", i), ""); err != nil {
			t.Fatal(err)
		}
	}
	mu.Lock()
	got := yields
	mu.Unlock()
	if got != 0 {
		t.Fatalf("a lone writer yielded %d times before its fsyncs, want 0", got)
	}

	// A's fsync is held while B queues: the log is then crowded.
	gate := make(chan struct{})
	wfs.mu.Lock()
	wfs.gate = gate
	wfs.mu.Unlock()
	errs, errC := make(chan error, 2), make(chan error, 1)
	send := func(body string, errs chan error) {
		go func() {
			_, err := walSend(svc, "t", "reviewer", "reader", body, "")
			errs <- err
		}()
	}
	base := mail.WALQueued(s)
	send("A", errs)
	for mail.WALQueued(s) < base+1 {
		time.Sleep(time.Millisecond)
	}
	// B's leader, yielding, lets C queue its record.
	mu.Lock()
	hook = func() {
		send("C", errC)
		for mail.WALQueued(s) < base+3 {
			time.Sleep(time.Millisecond)
		}
	}
	mu.Unlock()
	send("B", errs)
	for mail.WALQueued(s) < base+2 {
		time.Sleep(time.Millisecond)
	}
	before := wfs.logSyncs()
	close(gate)
	for range 2 {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
	mu.Lock()
	unused := hook != nil
	mu.Unlock()
	if unused {
		t.Fatal("B was acknowledged and its leader never yielded, want a yield before the crowded log's write")
	}
	if err := <-errC; err != nil {
		t.Fatal(err)
	}
	if got := wfs.logSyncs() - before; got != 2 {
		t.Fatalf("A, then B and C queued during B's leader's yield, made %d log fsyncs; want 2 (A's, then one for B and C)", got)
	}
	mu.Lock()
	got = yields
	mu.Unlock()
	if got < 2 || got > 2*4 {
		t.Fatalf("the crowded log's leaders yielded %d times, want 2 to 8 (a yield that queues nothing ends the gathering)", got)
	}
	items, err := svc.Inbox(ctx, "t", "reader")
	if err != nil {
		t.Fatal(err)
	}
	if len(items) != 3 {
		t.Fatalf("reader holds %d letters, want 3", len(items))
	}
}

// TestWALReplayAfterLetterLost: the crash falls after the record's fsync
// and before the letter's append to its inbox (here the inbox refuses the
// append, and the process is then abandoned). Start-up replays the letter
// into the file, once; the keyed send is remembered.
func TestWALReplayAfterLetterLost(t *testing.T) {
	wfs := newWalFS()
	data := t.TempDir()
	svc, _ := walService(t, data, wfs)
	walTeam(t, svc, "demo")
	if _, err := walSend(svc, "demo", "reviewer", "reader", "one", ""); err != nil {
		t.Fatal(err)
	}
	wfs.mu.Lock()
	wfs.failDir = filepath.Join(data, "teams", "demo", "inboxes")
	wfs.mu.Unlock()
	// The record is durable; the append fails: no 2xx, but it happened.
	if _, err := walSend(svc, "demo", "reviewer", "reader", "two", "k2"); core.ErrorCode(err) != core.CodeStorageFailed {
		t.Fatalf("send with the inbox refusing = %v, want storage_failed", err)
	}
	checkInbox(t, data, "demo", "reader", []string{"one"})
	// Killed here; a new process starts on the same directory.
	svc2, s2 := walService(t, data, mail.OS())
	t.Cleanup(func() { _ = s2.Close() })
	checkInbox(t, data, "demo", "reader", []string{"one", "two"})
	if got, err := walSend(svc2, "demo", "reviewer", "reader", "two", "k2"); err != nil || got.ID != "reader-2" {
		t.Fatalf("retry after restart = %+v, %v; want the first response reader-2", got, err)
	}
	checkInbox(t, data, "demo", "reader", []string{"one", "two"})
	if segs := segments(t, data); len(segs) > 1 {
		t.Fatalf("log segments after start-up = %q, want the replayed ones gone", segs)
	}
}

// TestWALReplayIsIdempotent: killed after the letters reached their files
// (and before any checkpoint), a restart finds each letter in place by its
// id and position and adds nothing; killed again right after that start,
// the next start adds nothing either.
func TestWALReplayIsIdempotent(t *testing.T) {
	data := t.TempDir()
	svc, _ := walService(t, data, newWalFS())
	walTeam(t, svc, "demo")
	var bodies []string
	for i := range 5 {
		b := fmt.Sprintf("letter %d", i)
		if _, err := walSend(svc, "demo", "reviewer", "reader", b, fmt.Sprintf("k%d", i)); err != nil {
			t.Fatal(err)
		}
		bodies = append(bodies, b)
	}
	open, err := svc.OpenRequest(core.AsMember(ctx, "demo", "reader"), core.OpenInput{Team: "demo", Target: "lead", Kind: "plan", Payload: "read the source, then report"})
	if err != nil {
		t.Fatal(err)
	}
	for range 2 {
		svc, _ = walService(t, data, newWalFS()) // the previous one is abandoned, as if killed
		checkInbox(t, data, "demo", "reader", bodies)
		reqs, err := svc.Requests(ctx, "demo")
		if err != nil || len(reqs) != 1 || reqs[0].ID != open.RequestID {
			t.Fatalf("requests after restart = %+v, %v; want %s", reqs, err, open.RequestID)
		}
		for i, b := range bodies {
			if got, err := walSend(svc, "demo", "reviewer", "reader", b, fmt.Sprintf("k%d", i)); err != nil || got.ID != fmt.Sprintf("reader-%d", i+1) {
				t.Fatalf("retry of k%d = %+v, %v", i, got, err)
			}
		}
	}
}

// TestWALPowerCut: a power cut drops every write not fsynced: the inbox
// appends (which have no fsync of their own) and anything of the log
// after its last fsync. Every acknowledged send, open and keyed send is
// there after the restart, exactly once, in the lesson's bytes.
func TestWALPowerCut(t *testing.T) {
	wfs := newWalFS()
	data := t.TempDir()
	svc, _ := walService(t, data, wfs)
	walTeam(t, svc, "demo")
	var reader, lead []string
	for i := range 20 {
		b := fmt.Sprintf("letter %d", i)
		key := ""
		if i%2 == 0 {
			key = fmt.Sprintf("k%d", i)
		}
		if _, err := walSend(svc, "demo", "reviewer", "reader", b, key); err != nil {
			t.Fatal(err)
		}
		reader = append(reader, b)
	}
	open, err := svc.OpenRequest(core.AsMember(ctx, "demo", "reader"), core.OpenInput{Team: "demo", Target: "lead", Kind: "plan", Payload: "read the source, then report"})
	if err != nil {
		t.Fatal(err)
	}
	lead = append(lead, core.EncodeRequestLetter("plan", open.RequestID, "read the source, then report"))
	if _, err := walSend(svc, "demo", "reader", "lead", "after the plan", ""); err != nil {
		t.Fatal(err)
	}
	lead = append(lead, "after the plan")
	wfs.powerCut(t)
	// What the disk kept of the inboxes: at most their first letter (a
	// whole-file write), nothing appended.
	if b, _ := os.ReadFile(inboxPath(data, "demo", "reader")); strings.Count(string(b), "\n") > 1 {
		t.Fatalf("the power cut left %d letters in reader's inbox; the test's cut is not cutting", strings.Count(string(b), "\n"))
	}

	svc2, s2 := walService(t, data, mail.OS())
	checkInbox(t, data, "demo", "reader", reader)
	checkInbox(t, data, "demo", "lead", lead)
	reqs, err := svc2.Requests(ctx, "demo")
	if err != nil || len(reqs) != 1 || reqs[0].ID != open.RequestID || reqs[0].Receipt != "lead-1" {
		t.Fatalf("requests = %+v, %v; want %s registered", reqs, err, open.RequestID)
	}
	if got, err := walSend(svc2, "demo", "reviewer", "reader", "letter 4", "k4"); err != nil || got.ID != "reader-5" {
		t.Fatalf("retry of k4 = %+v, %v; want reader-5 remembered", got, err)
	}
	// A clean shutdown checkpoints: state.json and idempotency.log hold
	// everything, the log is empty, and a start from the files alone
	// finds the same.
	if err := s2.Close(); err != nil {
		t.Fatal(err)
	}
	if segs := segments(t, data); len(segs) != 0 {
		t.Fatalf("log after a clean shutdown = %q, want empty", segs)
	}
	svc3, s3 := walService(t, data, mail.OS())
	t.Cleanup(func() { _ = s3.Close() })
	if reqs, _ := svc3.Requests(ctx, "demo"); len(reqs) != 1 {
		t.Fatalf("requests from the files alone = %+v", reqs)
	}
	if got, err := walSend(svc3, "demo", "reviewer", "reader", "letter 4", "k4"); err != nil || got.ID != "reader-5" {
		t.Fatalf("retry of k4 from the files alone = %+v, %v", got, err)
	}
	checkInbox(t, data, "demo", "reader", reader)
}

// TestWALTornTail: a crash during the log's write leaves a partial last
// record, whose fsync never returned (never acknowledged): start-up cuts
// it off and replays every whole record before it.
func TestWALTornTail(t *testing.T) {
	data := t.TempDir()
	svc, _ := walService(t, data, newWalFS())
	walTeam(t, svc, "demo")
	for i := range 3 {
		if _, err := walSend(svc, "demo", "reviewer", "reader", fmt.Sprintf("letter %d", i), ""); err != nil {
			t.Fatal(err)
		}
	}
	segs := segments(t, data)
	if len(segs) != 1 {
		t.Fatalf("segments = %q", segs)
	}
	path := filepath.Join(data, "wal", segs[0])
	whole := readFile(t, path)
	end := recordsEnd(whole)
	// A record torn within its frame, within its payload, and one whole
	// but for its last bytes (a record's frame: length, CRC, seq,
	// payload), each written where the next record goes: into the zeros
	// after the last one. And bytes at the very end of the segment's
	// space, as an out-of-order write-back of a torn batch leaves them.
	first := 16 + int(binary.LittleEndian.Uint32(whole))
	for _, torn := range []struct {
		at    int
		bytes []byte
	}{
		{end, []byte{0x10}},
		{end, []byte{0x30, 0, 0, 0, 1, 2, 3, 4, '{', '"'}},
		{end, whole[:first-3]},
		{len(whole) - 2, []byte{7, 7}},
	} {
		b := append([]byte{}, whole...)
		copy(b[torn.at:], torn.bytes)
		writeFile(t, path, b)
		svc, s := walService(t, data, newWalFS())
		checkInbox(t, data, "demo", "reader", []string{"letter 0", "letter 1", "letter 2"})
		if got, err := walSend(svc, "demo", "reviewer", "reader", "next", ""); err != nil || got.ID != "reader-4" {
			t.Fatalf("send after the repair = %+v, %v", got, err)
		}
		_ = s.Close()
		// The next round starts from these files again.
		writeFile(t, inboxPath(data, "demo", "reader"), canonical([]core.Message{
			{ID: "reader-1", Sender: "reviewer", Recipient: "reader", Body: "letter 0"},
			{ID: "reader-2", Sender: "reviewer", Recipient: "reader", Body: "letter 1"},
			{ID: "reader-3", Sender: "reviewer", Recipient: "reader", Body: "letter 2"},
		}))
	}
}

// recordsEnd is the offset after the last whole record of a segment.
func recordsEnd(seg []byte) int {
	off := 0
	for off+16 <= len(seg) {
		n := int(binary.LittleEndian.Uint32(seg[off:]))
		if n == 0 {
			break
		}
		off += 16 + n
	}
	return off
}

// TestWALRecordsGoIntoReadySpace: the log's segment grows in fsynced
// steps of zeros and records are written into them, so a record's fsync
// has no size to flush (the segment's size does not move from one send to
// the next). After a crash the zeros after the last record are the log's
// end, not a torn tail: replay finds every letter and cuts nothing.
func TestWALRecordsGoIntoReadySpace(t *testing.T) {
	data := t.TempDir()
	svc, _ := walService(t, data, mail.OS())
	walTeam(t, svc, "demo")
	var bodies []string
	sizes := map[int64]bool{}
	for i := range 30 {
		b := fmt.Sprintf("letter %d", i)
		if _, err := walSend(svc, "demo", "reviewer", "reader", b, ""); err != nil {
			t.Fatal(err)
		}
		bodies = append(bodies, b)
		segs := segments(t, data)
		fi, err := os.Stat(filepath.Join(data, "wal", segs[len(segs)-1]))
		if err != nil {
			t.Fatal(err)
		}
		sizes[fi.Size()] = true
	}
	if len(sizes) != 1 {
		t.Fatalf("segment sizes seen over 30 sends: %v; want one (records written into space made before)", sizes)
	}
	for size := range sizes {
		if size == 0 || size%(1<<20) != 0 {
			t.Fatalf("segment size %d, want a positive multiple of 1 MiB", size)
		}
	}
	segs := segments(t, data)
	seg := readFile(t, filepath.Join(data, "wal", segs[len(segs)-1]))
	// The store is abandoned as a killed process leaves it.
	var logged strings.Builder
	log := slog.New(slog.NewTextHandler(&logged, &slog.HandlerOptions{Level: slog.LevelWarn}))
	_, s2 := walService(t, data, mail.OS(), mail.WithLogger(log))
	t.Cleanup(func() { _ = s2.Close() })
	checkInbox(t, data, "demo", "reader", bodies)
	if logged.Len() != 0 {
		t.Fatalf("start-up after a crash warned %q; want nothing (zeros end the log)", logged.String())
	}
	if end := recordsEnd(seg); end == 0 || end == len(seg) {
		t.Fatalf("records end at %d of %d bytes; want records followed by zeros", end, len(seg))
	}
}

// TestWALCheckpoint: after WithCheckpoint's count of records the segment
// is closed and, once the files hold what it says, removed; a crash
// between a checkpoint's snapshot and the removal of its segments replays
// them over the snapshot to the same result.
func TestWALCheckpoint(t *testing.T) {
	data := t.TempDir()
	wfs := newWalFS()
	svc, s := walService(t, data, wfs, mail.WithCheckpoint(10, 1<<30))
	walTeam(t, svc, "demo")
	var bodies []string
	for i := range 35 {
		b := fmt.Sprintf("letter %d", i)
		if _, err := walSend(svc, "demo", "reviewer", "reader", b, fmt.Sprintf("k%d", i)); err != nil {
			t.Fatal(err)
		}
		bodies = append(bodies, b)
	}
	// The automatic checkpoints run beside the writers; wait (without a
	// deadline of our own) until they retired all but the last segments.
	for len(segments(t, data)) > 2 {
		time.Sleep(time.Millisecond)
	}
	if err := s.Checkpoint(ctx); err != nil {
		t.Fatal(err)
	}
	if segs := segments(t, data); len(segs) > 1 {
		t.Fatalf("segments after a checkpoint = %q", segs)
	}
	idem := readFile(t, filepath.Join(data, "teams", "demo", "idempotency.log"))
	if n := strings.Count(string(idem), "\n"); n != 35 {
		t.Fatalf("idempotency.log holds %d records, want 35", n)
	}
	checkInbox(t, data, "demo", "reader", bodies)

	// More writes, a checkpoint's snapshot written, and the crash before
	// the segments went: they are replayed over the snapshot.
	for i := 35; i < 40; i++ {
		b := fmt.Sprintf("letter %d", i)
		if _, err := walSend(svc, "demo", "reviewer", "reader", b, fmt.Sprintf("k%d", i)); err != nil {
			t.Fatal(err)
		}
		bodies = append(bodies, b)
	}
	saved := map[string][]byte{}
	for _, seg := range segments(t, data) {
		saved[seg] = readFile(t, filepath.Join(data, "wal", seg))
	}
	if err := s.Checkpoint(ctx); err != nil {
		t.Fatal(err)
	}
	wfs.powerCut(t) // the store is gone; its segments are put back
	for seg, b := range saved {
		writeFile(t, filepath.Join(data, "wal", seg), b)
	}
	svc2, s2 := walService(t, data, mail.OS())
	t.Cleanup(func() { _ = s2.Close() })
	checkInbox(t, data, "demo", "reader", bodies)
	for i, b := range bodies {
		if got, err := walSend(svc2, "demo", "reviewer", "reader", b, fmt.Sprintf("k%d", i)); err != nil || got.ID != fmt.Sprintf("reader-%d", i+1) {
			t.Fatalf("retry of k%d = %+v, %v", i, got, err)
		}
	}
	checkInbox(t, data, "demo", "reader", bodies)
}

// TestWALFailedWriteRollsBack: a log fsync that fails refuses its unit
// of work, and memory forgets it: the next letter takes the same id, and
// a restart finds only what was acknowledged.
func TestWALFailedWriteRollsBack(t *testing.T) {
	data := t.TempDir()
	ffs := newFaultFS()
	svc, s := walService(t, data, ffs)
	walTeam(t, svc, "demo")
	if _, err := walSend(svc, "demo", "reviewer", "reader", "one", ""); err != nil {
		t.Fatal(err)
	}
	ffs.arm("logsync")
	if _, err := walSend(svc, "demo", "reviewer", "reader", "lost", "k"); core.ErrorCode(err) != core.CodeStorageFailed {
		t.Fatalf("send with the log failing = %v, want storage_failed", err)
	}
	ffs.arm()
	if got, err := walSend(svc, "demo", "reviewer", "reader", "two", "k"); err != nil || got.ID != "reader-2" {
		t.Fatalf("send after the failure = %+v, %v; want reader-2 (the failed one forgotten)", got, err)
	}
	_ = s.Close()
	svc2, s2 := walService(t, data, mail.OS())
	t.Cleanup(func() { _ = s2.Close() })
	checkInbox(t, data, "demo", "reader", []string{"one", "two"})
	if got, err := walSend(svc2, "demo", "reviewer", "reader", "two", "k"); err != nil || got.ID != "reader-2" {
		t.Fatalf("retry = %+v, %v", got, err)
	}
}

// TestWALRefusedRecordNotReplayed: a record whose write reached the file
// but whose fsync failed was refused (storage_failed); a restart right
// after, with no other write in between, must not find it and replay it.
func TestWALRefusedRecordNotReplayed(t *testing.T) {
	data := t.TempDir()
	ffs := newFaultFS()
	svc, _ := walService(t, data, ffs)
	walTeam(t, svc, "demo")
	if _, err := walSend(svc, "demo", "reviewer", "reader", "one", ""); err != nil {
		t.Fatal(err)
	}
	ffs.arm("logsync")
	if _, err := walSend(svc, "demo", "reviewer", "reader", "refused", "k"); core.ErrorCode(err) != core.CodeStorageFailed {
		t.Fatalf("send with the log's fsync failing = %v, want storage_failed", err)
	}
	ffs.arm()
	// The store is abandoned as a killed process leaves it.
	svc2, s2 := walService(t, data, mail.OS())
	t.Cleanup(func() { _ = s2.Close() })
	checkInbox(t, data, "demo", "reader", []string{"one"})
	if got, err := walSend(svc2, "demo", "reviewer", "reader", "two", "k"); err != nil || got.ID != "reader-2" {
		t.Fatalf("send after the restart = %+v, %v; want reader-2 (the refused letter and its key forgotten)", got, err)
	}
}
