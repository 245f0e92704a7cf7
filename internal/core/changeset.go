package core

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"slices"
	"time"
)

// A unit of work, as core runs it (docs/storage.md): the store loads the
// team as a Snapshot, core's rules read it and change a private copy
// through a TeamTx that core implements here, and what they changed
// leaves as one ChangeSet, which the store commits atomically with a
// version check. Every check of what may be stored (a letter's id, the
// inbox's byte limit, a task's id, an idempotency record's expiry, a view
// that may not write) is made here, once, whichever store holds the team;
// a store only loads and commits.

// ErrConflict is what Unit.Commit (or a read of a snapshot) returns when
// the team changed since the snapshot was loaded: nothing was stored, and
// core runs the unit of work again on a new snapshot.
var ErrConflict = errors.New("core: the team changed since it was loaded")

// maxAttempts bounds how often one unit of work runs after conflicts.
const maxAttempts = 16

// Snapshot is one team as a store loaded it for a unit of work or a view.
// It is valid until its Unit is committed or closed, and core never
// changes what it returns.
type Snapshot interface {
	// State is the team's state as loaded. Core works on a copy
	// (TeamState.UnitCopy) and never changes it.
	State() *TeamState
	// Damaged is the reason a team's stored data failed validation, nil
	// for a sound team.
	Damaged() error
	// LoadInbox returns the validated letters of member's inbox
	// (docs/spec.md §4.2). A damaged inbox is CodeInboxCorrupt, never
	// empty. The caller must not change the slice.
	LoadInbox(member string) ([]Message, error)
	// InboxBytes returns member's inbox in the lesson's file bytes (the
	// file store: the file itself, as validated; a database: the lines
	// it stored, each exactly EncodeInboxLine of its letter or the
	// imported file's line). An empty inbox is no bytes.
	InboxBytes(member string) ([]byte, error)
	// LoadArchive returns the validated letters of member's archive
	// (archive.go) in the order they were sent: the letters its mark says
	// left the inbox. A damaged archive is CodeInboxCorrupt. The caller
	// must not change the slice.
	LoadArchive(member string) ([]Message, error)
	// InboxSize is how many letters member's inbox holds and how many
	// bytes its lesson's file takes, without reading the letters where
	// the store keeps the counts.
	InboxSize(member string) (letters, bytes int, err error)
	// Idempotency returns the stored record of member's key, expired or
	// not (core tells them apart).
	Idempotency(member, key string) (IdempotencyRecord, bool, error)
	// Turns returns the team's turn documents, oldest first.
	Turns() ([]TurnDoc, error)
	// ReadThrough is member's read cursor: how many letters of its inbox
	// it has read (0: none).
	ReadThrough(member string) (int, error)
	// Tasks returns the team's task board in id order, deleted tasks
	// included. The caller must not change the slice.
	Tasks() ([]Task, error)
}

// Unit is a Snapshot that ends: committed once, or closed. A store
// begins one per unit of work (Store.Begin) and keeps the team as loaded
// until it ends.
type Unit interface {
	Snapshot
	// Commit durably stores cs, all of it or nothing, if the team is
	// still the version the snapshot loaded; ErrConflict (nothing
	// stored) if it is not. It ends the unit; Close after it does
	// nothing. A commit that fails otherwise returns a storage error
	// and leaves the team as it was.
	Commit(cs *ChangeSet) error
	// Close ends a unit that did not commit; a view's Close returns once
	// everything it saw is durable.
	Close() error
}

