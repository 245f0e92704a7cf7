package pgstore

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"mailroom/internal/core"
)

// errReadOnly refuses a write inside ViewTeam.
var errReadOnly = errors.New("pgstore: a view cannot change the team")

// UpdateTeam implements core.Store: one transaction holding the team's row
// lock from the first read to the commit. The transaction's BEGIN travels
// with the reads (the row's lock first) and its COMMIT with the writes, so
// that a unit of work is two round trips and the reads its function makes;
// or one, on what this replica remembers of the team, when the lock finds
// the row unchanged since (updateCached).
func (s *Store) UpdateTeam(ctx context.Context, name string, fn func(tx core.TeamTx) error) error {
	ctx, cancel := context.WithTimeout(ctx, opTimeout)
	defer cancel()
	conn, err := s.pool.Acquire(ctx)
	if err != nil {
		return storeErr(ctx, err)
	}
	// A connection left inside a transaction (a failed ROLLBACK, a
	// cancelled round trip) is closed by Release, never reused.
	defer conn.Release()
	if e := s.cache.take(name); e != nil {
		done, err := func() (bool, error) {
			defer s.cache.done(name) // a panicking fn included
			return s.updateCached(ctx, conn, name, e, fn)
		}()
		if done {
			return err
		}
	}
	var fnErr error
	err = func() error {
		t, err := loadTeam(ctx, conn, name, true)
		if err != nil {
			return err
		}
		if t.damaged != nil {
			return core.CorruptInbox(t.damaged)
		}
		if fnErr = fn(t); fnErr != nil {
			return fnErr
		}
		if err := t.commit(ctx); err != nil {
			return err
		}
		s.cache.put(name, t.after)
		return nil
	}()
	if err != nil {
		if isNotFound(err) {
			s.cache.forget(name)
		}
		if conn.Conn().PgConn().TxStatus() != 'I' && !conn.Conn().IsClosed() {
			_, _ = conn.Exec(context.WithoutCancel(ctx), `ROLLBACK`)
		}
		err = storeErr(ctx, err)
	}
	if fnErr != nil && errors.Is(err, fnErr) && !lostDatabase(fnErr) {
		return fnErr // unchanged, as the contract says
	}
	return err
}

// updateCached runs fn on e, what this replica's last unit of work on
// the team committed, and commits it in one round trip that first checks,
// under the row's lock, that e is still the team (cache.go). done reports
// whether the unit of work is over, committed (err nil) or failed in a way
// that may have committed (the connection lost during the round trip);
// otherwise nothing was committed and the unit is to run again under the
// lock: fn failed or asked for what the cache does not hold, or the
// database refused the round trip (the team changed meanwhile).
func (s *Store) updateCached(ctx context.Context, conn *pgxpool.Conn, name string, e *cached, fn func(tx core.TeamTx) error) (done bool, err error) {
	t := &teamTx{ctx: ctx, tx: conn, name: name, inboxes: map[string][]core.Message{}, sizes: map[string]int{}}
	cachedTeam(t, e)
	// An error of fn's was decided on the remembered team: it is decided
	// again on the team read under the lock.
	if err := fn(t); err != nil || t.needsLock {
		return false, nil
	}
	err = t.commit(ctx)
	if err == nil {
		s.cache.put(name, t.after)
		return true, nil
	}
	if conn.Conn().PgConn().TxStatus() != 'I' && !conn.Conn().IsClosed() {
		_, _ = conn.Exec(context.WithoutCancel(ctx), `ROLLBACK`)
	}
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) && !unavailable(err) {
		// Refused by the database: the transaction was aborted at the
		// refusal, and its COMMIT skipped. Someone else is working on
		// this team too; for a while its units of work read it under
		// the lock rather than be refused in turn.
		s.cache.refuse(name)
		return false, nil
	}
	s.cache.forget(name)
	return true, storeErr(ctx, err)
}

// isNotFound reports whether err is core's CodeNotFound.
func isNotFound(err error) bool {
	var ce *core.Error
	return errors.As(err, &ce) && ce.Code == core.CodeNotFound
}

