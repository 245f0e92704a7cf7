package mail

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"path/filepath"
	"reflect"
	"slices"
	"sort"
	"sync"

	"mailroom/internal/core"
)

// The file store owns each unit of work (core.Store.UpdateTeam): it is the
// only process on its data directory (the server holds mailroom.lock), so
// it keeps every team's committed state in memory, serialises the units
// of work of a team with the team's lock, and writes each commit with the
// recipes of docs/durability.md: idempotency record, intent, letter,
// state. Memory is changed only once the disk holds the change (or an
// intent that a restart completes into it), so it never decides a write
// on anything a restart would not load.

// units is the store's teams in memory.
type units struct {
	once     sync.Once
	startErr error

	mu     sync.RWMutex
	teams  map[string]*teamEntry
	tokens map[string]tokenRef // sha256 hex → member
}

type tokenRef struct{ team, member string }

// teamEntry is one team: its committed state and what the store keeps
// beside it. mu is the team's lock: it covers every unit of work.
type teamEntry struct {
	mu      sync.Mutex
	st      *core.TeamState
	damaged error
	deleted bool
	// stale is set when memory is ahead of disk because a state write
	// failed after its letter (the intent on disk covers it) or an
	// intent could not be cleared after its letter failed: the next
	// commit that writes a letter saves the state first.
	stale bool
	idem  idemState
	turns []core.TurnDoc // oldest first
}

// Start loads every team, repairs what a crash of this store can leave
// (docs/durability.md) and releases the leases of the process that died.
// Every other method calls it first; calling it again does nothing.
func (s *Store) Start(ctx context.Context) error {
	s.units.once.Do(func() { s.units.startErr = s.start(ctx) })
	return s.units.startErr
}

