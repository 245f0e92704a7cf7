package pgstore

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"mailroom/internal/core"
)

// errReadOnly refuses a commit of a view.
var errReadOnly = errors.New("pgstore: a view cannot change the team")

// Begin implements core.Store. A unit of work holds one connection: it
// runs on what this replica's last unit of work on the team committed
// (cache.go) when it can, and its commit is then one round trip that
// begins the transaction, locks the team's row on condition that it is
// still the version remembered, writes and commits; a read the cache
// cannot answer takes the lock first (read). Otherwise the unit begins
// the transaction with its reads, the row's lock first, and commits with
// its writes. A view is a read-only snapshot transaction.
func (s *Store) Begin(ctx context.Context, name string, write bool) (core.Unit, error) {
	ctx, cancel := context.WithTimeout(ctx, opTimeout)
	if !write {
		tx, err := s.pool.BeginTx(ctx, pgx.TxOptions{IsoLevel: pgx.RepeatableRead, AccessMode: pgx.ReadOnly})
		if err != nil {
			cancel()
			return nil, storeErr(ctx, err)
		}
		t, err := loadTeam(ctx, tx, name, false)
		if err != nil {
			_ = tx.Rollback(context.WithoutCancel(ctx))
			cancel()
			return nil, storeErr(ctx, err)
		}
		t.s, t.readOnly, t.view, t.cancel = s, true, tx, cancel
		return t, nil
	}
	conn, err := s.pool.Acquire(ctx)
	if err != nil {
		cancel()
		return nil, storeErr(ctx, err)
	}
	if e := s.cache.take(name); e != nil {
		t := &teamTx{ctx: ctx, tx: conn, name: name, inboxes: map[string][]core.Message{}, sizes: map[string]int{}}
		cachedTeam(t, e)
		t.s, t.conn, t.cancel, t.took = s, conn, cancel, true
		return t, nil
	}
	t, err := loadTeam(ctx, conn, name, true)
	if err != nil {
		if isNotFound(err) {
			s.cache.forget(name)
		}
		rollback(ctx, conn)
		conn.Release()
		cancel()
		return nil, storeErr(ctx, err)
	}
	t.s, t.conn, t.cancel, t.locked = s, conn, cancel, true
	return t, nil
}

// rollback ends the transaction conn is in, if any. A connection left
// inside a transaction (a failed ROLLBACK, a cancelled round trip) is
// closed by Release, never reused.
func rollback(ctx context.Context, conn *pgxpool.Conn) {
	if conn.Conn().PgConn().TxStatus() != 'I' && !conn.Conn().IsClosed() {
		_, _ = conn.Exec(context.WithoutCancel(ctx), `ROLLBACK`)
	}
}

// Commit implements core.Unit: cs's writes and the COMMIT in one round
// trip. A unit on the cache whose team changed meanwhile is refused by
// the database (core.ErrConflict), and core runs it again; the team is
// then read under the lock for a while (teamCache.refuse).
func (t *teamTx) Commit(cs *core.ChangeSet) error {
	if t.readOnly || t.done {
		return errReadOnly
	}
	defer t.end()
	before := t.st
	t.st = cs.NewState(t.st)
	t.changed = cs.State != nil || len(cs.Leases) > 0
	t.letter, t.line = cs.Letter, cs.Line
	if t.letter != nil {
		if t.line == nil {
			t.line = core.EncodeInboxLine(*t.letter)
		}
		_, t.seq, _ = core.ParseLetterID(t.letter.ID)
	}
	t.idem, t.cursors, t.taskPuts = cs.Idempotency, cs.Cursors, cs.Tasks
	t.archived = cs.Archived
	t.turnPuts, t.turnDels = cs.PutTurns, cs.DeleteTurns
	if len(cs.Tasks) > 0 {
		board, err := t.Tasks()
		if err != nil {
			return err
		}
		if t.tasks, err = core.ApplyTasks(board, cs.Tasks); err != nil {
			return err
		}
	}
	err := t.commit(t.ctx)
	if err == nil {
		t.s.cache.put(t.name, t.after)
		for member, nums := range cs.Archived {
			t.rememberArchived(member, before.Member(member).Archive, nums)
		}
		return nil
	}
	rollback(t.ctx, t.conn)
	var pgErr *pgconn.PgError
	if t.fromCache && !t.locked && errors.As(err, &pgErr) && !unavailable(err) {
		// Refused by the database: the transaction was aborted at the
		// refusal, and its COMMIT skipped. Someone else is working on
		// this team too; for a while its units of work read it under
		// the lock rather than be refused in turn.
		t.s.cache.refuse(t.name)
		return core.ErrConflict
	}
	t.s.cache.forget(t.name)
	return storeErr(t.ctx, err)
}

