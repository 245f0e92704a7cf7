// Package mail is the file-backed core.Store: one directory per team, one
// JSONL file per inbox in exactly the lessons' format, and the team's
// durable state in state.json.
//
// Layout under the data directory:
//
//	teams/<team>/state.json              core.TeamState as JSON
//	teams/<team>/inboxes/<member>.jsonl  one letter per line
//
//	wal/<seq>.log                        the write-ahead log (wal.go)
//
// Every unit of work (Store.UpdateTeam) commits as one record of the
// write-ahead log, whose fsyncs concurrent writers share; its letter is
// then appended to its inbox without an fsync of its own, and state.json
// and idempotency.log are snapshots written at checkpoints, after which
// the log is cut. Whole files (state.json, an inbox's first letter) are
// written through a temporary file in the same directory, fsynced and
// renamed into place, followed by an fsync of the directory. An
// acknowledged write survives a crash or a power loss (start-up replays
// the log into the files), and the inbox files are exactly what the
// lessons write (docs/durability.md).
package mail

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"runtime"
	"sync"
	"syscall"
	"time"

	"mailroom/internal/core"
)

const (
	teamsDir   = "teams"
	inboxesDir = "inboxes"
	stateFile  = "state.json"
	inboxExt   = ".jsonl"
)

// Store is the file-backed core.Store.
//
// Its mutable state is what it knows of each inbox (the letters, and the
// signature of the file version they came from), so that loading or
// appending to an unchanged inbox reads nothing, and a bounded set of
// inbox files kept open between appends (see WithOpenFiles). Each has its
// own lock, since calls on different teams run concurrently; an inbox
// itself relies on core serialising the calls of one team. The letters of
// every inbox in use stay in memory, bounded by the teams' inbox byte
// limits. Close releases the open files.
type Store struct {
	root string // <data>/teams
	fs   FS
	log  *slog.Logger

	// mu guards inboxes. Every send looks an inbox up twice and publishes
	// once, so lookups share the lock.
	mu      sync.RWMutex
	inboxes map[string]*inboxState // by cacheKey(team, member)
	files   openFiles
	// dataDir is the data directory; runs live in dataDir/runs.
	dataDir string
	// runLeases is the leases of the runs in progress, in memory only
	// (runlease.go).
	runLeases runLeases
	// units is the teams' committed state in memory (unit.go).
	units units
	// wal is the write-ahead log every unit of work is committed to
	// (wal.go).
	wal wal
	// search is the index of letters for core.Searcher (search.go).
	search searchIndex
	// now is the clock of the racy-signature rule (fileSig.racy); tests
	// move it forward instead of waiting.
	now func() time.Time
	// clock is the time of the domain: idempotency expiry and the ends
	// of interrupted turns (WithClock).
	clock func() time.Time
	// logged are the widest inbox limits of the log's records, by team,
	// while start-up reads the teams (limits.go); nil after it.
	logged loggedLimits
}

var _ core.Store = (*Store)(nil)

// Option configures a Store.
type Option func(*Store)

// WithFS makes the store use fsys for every file-system call. Tests use it
// to inject failures; the default is OS().
func WithFS(fsys FS) Option { return func(s *Store) { s.fs = fsys } }

// WithClock sets the clock of idempotency expiry and start-up repairs;
// it should be the Service's (core.Options.Now). The default is time.Now.
func WithClock(now func() time.Time) Option { return func(s *Store) { s.clock = now } }

// WithLogger sets the logger for the repairs LoadTeams makes. The default
// is slog.Default().
func WithLogger(l *slog.Logger) Option { return func(s *Store) { s.log = l } }

// Open returns a store over dataDir, creating dataDir/teams (mode 0700) if
// it is missing.
func Open(dataDir string, opts ...Option) (*Store, error) {
	s := &Store{root: filepath.Join(dataDir, teamsDir), dataDir: dataDir, fs: OS(), log: slog.Default(), inboxes: map[string]*inboxState{}}
	s.files.max = defaultOpenFiles
	s.wal = wal{s: s, dir: filepath.Join(dataDir, walDir), maxRecs: defaultCheckpointRecords, maxBytes: defaultCheckpointBytes, yield: runtime.Gosched}
	s.now = time.Now
	s.clock = time.Now
	for _, o := range opts {
		o(s)
	}
	if err := makeDataDir(s.fs, dataDir); err != nil {
		return nil, err
	}
	if err := s.ensureDir(s.root); err != nil {
		return nil, fmt.Errorf("mail: create teams directory: %w", err)
	}
	if err := s.wal.ensureDir(); err != nil {
		return nil, fmt.Errorf("mail: create log directory: %w", err)
	}
	return s, nil
}

