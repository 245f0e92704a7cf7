package mail_test

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"reflect"
	"sync"
	"testing"
	"time"

	"mailroom/internal/core"
	"mailroom/internal/mail"
)

var errInjected = errors.New("injected failure")

// faultFS is the real file system with chosen operations made to fail
// while armed. Every other call reaches the disk, so the test sees exactly
// what a real failure would leave behind. It also counts the files opened
// for reading, which is how tests see whether the store read an inbox.
type faultFS struct {
	mail.FS
	mu    sync.Mutex
	ops   map[string]bool
	hit   int
	reads int
	// writes counts the files opened for writing (appends, truncations).
	writes int
	// duringRead, when set, runs once, just before the first read from
	// the next file opened for reading (after the store's fstat of it).
	duringRead func()
}

func newFaultFS() *faultFS { return &faultFS{FS: mail.OS()} }

// arm makes ops fail from now on and resets the count of failures; arm()
// disarms and keeps the count.
func (f *faultFS) arm(ops ...string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if len(ops) > 0 {
		f.hit = 0
	}
	f.ops = map[string]bool{}
	for _, op := range ops {
		f.ops[op] = true
	}
}

// hits reports how many times an armed operation failed.
func (f *faultFS) hits() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.hit
}

// writeOpens reports how many files were opened for writing so far.
func (f *faultFS) writeOpens() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.writes
}

// readOpens reports how many files were opened for reading so far.
func (f *faultFS) readOpens() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.reads
}

func (f *faultFS) fails(op string) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	if !f.ops[op] {
		return false
	}
	f.hit++
	return true
}

func (f *faultFS) OpenFile(name string, flag int, perm fs.FileMode) (mail.File, error) {
	var hook func()
	if flag&(os.O_WRONLY|os.O_RDWR) == 0 {
		f.mu.Lock()
		f.reads++
		hook, f.duringRead = f.duringRead, nil
		f.mu.Unlock()
	} else {
		f.mu.Lock()
		f.writes++
		f.mu.Unlock()
		if f.fails("open") {
			return nil, errInjected
		}
	}
	file, err := f.FS.OpenFile(name, flag, perm)
	if err != nil {
		return nil, err
	}
	return &faultFile{File: file, fs: f, beforeRead: hook}, nil
}

func (f *faultFS) CreateTemp(dir, pattern string) (mail.File, error) {
	if f.fails("createtemp") {
		return nil, errInjected
	}
	file, err := f.FS.CreateTemp(dir, pattern)
	if err != nil {
		return nil, err
	}
	return &faultFile{File: file, fs: f}, nil
}

func (f *faultFS) Rename(oldpath, newpath string) error {
	if f.fails("rename") {
		return errInjected
	}
	return f.FS.Rename(oldpath, newpath)
}

func (f *faultFS) SyncDir(name string) error {
	if f.fails("syncdir") {
		return errInjected
	}
	return f.FS.SyncDir(name)
}

func (f *faultFS) Mkdir(name string, perm fs.FileMode) error {
	if f.fails("mkdir") {
		return errInjected
	}
	return f.FS.Mkdir(name, perm)
}

type faultFile struct {
	mail.File
	fs         *faultFS
	beforeRead func()
}

func (f *faultFile) Read(p []byte) (int, error) {
	if f.beforeRead != nil {
		f.beforeRead()
		f.beforeRead = nil
	}
	return f.File.Read(p)
}

func (f *faultFile) Write(p []byte) (int, error) {
	if f.fs.fails("write") {
		// A short write, as a full disk gives.
		n, _ := f.File.Write(p[:len(p)/2])
		return n, errInjected
	}
	return f.File.Write(p)
}

// WriteAt fails as Write does (the write-ahead log writes this way).
func (f *faultFile) WriteAt(p []byte, off int64) (int, error) {
	if f.fs.fails("write") {
		n, _ := f.File.WriteAt(p[:len(p)/2], off)
		return n, errInjected
	}
	return f.File.WriteAt(p, off)
}

// Sync fails while "sync" is armed, and for the write-ahead log's
// segments while "logsync" is.
func (f *faultFile) Sync() error {
	if isLog(f.Name()) && f.fs.fails("logsync") {
		return errInjected
	}
	if f.fs.fails("sync") {
		return errInjected
	}
	return f.File.Sync()
}

func (f *faultFile) Close() error {
	err := f.File.Close()
	if f.fs.fails("close") {
		return errInjected
	}
	return err
}

func (f *faultFile) Chmod(mode fs.FileMode) error {
	if f.fs.fails("chmod") {
		return errInjected
	}
	return f.File.Chmod(mode)
}

func (f *faultFile) SetModTime(t time.Time) error {
	if f.fs.fails("touch") {
		return errInjected
	}
	return f.File.SetModTime(t)
}

func (f *faultFile) Truncate(size int64) error {
	if f.fs.fails("truncate") {
		return errInjected
	}
	return f.File.Truncate(size)
}

// faultOps are the steps of a whole-file replace (state.json, and an
// inbox's first letter). appendOps are those of an append to an inbox
// file the store opens for the append and closes after it (WithOpenFiles(0),
// or a file not kept open); keptOps those of an append to a file the store
// kept open since the previous append.
var (
	faultOps  = []string{"createtemp", "chmod", "write", "touch", "sync", "close", "rename", "syncdir"}
	appendOps = []string{"open", "write", "touch", "sync", "close"}
	keptOps   = []string{"write", "touch", "sync"}
)

