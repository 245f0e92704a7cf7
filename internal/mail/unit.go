package mail

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"path/filepath"
	"slices"
	"sort"
	"sync"
	"sync/atomic"

	"mailroom/internal/core"
)

// The file store owns each unit of work (core.Store.UpdateTeam): it is the
// only process on its data directory (the server holds mailroom.lock), so
// it keeps every team's committed state in memory and serialises the
// units of work of a team with the team's lock. A unit commits as one
// record of the write-ahead log (wal.go), shared fsyncs and all; memory
// takes the change when its record is queued, and no caller is answered
// from it before the record is durable (see teamEntry). The team's files
// follow the log (walunit.go): letters as soon as they are durable, the
// rest at checkpoints. docs/durability.md gives the crash argument.

// units is the store's teams in memory.
type units struct {
	once     sync.Once
	startErr error

	mu     sync.RWMutex
	teams  map[string]*teamEntry
	tokens map[string]tokenRef // sha256 hex → member

	// dirty lists the teams changed since the last checkpoint.
	dirtyMu sync.Mutex
	dirty   []*teamEntry
}

type tokenRef struct{ team, member string }

// teamEntry is one team: its committed state and what the store keeps
// beside it. mu is the team's lock: it covers every unit of work.
//
// Memory runs ahead of the disk by the records still in the log's queue:
// a unit of work is applied to memory as soon as its record is queued,
// so the team's next unit can build on it without waiting for the fsync
// (pipelining). Nobody is answered from such a change before it is
// durable: every unit of work and every view waits, after it released the
// lock, until the log is durable up to the team's last record (lastSeq)
// it saw. Since the log is written in order, whatever a unit built on is
// durable no later than the unit itself.
type teamEntry struct {
	mu      sync.Mutex
	st      *core.TeamState
	damaged error
	deleted bool
	idem    idemState
	turns   []core.TurnDoc // oldest first
	tasks   []core.Task    // the board, in id order (tasks.go)
	// lastSeq is the seq of the team's last record in the log.
	lastSeq uint64
	// pending is the letters whose records are logged but which are not
	// yet in their inbox files, in log order (drain writes them).
	pending []pendingLetter
	// What the next checkpoint writes: dirty is set while the team is
	// in the store's dirty list.
	dirty      bool
	stateDirty bool
	// stateUnlogged: the state in memory is neither in state.json nor in
	// the log (a repair at start could not be saved); the next record
	// carries it whole.
	stateUnlogged bool
	idemDirty     bool
	tasksDirty    bool
	turnDirty     map[string]bool
	inboxDirty    []string // members whose inbox got unsynced appends
	// drained is the seq of the last letter record written into its
	// inbox file (read without the lock by writers that need not drain).
	drained atomic.Uint64
	// overlay is, by member, the file's letters followed by the queued
	// ones, as units of work see the inbox (overlayOf).
	overlay map[string][]core.Message
	// archives is, by member, its archive as read (LoadArchive), until
	// letters next move into it.
	archives map[string][]core.Message
	// filesMark is, by member, the archive mark the inbox files were
	// moved to when the team was loaded: the log's replay reads them at
	// it (archive.go). Nil once the team is served.
	filesMark map[string]*core.ArchiveMark
	// cursors is the members' read positions (cursors.go), replaced,
	// never changed in place; cursorDirty: cursors.json is behind it.
	cursors     map[string]int
	cursorDirty bool
	// undo holds, for each of the team's records not yet known durable,
	// what memory was before it: a record that failed is rolled back
	// (settle), with every later one of the team.
	undo []undoRec
}

type undoRec struct {
	seq, lastSeq uint64
	st           *core.TeamState
	turns        []core.TurnDoc
	tasks        []core.Task
	idem         []idemUndo
	unlogged     bool
	cursors      map[string]int
}

type idemUndo struct {
	ref     idemRef
	prev    core.IdempotencyRecord
	existed bool
}

