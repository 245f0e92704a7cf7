package core_test

import (
	"context"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"mailroom/internal/core"
	"mailroom/internal/mail"
	"mailroom/internal/testkit"
)

// faultFS wraps the real file system and fails the save of a chosen file
// on demand (its replacing rename, or its opening for an append), so
// failure paths run the production code unchanged.
type faultFS struct {
	mail.FS
	mu       sync.Mutex
	failSave func(newpath string) bool
}

var errInjected = errors.New("injected save failure")

func (f *faultFS) Rename(oldpath, newpath string) error {
	f.mu.Lock()
	fail := f.failSave
	f.mu.Unlock()
	if fail != nil && fail(newpath) {
		return errInjected
	}
	return f.FS.Rename(oldpath, newpath)
}

// OpenFile fails the opening of a file for an append when failSave
// matches it: letters after the first are appended, not renamed. A file
// it opens fails its writes (Write, WriteAt) and fsyncs while failSave
// matches it: that is how the write-ahead log's segment (opened once) is
// made to fail.
func (f *faultFS) OpenFile(name string, flag int, perm fs.FileMode) (mail.File, error) {
	f.mu.Lock()
	fail := f.failSave
	f.mu.Unlock()
	if flag&os.O_APPEND != 0 && fail != nil && fail(name) {
		return nil, errInjected
	}
	file, err := f.FS.OpenFile(name, flag, perm)
	if err != nil {
		return nil, err
	}
	return &faultFile{File: file, fs: f}, nil
}

type faultFile struct {
	mail.File
	fs *faultFS
}

func (f *faultFile) failing() bool {
	f.fs.mu.Lock()
	fail := f.fs.failSave
	f.fs.mu.Unlock()
	return fail != nil && fail(f.Name())
}

func (f *faultFile) Write(p []byte) (int, error) {
	if f.failing() {
		return 0, errInjected
	}
	return f.File.Write(p)
}

// WriteAt fails as Write does: the log writes its records at their offset.
func (f *faultFile) WriteAt(p []byte, off int64) (int, error) {
	if f.failing() {
		return 0, errInjected
	}
	return f.File.WriteAt(p, off)
}

func (f *faultFile) Sync() error {
	if f.failing() {
		return errInjected
	}
	return f.File.Sync()
}

func (f *faultFS) setFailSave(fn func(string) bool) {
	f.mu.Lock()
	f.failSave = fn
	f.mu.Unlock()
}

// failInbox matches renames onto an inbox file; failState onto state.json.
func failInbox(p string) bool { return strings.HasSuffix(p, ".jsonl") }
func failState(p string) bool { return strings.HasSuffix(p, "state.json") }

// failLog matches the write-ahead log, where every unit of work commits:
// its segments' creation, writes and fsyncs.
func failLog(p string) bool {
	return strings.Contains(p, string(filepath.Separator)+"wal"+string(filepath.Separator))
}

type fixture struct {
	t    *testing.T
	dir  string
	fs   *faultFS
	svc  *core.Service
	team string
}

// newFixture opens a real store in a temp dir and creates the lesson team
// (lead, reader, reviewer) with the lesson limits unless limits is given.
func newFixture(t *testing.T, limits *core.Limits) *fixture {
	t.Helper()
	dir := t.TempDir()
	ffs := &faultFS{FS: mail.OS()}
	svc := testkit.OpenService(t, dir, mail.WithFS(ffs))
	f := &fixture{t: t, dir: dir, fs: ffs, svc: svc, team: "demo"}
	_, _, err := svc.CreateTeam(t.Context(), core.TeamSpec{Name: "demo", Limits: limits, Members: []core.MemberSpec{
		{Name: "lead", Role: "summarise read-only evidence"},
		{Name: "reader", Role: "read the source"},
		{Name: "reviewer", Role: "read the expected value"},
	}})
	if err != nil {
		t.Fatal(err)
	}
	return f
}

// reopen starts a new Service over the same directory, as a restart does.
func (f *fixture) reopen() *core.Service {
	f.t.Helper()
	return testkit.OpenService(f.t, f.dir, mail.WithFS(f.fs))
}

func (f *fixture) inboxPath(member string) string {
	return filepath.Join(f.dir, "teams", f.team, "inboxes", member+".jsonl")
}

func (f *fixture) inboxBytes(member string) string {
	f.t.Helper()
	b, err := os.ReadFile(f.inboxPath(member))
	if errors.Is(err, os.ErrNotExist) {
		return "<missing>"
	}
	if err != nil {
		f.t.Fatal(err)
	}
	return string(b)
}

func (f *fixture) send(sender, recipient, body string) core.SendResult {
	f.t.Helper()
	r, err := f.svc.Send(core.AsMember(f.t.Context(), f.team, sender), core.SendInput{Team: f.team, To: recipient, Body: body})
	if err != nil {
		f.t.Fatalf("send %s→%s: %v", sender, recipient, err)
	}
	return r
}

func (f *fixture) open(sender, target, kind, payload string) core.OpenResult {
	f.t.Helper()
	r, err := f.svc.OpenRequest(core.AsMember(f.t.Context(), f.team, sender), core.OpenInput{Team: f.team, Target: target, Kind: kind, Payload: payload})
	if err != nil {
		f.t.Fatalf("open %s %s→%s: %v", kind, sender, target, err)
	}
	return r
}

func (f *fixture) reply(id, actor string, approve bool, feedback string) core.ReplyResult {
	f.t.Helper()
	r, err := f.svc.Reply(core.AsMember(f.t.Context(), f.team, actor), core.ReplyInput{Team: f.team, RequestID: id, Approve: approve, Feedback: feedback})
	if err != nil {
		f.t.Fatalf("reply %s as %s: %v", id, actor, err)
	}
	return r
}

func (f *fixture) request(id string) core.Request {
	f.t.Helper()
	r, err := f.svc.Request(f.t.Context(), f.team, id)
	if err != nil {
		f.t.Fatal(err)
	}
	return r
}

func (f *fixture) member(name string) core.MemberView {
	f.t.Helper()
	return memberOf(f.t, f.svc, f.team, name)
}

// memberOf is member name of team as the team's view shows it.
var memberOf = testkit.MemberOf

// assertNoTemp fails when anything but member inbox files is in inboxes/
// or anything but state.json and inboxes/ in the team directory.
func (f *fixture) assertNoTemp() {
	f.t.Helper()
	entries, _ := os.ReadDir(filepath.Join(f.dir, "teams", f.team, "inboxes"))
	for _, e := range entries {
		if !strings.HasSuffix(e.Name(), ".jsonl") || strings.HasPrefix(e.Name(), ".") {
			f.t.Errorf("stray file in inboxes: %s", e.Name())
		}
	}
	entries, _ = os.ReadDir(filepath.Join(f.dir, "teams", f.team))
	for _, e := range entries {
		if e.Name() != "state.json" && e.Name() != "inboxes" {
			f.t.Errorf("stray file in team dir: %s", e.Name())
		}
	}
}

func wantCode(t *testing.T, err error, code core.Code) {
	t.Helper()
	if got := core.ErrorCode(err); got != code {
		t.Fatalf("error = %v (code %q), want code %q", err, got, code)
	}
}

// answer is a turn function that appends one exchange and answers.
func answer(text string) core.TurnFunc {
	return func(_ context.Context, h []core.Entry) (core.TurnOutcome, error) {
		return core.TurnOutcome{Status: core.TurnAnswered, Text: text,
			Messages: append(h, core.UserText("本轮追问"), core.Entry{Role: "assistant", Text: "依据已有记录补充回答。"})}, nil
	}
}