// lostDatabase reports whether err, returned by core's function, is in
// fact the database lost under one of tx's reads (not a domain error of
// core's): then the store's storage_unavailable is the answer, not the
// raw error (or core's storage_failed wrapping it) that would tell the
// client a write failed for good.
func lostDatabase(err error) bool {
	var ce *core.Error
	if errors.As(err, &ce) {
		// Core wraps a failed tx call as storage_failed.
		return ce.Code == core.CodeStorageFailed && ce.Err != nil && unavailable(ce.Err)
	}
	return unavailable(err)
}

// ViewTeam implements core.Store: a read-only snapshot transaction.
func (s *Store) ViewTeam(ctx context.Context, name string, fn func(tx core.TeamTx) error) error {
	var fnErr error
	err := s.withTx(ctx, pgx.TxOptions{IsoLevel: pgx.RepeatableRead, AccessMode: pgx.ReadOnly}, func(tx pgx.Tx) error {
		t, err := loadTeam(ctx, tx, name, false)
		if err != nil {
			return err
		}
		t.readOnly = true
		fnErr = fn(t)
		return fnErr
	})
	if fnErr != nil && errors.Is(err, fnErr) && !lostDatabase(fnErr) {
		return fnErr
	}
	return err
}

// loaded is what a unit of work read, to write back only what changed.
type loaded struct {
	requests    map[string][]byte // request id → its JSON as read
	permissions map[string][]byte
	leases      map[string]core.Lease
	// wake is members.wake as read: the members with wake set.
	wake map[string]bool
}

// teamTx is core.TeamTx inside one database transaction.
type teamTx struct {
	ctx         context.Context
	tx          querier
	name        string
	incarnation int64
	version     int64
	// fromCache: the team is what this replica remembered (cache.go);
	// commit checks it under the lock. needsLock: fn asked for what the
	// cache does not hold.
	fromCache bool
	needsLock bool
	// after is the team as commit left it, for the cache.
	after    *cached
	st       *core.TeamState
	damaged  error
	readOnly bool
	orig     loaded

	inboxes map[string][]core.Message // loaded inboxes
	sizes   map[string]int            // their size in bytes
	counts  map[string]inboxCount     // every inbox's size as stored (UpdateTeam)
	letter  *core.Message
	line    []byte // the letter's inbox line
	seq     int    // and its number
	idem    []core.IdempotencyRecord
	// cursors is the read positions this unit moved (members.read_through).
	cursors map[string]int
	// state is teams.state as read: commit rewrites the row only when
	// the state's encoding differs from it.
	state []byte
	// remembered is the decoded state the cached unit of work's copy was
	// made from (cache.go): a state still deeply equal to it encodes to
	// state, so commit need not encode it to find it unchanged.
	remembered *core.TeamState
	// tasks is the board as read and put (nil: not read yet); taskPuts
	// the tasks to write at commit (tasks.go).
	tasks    []core.Task
	taskPuts []core.Task
}

// inboxCount is members.letters, members.inbox_bytes and
// members.read_through.
type inboxCount struct {
	letters int
	bytes   int
	read    int
}

// querier is a transaction (ViewTeam) or a connection inside one that
// UpdateTeam began itself.
type querier interface {
	Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error)
	Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error)
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
	SendBatch(ctx context.Context, b *pgx.Batch) pgx.BatchResults
}