// makeDataDir creates dataDir with mode 0700 if it is missing. An existing
// directory is left as the operator made it.
func makeDataDir(fsys FS, dataDir string) error {
	_, err := fsys.Lstat(dataDir)
	if !errors.Is(err, fs.ErrNotExist) {
		return nil // present, or a problem the next call will report
	}
	if err := fsys.MkdirAll(dataDir, dirMode); err != nil {
		return fmt.Errorf("mail: create data directory %s: %w", dataDir, err)
	}
	if err := fsys.Chmod(dataDir, dirMode); err != nil {
		return fmt.Errorf("mail: chmod data directory %s: %w", dataDir, err)
	}
	return nil
}

func (s *Store) teamDir(team string) string { return filepath.Join(s.root, team) }

// CreateTeam creates teams/<team> exclusively, its inboxes directory and
// its first state.json. The exclusive mkdir is what makes a name taken: it
// fails with core.CodeTeamExists whatever another process did. On failure
// everything it created is removed.
func (s *Store) createTeamFiles(st *core.TeamState) (err error) {
	if !core.ValidName(st.Name) {
		return fmt.Errorf("mail: invalid team name %q", st.Name)
	}
	data, err := json.Marshal(st)
	if err != nil {
		return fmt.Errorf("mail: encode team state: %w", err)
	}
	dir := s.teamDir(st.Name)
	if err := s.fs.Mkdir(dir, dirMode); err != nil {
		if errors.Is(err, fs.ErrExist) {
			return core.Errorf(core.CodeTeamExists, "A team with this name already exists.")
		}
		return fmt.Errorf("mail: create team directory: %w", err)
	}
	inboxes := filepath.Join(dir, inboxesDir)
	defer func() {
		if err != nil {
			// Undo in reverse order; each may already be gone.
			_ = s.fs.Remove(filepath.Join(dir, stateFile))
			_ = s.removeTemps(dir)
			_ = s.fs.Remove(inboxes)
			_ = s.fs.Remove(dir)
			_ = s.fs.SyncDir(s.root)
		}
	}()
	if err := s.fs.Chmod(dir, dirMode); err != nil {
		return fmt.Errorf("mail: chmod team directory: %w", err)
	}
	if err := s.ensureDir(inboxes); err != nil {
		return fmt.Errorf("mail: create inboxes directory: %w", err)
	}
	if _, err := s.replaceFile(dir, stateFile, data, previous{}); err != nil {
		return err
	}
	// The team directory's own entry must reach the disk too, or a power
	// loss could forget a team whose creation was acknowledged.
	if err := s.fs.SyncDir(s.root); err != nil {
		return fmt.Errorf("mail: sync teams directory: %w", err)
	}
	return nil
}

// SaveTeam atomically replaces teams/<team>/state.json. On error the old
// file is unchanged.
func (s *Store) SaveTeam(_ context.Context, st *core.TeamState) error {
	if !core.ValidName(st.Name) {
		return fmt.Errorf("mail: invalid team name %q", st.Name)
	}
	data, err := json.Marshal(st)
	if err != nil {
		return fmt.Errorf("mail: encode team state: %w", err)
	}
	dir := s.teamDir(st.Name)
	// The old bytes are kept in case the replace must be undone (see
	// replaceFile).
	old, _, rerr := s.readRegular(filepath.Join(dir, stateFile), -1)
	if rerr != nil && !errors.Is(rerr, fs.ErrNotExist) {
		return fmt.Errorf("mail: read team state: %w", rerr)
	}
	_, err = s.replaceFile(dir, stateFile, data, previous{data: old, exists: rerr == nil})
	return err
}

// LoadTeams returns every team directory under teams/, sorted by name. A
// team whose state cannot be read or parsed is returned with Err set; it
// never fails the whole call.
//
// It repairs exactly what a crash of this store can leave, none of which
// was acknowledged, and nothing else:
//   - temporary files, which were never renamed into place, are removed;
//   - the trash of a team deletion a crash interrupted is removed (see
//     DeleteTeam);
//   - a team directory without state.json whose inboxes are empty is a
//     creation interrupted before it was acknowledged, and is removed;
//   - an inbox of a member whose last line has no final newline is an
//     append interrupted before its fsync returned: it is truncated to just
//     after its last newline, and the repair is logged at WARN (see
//     startInbox). Any other damage is left for core to report.
//
// Teams are loaded by a few goroutines at once (each touches only its own
// directory), and each team directory and inboxes directory is listed
// once. An inbox read for the torn-line check is validated from the same
// bytes and kept as LoadInbox keeps what it reads, so core's validation
// that follows does not read it again.
func (s *Store) LoadTeams(_ context.Context) ([]core.LoadedTeam, error) {
	loaded, err := s.loadTeams()
	if err != nil {
		return nil, err
	}
	out := make([]core.LoadedTeam, len(loaded))
	for i, lt := range loaded {
		out[i] = lt.LoadedTeam
	}
	return out, nil
}