// ChangeSet is everything one unit of work changes in one team: the
// value a store commits. Its JSON is the file store's log record
// (docs/durability.md), so the names of its fields are stored on disk.
type ChangeSet struct {
	// State is the team's new state, set when anything in it changed
	// but members' leases; nil when nothing did.
	State *TeamState `json:"state,omitempty"`
	// Leases are the members whose lease alone changed, with the new
	// lease (nil: released), so that renewing a turn's lease stores the
	// lease and not the team (set only when State is nil).
	Leases map[string]*Lease `json:"leases,omitempty"`
	// Letter is the letter appended, at the end of its recipient's
	// inbox; Line is its line in the lesson's bytes, encoded once.
	Letter *Message `json:"letter,omitempty"`
	Line   []byte   `json:"-"`
	// Idempotency are the records to remember, their Letter set to the
	// unit's letter.
	Idempotency []IdempotencyRecord `json:"idem,omitempty"`
	// PutTurns replace the turn documents with their ids (or add them);
	// DeleteTurns remove documents.
	PutTurns    []TurnDoc `json:"turn_puts,omitempty"`
	DeleteTurns []string  `json:"turn_dels,omitempty"`
	// Cursors are the read positions moved, by member.
	Cursors map[string]int `json:"cursors,omitempty"`
	// Tasks are the tasks put, in order: each replaces the task with its
	// id or is the next one (ApplyTasks).
	Tasks []Task `json:"tasks,omitempty"`
	// Archived are the letters that left their inbox for the archive,
	// by member: their numbers, ascending. State carries the member's new
	// ArchiveMark and Cursors its cursor moved back by as many; a unit
	// that archives appends no letter.
	Archived map[string][]int `json:"archived,omitempty"`
}

// Empty reports whether cs changes nothing.
func (cs *ChangeSet) Empty() bool {
	return cs.State == nil && len(cs.Leases) == 0 && cs.Letter == nil && len(cs.Idempotency) == 0 &&
		len(cs.PutTurns) == 0 && len(cs.DeleteTurns) == 0 && len(cs.Cursors) == 0 && len(cs.Tasks) == 0 && len(cs.Archived) == 0
}

// NewState returns the state cs leaves when applied to st, the state it
// was made on: cs.State, or st with cs's leases (a copy; st is not
// changed), or st itself when neither changed.
func (cs *ChangeSet) NewState(st *TeamState) *TeamState {
	if cs.State != nil {
		return cs.State
	}
	if len(cs.Leases) == 0 {
		return st
	}
	out := st.UnitCopy()
	for i := range out.Members {
		if l, ok := cs.Leases[out.Members[i].Name]; ok {
			if l != nil {
				x := *l
				l = &x
			}
			out.Members[i].Lease = l
		}
	}
	return out
}

// ApplyTasks returns board with puts applied: each replaces the task
// with its id or, the next id, is added. The board is copied, never
// changed in place.
func ApplyTasks(board, puts []Task) ([]Task, error) {
	if len(puts) == 0 {
		return board, nil
	}
	out := slices.Clone(board)
	for _, t := range puts {
		n := TaskNumber(t.ID)
		switch {
		case n >= 1 && n <= len(out):
			out[n-1] = t
		case n == len(out)+1:
			out = append(out, t)
		default:
			return nil, fmt.Errorf("core: task %q is not on a board of %d tasks, nor the next", t.ID, len(out))
		}
	}
	return out, nil
}

// ApplyTurns returns docs with cs's turn documents deleted and put; a
// copy when cs changes any, docs itself otherwise.
func (cs *ChangeSet) ApplyTurns(docs []TurnDoc) []TurnDoc {
	if len(cs.PutTurns) == 0 && len(cs.DeleteTurns) == 0 {
		return docs
	}
	out := slices.Clone(docs)
	for _, id := range cs.DeleteTurns {
		out = slices.DeleteFunc(out, func(d TurnDoc) bool { return d.TurnID == id })
	}
	for _, d := range cs.PutTurns {
		if i := slices.IndexFunc(out, func(x TurnDoc) bool { return x.TurnID == d.TurnID }); i >= 0 {
			out[i] = d
		} else {
			out = append(out, d)
		}
	}
	return out
}

// Update runs fn as one unit of work on team name of store: fn sees the
// team through tx and changes it through tx; when fn returns nil what it
// changed commits as one ChangeSet, and when it returns an error nothing
// does and Update returns that error unchanged. A conflict (the team
// changed since it was loaded) runs fn again on the team as it is now, so
// fn must have no effect but through tx. A missing team is CodeNotFound;
// a damaged one CodeInboxCorrupt before fn runs.
func Update(ctx context.Context, store Store, name string, fn func(tx TeamTx) error) error {
	return update(ctx, store, name, time.Now, fn)
}