// loadTeam reads team name; with forUpdate it begins the transaction on
// tx, a connection, and locks the team's row.
func loadTeam(ctx context.Context, tx querier, name string, forUpdate bool) (*teamTx, error) {
	q := `SELECT incarnation, version, state FROM teams WHERE name = $1`
	if forUpdate {
		q += ` FOR UPDATE`
	}
	t := &teamTx{ctx: ctx, tx: tx, name: name, inboxes: map[string][]core.Message{}, sizes: map[string]int{}}
	// One round trip: the row's lock first, then what it guards (each
	// statement of the batch reads after the lock is held).
	b := &pgx.Batch{}
	if forUpdate {
		b.Queue(`BEGIN`)
	}
	b.Queue(q, name)
	b.Queue(`SELECT request_id, doc FROM requests WHERE team = $1 ORDER BY seq`, name)
	b.Queue(`SELECT permission_id, doc FROM permissions WHERE team = $1 ORDER BY seq`, name)
	// The counts and cursors, read by views too: a member document
	// counts its letters and unread ones from them (migration 00007).
	b.Queue(`SELECT name, letters, inbox_bytes, read_through FROM members WHERE team = $1`, name)
	br := tx.SendBatch(ctx, b)
	defer br.Close()
	if forUpdate {
		if _, err := br.Exec(); err != nil {
			return nil, err
		}
	}
	var state []byte
	err := br.QueryRow().Scan(&t.incarnation, &t.version, &state)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, core.Errorf(core.CodeNotFound, "No such team.")
	}
	if err != nil {
		return nil, err
	}
	st := &core.TeamState{}
	if err := json.Unmarshal(state, st); err != nil {
		t.damaged = fmt.Errorf("team state: %w", err)
		st = &core.TeamState{Name: name}
	}
	st.Requests = []core.Request{}
	st.Permissions = nil
	t.orig = loaded{requests: map[string][]byte{}, permissions: map[string][]byte{}, leases: map[string]core.Lease{}}
	// The documents are stored as Go encoded them (migration 00005), so
	// the text read is what commit compares its encoding with.
	if err := scanDocs(br, "request", &t.damaged, func(id string, doc []byte, r core.Request) {
		st.Requests = append(st.Requests, r)
		t.orig.requests[id] = doc
	}); err != nil {
		return nil, err
	}
	if err := scanDocs(br, "permission", &t.damaged, func(id string, doc []byte, p core.Permission) {
		st.Permissions = append(st.Permissions, p)
		t.orig.permissions[id] = doc
	}); err != nil {
		return nil, err
	}
	t.counts = map[string]inboxCount{}
	rows, err := br.Query()
	if err != nil {
		return nil, err
	}
	for rows.Next() {
		var member string
		var c inboxCount
		if err := rows.Scan(&member, &c.letters, &c.bytes, &c.read); err != nil {
			return nil, err
		}
		t.counts[member] = c
	}
	if err := rows.Err(); err != nil {
		return nil, err
	}
	if forUpdate {
		// The state's text as stored: Go's encoding of it (CreateTeam,
		// commit, import), so an unchanged state encodes to the same
		// bytes and is not rewritten. Text another encoder wrote (a
		// row from before migration 00005) differs, and is rewritten
		// once, with the same content.
		t.state = state
	}
	if err := br.Close(); err != nil {
		return nil, err
	}
	t.orig.wake = map[string]bool{}
	for _, m := range st.Members {
		if m.Lease != nil {
			t.orig.leases[m.Name] = *m.Lease
		}
		if m.Wake {
			t.orig.wake[m.Name] = true
		}
	}
	t.st = st
	return t, nil
}

// searchText is a body as letters.body holds it (migration 00010): the
// text column cannot hold U+0000, so each is a space there. The column is
// for searching only; a letter is read back from its line, exactly.
func searchText(body string) string {
	return strings.ReplaceAll(body, "\x00", " ")
}

func canonical(v any) []byte {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err) // core's types always encode
	}
	return b
}

// encodeState is the teams.state column: the state without what has a
// table of its own.
func encodeState(st *core.TeamState) ([]byte, error) {
	cp := *st
	cp.Requests = nil
	cp.Permissions = nil
	cp.Intent = nil
	cp.Idempotency = nil
	return json.Marshal(&cp)
}

func (t *teamTx) State() *core.TeamState { return t.st }
func (t *teamTx) Damaged() error         { return t.damaged }

// LoadInbox implements core.TeamTx: the inbox's lines, validated exactly as
// a file of those bytes would be.
func (t *teamTx) LoadInbox(member string) ([]core.Message, error) {
	if msgs, ok := t.inboxes[member]; ok {
		return append([]core.Message(nil), msgs...), nil
	}
	if t.damaged != nil {
		return nil, core.CorruptInbox(t.damaged)
	}
	if err := t.read(); err != nil {
		return nil, err
	}
	data, err := inboxBytes(t.ctx, t.tx, t.name, member)
	if err != nil {
		return nil, err
	}
	if len(data) > t.st.Limits.InboxBytes {
		return nil, core.CorruptInbox(core.ErrInboxTooLarge)
	}
	msgs, err := core.DecodeInbox(data, t.st.Rules(member))
	if err != nil {
		return nil, err
	}
	if t.letter != nil && t.letter.Recipient == member {
		// Appended in this unit, written at commit.
		msgs = append(msgs, *t.letter)
		data = append(data, t.line...)
	}
	t.inboxes[member] = msgs
	t.sizes[member] = len(data)
	return append([]core.Message(nil), msgs...), nil
}