// loadedTeam is one team as its files hold it, with what older versions
// of the file store wrote into state.json beside the state.
type loadedTeam struct {
	core.LoadedTeam
	legacy
}

// teamFile is state.json: the team's state, and, in files older versions
// wrote, an intent or idempotency records beside it.
type teamFile struct {
	*core.TeamState
	legacy
}

// legacy is what older versions of the file store kept in state.json and
// start-up moves out of it: an intent recorded before a protocol letter
// (completed or dropped, recoverTeam) and idempotency records kept before
// the team had an idempotency log (moved into the log).
type legacy struct {
	Intent      *intent                  `json:"intent,omitempty"`
	Idempotency []core.IdempotencyRecord `json:"idempotency,omitempty"`
}

// intent records, before a protocol letter was written by an older
// version, what the letter would mean once stored: a request to
// register, a reply to record (and a member to close), or a whole new
// state (docs/spec.md §13.14). Start-up completes one whose exact letter is
// on disk and drops one whose letter is missing; this version writes
// none (its log commits a letter and its meaning as one record).
type intent struct {
	Op          string                  `json:"op"`
	Letter      core.Message            `json:"letter"`
	Request     *core.Request           `json:"request,omitempty"`
	RequestID   string                  `json:"request_id,omitempty"`
	Reply       *core.Reply             `json:"reply,omitempty"`
	Close       string                  `json:"close,omitempty"`
	State       *teamFile               `json:"state,omitempty"`
	Idempotency *core.IdempotencyRecord `json:"idempotency_record,omitempty"`
}

// Intent operations.
const (
	intentOpen  = "open"
	intentReply = "reply"
	// intentState is a letter whose unit of work changed the state in a
	// way open and reply do not describe: State is the state to store
	// once the letter is on disk.
	intentState = "state"
)

func (s *Store) loadTeams() ([]loadedTeam, error) {
	entries, err := s.fs.ReadDir(s.root)
	if err != nil {
		return nil, fmt.Errorf("mail: list teams: %w", err)
	}
	s.removeTrash(s.root, entries)
	var names []string
	for _, e := range entries {
		// Only real directories with a valid name can be teams; anything
		// else could not have been created through the store.
		if e.IsDir() && core.ValidName(e.Name()) {
			names = append(names, e.Name())
		}
	}
	loaded := make([]loadedTeam, len(names))
	keep := make([]bool, len(names))
	core.ForEach(len(names), func(i int) { loaded[i], keep[i] = s.loadTeam(names[i]) })
	teams := []loadedTeam{}
	for i := range names {
		if keep[i] {
			teams = append(teams, loaded[i])
		}
	}
	return teams, nil
}

func (s *Store) loadTeam(name string) (loadedTeam, bool) {
	lt := loadedTeam{LoadedTeam: core.LoadedTeam{Name: name}}
	dir := s.teamDir(name)
	top, err := s.listClean(dir)
	if err != nil {
		lt.Err = fmt.Errorf("mail: clean team directory: %w", err)
		return lt, true
	}
	// Only a real directory is listed: a symbolic link in its place is
	// not followed (core reports it when it loads an inbox).
	var boxes map[string]fs.FileMode
	if typ, ok := top[inboxesDir]; ok && typ.IsDir() {
		if boxes, err = s.listClean(filepath.Join(dir, inboxesDir)); err != nil {
			lt.Err = fmt.Errorf("mail: clean inboxes directory: %w", err)
			return lt, true
		}
	}
	data, _, err := s.readListed(filepath.Join(dir, stateFile), top, -1)
	if errors.Is(err, fs.ErrNotExist) && s.removeUnfinished(dir, top, boxes) {
		return lt, false
	}
	if err != nil {
		lt.Err = fmt.Errorf("mail: read team state: %w", err)
		return lt, true
	}
	file := teamFile{TeamState: &core.TeamState{}}
	if err := json.Unmarshal(data, &file); err != nil {
		lt.Err = fmt.Errorf("mail: parse team state: %w", err)
		return lt, true
	}
	st := file.TeamState
	lt.legacy = file.legacy
	if st.Name != name {
		lt.Err = fmt.Errorf("mail: team state names %q, not its directory %q", st.Name, name)
		return lt, true
	}
	for _, m := range st.Members {
		if err := s.startInbox(st, m.Name, boxes); err != nil {
			lt.Err = err
			return lt, true
		}
	}
	lt.State = st
	return lt, true
}