type pendingLetter struct {
	err   error // why the last try to write it failed
	seq   uint64
	msg   core.Message
	rules core.InboxRules
	line  []byte // msg in the inbox file's bytes, encoded once at commit
}

// Start loads every team, repairs what a crash of this store can leave
// (docs/durability.md), replays the write-ahead log into the files and
// releases the leases of the process that died. Every other method calls
// it first; calling it again does nothing.
func (s *Store) Start(ctx context.Context) error {
	s.units.once.Do(func() {
		if s.units.startErr = s.start(ctx); s.units.startErr == nil {
			s.openSearch() // search.go: the index catches up in the background
		}
	})
	return s.units.startErr
}

func (s *Store) start(ctx context.Context) error {
	records, segs, err := s.wal.readLog()
	if err != nil {
		return err
	}
	s.logged = widestLogged(records)
	defer func() { s.logged = nil }()
	loaded, err := s.loadTeams()
	if err != nil {
		return err
	}
	entries := make([]*teamEntry, len(loaded))
	core.ForEach(len(loaded), func(i int) { entries[i] = s.recoverTeam(ctx, loaded[i]) })
	byName := make(map[string]*teamEntry, len(loaded))
	for i, e := range entries {
		byName[loaded[i].Name] = e
	}
	next, written := s.replay(ctx, records, byName)
	if !written {
		// Kept for the first checkpoint to retire, once it wrote the
		// teams the replay could not.
		for _, name := range segs {
			s.wal.retire = append(s.wal.retire, filepath.Join(s.wal.dir, name))
		}
		segs = nil
	}
	// Every old segment is now in the files; they go before the new one
	// is started.
	for _, name := range segs {
		if err := s.fs.Remove(filepath.Join(s.wal.dir, name)); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return fmt.Errorf("mail: remove replayed log segment: %w", err)
		}
	}
	if len(segs) > 0 {
		if err := s.fs.SyncDir(s.wal.dir); err != nil {
			return fmt.Errorf("mail: sync log directory: %w", err)
		}
	}
	if err := s.wal.open(next); err != nil {
		return err
	}
	u := &s.units
	u.mu.Lock()
	defer u.mu.Unlock()
	u.teams = map[string]*teamEntry{}
	u.tokens = map[string]tokenRef{}
	for i, e := range entries {
		if e.damaged != nil {
			s.log.Error("team damaged; serving it read-only", "team", loaded[i].Name, "err", e.damaged)
		}
		u.teams[loaded[i].Name] = e
		for _, m := range e.st.Members {
			if m.TokenHash != "" {
				u.tokens[m.TokenHash] = tokenRef{loaded[i].Name, m.Name}
			}
		}
	}
	return nil
}