// InboxBytes returns member's inbox exactly as the lesson's file holds it
// (Accept: application/jsonl).
// The lines are validated as LoadInbox validates them: a damaged inbox is
// CodeInboxCorrupt, never served.
func (t *teamTx) InboxBytes(member string) ([]byte, error) {
	if t.damaged != nil {
		return nil, core.CorruptInbox(t.damaged)
	}
	if err := t.read(); err != nil {
		return nil, err
	}
	data, err := inboxBytes(t.ctx, t.tx, t.name, member)
	if err != nil {
		return nil, err
	}
	if _, ok := t.inboxes[member]; !ok {
		if len(data) > t.st.Limits.InboxBytes {
			return nil, core.CorruptInbox(core.ErrInboxTooLarge)
		}
		if _, err := core.DecodeInbox(data, t.st.Rules(member)); err != nil {
			return nil, err
		}
	}
	if t.letter != nil && t.letter.Recipient == member {
		data = append(data, t.line...) // written at commit
	}
	return data, nil
}

func inboxBytes(ctx context.Context, q querier, team, member string) ([]byte, error) {
	rows, err := q.Query(ctx, `SELECT line FROM letters WHERE team = $1 AND member = $2 ORDER BY seq`, team, member)
	if err != nil {
		return nil, err
	}
	var buf bytes.Buffer
	for rows.Next() {
		var line []byte
		if err := rows.Scan(&line); err != nil {
			return nil, err
		}
		buf.Write(line)
	}
	return buf.Bytes(), rows.Err()
}

// InboxLen implements core.InboxCounter: the stored count (members.letters,
// kept with the letters by the statement that inserts one, or a trigger),
// without reading the inbox.
func (t *teamTx) InboxLen(member string) (int, error) {
	if msgs, ok := t.inboxes[member]; ok {
		return len(msgs), nil
	}
	if t.damaged != nil {
		return 0, core.CorruptInbox(t.damaged)
	}
	if t.counts == nil {
		msgs, err := t.LoadInbox(member)
		return len(msgs), err
	}
	n := t.counts[member].letters
	if t.letter != nil && t.letter.Recipient == member {
		n++
	}
	return n, nil
}

// AppendLetter implements core.TeamTx. The letter's row is inserted at
// commit, with the unit's other writes; its id n+1 and the inbox_bytes
// limit are checked against the stored count, and the primary key (team,
// member, seq) refuses a duplicate.
func (t *teamTx) AppendLetter(msg core.Message) error {
	if t.readOnly {
		return errReadOnly
	}
	if t.letter != nil {
		return errors.New("pgstore: a unit of work appends at most one letter")
	}
	if t.damaged != nil {
		return core.CorruptInbox(t.damaged)
	}
	var n, size int
	if msgs, ok := t.inboxes[msg.Recipient]; ok {
		n, size = len(msgs), t.sizes[msg.Recipient]
	} else {
		c, ok := t.counts[msg.Recipient]
		if !ok {
			return fmt.Errorf("pgstore: no member %q", msg.Recipient)
		}
		n, size = c.letters, c.bytes
	}
	seq := n + 1
	if msg.ID != msg.Recipient+"-"+strconv.Itoa(seq) {
		return fmt.Errorf("pgstore: letter id %q after %d letters, want %s-%d", msg.ID, n, msg.Recipient, seq)
	}
	line := core.EncodeInboxLine(msg)
	if size+len(line) > t.st.Limits.InboxBytes {
		return core.Errorf(core.CodeInboxFull, "The recipient's inbox is full.")
	}
	if _, ok := t.inboxes[msg.Recipient]; ok {
		t.inboxes[msg.Recipient] = append(t.inboxes[msg.Recipient], msg)
		t.sizes[msg.Recipient] += len(line)
	}
	m := msg
	t.letter = &m
	t.line = line
	t.seq = seq
	return nil
}

// read is called before a statement inside fn: a unit of work on the
// cache has no transaction yet, and is to run again under the lock.
func (t *teamTx) read() error {
	if t.fromCache {
		t.needsLock = true
		return errNeedsLock
	}
	return nil
}

