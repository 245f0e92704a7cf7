// Package mail is the file-backed core.Store: one directory per team, one
// JSONL file per inbox in exactly the lessons' format, and the team's
// durable state in state.json.
//
// Layout under the data directory:
//
//	teams/<team>/state.json              core.TeamState as JSON
//	teams/<team>/inboxes/<member>.jsonl  one letter per line
//
// state.json and an inbox's first letter are written whole: through a
// temporary file in the same directory, fsynced and renamed into place,
// followed by an fsync of the directory. Later letters are appended to the
// inbox and fsynced, and a failed append is truncated away, so a send
// costs the same whatever the inbox holds (see Store.AppendInbox). Either
// way an acknowledged write survives a crash or a power loss, a failed one
// leaves the old file byte-for-byte as it was, and the files are exactly
// what the lessons write.
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
	"sync"
	"syscall"

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
}

var _ core.Store = (*Store)(nil)

// Option configures a Store.
type Option func(*Store)

// WithFS makes the store use fsys for every file-system call. Tests use it
// to inject failures; the default is OS().
func WithFS(fsys FS) Option { return func(s *Store) { s.fs = fsys } }

// WithLogger sets the logger for the repairs LoadTeams makes. The default
// is slog.Default().
func WithLogger(l *slog.Logger) Option { return func(s *Store) { s.log = l } }

// Open returns a store over dataDir, creating dataDir/teams (mode 0700) if
// it is missing.
func Open(dataDir string, opts ...Option) (*Store, error) {
	s := &Store{root: filepath.Join(dataDir, teamsDir), fs: OS(), log: slog.Default(), inboxes: map[string]*inboxState{}}
	s.files.max = defaultOpenFiles
	for _, o := range opts {
		o(s)
	}
	if err := makeDataDir(s.fs, dataDir); err != nil {
		return nil, err
	}
	if err := s.ensureDir(s.root); err != nil {
		return nil, fmt.Errorf("mail: create teams directory: %w", err)
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
func (s *Store) CreateTeam(_ context.Context, st *core.TeamState) (err error) {
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
//   - a team directory without state.json whose inboxes are empty is a
//     creation interrupted before it was acknowledged, and is removed;
//   - an inbox of a member whose last line has no final newline is an
//     append interrupted before its fsync returned: it is truncated to just
//     after its last newline, and the repair is logged at WARN (see
//     repairTornLine). Any other damage is left for core to report.
func (s *Store) LoadTeams(_ context.Context) ([]core.LoadedTeam, error) {
	entries, err := s.fs.ReadDir(s.root)
	if err != nil {
		return nil, fmt.Errorf("mail: list teams: %w", err)
	}
	teams := []core.LoadedTeam{}
	for _, e := range entries {
		// Only real directories with a valid name can be teams; anything
		// else could not have been created through the store.
		if !e.IsDir() || !core.ValidName(e.Name()) {
			continue
		}
		lt, keep := s.loadTeam(e.Name())
		if keep {
			teams = append(teams, lt)
		}
	}
	return teams, nil
}

func (s *Store) loadTeam(name string) (core.LoadedTeam, bool) {
	lt := core.LoadedTeam{Name: name}
	dir := s.teamDir(name)
	inboxes := filepath.Join(dir, inboxesDir)
	if err := s.removeTemps(dir); err != nil {
		lt.Err = fmt.Errorf("mail: clean team directory: %w", err)
		return lt, true
	}
	if err := s.removeTemps(inboxes); err != nil {
		lt.Err = fmt.Errorf("mail: clean inboxes directory: %w", err)
		return lt, true
	}
	data, _, err := s.readRegular(filepath.Join(dir, stateFile), -1)
	if errors.Is(err, fs.ErrNotExist) && s.removeUnfinished(dir) {
		return lt, false
	}
	if err != nil {
		lt.Err = fmt.Errorf("mail: read team state: %w", err)
		return lt, true
	}
	st := &core.TeamState{}
	if err := json.Unmarshal(data, st); err != nil {
		lt.Err = fmt.Errorf("mail: parse team state: %w", err)
		return lt, true
	}
	if st.Name != name {
		lt.Err = fmt.Errorf("mail: team state names %q, not its directory %q", st.Name, name)
		return lt, true
	}
	for _, m := range st.Members {
		if err := s.repairTornLine(st, m.Name); err != nil {
			lt.Err = err
			return lt, true
		}
	}
	lt.State = st
	return lt, true
}

// removeUnfinished removes dir if it holds nothing but an empty inboxes
// directory, and reports whether it did.
func (s *Store) removeUnfinished(dir string) bool {
	entries, err := s.fs.ReadDir(dir)
	if err != nil {
		return false
	}
	for _, e := range entries {
		if e.Name() != inboxesDir || !e.IsDir() {
			return false
		}
	}
	inboxes := filepath.Join(dir, inboxesDir)
	if len(entries) == 1 {
		if rest, err := s.fs.ReadDir(inboxes); err != nil || len(rest) > 0 {
			return false
		}
		if err := s.fs.Remove(inboxes); err != nil {
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
	if fi.Mode()&fs.ModeSymlink != 0 {
		return nil, nil, errSymlink
	}
	if !fi.Mode().IsRegular() {
		return nil, nil, errNotRegular
	}
	// O_NOFOLLOW closes the race with a symlink swapped in after Lstat;
	// O_NONBLOCK keeps a FIFO swapped in from blocking the open.
	f, err := s.fs.OpenFile(path, os.O_RDONLY|syscall.O_NOFOLLOW|syscall.O_NONBLOCK, 0)
	if err != nil {
		if errors.Is(err, syscall.ELOOP) {
			return nil, nil, errSymlink
		}
		return nil, nil, err
	}
	defer f.Close()
	fi, err = f.Stat()
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
	var buf bytes.Buffer
	if _, err := buf.ReadFrom(r); err != nil {
		return nil, nil, err
	}
	return buf.Bytes(), fi, nil
}