// update is Update on the clock now, which tells a live idempotency record
// from an expired one.
func update(ctx context.Context, store Store, name string, now func() time.Time, fn func(tx TeamTx) error) error {
	for attempt := 1; ; attempt++ {
		err := runUnit(ctx, store, name, now(), fn)
		if !errors.Is(err, ErrConflict) {
			return err
		}
		if attempt == maxAttempts {
			return &Error{Code: CodeStorageFailed, Message: "The team changed under every attempt to write it; try again.", Err: err}
		}
		if err := ctx.Err(); err != nil {
			return StorageError(err)
		}
	}
}

func runUnit(ctx context.Context, store Store, name string, now time.Time, fn func(tx TeamTx) error) (err error) {
	u, err := store.Begin(ctx, name, true)
	if err != nil {
		return err
	}
	defer func() {
		if cerr := u.Close(); err == nil {
			err = cerr
		}
	}()
	if d := u.Damaged(); d != nil {
		return DamagedError(d)
	}
	tx := newTxn(u, true, now)
	if err := fn(tx); err != nil {
		return err
	}
	cs := tx.changes()
	if cs.Empty() {
		return nil
	}
	return u.Commit(cs)
}

// View runs fn on a consistent view of team name of store. tx refuses
// every change. A damaged team is viewed (tx.Damaged says why); its
// inboxes fail with CodeInboxCorrupt.
func View(ctx context.Context, store Store, name string, fn func(tx TeamTx) error) error {
	return view(ctx, store, name, time.Now(), fn)
}

func view(ctx context.Context, store Store, name string, now time.Time, fn func(tx TeamTx) error) (err error) {
	u, err := store.Begin(ctx, name, false)
	if err != nil {
		return err
	}
	defer func() {
		if cerr := u.Close(); err == nil {
			err = cerr
		}
	}()
	return fn(newTxn(u, false, now))
}

// errReadOnly refuses a change inside View.
var errReadOnly = errors.New("core: a view cannot change the team")

// txn is core's TeamTx: a snapshot, a private copy of its state, and the
// changes made so far, which every read sees.
type txn struct {
	snap  Snapshot
	write bool
	now   time.Time
	base  *TeamState // the snapshot's, never changed
	st    *TeamState // the unit's copy

	letter   *Message
	line     []byte
	recs     []IdempotencyRecord
	puts     []TurnDoc
	dels     []string
	cursors  map[string]int
	taskPuts []Task
	archived map[string][]int
}

func newTxn(snap Snapshot, write bool, now time.Time) *txn {
	base := snap.State()
	st := base.UnitCopy()
	if st.Requests == nil {
		st.Requests = []Request{}
	}
	return &txn{snap: snap, write: write, now: now, base: base, st: st}
}

func (t *txn) State() *TeamState { return t.st }
func (t *txn) Damaged() error    { return t.snap.Damaged() }

func (t *txn) writable() error {
	if !t.write {
		return errReadOnly
	}
	return nil
}

func (t *txn) LoadInbox(member string) ([]Message, error) {
	items, err := t.snap.LoadInbox(member)
	if err != nil {
		return nil, err
	}
	if moved := t.archived[member]; len(moved) > 0 {
		items = slices.DeleteFunc(slices.Clone(items), func(m Message) bool {
			_, ok := slices.BinarySearch(moved, letterNumberOf(m))
			return ok
		})
	}
	if t.letter != nil && t.letter.Recipient == member {
		return append(slices.Clip(items), *t.letter), nil
	}
	return items, nil
}