// Close implements core.Unit.
func (t *teamTx) Close() error {
	if t.done {
		return nil
	}
	if t.view != nil {
		err := t.view.Commit(t.ctx)
		t.done = true
		t.cancel()
		return storeErr(t.ctx, err)
	}
	rollback(t.ctx, t.conn)
	t.end()
	return nil
}

// end releases what a unit of work holds.
func (t *teamTx) end() {
	t.done = true
	if t.took {
		t.s.cache.done(t.name)
	}
	t.conn.Release()
	t.cancel()
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
	// commit checks it under the lock unless a read took the lock
	// (locked, also set for a unit that read the team under it).
	fromCache bool
	locked    bool
	// What the unit holds until it ends: its store, connection and
	// deadline, the cache entry it took, or a view's transaction.
	s      *Store
	conn   *pgxpool.Conn
	cancel context.CancelFunc
	took   bool
	view   pgx.Tx
	done   bool
	// changed: the commit changes the state.
	changed bool
	// turnPuts and turnDels are the turn documents the commit writes.
	turnPuts []core.TurnDoc
	turnDels []string
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
	// archived is the letters this unit moved to their archive, by
	// member (core.ChangeSet.Archived), and archives the archives read.
	archived map[string][]int
	archives map[string][]core.Message
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
	return json.Marshal(&cp)
}

func (t *teamTx) State() *core.TeamState { return t.st }
func (t *teamTx) Damaged() error         { return t.damaged }

// loadInbox reads and validates member's inbox, once per unit of work.
func (t *teamTx) loadInbox(member string) ([]core.Message, error) {
	if msgs, ok := t.inboxes[member]; ok {
		return msgs, nil
	}
	if t.damaged != nil {
		return nil, core.CorruptInbox(t.damaged)
	}
	if err := t.read(); err != nil {
		return nil, err
	}
	data, err := inboxBytes(t.ctx, t.tx, t.name, member, t.inboxFrom(member))
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
	t.inboxes[member] = msgs
	t.sizes[member] = len(data)
	return msgs, nil
}

// inboxBytes reads member's inbox as its lines (Accept:
// application/jsonl). A damaged inbox is CodeInboxCorrupt, never served.
func (t *teamTx) inboxBytes(member string) ([]byte, error) {
	if t.damaged != nil {
		return nil, core.CorruptInbox(t.damaged)
	}
	if err := t.read(); err != nil {
		return nil, err
	}
	data, err := inboxBytes(t.ctx, t.tx, t.name, member, t.inboxFrom(member))
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
	return data, nil
}

// inboxFrom is the number of the first letter of member's inbox: the
// rows before it are all archived (core.ArchiveMark), so a read of the
// inbox scans the primary key from there.
func (t *teamTx) inboxFrom(member string) int {
	var mark *core.ArchiveMark
	if m := t.st.Member(member); m != nil {
		mark = m.Archive
	}
	return mark.Number(1)
}

// inboxBytes reads the lines of member's inbox, its letters numbered from
// or after from that are not archived.
func inboxBytes(ctx context.Context, q querier, team, member string, from int) ([]byte, error) {
	return lines(ctx, q, `SELECT line FROM letters WHERE team = $1 AND member = $2 AND seq >= $3 AND NOT archived ORDER BY seq`, team, member, from)
}