// Idempotency implements core.TeamTx.
func (t *teamTx) Idempotency(member, key string) (core.IdempotencyRecord, bool, error) {
	for i := len(t.idem) - 1; i >= 0; i-- {
		if r := t.idem[i]; r.Member == member && r.Key == key {
			return r, true, nil
		}
	}
	if err := t.read(); err != nil {
		return core.IdempotencyRecord{}, false, err
	}
	r := core.IdempotencyRecord{Member: member, Key: key}
	var letter []byte
	err := t.tx.QueryRow(t.ctx, `SELECT fingerprint, result, at, letter FROM idempotency
		WHERE team = $1 AND member = $2 AND key = $3`, t.name, member, key).Scan(&r.Fingerprint, &r.Result, &r.At, &letter)
	if errors.Is(err, pgx.ErrNoRows) {
		return core.IdempotencyRecord{}, false, nil
	}
	if err != nil {
		return core.IdempotencyRecord{}, false, err
	}
	r.At = r.At.UTC()
	if time.Since(r.At) >= core.IdempotencyTTL {
		return core.IdempotencyRecord{}, false, nil
	}
	if letter != nil {
		r.Letter = &core.Message{}
		if err := json.Unmarshal(letter, r.Letter); err != nil {
			return core.IdempotencyRecord{}, false, err
		}
	}
	return r, true, nil
}

// PutIdempotency implements core.TeamTx; the record is written at commit,
// with the unit's letter.
func (t *teamTx) PutIdempotency(r core.IdempotencyRecord) error {
	if t.readOnly {
		return errReadOnly
	}
	t.idem = append(t.idem, r)
	return nil
}

// Turns implements core.TeamTx.
func (t *teamTx) Turns() ([]core.TurnDoc, error) {
	if err := t.read(); err != nil {
		return nil, err
	}
	rows, err := t.tx.Query(t.ctx, `SELECT doc FROM turns WHERE team = $1 ORDER BY seq`, t.name)
	if err != nil {
		return nil, err
	}
	out := []core.TurnDoc{}
	for rows.Next() {
		var doc []byte
		if err := rows.Scan(&doc); err != nil {
			return nil, err
		}
		var d core.TurnDoc
		if err := json.Unmarshal(doc, &d); err != nil {
			return nil, fmt.Errorf("pgstore: turn document: %w", err)
		}
		out = append(out, d)
	}
	return out, rows.Err()
}

// PutTurn implements core.TeamTx.
func (t *teamTx) PutTurn(doc core.TurnDoc) error {
	if t.readOnly {
		return errReadOnly
	}
	if err := t.read(); err != nil {
		return err
	}
	b, err := json.Marshal(doc)
	if err != nil {
		return err
	}
	_, err = t.tx.Exec(t.ctx, `INSERT INTO turns (team, turn_id, doc) VALUES ($1, $2, $3)
		ON CONFLICT (team, turn_id) DO UPDATE SET doc = EXCLUDED.doc`, t.name, doc.TurnID, b)
	return err
}

// DeleteTurn implements core.TeamTx.
func (t *teamTx) DeleteTurn(turnID string) error {
	if t.readOnly {
		return errReadOnly
	}
	if err := t.read(); err != nil {
		return err
	}
	_, err := t.tx.Exec(t.ctx, `DELETE FROM turns WHERE team = $1 AND turn_id = $2`, t.name, turnID)
	return err
}