func (t *txn) InboxBytes(member string) ([]byte, error) {
	if len(t.archived[member]) > 0 {
		items, err := t.LoadInbox(member)
		if err != nil {
			return nil, err
		}
		var data []byte
		for _, m := range items {
			data = append(data, EncodeInboxLine(m)...)
		}
		return data, nil
	}
	data, err := t.snap.InboxBytes(member)
	if err != nil {
		return nil, err
	}
	if t.letter != nil && t.letter.Recipient == member {
		return append(slices.Clip(data), t.line...), nil
	}
	return data, nil
}

// InboxLen implements InboxCounter.
func (t *txn) InboxLen(member string) (int, error) {
	n, _, err := t.snap.InboxSize(member)
	if t.letter != nil && t.letter.Recipient == member {
		n++
	}
	return n - len(t.archived[member]), err
}

// LoadArchive is the snapshot's archive with the letters this unit
// archived.
func (t *txn) LoadArchive(member string) ([]Message, error) {
	items, err := t.snap.LoadArchive(member)
	if err != nil || len(t.archived[member]) == 0 {
		return items, err
	}
	inbox, err := t.snap.LoadInbox(member)
	if err != nil {
		return nil, err
	}
	out := slices.Clone(items)
	for _, m := range inbox {
		if _, ok := slices.BinarySearch(t.archived[member], letterNumberOf(m)); ok {
			out = append(out, m)
		}
	}
	slices.SortFunc(out, func(a, b Message) int { return letterNumberOf(a) - letterNumberOf(b) })
	return out, nil
}

// ArchivePage implements ArchivePager over the snapshot's pages when it
// reads them itself, unless this unit archived letters of member.
func (t *txn) ArchivePage(member string, after, limit int) ([]Message, error) {
	if p, ok := t.snap.(ArchivePager); ok && len(t.archived[member]) == 0 {
		return p.ArchivePage(member, after, limit)
	}
	items, err := t.LoadArchive(member)
	if err != nil {
		return nil, err
	}
	return PageOf(items, after, limit), nil
}

// ArchiveLetters moves the letters numbered moved (ascending, all in the
// inbox) out of member's inbox, mark being the member's new ArchiveMark.
// A unit archives once, and appends no letter besides.
func (t *txn) ArchiveLetters(member string, mark *ArchiveMark, moved []int) error {
	if err := t.writable(); err != nil {
		return err
	}
	m := t.st.Member(member)
	if m == nil {
		return fmt.Errorf("core: no member %q", member)
	}
	if t.letter != nil || len(t.archived) > 0 {
		return errors.New("core: a unit of work that archives appends no letter and archives once")
	}
	if len(moved) == 0 || mark.Count() != m.Archive.Count()+len(moved) {
		return fmt.Errorf("core: archive of %d letters from %d to %d archived", len(moved), m.Archive.Count(), mark.Count())
	}
	for _, n := range moved {
		if !mark.Archived(n) || m.Archive.Archived(n) {
			return fmt.Errorf("core: letter %d is not one the archive takes", n)
		}
	}
	m.Archive = mark
	t.archived = map[string][]int{member: slices.Clone(moved)}
	return nil
}

// AppendLetter checks that msg is the next letter of its recipient's
// inbox and that its line fits the inbox's byte limit: the limits of
// what a store may hold, checked here once for every store.
func (t *txn) AppendLetter(msg Message) error {
	if err := t.writable(); err != nil {
		return err
	}
	if t.letter != nil || len(t.archived) > 0 {
		return errors.New("core: a unit of work appends at most one letter, and none when it archives")
	}
	if t.st.Member(msg.Recipient) == nil {
		return fmt.Errorf("core: no member %q", msg.Recipient)
	}
	n, size, err := t.snap.InboxSize(msg.Recipient)
	if err != nil {
		return err
	}
	if want := fmt.Sprintf("%s-%d", msg.Recipient, t.st.Member(msg.Recipient).Archive.Next(n)); msg.ID != want {
		return fmt.Errorf("core: letter id %q after %d letters, want %s", msg.ID, n, want)
	}
	line := EncodeInboxLine(msg)
	if size+len(line) > t.st.Limits.InboxBytes {
		return &Error{Code: CodeInboxFull, Message: "The recipient's inbox file would exceed its byte limit; nothing was written.", Err: ErrInboxTooLarge}
	}
	t.letter, t.line = &msg, line
	return nil
}