// TestAppendInboxFaults: whichever step of the replace (first letter) or
// the append (third letter) fails, the append returns the error, the inbox
// keeps its old bytes (or stays absent), no temporary file is left, and
// the store works once the fault is gone. Appends run with the file kept
// open since the second letter, with no file kept, and with the kept file
// pushed out by another inbox's (so the third letter opens it again).
func TestAppendInboxFaults(t *testing.T) {
	type tc struct {
		op       string
		existing bool
		files    string // "kept", "none" or "evicted"
	}
	var cases []tc
	for _, op := range faultOps {
		cases = append(cases, tc{op, false, "kept"})
	}
	for _, op := range keptOps {
		cases = append(cases, tc{op, true, "kept"})
	}
	for _, op := range appendOps {
		cases = append(cases, tc{op, true, "none"})
		// The reopened file is kept, not closed, after the append.
		if op != "close" {
			cases = append(cases, tc{op, true, "evicted"})
		}
	}
	for _, c := range cases {
		op, existing := c.op, c.existing
		{
			name := op + "/first letter"
			if existing {
				name = op + "/third letter/" + c.files
			}
			t.Run(name, func(t *testing.T) {
				ffs := newFaultFS()
				opts := []mail.Option{mail.WithFS(ffs)}
				switch c.files {
				case "none":
					opts = append(opts, mail.WithOpenFiles(0))
				case "evicted":
					opts = append(opts, mail.WithOpenFiles(1))
				}
				s, data := openStore(t, opts...)
				createTeam(t, s, "team")
				r := rules("reader", core.DefaultLimits())
				path := inboxPath(data, "team", "reader")
				n := 1
				if existing {
					send(t, s, "team", r, core.Message{ID: "reader-1", Sender: "lead", Recipient: "reader", Body: "one"})
					send(t, s, "team", r, core.Message{ID: "reader-2", Sender: "reviewer", Recipient: "reader", Body: "二"})
					n = 3
				}
				if c.files == "evicted" {
					rv := rules("reviewer", core.DefaultLimits())
					send(t, s, "team", rv, core.Message{ID: "reviewer-1", Sender: "lead", Recipient: "reviewer", Body: "one"})
					send(t, s, "team", rv, core.Message{ID: "reviewer-2", Sender: "lead", Recipient: "reviewer", Body: "two"})
				}
				old, oldErr := os.ReadFile(path)
				prev, err := s.LoadInbox(ctx, "team", r)
				if err != nil {
					t.Fatal(err)
				}

				ffs.arm(op)
				msg := core.Message{ID: fmt.Sprintf("reader-%d", n), Sender: "lead", Recipient: "reader", Body: "lost"}
				err = s.AppendInbox(ctx, "team", r, prev, msg)
				ffs.arm()
				if !errors.Is(err, errInjected) {
					t.Fatalf("AppendInbox = %v, want the injected failure", err)
				}
				if ffs.hits() == 0 {
					t.Fatal("the fault was never reached")
				}
				now, nowErr := os.ReadFile(path)
				if existing {
					wantBytes(t, "inbox after failed append", now, old)
				} else if !os.IsNotExist(oldErr) || !os.IsNotExist(nowErr) {
					t.Fatalf("inbox exists after a failed first append: %q, %v", now, nowErr)
				}
				want := []string{"reader.jsonl"}
				if c.files == "evicted" {
					want = []string{"reader.jsonl", "reviewer.jsonl"}
				}
				if !existing {
					want = []string{}
				}
				if got := dirNames(t, filepath.Dir(path)); !reflect.DeepEqual(got, want) {
					t.Fatalf("inboxes directory holds %q, want %q", got, want)
				}

				send(t, s, "team", r, msg)
				if got, err := s.LoadInbox(ctx, "team", r); err != nil || len(got) != n {
					t.Fatalf("after recovery: %+v, %v", got, err)
				}
			})
		}
	}
}

// TestSaveTeamFaults: as TestAppendInboxFaults, for state.json.
func TestSaveTeamFaults(t *testing.T) {
	for _, op := range faultOps {
		t.Run(op, func(t *testing.T) {
			ffs := newFaultFS()
			s, data := openStore(t, mail.WithFS(ffs))
			st := createTeam(t, s, "team")
			path := filepath.Join(data, "teams", "team", "state.json")
			old := readFile(t, path)

			st.Members[1].Turns = 1
			ffs.arm(op)
			err := s.SaveTeam(ctx, st)
			ffs.arm()
			if !errors.Is(err, errInjected) {
				t.Fatalf("SaveTeam = %v, want the injected failure", err)
			}
			wantBytes(t, "state after failed save", readFile(t, path), old)
			if got := dirNames(t, filepath.Dir(path)); !reflect.DeepEqual(got, []string{"inboxes", "state.json"}) {
				t.Fatalf("team directory holds %q", got)
			}

			if err := s.SaveTeam(ctx, st); err != nil {
				t.Fatal(err)
			}
			teams, err := s.LoadTeams(ctx)
			if err != nil || len(teams) != 1 || teams[0].State.Members[1].Turns != 1 {
				t.Fatalf("after recovery: %+v, %v", teams, err)
			}
		})
	}
}

// TestCreateTeamFaults: a failed creation leaves no team directory, so the
// name stays free.
func TestCreateTeamFaults(t *testing.T) {
	for _, op := range append([]string{"mkdir"}, faultOps...) {
		t.Run(op, func(t *testing.T) {
			ffs := newFaultFS()
			s, data := openStore(t, mail.WithFS(ffs))
			ffs.arm(op)
			err := s.CreateTeam(ctx, teamState("team", "lead"))
			ffs.arm()
			if !errors.Is(err, errInjected) {
				t.Fatalf("CreateTeam = %v, want the injected failure", err)
			}
			if got := dirNames(t, filepath.Join(data, "teams")); len(got) != 0 {
				t.Fatalf("teams directory holds %q", got)
			}
			createTeam(t, s, "team")
		})
	}
}