// commit writes what fn changed and commits, in one round trip; for a
// unit of work on the cache the round trip begins the transaction and
// locks the row, refused unless the row is still the team remembered.
// It leaves the team as committed in t.after.
func (t *teamTx) commit(ctx context.Context) error {
	b := &pgx.Batch{}
	if t.fromCache {
		b.Queue(`BEGIN`)
		b.Queue(`SELECT mailroom_lock_team($1, $2, $3)`, t.name, t.incarnation, t.version)
	}
	if m := t.letter; m != nil {
		// The inbox's count and the team's version change in the same
		// statement as the letter (migration 00006: counted, so the
		// trigger that does it for other writers does not fire).
		b.Queue(`WITH counted AS (UPDATE members SET letters = letters + 1, inbox_bytes = inbox_bytes + $7
				WHERE team = $1 AND name = $2),
			bumped AS (UPDATE teams SET version = version + 1 WHERE name = $1)
			INSERT INTO letters (team, member, seq, sender, body, line, counted) VALUES ($1, $2, $3, $4, $5, $6, true)`,
			t.name, m.Recipient, t.seq, m.Sender, searchText(m.Body), t.line, len(t.line))
	}
	for member, n := range t.cursors {
		b.Queue(`WITH bumped AS (UPDATE teams SET version = version + 1 WHERE name = $1)
			UPDATE members SET read_through = $3 WHERE team = $1 AND name = $2`, t.name, member, n)
	}
	for _, r := range t.idem {
		if t.letter != nil {
			l := *t.letter
			r.Letter = &l
		}
		var letter []byte
		if r.Letter != nil {
			letter = canonical(r.Letter)
		}
		b.Queue(`INSERT INTO idempotency (team, member, key, fingerprint, result, at, letter)
			VALUES ($1, $2, $3, $4, $5, $6, $7)
			ON CONFLICT (team, member, key) DO UPDATE SET fingerprint = EXCLUDED.fingerprint,
				result = EXCLUDED.result, at = EXCLUDED.at, letter = EXCLUDED.letter`,
			t.name, r.Member, r.Key, r.Fingerprint, r.Result, r.At, letter)
	}
	if len(t.idem) > 0 {
		// Forget this team's expired records; an index range scan
		// (idempotency_team_at) that finds nothing most of the time.
		b.Queue(`DELETE FROM idempotency WHERE team = $1 AND at < $2`,
			t.name, time.Now().Add(-core.IdempotencyTTL))
	}
	reqs, perms := queueChildren(b, t.st, &t.orig)
	t.queueTasks(b)
	state := t.state
	if t.remembered == nil || !reflect.DeepEqual(t.st, t.remembered) {
		var err error
		if state, err = encodeState(t.st); err != nil {
			return err
		}
	}
	if !bytes.Equal(state, t.state) {
		b.Queue(`UPDATE teams SET state = $2, version = version + 1 WHERE name = $1`, t.name, state)
	}
	// The version the writes left (they bump it, migration 00006).
	// The committed state stays decoded for the next unit of work on
	// this replica: t.st is what state is the text of (the unit is over
	// and core only reads it from here on).
	after := &cached{incarnation: t.incarnation, state: state, requests: reqs, permissions: perms,
		counts: make(map[string]inboxCount, len(t.counts)), tasks: t.tasks, decoded: t.st.UnitCopy()}
	b.Queue(`SELECT version FROM teams WHERE name = $1`, t.name).QueryRow(func(row pgx.Row) error {
		return row.Scan(&after.version)
	})
	b.Queue(`COMMIT`)
	// Once the COMMIT is on its way, its answer is waited for even if
	// the caller gives up (a client gone, a server stopping): cancelled
	// mid-way, the unit of work would be reported failed though it may
	// have committed, and core would undo what it keeps in memory for it
	// (a running turn) while the database holds it. The unit's deadline
	// still bounds the wait.
	cctx := context.WithoutCancel(ctx)
	if dl, ok := ctx.Deadline(); ok {
		var cancel context.CancelFunc
		cctx, cancel = context.WithDeadline(cctx, dl)
		defer cancel()
	}
	if err := t.tx.SendBatch(cctx, b).Close(); err != nil {
		return err
	}
	for k, v := range t.counts {
		after.counts[k] = v
	}
	if m := t.letter; m != nil {
		c := after.counts[m.Recipient]
		c.letters++
		c.bytes += len(t.line)
		after.counts[m.Recipient] = c
	}
	for member, n := range t.cursors {
		c := after.counts[member]
		c.read = n
		after.counts[member] = c
	}
	t.after = after
	return nil
}

// syncChildren writes the requests, permissions and leases of st that
// differ from what was read (orig), in one round trip.
func syncChildren(ctx context.Context, tx pgx.Tx, st *core.TeamState, orig *loaded) error {
	b := &pgx.Batch{}
	_, _ = queueChildren(b, st, orig)
	if b.Len() == 0 {
		return nil
	}
	return tx.SendBatch(ctx, b).Close()
}