// Idempotency returns member's live record of key: this unit's, else the
// stored one unless it expired.
func (t *txn) Idempotency(member, key string) (IdempotencyRecord, bool, error) {
	for _, r := range slices.Backward(t.recs) {
		if r.Member == member && r.Key == key {
			return r, true, nil
		}
	}
	r, ok, err := t.snap.Idempotency(member, key)
	if err != nil || !ok || r.Expired(t.now) {
		return IdempotencyRecord{}, false, err
	}
	return r, true, nil
}

func (t *txn) PutIdempotency(r IdempotencyRecord) error {
	if err := t.writable(); err != nil {
		return err
	}
	t.recs = append(t.recs, r)
	return nil
}

func (t *txn) Turns() ([]TurnDoc, error) {
	docs, err := t.snap.Turns()
	if err != nil {
		return nil, err
	}
	// A copy, made once: the caller may reorder it, and the store's is
	// shared. ApplyTurns copies when the unit put or deleted a document.
	if len(t.puts) == 0 && len(t.dels) == 0 {
		return slices.Clone(docs), nil
	}
	cs := ChangeSet{PutTurns: t.puts, DeleteTurns: t.dels}
	return cs.ApplyTurns(docs), nil
}

func (t *txn) PutTurn(doc TurnDoc) error {
	if err := t.writable(); err != nil {
		return err
	}
	t.dels = slices.DeleteFunc(t.dels, func(id string) bool { return id == doc.TurnID })
	t.puts = append(slices.DeleteFunc(t.puts, func(d TurnDoc) bool { return d.TurnID == doc.TurnID }), doc)
	return nil
}

func (t *txn) DeleteTurn(id string) error {
	if err := t.writable(); err != nil {
		return err
	}
	t.puts = slices.DeleteFunc(t.puts, func(d TurnDoc) bool { return d.TurnID == id })
	if !slices.Contains(t.dels, id) {
		t.dels = append(t.dels, id)
	}
	return nil
}

func (t *txn) ReadThrough(member string) (int, error) {
	if n, ok := t.cursors[member]; ok {
		return n, nil
	}
	return t.snap.ReadThrough(member)
}

func (t *txn) SetReadThrough(member string, n int) error {
	if err := t.writable(); err != nil {
		return err
	}
	if t.st.Member(member) == nil {
		return fmt.Errorf("core: no member %q", member)
	}
	if t.cursors == nil {
		t.cursors = map[string]int{}
	}
	t.cursors[member] = n
	return nil
}

func (t *txn) Tasks() ([]Task, error) {
	board, err := t.snap.Tasks()
	if err != nil {
		return nil, err
	}
	return ApplyTasks(board, t.taskPuts)
}

// PutTask checks that task is on the board or the next one, so that no
// task id is ever given twice.
func (t *txn) PutTask(task Task) error {
	if err := t.writable(); err != nil {
		return err
	}
	board, err := t.snap.Tasks()
	if err != nil {
		return err
	}
	// The board's length after this unit's puts so far: ids are given
	// in order, so the last new one is the highest.
	n := len(board)
	for _, p := range t.taskPuts {
		n = max(n, TaskNumber(p.ID))
	}
	if k := TaskNumber(task.ID); k < 1 || k > n+1 {
		return fmt.Errorf("core: task %q is not on a board of %d tasks, nor the next", task.ID, n)
	}
	task.Blocks = nil
	t.taskPuts = append(t.taskPuts, task)
	return nil
}

// changes is the unit's ChangeSet.
func (t *txn) changes() *ChangeSet {
	cs := &ChangeSet{Letter: t.letter, Line: t.line, PutTurns: t.puts, DeleteTurns: t.dels, Cursors: t.cursors, Tasks: t.taskPuts, Archived: t.archived}
	for _, r := range t.recs {
		if t.letter != nil {
			l := *t.letter
			r.Letter = &l
		}
		cs.Idempotency = append(cs.Idempotency, r)
	}
	cs.State, cs.Leases = diffState(t.base, t.st)
	return cs
}