// lines concatenates the lines a query of letters returns.
func lines(ctx context.Context, q querier, sql string, args ...any) ([]byte, error) {
	rows, err := q.Query(ctx, sql, args...)
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

// InboxSize implements core.Snapshot: the stored counts (members.letters
// and inbox_bytes, kept with the letters by the statement that inserts
// one, or a trigger), without reading the inbox.
func (t *teamTx) InboxSize(member string) (int, int, error) {
	if msgs, ok := t.inboxes[member]; ok {
		return len(msgs), t.sizes[member], nil
	}
	if t.damaged != nil {
		return 0, 0, core.CorruptInbox(t.damaged)
	}
	c, ok := t.counts[member]
	if !ok {
		return 0, 0, fmt.Errorf("pgstore: no member %q", member)
	}
	if mayBeFull(c, t.st.Limits) {
		// A letter refused inbox_full would never reach the database,
		// which confirms only what commits: counts this replica
		// remembers may be stale (another replica archived, or raised
		// the limit), so an inbox that may refuse is confirmed current
		// under the lock first (read; else the unit runs again on the
		// team as stored).
		if err := t.read(); err != nil {
			return 0, 0, err
		}
	}
	return c.letters, c.bytes, nil
}

// mayBeFull reports whether an inbox of counts c may refuse a letter
// under limits l: it holds inbox_messages letters, or has less room than
// the longest line a letter can take (each code point of the body at most
// 6 bytes, a \u00xx escape, and the envelope's names, ids and keys well
// within 512).
func mayBeFull(c inboxCount, l core.Limits) bool {
	return c.letters >= l.InboxMessages || c.bytes+6*l.BodyChars+512 > l.InboxBytes
}

// read is called before a statement of a unit of work: one on the cache
// has no transaction yet, and takes the lock now, on condition that the
// team is still the version remembered; else the unit ends in
// core.ErrConflict and core runs it again.
func (t *teamTx) read() error {
	if !t.fromCache || t.locked {
		return nil
	}
	b := &pgx.Batch{}
	b.Queue(`BEGIN`)
	b.Queue(`SELECT mailroom_lock_team($1, $2, $3)`, t.name, t.incarnation, t.version)
	if err := t.tx.SendBatch(t.ctx, b).Close(); err != nil {
		rollback(t.ctx, t.conn)
		var pgErr *pgconn.PgError
		if errors.As(err, &pgErr) && !unavailable(err) {
			t.s.cache.refuse(t.name)
			return core.ErrConflict
		}
		return storeErr(t.ctx, err)
	}
	t.locked = true
	return nil
}

// Idempotency implements core.Snapshot.
func (t *teamTx) Idempotency(member, key string) (core.IdempotencyRecord, bool, error) {
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
		return core.IdempotencyRecord{}, false, storeErr(t.ctx, err)
	}
	r.At = r.At.UTC()
	if letter != nil {
		r.Letter = &core.Message{}
		if err := json.Unmarshal(letter, r.Letter); err != nil {
			return core.IdempotencyRecord{}, false, err
		}
	}
	return r, true, nil
}

// turns reads the team's turn documents.
func (t *teamTx) turns() ([]core.TurnDoc, error) {
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

// commit writes what fn changed and commits, in one round trip; for a
// unit of work on the cache the round trip begins the transaction and
// locks the row, refused unless the row is still the team remembered.
// It leaves the team as committed in t.after.
func (t *teamTx) commit(ctx context.Context) error {
	b := &pgx.Batch{}
	if t.fromCache && !t.locked {
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
	// The rows archived leave the inbox's counts in the same statement
	// (migration 00012), which says how many bytes they took.
	movedBytes := make(map[string]int, len(t.archived))
	for member, nums := range t.archived {
		b.Queue(`SELECT mailroom_archive($1, $2, $3)`, t.name, member, nums).QueryRow(func(row pgx.Row) error {
			var n int64
			err := row.Scan(&n)
			movedBytes[member] = int(n)
			return err
		})
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
	for _, id := range t.turnDels {
		b.Queue(`DELETE FROM turns WHERE team = $1 AND turn_id = $2`, t.name, id)
	}
	for _, doc := range t.turnPuts {
		b.Queue(`INSERT INTO turns (team, turn_id, doc) VALUES ($1, $2, $3)
			ON CONFLICT (team, turn_id) DO UPDATE SET doc = EXCLUDED.doc`, t.name, doc.TurnID, canonical(doc))
	}
	state := t.state
	if t.changed || state == nil {
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
	for member, nums := range t.archived {
		c := after.counts[member]
		c.letters -= len(nums)
		c.bytes -= movedBytes[member]
		after.counts[member] = c
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

// ReadThrough implements core.Snapshot: members.read_through as read with
// the team.
func (t *teamTx) ReadThrough(member string) (int, error) {
	c, ok := t.counts[member]
	if !ok {
		return 0, fmt.Errorf("pgstore: no counts for %q", member)
	}
	return c.read, nil
}

// The snapshot's reads (core.Snapshot): a database lost under one of them
// is storage_unavailable, as it is for a commit, never an error that
// would tell the client a write failed for good.

// LoadInbox implements core.Snapshot: the inbox's lines, validated exactly
// as a file of those bytes would be.
func (t *teamTx) LoadInbox(member string) ([]core.Message, error) {
	msgs, err := t.loadInbox(member)
	return msgs, storeErr(t.ctx, err)
}

// InboxBytes implements core.Snapshot: the inbox exactly as the lesson's
// file holds it, its lines validated as LoadInbox validates them.
func (t *teamTx) InboxBytes(member string) ([]byte, error) {
	data, err := t.inboxBytes(member)
	return data, storeErr(t.ctx, err)
}

// Turns implements core.Snapshot.
func (t *teamTx) Turns() ([]core.TurnDoc, error) {
	docs, err := t.turns()
	return docs, storeErr(t.ctx, err)
}

// Tasks implements core.Snapshot.
func (t *teamTx) Tasks() ([]core.Task, error) {
	board, err := t.tasksRead()
	return board, storeErr(t.ctx, err)
}