// queueChildren queues the writes of the requests, permissions and leases
// of st that differ from what was read (orig), and returns st's requests
// and permissions as stored after them.
func queueChildren(b *pgx.Batch, st *core.TeamState, orig *loaded) (reqs, perms []storedDoc) {
	seen := map[string]bool{}
	for i, r := range st.Requests {
		seen[r.ID] = true
		doc := canonical(r)
		reqs = append(reqs, storedDoc{r.ID, doc})
		if old, ok := orig.requests[r.ID]; ok && bytes.Equal(old, doc) {
			continue
		}
		b.Queue(`INSERT INTO requests (team, seq, request_id, status, doc) VALUES ($1, $2, $3, $4, $5)
			ON CONFLICT (team, request_id) DO UPDATE SET seq = EXCLUDED.seq, status = EXCLUDED.status, doc = EXCLUDED.doc`,
			st.Name, i+1, r.ID, r.Status, doc)
	}
	for id := range orig.requests {
		if !seen[id] {
			b.Queue(`DELETE FROM requests WHERE team = $1 AND request_id = $2`, st.Name, id)
		}
	}
	seen = map[string]bool{}
	for i, p := range st.Permissions {
		seen[p.ID] = true
		doc := canonical(p)
		perms = append(perms, storedDoc{p.ID, doc})
		if old, ok := orig.permissions[p.ID]; ok && bytes.Equal(old, doc) {
			continue
		}
		b.Queue(`INSERT INTO permissions (team, seq, permission_id, doc) VALUES ($1, $2, $3, $4)
			ON CONFLICT (team, permission_id) DO UPDATE SET seq = EXCLUDED.seq, doc = EXCLUDED.doc`,
			st.Name, i+1, p.ID, doc)
	}
	for id := range orig.permissions {
		if !seen[id] {
			b.Queue(`DELETE FROM permissions WHERE team = $1 AND permission_id = $2`, st.Name, id)
		}
	}
	for _, m := range st.Members {
		old, had := orig.leases[m.Name]
		switch {
		case m.Lease != nil && (!had || old.Holder != m.Lease.Holder || !old.Expires.Equal(m.Lease.Expires)):
			b.Queue(`INSERT INTO leases (team, member, holder, expires_at) VALUES ($1, $2, $3, $4)
				ON CONFLICT (team, member) DO UPDATE SET holder = EXCLUDED.holder, expires_at = EXCLUDED.expires_at`,
				st.Name, m.Name, m.Lease.Holder, m.Lease.Expires)
		case m.Lease == nil && had:
			b.Queue(`DELETE FROM leases WHERE team = $1 AND member = $2`, st.Name, m.Name)
		}
		// members.wake mirrors the state, so that a replica starting
		// finds the members to wake without reading every team.
		if m.Wake != orig.wake[m.Name] {
			b.Queue(`UPDATE members SET wake = $3 WHERE team = $1 AND name = $2`, st.Name, m.Name, m.Wake)
		}
	}
	return reqs, perms
}

// scanDocs reads the next result of br, rows of (id, JSON document), and
// hands each document, as stored and decoded, to add. A document that
// does not decode is kept as the team's damage (the first one only), so
// the team is served read-only rather than with a row silently dropped.
func scanDocs[T any](br pgx.BatchResults, kind string, damaged *error, add func(id string, doc []byte, v T)) error {
	rows, err := br.Query()
	if err != nil {
		return err
	}
	defer rows.Close()
	for rows.Next() {
		var id string
		var doc []byte
		if err := rows.Scan(&id, &doc); err != nil {
			return err
		}
		var v T
		if err := json.Unmarshal(doc, &v); err != nil && *damaged == nil {
			*damaged = fmt.Errorf("%s %s: %w", kind, id, err)
		}
		add(id, doc, v)
	}
	return rows.Err()
}

// ReadThrough implements core.TeamTx: members.read_through as read with
// the team (or as this unit moved it).
func (t *teamTx) ReadThrough(member string) (int, error) {
	if n, ok := t.cursors[member]; ok {
		return n, nil
	}
	if t.counts == nil {
		return 0, fmt.Errorf("pgstore: no counts for %q", member)
	}
	return t.counts[member].read, nil
}

// SetReadThrough implements core.TeamTx; the position is written at
// commit, with the unit's other writes.
func (t *teamTx) SetReadThrough(member string, n int) error {
	if t.readOnly {
		return errReadOnly
	}
	if _, ok := t.counts[member]; !ok {
		return fmt.Errorf("pgstore: no member %q", member)
	}
	if t.cursors == nil {
		t.cursors = map[string]int{}
	}
	t.cursors[member] = n
	return nil
}