// recoverTeam brings one loaded team to a consistent state (docs/spec.md §13.14).
// A recorded intent is completed only when its exact letter (id, sender,
// recipient, body) is on disk, and dropped otherwise: letters alone never
// create requests, replies or closes, because any member can mail a
// look-alike body. Every inbox is validated; a failure marks the team
// damaged. Failing to save the repair does not: the repaired state is
// served and saved by the next commit.
//
// The inboxes are validated against the widest limits the log's records
// name for the team (loggedLimits), which the replay that follows sets.
func (s *Store) recoverTeam(ctx context.Context, lt loadedTeam) *teamEntry {
	e := &teamEntry{st: lt.State, damaged: lt.Err}
	if e.st == nil {
		e.st = &core.TeamState{Name: lt.Name, Limits: core.DefaultLimits(), Requests: []core.Request{}}
	}
	if e.damaged != nil {
		return e
	}
	now := s.clock()
	st := e.st
	changed := core.ReleaseAtStart(st, now)
	inboxes := map[string][]core.Message{}
	limits := s.logged.of(st)
	for _, m := range st.Members {
		rules := st.Rules(m.Name)
		rules.Limits = limits
		items, err := s.LoadInbox(ctx, st.Name, rules)
		if err != nil {
			e.damaged = fmt.Errorf("inbox %s: %w", m.Name, err)
			return e
		}
		inboxes[m.Name] = items
		if m.Archive != nil {
			// The files were moved to this mark at load (startInbox).
			if e.filesMark == nil {
				e.filesMark = map[string]*core.ArchiveMark{}
			}
			e.filesMark[m.Name] = m.Archive
		}
	}
	legacyIdem := lt.Idempotency
	if in := lt.Intent; in != nil {
		if letterStored(inboxes[in.Letter.Recipient], in.Letter) {
			if in.Op == intentState && in.State != nil && in.State.TeamState != nil {
				next := in.State.TeamState
				legacyIdem = append(legacyIdem, in.State.Idempotency...)
				core.ReleaseAtStart(next, now)
				e.st, st = next, next
			} else {
				completeIntent(st, in)
			}
			if in.Idempotency != nil {
				legacyIdem = append(legacyIdem, *in.Idempotency)
			}
			s.log.Info("completed a recorded intent", "team", st.Name, "op", in.Op, "letter", in.Letter.ID)
		} else {
			s.log.Info("dropped a recorded intent whose letter was never stored", "team", st.Name, "op", in.Op, "letter", in.Letter.ID)
		}
		changed = true
	}
	migrated, err := s.restoreIdempotency(ctx, e, inboxes, legacyIdem)
	if err != nil {
		e.damaged = fmt.Errorf("idempotency log: %w", err)
		return e
	}
	if changed || migrated {
		if err := s.SaveTeam(ctx, st); err != nil {
			// The team's first record carries the whole state, so no
			// letter is ever replayed over the unrepaired state.json.
			e.stateDirty, e.stateUnlogged = true, true
			s.markDirty(e)
			s.log.Warn("saving the recovered state failed; serving it, logging it with the team's next write and saving it at the next checkpoint", "team", st.Name, "err", err)
		}
	}
	s.restoreTurns(ctx, e)
	cursors, err := s.loadCursors(st.Name)
	if err != nil {
		e.damaged = err
		return e
	}
	e.cursors = cursors
	s.restoreTasks(ctx, e)
	return e
}

func letterStored(items []core.Message, letter core.Message) bool {
	return slices.Contains(items, letter)
}

// completeIntent applies what an open or reply intent records.
func completeIntent(st *core.TeamState, in *intent) {
	request := func(id string) *core.Request {
		for i := range st.Requests {
			if st.Requests[i].ID == id {
				return &st.Requests[i]
			}
		}
		return nil
	}
	switch in.Op {
	case intentOpen:
		if in.Request != nil && request(in.Request.ID) == nil {
			st.Requests = append(st.Requests, *in.Request)
		}
	case intentReply:
		if r := request(in.RequestID); r != nil && r.Reply == nil && in.Reply != nil {
			rep := *in.Reply
			r.Reply = &rep
		}
		if m := st.Member(in.Close); m != nil {
			m.Status = core.StatusClosed
		}
	}
}

// restoreTurns loads a team's stored documents at start. A document still
// running is a turn the process that died never ended: it becomes failed,
// with a text saying it was interrupted.
func (s *Store) restoreTurns(ctx context.Context, e *teamEntry) {
	name := e.st.Name
	docs, err := s.LoadTurns(ctx, name)
	if err != nil {
		s.log.Warn("loading turn documents failed; the team starts without them", "team", name, "err", err)
		return
	}
	sort.Slice(docs, func(i, j int) bool {
		if !docs[i].StartedAt.Equal(docs[j].StartedAt) {
			return docs[i].StartedAt.Before(docs[j].StartedAt)
		}
		return docs[i].TurnID < docs[j].TurnID
	})
	for i := range docs {
		d := &docs[i]
		if d.Steps == nil {
			d.Steps = []core.TurnStep{}
		}
		if core.InterruptTurnDoc(d, s.clock()) {
			if err := s.SaveTurn(ctx, name, d); err != nil {
				s.log.Warn("saving an interrupted turn's document failed", "team", name, "turn", d.TurnID, "err", err)
			}
		}
	}
	for len(docs) > core.MaxTurnDocs {
		_ = s.DeleteTurn(ctx, name, docs[0].TurnID)
		docs = docs[1:]
	}
	e.turns = docs
}