func (s *Store) start(ctx context.Context) error {
	loaded, err := s.LoadTeams(ctx)
	if err != nil {
		return err
	}
	entries := make([]*teamEntry, len(loaded))
	core.ForEach(len(loaded), func(i int) { entries[i] = s.recoverTeam(ctx, loaded[i]) })
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

// recoverTeam brings one loaded team to a consistent state (SPEC §13.14).
// A recorded intent is completed only when its exact letter (id, sender,
// recipient, body) is on disk, and dropped otherwise: letters alone never
// create requests, replies or closes, because any member can mail a
// look-alike body. Every inbox is validated; a failure marks the team
// damaged. Failing to save the repair does not: the repaired state is
// served and saved by the next commit.
func (s *Store) recoverTeam(ctx context.Context, lt core.LoadedTeam) *teamEntry {
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
	for _, m := range st.Members {
		items, err := s.LoadInbox(ctx, st.Name, st.Rules(m.Name))
		if err != nil {
			e.damaged = fmt.Errorf("inbox %s: %w", m.Name, err)
			return e
		}
		inboxes[m.Name] = items
	}
	if in := st.Intent; in != nil {
		if letterStored(inboxes[in.Letter.Recipient], in.Letter) {
			if in.Op == core.IntentState && in.State != nil {
				next := in.State
				next.Intent = nil
				core.ReleaseAtStart(next, now)
				e.st, st = next, next
			} else {
				completeIntent(st, in)
			}
			s.log.Info("completed a recorded intent", "team", st.Name, "op", in.Op, "letter", in.Letter.ID)
		} else {
			s.log.Info("dropped a recorded intent whose letter was never stored", "team", st.Name, "op", in.Op, "letter", in.Letter.ID)
		}
		st.Intent = nil
		changed = true
	}
	migrated, err := s.restoreIdempotency(ctx, e, inboxes)
	if err != nil {
		e.damaged = fmt.Errorf("idempotency log: %w", err)
		return e
	}
	if changed || migrated {
		if err := s.SaveTeam(ctx, st); err != nil {
			e.stale = true
			s.log.Warn("saving the recovered state failed; serving it and saving it with the next write", "team", st.Name, "err", err)
		}
	}
	s.restoreTurns(ctx, e)
	return e
}

func letterStored(items []core.Message, letter core.Message) bool {
	return slices.Contains(items, letter)
}

// completeIntent applies what an open or reply intent records.
func completeIntent(st *core.TeamState, in *core.Intent) {
	request := func(id string) *core.Request {
		for i := range st.Requests {
			if st.Requests[i].ID == id {
				return &st.Requests[i]
			}
		}
		return nil
	}
	switch in.Op {
	case core.IntentOpen:
		if in.Request != nil && request(in.Request.ID) == nil {
			st.Requests = append(st.Requests, *in.Request)
		}
	case core.IntentReply:
		if r := request(in.RequestID); r != nil && r.Reply == nil && in.Reply != nil {
			rep := *in.Reply
			r.Reply = &rep
		}
		if m := st.Member(in.Close); m != nil {
			m.Status = core.StatusClosed
		}
	}
	if in.Idempotency != nil {
		// Written by an older version; restoreIdempotency moves it into
		// the log.
		st.Idempotency = append(st.Idempotency, *in.Idempotency)
	}
}

// deriveIntent describes what committing next after letter changes in
// old: the request registered (open), or the reply recorded and the
// member closed (reply), in the form older versions wrote; anything else
// as the whole new state.
func deriveIntent(old, next *core.TeamState, letter core.Message) *core.Intent {
	try := func(in *core.Intent) bool {
		c := cloneState(old)
		completeIntent(c, in)
		return reflect.DeepEqual(c, next)
	}
	if len(next.Requests) == len(old.Requests)+1 {
		r := next.Requests[len(next.Requests)-1]
		if in := (&core.Intent{Op: core.IntentOpen, Letter: letter, Request: &r}); try(in) {
			return in
		}
	}
	for i := range next.Requests {
		if i < len(old.Requests) && old.Requests[i].Reply == nil && next.Requests[i].Reply != nil {
			rep := *next.Requests[i].Reply
			in := &core.Intent{Op: core.IntentReply, Letter: letter, RequestID: next.Requests[i].ID, Reply: &rep}
			for j := range next.Members {
				if next.Members[j].Status == core.StatusClosed && old.Members[j].Status != core.StatusClosed {
					in.Close = next.Members[j].Name
				}
			}
			if try(in) {
				return in
			}
		}
	}
	return &core.Intent{Op: core.IntentState, Letter: letter, State: cloneState(next)}
}

// cloneState copies st as deeply as a unit of work may change it: the
// slices it appends to or assigns into, and the leases. Histories and
// other values a unit only ever replaces are shared.
func cloneState(st *core.TeamState) *core.TeamState {
	c := *st
	c.Members = slices.Clone(st.Members)
	for i := range c.Members {
		if l := c.Members[i].Lease; l != nil {
			x := *l
			c.Members[i].Lease = &x
		}
	}
	c.Requests = slices.Clone(st.Requests)
	for i := range c.Requests {
		if r := c.Requests[i].Reply; r != nil {
			x := *r
			c.Requests[i].Reply = &x
		}
	}
	c.Permissions = slices.Clone(st.Permissions)
	return &c
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
	e := &teamEntry{st: cloneState(st)}
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

// UpdateTeam runs fn under the team's lock and commits what it did.
func (s *Store) UpdateTeam(ctx context.Context, name string, fn func(tx core.TeamTx) error) error {
	e, err := s.entry(ctx, name)
	if err != nil {
		return err
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.deleted {
		return core.Errorf(core.CodeNotFound, "No such team.")
	}
	if e.damaged != nil {
		return core.DamagedError(e.damaged)
	}
	tx := &fileTx{s: s, e: e, ctx: ctx, st: cloneState(e.st), write: true, prev: map[string][]core.Message{}}
	if err := fn(tx); err != nil {
		return err
	}
	tx.done = true
	return s.commit(ctx, e, tx)
}

// ViewTeam runs fn under the team's lock on a copy of its state.
func (s *Store) ViewTeam(ctx context.Context, name string, fn func(tx core.TeamTx) error) error {
	e, err := s.entry(ctx, name)
	if err != nil {
		return err
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.deleted {
		return core.Errorf(core.CodeNotFound, "No such team.")
	}
	tx := &fileTx{s: s, e: e, ctx: ctx, st: cloneState(e.st), prev: map[string][]core.Message{}}
	defer func() { tx.done = true }()
	return fn(tx)
}

var errReadOnly = errors.New("mail: a view cannot change the team")

// fileTx is a unit of work of the file store.
type fileTx struct {
	s     *Store
	e     *teamEntry
	ctx   context.Context
	st    *core.TeamState
	write bool
	done  bool

	prev   map[string][]core.Message // inboxes as loaded, by member
	letter *core.Message
	recs   []core.IdempotencyRecord
	puts   []core.TurnDoc
	dels   []string
}

func (tx *fileTx) State() *core.TeamState { return tx.st }
func (tx *fileTx) Damaged() error         { return tx.e.damaged }

func (tx *fileTx) LoadInbox(member string) ([]core.Message, error) {
	if tx.e.damaged != nil {
		return nil, core.DamagedError(tx.e.damaged)
	}
	items, ok := tx.prev[member]
	if !ok {
		var err error
		items, err = tx.s.LoadInbox(tx.ctx, tx.st.Name, tx.st.Rules(member))
		if err != nil {
			return nil, err
		}
		tx.prev[member] = items
	}
	if tx.letter != nil && tx.letter.Recipient == member {
		return append(slices.Clip(items), *tx.letter), nil
	}
	return items, nil
}

// InboxBytes is the inbox file's bytes; a letter appended in this unit of
// work follows in the lesson's bytes, as the commit writes it (a file in
// foreign spacing is then rewritten whole, canonical).
func (tx *fileTx) InboxBytes(member string) ([]byte, error) {
	if tx.e.damaged != nil {
		return nil, core.DamagedError(tx.e.damaged)
	}
	if tx.letter != nil && tx.letter.Recipient == member {
		items, err := tx.LoadInbox(member)
		if err != nil {
			return nil, err
		}
		return encodeLines(nil, items), nil
	}
	return tx.s.InboxBytes(tx.ctx, tx.st.Name, tx.st.Rules(member))
}

func (tx *fileTx) AppendLetter(msg core.Message) error {
	if !tx.write || tx.done {
		return errReadOnly
	}
	if tx.letter != nil {
		return errors.New("mail: a unit of work appends at most one letter")
	}
	items, err := tx.LoadInbox(msg.Recipient)
	if err != nil {
		return err
	}
	if msg.ID != fmt.Sprintf("%s-%d", msg.Recipient, len(items)+1) {
		return fmt.Errorf("mail: letter %q is not the next of %s's inbox", msg.ID, msg.Recipient)
	}
	// The byte limit is checked by the commit's append, before the disk is
	// touched (AppendInbox).
	tx.letter = &msg
	return nil
}

func (tx *fileTx) Idempotency(member, key string) (core.IdempotencyRecord, bool, error) {
	for _, r := range slices.Backward(tx.recs) {
		if r.Member == member && r.Key == key {
			return r, true, nil
		}
	}
	r, ok := tx.e.idem.live[idemRef{member, key}]
	return r, ok, nil
}

func (tx *fileTx) PutIdempotency(r core.IdempotencyRecord) error {
	if !tx.write || tx.done {
		return errReadOnly
	}
	tx.recs = append(tx.recs, r)
	return nil
}

func (tx *fileTx) Turns() ([]core.TurnDoc, error) {
	out := slices.Clone(tx.e.turns)
	for _, id := range tx.dels {
		out = slices.DeleteFunc(out, func(d core.TurnDoc) bool { return d.TurnID == id })
	}
	for _, d := range tx.puts {
		if i := slices.IndexFunc(out, func(x core.TurnDoc) bool { return x.TurnID == d.TurnID }); i >= 0 {
			out[i] = d
		} else {
			out = append(out, d)
		}
	}
	return out, nil
}

func (tx *fileTx) PutTurn(doc core.TurnDoc) error {
	if !tx.write || tx.done {
		return errReadOnly
	}
	tx.dels = slices.DeleteFunc(tx.dels, func(id string) bool { return id == doc.TurnID })
	tx.puts = append(tx.puts, doc)
	return nil
}

func (tx *fileTx) DeleteTurn(id string) error {
	if !tx.write || tx.done {
		return errReadOnly
	}
	tx.puts = slices.DeleteFunc(tx.puts, func(d core.TurnDoc) bool { return d.TurnID == id })
	tx.dels = append(tx.dels, id)
	return nil
}

// commit writes a unit of work in the order of docs/durability.md and
// changes memory only as far as the disk holds it.
func (s *Store) commit(ctx context.Context, e *teamEntry, tx *fileTx) error {
	changed := !reflect.DeepEqual(e.st, tx.st)
	if tx.letter == nil {
		if len(tx.recs) > 0 {
			for _, r := range tx.recs {
				if err := s.AppendIdempotency(ctx, e.st.Name, r); err != nil {
					return core.StorageError(err)
				}
				e.idem.lines++
				e.remember(r)
			}
		}
		if changed {
			if err := s.SaveTeam(ctx, tx.st); err != nil {
				return core.StorageError(err)
			}
			e.st, e.stale = tx.st, false
		}
		s.commitTurns(ctx, e, tx)
		return nil
	}
	letter := *tx.letter
	if err := s.flushCancels(ctx, e); err != nil {
		return core.StorageError(err)
	}
	if e.stale && !changed {
		// Memory is ahead of disk: saved before a letter could take an
		// id that the disk's intent still means for another.
		if err := s.SaveTeam(ctx, e.st); err != nil {
			return core.StorageError(err)
		}
		e.stale = false
	}
	if len(tx.recs) > 0 {
		s.compactIdempotency(ctx, e)
		for i := range tx.recs {
			l := letter
			tx.recs[i].Letter = &l
			if err := s.AppendIdempotency(ctx, e.st.Name, tx.recs[i]); err != nil {
				s.cancelPending(ctx, e)
				return core.StorageError(err)
			}
			e.idem.lines++
			e.idem.pending = append(e.idem.pending, tx.recs[i])
		}
	}
	if changed {
		withIntent := cloneState(e.st)
		withIntent.Intent = deriveIntent(e.st, tx.st, letter)
		if err := s.SaveTeam(ctx, withIntent); err != nil {
			s.cancelPending(ctx, e)
			return core.StorageError(err)
		}
	}
	rules := tx.st.Rules(letter.Recipient)
	if err := s.AppendInbox(ctx, e.st.Name, rules, tx.prev[letter.Recipient], letter); err != nil {
		s.cancelPending(ctx, e)
		if changed {
			if serr := s.SaveTeam(ctx, e.st); serr != nil {
				e.stale = true
			}
		}
		var ce *core.Error
		if errors.As(err, &ce) {
			return err
		}
		return core.StorageError(err)
	}
	for _, r := range e.idem.pending {
		e.remember(r)
	}
	e.idem.pending = nil
	if changed {
		// The letter is durable with its intent, so a failure here loses
		// nothing: start-up completes the intent. The next commit with a
		// letter saves the state first.
		if err := s.SaveTeam(ctx, tx.st); err != nil {
			s.log.ErrorContext(ctx, "saving team state after a letter failed; the recorded intent covers it", "team", e.st.Name, "err", err)
			e.stale = true
		} else {
			e.stale = false
		}
	}
	e.st = tx.st
	s.commitTurns(ctx, e, tx)
	return nil
}

// commitTurns writes the unit's turn documents. They are records, not
// state the rules depend on: a failed write is logged.
func (s *Store) commitTurns(ctx context.Context, e *teamEntry, tx *fileTx) {
	if len(tx.puts) == 0 && len(tx.dels) == 0 {
		return
	}
	name := e.st.Name
	for _, d := range tx.puts {
		d := d
		if err := s.SaveTurn(context.WithoutCancel(ctx), name, &d); err != nil {
			s.log.WarnContext(ctx, "saving a turn document failed", "team", name, "turn", d.TurnID, "err", err)
		}
	}
	for _, id := range tx.dels {
		if err := s.DeleteTurn(ctx, name, id); err != nil {
			s.log.WarnContext(ctx, "removing an old turn document failed", "team", name, "turn", id, "err", err)
		}
	}
	e.turns, _ = tx.Turns()
}

// Runs: <data>/runs/<id>/result.json, written by the replace recipe. A
// run directory without result.json is a run claimed and not finished.
const (
	runsDir    = "runs"
	resultFile = "result.json"
)

func (s *Store) runDir(id string) string { return filepath.Join(s.dataDir, runsDir, id) }

// PutRun stores a run: its directory, and its result when it has one.
func (s *Store) PutRun(_ context.Context, run core.RunDoc) error {
	if !core.ValidName(run.ID) {
		return fmt.Errorf("mail: invalid run id %q", run.ID)
	}
	if err := s.ensureDir(filepath.Join(s.dataDir, runsDir)); err != nil {
		return fmt.Errorf("mail: create runs directory: %w", err)
	}
	dir := s.runDir(run.ID)
	if err := s.ensureDir(dir); err != nil {
		return fmt.Errorf("mail: create run directory: %w", err)
	}
	if run.Result == nil {
		return nil
	}
	old, _, rerr := s.readRegular(filepath.Join(dir, resultFile), -1)
	_, err := s.replaceFile(dir, resultFile, run.Result, previous{data: old, exists: rerr == nil})
	return err
}

// GetRun reads one run; CodeNotFound when it has no directory.
func (s *Store) GetRun(_ context.Context, id string) (core.RunDoc, error) {
	if !core.ValidName(id) {
		return core.RunDoc{}, core.Errorf(core.CodeNotFound, "No such run.")
	}
	dir := s.runDir(id)
	if fi, err := s.fs.Lstat(dir); err != nil || !fi.IsDir() {
		return core.RunDoc{}, core.Errorf(core.CodeNotFound, "No such run.")
	}
	data, _, err := s.readRegular(filepath.Join(dir, resultFile), -1)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return core.RunDoc{ID: id}, nil
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
// across a crash (RemoveDir).
func (s *Store) DeleteRun(_ context.Context, id string) error {
	if !core.ValidName(id) {
		return nil
	}
	trash, err := s.moveToTrash(filepath.Join(s.dataDir, runsDir), id)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	return s.removeTree(trash)
}

// RunDir is where a run's files beside its document live (a scenario's
// workspace): <data>/runs/<id>.
func (s *Store) RunDir(id string) string { return s.runDir(id) }