// diffState compares a unit's state st with base, the state it was
// copied from: nothing changed (nil, nil); only members' leases (nil and
// the new leases by member); or anything else (st). Histories and the
// other values a unit only ever replaces are shared by the copy
// (UnitCopy): untouched tells the usual case, nothing changed, from
// their identity, and the deep comparison below runs only when it
// cannot.
func diffState(base, st *TeamState) (*TeamState, map[string]*Lease) {
	if untouched(base, st) {
		return nil, nil
	}
	if len(base.Members) != len(st.Members) {
		return st, nil
	}
	a, b := *base, *st
	a.Members, b.Members = nil, nil
	if len(a.Requests) == 0 && len(b.Requests) == 0 {
		a.Requests, b.Requests = nil, nil
	}
	if !reflect.DeepEqual(a, b) {
		return st, nil
	}
	var leases map[string]*Lease
	for i := range st.Members {
		x, y := base.Members[i], st.Members[i]
		lx, ly := x.Lease, y.Lease
		x.Lease, y.Lease = nil, nil
		if !reflect.DeepEqual(x, y) {
			return st, nil
		}
		if sameLease(lx, ly) {
			continue
		}
		if leases == nil {
			leases = map[string]*Lease{}
		}
		leases[y.Name] = ly
	}
	return nil, leases
}

// untouched reports, without reflection, that st is still its base: every
// field of the team and its members equal by value, and every slice and
// pointer a unit only ever replaces (UnitCopy) still the base's own. It
// answers false whenever it cannot tell (a replaced slice, pending
// requests or permissions), and diffState then compares deeply: most
// units of work (a send, a read, a refusal) leave the state as it was, and
// a deep comparison of it was a few per cent of a send's CPU.
// TestUntouchedKnowsEveryField holds it to every field of the types.
func untouched(base, st *TeamState) bool {
	if base.Name != st.Name || base.CreatedAt != st.CreatedAt || base.Limits != st.Limits ||
		base.Purpose != st.Purpose || base.Model != st.Model || base.Workspace != st.Workspace ||
		base.HostPermission != st.HostPermission || base.ReservationSeq != st.ReservationSeq ||
		!sameBacking(base.Reservations, st.Reservations) || !sameBacking(base.Acks, st.Acks) ||
		len(base.Requests) != 0 || len(st.Requests) != 0 ||
		len(base.Permissions) != 0 || len(st.Permissions) != 0 || (base.Permissions == nil) != (st.Permissions == nil) ||
		len(base.Members) != len(st.Members) {
		return false
	}
	for i := range st.Members {
		x, y := &base.Members[i], &st.Members[i]
		if x.Name != y.Name || x.Role != y.Role || x.Status != y.Status || x.Turns != y.Turns ||
			!sameBacking(x.History, y.History) || x.TokenHash != y.TokenHash || x.Usage != y.Usage ||
			x.ModelRequests != y.ModelRequests || !sameLease(x.Lease, y.Lease) || x.Model != y.Model ||
			x.Wake != y.Wake || x.WakeHeld != y.WakeHeld || x.WakeHeldReason != y.WakeHeldReason ||
			!sameBacking(x.Attended, y.Attended) || !sameBacking(x.Skills, y.Skills) || x.Archive != y.Archive {
			return false
		}
	}
	return true
}

// sameBacking reports that x and y are one slice: the same length, both
// nil or neither, and (when not empty) the same first element.
func sameBacking[T any](x, y []T) bool {
	if len(x) != len(y) || (x == nil) != (y == nil) {
		return false
	}
	return len(x) == 0 || &x[0] == &y[0]
}

func sameLease(a, b *Lease) bool {
	if a == nil || b == nil {
		return a == b
	}
	return a.Holder == b.Holder && a.Expires.Equal(b.Expires)
}