// entry returns team name's entry; CodeNotFound when there is none.
func (s *Store) entry(ctx context.Context, name string) (*teamEntry, error) {
	if err := s.Start(ctx); err != nil {
		return nil, err
	}
	s.units.mu.RLock()
	e := s.units.teams[name]
	s.units.mu.RUnlock()
	if e == nil {
		return nil, core.Errorf(core.CodeNotFound, "No such team.")
	}
	return e, nil
}

// CreateTeam creates the team's files (createTeamFiles) and registers it
// with its tokens. A name taken in memory or on disk is CodeTeamExists.
func (s *Store) CreateTeam(ctx context.Context, st *core.TeamState) error {
	if err := s.Start(ctx); err != nil {
		return err
	}
	u := &s.units
	u.mu.Lock()
	if _, taken := u.teams[st.Name]; taken {
		u.mu.Unlock()
		return core.Errorf(core.CodeTeamExists, "A team with this name already exists.")
	}
	// Reserved while the files are written, so a concurrent create of
	// the same name fails instead of racing on disk.
	e := &teamEntry{st: st.UnitCopy()}
	if e.st.Requests == nil {
		e.st.Requests = []core.Request{}
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	u.teams[st.Name] = e
	u.mu.Unlock()
	if err := s.createTeamFiles(st); err != nil {
		u.mu.Lock()
		delete(u.teams, st.Name)
		u.mu.Unlock()
		e.deleted = true
		return err
	}
	u.mu.Lock()
	for _, m := range st.Members {
		u.tokens[m.TokenHash] = tokenRef{st.Name, m.Name}
	}
	u.mu.Unlock()
	return nil
}

// DeleteTeam removes the team's files all or nothing (deleteTeamFiles),
// then the team and its tokens from memory.
func (s *Store) DeleteTeam(ctx context.Context, name string) error {
	e, err := s.entry(ctx, name)
	if err != nil {
		return err
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.deleted {
		return core.Errorf(core.CodeNotFound, "No such team.")
	}
	if err := s.deleteTeamFiles(ctx, name); err != nil {
		return err
	}
	// Marked under the team's lock, so every unit of work that found the
	// team before and waits for the lock sees it gone.
	e.deleted = true
	s.forgetSearch(e.st) // its letters leave the search index (search.go)
	u := &s.units
	u.mu.Lock()
	if u.teams[name] == e {
		delete(u.teams, name)
	}
	for h, ref := range u.tokens {
		if ref.team == name {
			delete(u.tokens, h)
		}
	}
	u.mu.Unlock()
	return nil
}

// ListTeams returns every team.
func (s *Store) ListTeams(ctx context.Context) ([]core.TeamSummary, error) {
	if err := s.Start(ctx); err != nil {
		return nil, err
	}
	s.units.mu.RLock()
	list := make([]*teamEntry, 0, len(s.units.teams))
	for _, e := range s.units.teams {
		list = append(list, e)
	}
	s.units.mu.RUnlock()
	out := make([]core.TeamSummary, 0, len(list))
	for _, e := range list {
		e.mu.Lock()
		if !e.deleted {
			out = append(out, core.TeamSummary{Name: e.st.Name, Members: len(e.st.Members), CreatedAt: e.st.CreatedAt})
		}
		e.mu.Unlock()
	}
	return out, nil
}

// CountTeams implements core.Store: the teams in memory (a deleted team
// leaves the map, a team being created is in it already).
func (s *Store) CountTeams(ctx context.Context) (int, error) {
	if err := s.Start(ctx); err != nil {
		return 0, err
	}
	s.units.mu.RLock()
	defer s.units.mu.RUnlock()
	return len(s.units.teams), nil
}

// LookupToken finds a token's member in the token map, under its read
// lock only: it never waits for a team's unit of work.
func (s *Store) LookupToken(ctx context.Context, hash string) (string, string, error) {
	if err := s.Start(ctx); err != nil {
		return "", "", err
	}
	s.units.mu.RLock()
	ref, ok := s.units.tokens[hash]
	s.units.mu.RUnlock()
	if !ok {
		return "", "", core.Errorf(core.CodeNotFound, "No such token.")
	}
	return ref.team, ref.member, nil
}

// Begin implements core.Store: the team's lock is held from here until the
// unit commits or closes, so the file store's units of work never
// conflict. A commit is one record in the write-ahead log, applied to
// memory when it is queued; the lock is released before the log's fsync,
// so the team's next unit of work runs meanwhile, and Commit returns only
// once the record (and everything the unit saw) is durable, and its
// letter is in the inbox file.
func (s *Store) Begin(ctx context.Context, name string, write bool) (core.Unit, error) {
	e, err := s.lockEntry(ctx, name)
	if err != nil {
		return nil, err
	}
	return &fileTx{s: s, e: e, ctx: ctx, write: write, version: e.lastSeq, prev: map[string][]core.Message{}}, nil
}

// Commit implements core.Unit.
func (tx *fileTx) Commit(cs *core.ChangeSet) error {
	if !tx.write || tx.done {
		return errReadOnly
	}
	tx.done = true
	s, e := tx.s, tx.e
	var seq uint64
	var err error
	if e.lastSeq != tx.version {
		err = core.ErrConflict // cannot happen while the lock is held
	} else {
		seq, err = s.commit(e, cs, tx.prev)
	}
	if err == nil && seq != 0 && len(cs.Archived) > 0 {
		// The letters move under the lock, once the record is durable
		// (archive.go): no unit sees the new mark before the files.
		defer e.mu.Unlock()
		return s.commitArchive(tx.ctx, e, cs, seq)
	}
	horizon := e.lastSeq
	key, recheck := s.searchKey(e, cs) // read under the team's lock
	e.mu.Unlock()
	if err := s.settle(horizon); err != nil {
		return err
	}
	if err == nil && cs.Letter != nil {
		// Durable now: searches find the letter before its send is
		// answered (search.go).
		s.indexSearch(key, cs.Letter, recheck)
	}
	turns := len(cs.PutTurns) > 0 || len(cs.DeleteTurns) > 0
	if seq == 0 || !turns && (cs.Letter == nil || e.drained.Load() >= seq) {
		return err // nothing to write, or another writer drained the letter
	}
	// The letter goes to its inbox file before the answer, so a reader
	// of the file finds every acknowledged letter; so do the turn
	// documents (rare, and read from their files by people).
	e.mu.Lock()
	defer e.mu.Unlock()
	s.drain(e)
	if err := e.drainErr(seq); err != nil {
		return err
	}
	if turns {
		s.flushTurns(tx.ctx, e)
	}
	if e.damaged != nil && !e.deleted {
		return core.DamagedError(e.damaged)
	}
	return err
}

// Close implements core.Unit: it releases the team's lock and returns
// once everything the unit saw is durable.
func (tx *fileTx) Close() error {
	if tx.done {
		return nil
	}
	tx.done = true
	horizon := tx.e.lastSeq
	tx.e.mu.Unlock()
	return tx.s.settle(horizon)
}

// drainErr is the error that keeps letter record seq out of its inbox
// file, if it is still waiting there.
func (e *teamEntry) drainErr(seq uint64) error {
	if len(e.pending) > 0 && e.pending[0].seq <= seq && e.pending[0].err != nil {
		return core.StorageError(e.pending[0].err)
	}
	return nil
}

// settle waits until the log is durable up to seq (0: nothing to wait
// for).
func (s *Store) settle(seq uint64) error {
	if seq == 0 {
		return nil
	}
	if err := s.wal.wait(seq); err != nil {
		return core.StorageError(err)
	}
	return nil
}

// lockEntry returns team name's entry locked, with every durable letter
// of it in its inbox files: how a unit of work and a view begin. A team
// deleted meanwhile is CodeNotFound, with no lock held.
func (s *Store) lockEntry(ctx context.Context, name string) (*teamEntry, error) {
	e, err := s.entry(ctx, name)
	if err != nil {
		return nil, err
	}
	e.mu.Lock()
	if e.deleted {
		e.mu.Unlock()
		return nil, core.Errorf(core.CodeNotFound, "No such team.")
	}
	s.drain(e)
	return e, nil
}

var errReadOnly = errors.New("mail: a view cannot change the team")

// fileTx is a unit of work of the file store: the team's entry, locked,
// as core's snapshot.
type fileTx struct {
	s     *Store
	e     *teamEntry
	ctx   context.Context
	write bool
	done  bool
	// version is the team's last record when the unit began.
	version uint64
	prev    map[string][]core.Message // inboxes as loaded, by member
}

func (tx *fileTx) State() *core.TeamState { return tx.e.st }
func (tx *fileTx) Damaged() error         { return tx.e.damaged }

// LoadInbox implements core.Snapshot: the file's letters followed by those
// logged but not yet in the file.
func (tx *fileTx) LoadInbox(member string) ([]core.Message, error) {
	if tx.e.damaged != nil {
		return nil, core.DamagedError(tx.e.damaged)
	}
	items, ok := tx.prev[member]
	if !ok {
		var err error
		items, err = tx.s.LoadInbox(tx.ctx, tx.e.st.Name, tx.e.st.Rules(member))
		if err != nil {
			return nil, err
		}
		tx.prev[member] = items
	}
	if n := tx.e.queuedCount(member); n > 0 {
		items = tx.e.overlayOf(member, items, n)
	}
	return items, nil
}

// InboxBytes implements core.Snapshot: the inbox file's bytes.
func (tx *fileTx) InboxBytes(member string) ([]byte, error) {
	if tx.e.damaged != nil {
		return nil, core.DamagedError(tx.e.damaged)
	}
	data, err := tx.s.InboxBytes(tx.ctx, tx.e.st.Name, tx.e.st.Rules(member))
	if err != nil {
		return nil, err
	}
	if pend, _ := tx.e.queued(member); len(pend) > 0 {
		data = encodeLines(slices.Clip(data), pend)
	}
	return data, nil
}

// InboxSize implements core.Snapshot.
func (tx *fileTx) InboxSize(member string) (int, int, error) {
	items, err := tx.LoadInbox(member)
	if err != nil {
		return 0, 0, err
	}
	_, pendBytes := tx.e.queued(member)
	return len(items), int(tx.s.fileSize(tx.e.st.Name, member, tx.prev[member]) + pendBytes), nil
}

// Idempotency implements core.Snapshot.
func (tx *fileTx) Idempotency(member, key string) (core.IdempotencyRecord, bool, error) {
	r, ok := tx.e.idem.live[idemRef{member, key}]
	return r, ok, nil
}

// Turns implements core.Snapshot.
func (tx *fileTx) Turns() ([]core.TurnDoc, error) { return tx.e.turns, nil }

// commit logs a change-set as one record and applies it to memory. It
// returns the record's seq, 0 when it changed nothing. Nothing is logged
// that the files could refuse for reasons of their own: the letter is
// checked against its inbox file first (prev: the inboxes the unit
// loaded).
func (s *Store) commit(e *teamEntry, cs *core.ChangeSet, prev map[string][]core.Message) (uint64, error) {
	if cs.Empty() && !e.stateUnlogged {
		return 0, nil
	}
	tasks, err := core.ApplyTasks(e.tasks, cs.Tasks)
	if err != nil {
		return 0, err
	}
	st := cs.NewState(e.st)
	rec := &walRecord{Team: e.st.Name, Created: e.st.CreatedAt, ChangeSet: *cs}
	if e.stateUnlogged {
		rec.State, rec.Leases = st, nil
	}
	var pl pendingLetter
	if cs.Letter != nil {
		letter := *cs.Letter
		rules := st.Rules(letter.Recipient)
		pend, pendBytes := e.queued(letter.Recipient)
		line := cs.Line
		if line == nil {
			line = core.EncodeInboxLine(letter)
		}
		if err := s.checkNext(e.st.Name, rules, prev[letter.Recipient], pend, pendBytes, letter, line); err != nil {
			var ce *core.Error
			if errors.As(err, &ce) {
				return 0, err
			}
			return 0, core.StorageError(err)
		}
		pl = pendingLetter{msg: letter, rules: rules, line: line}
	}
	s.markDirty(e)
	seq, err := s.wal.append(rec, e.lastSeq)
	if err != nil {
		return 0, core.StorageError(err)
	}
	u := undoRec{seq: seq, lastSeq: e.lastSeq, st: e.st, turns: e.turns, tasks: e.tasks, unlogged: e.stateUnlogged, cursors: e.cursors}
	for _, r := range cs.Idempotency {
		ref := idemRef{r.Member, r.Key}
		prev, ok := e.idem.live[ref]
		u.idem = append(u.idem, idemUndo{ref, prev, ok})
	}
	e.undo = append(e.undo, u)
	e.lastSeq = seq
	e.stateUnlogged = false
	if cs.Letter != nil {
		pl.seq = seq
		e.pending = append(e.pending, pl)
		if all, ok := e.overlay[pl.msg.Recipient]; ok {
			// Grown in place: what was handed out is capped at its length.
			e.overlay[pl.msg.Recipient] = append(all, pl.msg)
		}
	}
	if st != e.st {
		e.st = st
		e.stateDirty = true
	}
	if len(cs.Cursors) > 0 {
		e.cursors = withCursors(e.cursors, cs.Cursors)
		e.cursorDirty = true
	}
	for _, r := range cs.Idempotency {
		e.idem.lines++
		e.remember(r)
		e.idemDirty = true
	}
	if len(cs.Tasks) > 0 {
		e.tasks = tasks
		e.tasksDirty = true
	}
	if len(cs.PutTurns) > 0 || len(cs.DeleteTurns) > 0 {
		if e.turnDirty == nil {
			e.turnDirty = map[string]bool{}
		}
		for _, d := range cs.PutTurns {
			e.turnDirty[d.TurnID] = true
		}
		for _, id := range cs.DeleteTurns {
			e.turnDirty[id] = true
		}
		e.turns = cs.ApplyTurns(e.turns)
	}
	return seq, nil
}

// queuedCount is how many letters to member are logged but not yet in
// the file.
func (e *teamEntry) queuedCount(member string) int {
	n := 0
	for _, p := range e.pending {
		if p.msg.Recipient == member {
			n++
		}
	}
	return n
}

// overlayOf returns the file's letters (file) followed by the n letters
// queued for member. The result is kept and grown by one letter per
// commit, so a busy inbox is not copied whole for each unit of work; it
// is rebuilt whenever it does not add up (the file changed, a record was
// rolled back).
func (e *teamEntry) overlayOf(member string, file []core.Message, n int) []core.Message {
	all := e.overlay[member]
	if len(all) != len(file)+n || (len(file) > 0 && all[len(file)-1] != file[len(file)-1]) {
		pend, _ := e.queued(member)
		all = append(append(make([]core.Message, 0, len(file)+n+16), file...), pend...)
		if e.overlay == nil {
			e.overlay = map[string][]core.Message{}
		}
		e.overlay[member] = all
	}
	return all[:len(all):len(all)]
}

// queued returns the letters to member logged but not yet in the file,
// and the bytes of their lines.
func (e *teamEntry) queued(member string) ([]core.Message, int64) {
	var out []core.Message
	var n int64
	for _, p := range e.pending {
		if p.msg.Recipient == member {
			out = append(out, p.msg)
			n += int64(len(p.line))
		}
	}
	return out, n
}

// Runs: <data>/runs/<id>/result.json, written by the replace recipe. A
// run directory without result.json is a run claimed and not finished.
const (
	runsDir    = "runs"
	resultFile = "result.json"
)

func (s *Store) runDir(id string) string { return filepath.Join(s.dataDir, runsDir, id) }

// PutRun stores a run: its directory, and its result when it has one.
// The lease of a claimed run is kept in memory (runlease.go).
func (s *Store) PutRun(_ context.Context, run core.RunDoc) error {
	if !core.ValidName(run.ID) {
		return fmt.Errorf("mail: invalid run id %q", run.ID)
	}
	s.runLeases.mu.Lock()
	defer s.runLeases.mu.Unlock()
	if err := s.ensureDir(filepath.Join(s.dataDir, runsDir)); err != nil {
		return fmt.Errorf("mail: create runs directory: %w", err)
	}
	dir := s.runDir(run.ID)
	if err := s.ensureDir(dir); err != nil {
		return fmt.Errorf("mail: create run directory: %w", err)
	}
	if run.Result == nil {
		s.runLeases.set(run.ID, run.Lease)
		return nil
	}
	old, _, rerr := s.readRegular(filepath.Join(dir, resultFile), -1)
	_, err := s.replaceFile(dir, resultFile, run.Result, previous{data: old, exists: rerr == nil})
	if err == nil {
		s.runLeases.set(run.ID, nil)
	}
	return err
}

// GetRun reads one run; CodeNotFound when it has no directory.
func (s *Store) GetRun(_ context.Context, id string) (core.RunDoc, error) {
	if !core.ValidName(id) {
		return core.RunDoc{}, core.Errorf(core.CodeNotFound, "No such run.")
	}
	// Under the leases' lock, so that a result stored meanwhile is never
	// read as a run without result and without lease.
	s.runLeases.mu.Lock()
	defer s.runLeases.mu.Unlock()
	dir := s.runDir(id)
	if fi, err := s.fs.Lstat(dir); err != nil || !fi.IsDir() {
		return core.RunDoc{}, core.Errorf(core.CodeNotFound, "No such run.")
	}
	data, _, err := s.readRegular(filepath.Join(dir, resultFile), -1)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return core.RunDoc{ID: id, Lease: s.runLeases.get(id)}, nil
	case err != nil:
		return core.RunDoc{}, fmt.Errorf("mail: read run result: %w", err)
	}
	return core.RunDoc{ID: id, Result: data}, nil
}

// ListRuns lists the run directories.
func (s *Store) ListRuns(_ context.Context) ([]string, error) {
	entries, err := s.fs.ReadDir(filepath.Join(s.dataDir, runsDir))
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("mail: list runs: %w", err)
	}
	var out []string
	for _, e := range entries {
		if e.IsDir() && core.ValidName(e.Name()) {
			out = append(out, e.Name())
		}
	}
	return out, nil
}

// DeleteRun removes a run's directory (its workspace too) all or nothing
// across a crash (see trashPrefix): once renamed aside it is deleted, and
// what resists removal then is removed at the next start.
func (s *Store) DeleteRun(_ context.Context, id string) error {
	if !core.ValidName(id) {
		return nil
	}
	s.runLeases.mu.Lock()
	defer s.runLeases.mu.Unlock()
	s.runLeases.set(id, nil)
	trash, err := s.moveToTrash(filepath.Join(s.dataDir, runsDir), id)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	if err := s.removeTree(trash); err != nil {
		s.log.Warn("removing a deleted run's files failed; the next start removes them", "run", id, "err", err)
	}
	return nil
}

// RunDir is where a run's files beside its document live (a scenario's
// workspace): <data>/runs/<id>.
func (s *Store) RunDir(id string) string { return s.runDir(id) }