// listClean lists dir once, removes the temporary files a crash left in it
// (never renamed into place, so nothing acknowledged is lost), and returns
// the type of every other entry by name. A missing dir is empty.
func (s *Store) listClean(dir string) (map[string]fs.FileMode, error) {
	entries, err := s.fs.ReadDir(dir)
	if errors.Is(err, fs.ErrNotExist) {
		return map[string]fs.FileMode{}, nil
	}
	if err != nil {
		return nil, err
	}
	out := make(map[string]fs.FileMode, len(entries))
	for _, e := range entries {
		if e.Type().IsRegular() && isTempName(e.Name()) {
			if err := s.fs.Remove(filepath.Join(dir, e.Name())); err != nil && !errors.Is(err, fs.ErrNotExist) {
				return nil, err
			}
			continue
		}
		out[e.Name()] = e.Type()
	}
	return out, nil
}

// removeUnfinished removes dir if it holds nothing but an empty inboxes
// directory, and reports whether it did. top and boxes are what listClean
// found in dir and in its inboxes directory.
func (s *Store) removeUnfinished(dir string, top, boxes map[string]fs.FileMode) bool {
	for name, typ := range top {
		if name != inboxesDir || !typ.IsDir() {
			return false
		}
	}
	if len(top) == 1 {
		if len(boxes) > 0 {
			return false
		}
		if err := s.fs.Remove(filepath.Join(dir, inboxesDir)); err != nil {
			return false
		}
	}
	if err := s.fs.Remove(dir); err != nil {
		return false
	}
	_ = s.fs.SyncDir(s.root)
	return true
}

// errSymlink and errNotRegular mark a path that exists but is not a
// regular file.
var (
	errSymlink    = errors.New("is a symbolic link")
	errNotRegular = errors.New("not a regular file")
)

// readRegular reads the regular file at path without following a symbolic
// link in its last component. With max >= 0 it reads at most max+1 bytes,
// enough for the caller to tell "too large" from "exactly max". A symbolic
// link gives errSymlink, anything else that is not a regular file
// errNotRegular, a missing file an error matching fs.ErrNotExist. It also
// returns what fstat said of the open file before it was read.
func (s *Store) readRegular(path string, max int) ([]byte, fs.FileInfo, error) {
	fi, err := s.fs.Lstat(path)
	if err != nil {
		return nil, nil, err
	}
	// The lstat keeps the open away from device files, whose open alone
	// can have effects.
	if fi.Mode()&fs.ModeSymlink != 0 {
		return nil, nil, errSymlink
	}
	if !fi.Mode().IsRegular() {
		return nil, nil, errNotRegular
	}
	return s.readOpen(path, max)
}

// readListed is readRegular for a file whose directory was just listed:
// the listing's entry type (listClean) stands in for the lstat.
func (s *Store) readListed(path string, listed map[string]fs.FileMode, max int) ([]byte, fs.FileInfo, error) {
	typ, ok := listed[filepath.Base(path)]
	switch {
	case !ok:
		return nil, nil, &fs.PathError{Op: "open", Path: path, Err: fs.ErrNotExist}
	case typ&fs.ModeSymlink != 0:
		return nil, nil, errSymlink
	case !typ.IsRegular():
		return nil, nil, errNotRegular
	}
	return s.readOpen(path, max)
}

// readOpen is the rest of readRegular, once the path was seen to be a
// regular file.
func (s *Store) readOpen(path string, max int) ([]byte, fs.FileInfo, error) {
	// O_NOFOLLOW closes the race with a symlink swapped in after the
	// check; O_NONBLOCK keeps a FIFO swapped in from blocking the open.
	f, err := s.fs.OpenFile(path, os.O_RDONLY|syscall.O_NOFOLLOW|syscall.O_NONBLOCK, 0)
	if err != nil {
		switch {
		case errors.Is(err, syscall.ELOOP):
			return nil, nil, errSymlink
		case errors.Is(err, syscall.ENXIO): // a socket
			return nil, nil, errNotRegular
		}
		return nil, nil, err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return nil, nil, err
	}
	if !fi.Mode().IsRegular() {
		return nil, nil, errNotRegular
	}
	var r io.Reader = f
	if max >= 0 {
		r = io.LimitReader(f, int64(max)+1)
	}
	// Room for the whole file, so it is read in one call (and one more
	// that sees its end) into one allocation.
	size := fi.Size()
	if max >= 0 && size > int64(max) {
		size = int64(max) + 1
	}
	var buf bytes.Buffer
	buf.Grow(int(size) + bytes.MinRead)
	if _, err := buf.ReadFrom(r); err != nil {
		return nil, nil, err
	}
	return buf.Bytes(), fi, nil
}
