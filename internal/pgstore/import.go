package pgstore

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"mailroom/internal/core"
)

// ImportedTeam is one team of another store, as Import copies it.
type ImportedTeam struct {
	State *core.TeamState
	// Inboxes maps a member to its inbox file's exact bytes (the lesson's
	// mailbox format); a member without an entry has an empty inbox.
	Inboxes map[string][]byte
	// Archives maps a member to its archive file's exact bytes: lines as
	// an inbox's, each a letter the member's state marks archived
	// (core.ArchiveMark), in the order they were archived; a member
	// without an entry has archived nothing.
	Archives map[string][]byte
	// Idempotency are the live records, at most one per member and key.
	Idempotency []core.IdempotencyRecord
	// Turns are the turn documents, oldest first.
	Turns []core.TurnDoc
	// ReadThrough maps a member to its read cursor (letters read); a
	// member without an entry has read none.
	ReadThrough map[string]int
	// Tasks are the task board, in id order.
	Tasks []core.Task
}

// ErrNotEmpty refuses an import into a database that holds teams.
var ErrNotEmpty = fmt.Errorf("the database already holds teams; import only into an empty one")

// Import copies teams and runs into the database in one transaction: all
// of them or, on any error, none. It refuses with ErrNotEmpty a database
// that already holds a team. Each inbox is validated as the file store
// validates a file, and stored byte for byte.
func (s *Store) Import(ctx context.Context, teams []ImportedTeam, runs []core.RunDoc) error {
	tx, err := s.pool.Begin(ctx)
	if err != nil {
		return storeErr(ctx, err)
	}
	defer tx.Rollback(context.WithoutCancel(ctx)) //nolint:errcheck // no-op after commit
	// No replica may create a team while the import decides the database
	// is empty and fills it.
	if _, err := tx.Exec(ctx, `LOCK TABLE teams IN EXCLUSIVE MODE`); err != nil {
		return storeErr(ctx, err)
	}
	var n int
	if err := tx.QueryRow(ctx, `SELECT count(*) FROM teams`).Scan(&n); err != nil {
		return storeErr(ctx, err)
	}
	if n > 0 {
		return ErrNotEmpty
	}
	for _, t := range teams {
		if err := importTeam(ctx, tx, t); err != nil {
			return fmt.Errorf("team %s: %w", t.State.Name, err)
		}
	}
	for _, r := range runs {
		var result any
		if r.Result != nil {
			result = string(r.Result)
		}
		if _, err := tx.Exec(ctx, `INSERT INTO runs (id, result) VALUES ($1, $2)`, r.ID, result); err != nil {
			return fmt.Errorf("run %s: %w", r.ID, err)
		}
	}
	return storeErr(ctx, tx.Commit(ctx))
}

func importTeam(ctx context.Context, tx pgx.Tx, t ImportedTeam) error {
	st := t.State
	if st.Requests == nil {
		st.Requests = []core.Request{}
	}
	state, err := encodeState(st)
	if err != nil {
		return err
	}
	if _, err := tx.Exec(ctx, `INSERT INTO teams (name, created_at, state) VALUES ($1, $2, $3)`, st.Name, st.CreatedAt, state); err != nil {
		return err
	}
	for _, m := range st.Members {
		if _, err := tx.Exec(ctx, `INSERT INTO members (team, name, token_hash) VALUES ($1, $2, $3)`, st.Name, m.Name, m.TokenHash); err != nil {
			return err
		}
	}
	if err := syncChildren(ctx, tx, st, &loaded{}); err != nil {
		return err
	}
	for _, m := range st.Members {
		data := t.Inboxes[m.Name]
		if len(data) > st.Limits.InboxBytes {
			return fmt.Errorf("inbox of %s: %w", m.Name, core.CorruptInbox(core.ErrInboxTooLarge))
		}
		msgs, err := core.DecodeInbox(data, st.Rules(m.Name))
		if err != nil {
			return fmt.Errorf("inbox of %s: %w", m.Name, err)
		}
		lines := splitLines(data)
		if len(lines) != len(msgs) {
			return fmt.Errorf("inbox of %s: %d lines for %d letters", m.Name, len(lines), len(msgs))
		}
		for i, msg := range msgs {
			if err := importLetter(ctx, tx, st.Name, msg, lines[i], false); err != nil {
				return err
			}
		}
		if err := importArchive(ctx, tx, st, m, t.Archives[m.Name]); err != nil {
			return fmt.Errorf("archive of %s: %w", m.Name, err)
		}
	}
	for member, n := range t.ReadThrough {
		if _, err := tx.Exec(ctx, `UPDATE members SET read_through = $3 WHERE team = $1 AND name = $2`, st.Name, member, n); err != nil {
			return fmt.Errorf("read cursor of %s: %w", member, err)
		}
	}
	for _, r := range t.Idempotency {
		var letter []byte
		if r.Letter != nil {
			letter, _ = json.Marshal(r.Letter)
		}
		if _, err := tx.Exec(ctx, `INSERT INTO idempotency (team, member, key, fingerprint, result, at, letter)
			VALUES ($1, $2, $3, $4, $5, $6, $7)
			ON CONFLICT (team, member, key) DO UPDATE SET fingerprint = EXCLUDED.fingerprint,
				result = EXCLUDED.result, at = EXCLUDED.at, letter = EXCLUDED.letter`,
			st.Name, r.Member, r.Key, r.Fingerprint, r.Result, r.At, letter); err != nil {
			return err
		}
	}
	for _, d := range t.Turns {
		b, err := json.Marshal(d)
		if err != nil {
			return err
		}
		if _, err := tx.Exec(ctx, `INSERT INTO turns (team, turn_id, doc) VALUES ($1, $2, $3)`, st.Name, d.TurnID, b); err != nil {
			return err
		}
	}
	for i, task := range t.Tasks {
		if task.ID != core.TaskID(i+1) {
			return fmt.Errorf("task %d is %q", i+1, task.ID)
		}
		task.Blocks = nil
		if _, err := tx.Exec(ctx, `INSERT INTO tasks (team, seq, status, doc) VALUES ($1, $2, $3, $4)`, st.Name, i+1, task.Status, canonical(task)); err != nil {
			return err
		}
	}
	return nil
}

// splitLines cuts a file of lines into its lines, newline included.
func splitLines(data []byte) [][]byte {
	lines := bytes.SplitAfter(data, []byte("\n"))
	if len(lines) > 0 && len(lines[len(lines)-1]) == 0 {
		lines = lines[:len(lines)-1]
	}
	return lines
}

// importLetter inserts msg's row, line byte for byte; an archived one is
// not counted in the inbox (migration 00012).
func importLetter(ctx context.Context, tx pgx.Tx, team string, msg core.Message, line []byte, archived bool) error {
	_, n, _ := core.ParseLetterID(msg.ID)
	if _, err := tx.Exec(ctx, `INSERT INTO letters (team, member, seq, sender, body, line, archived) VALUES ($1, $2, $3, $4, $5, $6, $7)`,
		team, msg.Recipient, n, msg.Sender, searchText(msg.Body), line, archived); err != nil {
		return fmt.Errorf("letter %s: %w", msg.ID, err)
	}
	return nil
}

// importArchive validates member m's archive file as the file store does
// (core.DecodeArchive), finds in it every letter m's mark says left the
// inbox, and stores each line, byte for byte, archived.
func importArchive(ctx context.Context, tx pgx.Tx, st *core.TeamState, m core.MemberState, data []byte) error {
	rules := st.Rules(m.Name)
	if _, err := core.DecodeArchive(data, rules); err != nil {
		return err
	}
	lines := splitLines(data)
	if len(lines) != m.Archive.Count() {
		return fmt.Errorf("%d letters for the %d its mark archived", len(lines), m.Archive.Count())
	}
	for _, line := range lines {
		// One line at a time, to pair each letter with its bytes: the
		// whole file was validated above (none twice, each archived).
		msgs, err := core.DecodeArchive(line, rules)
		if err != nil {
			return err
		}
		if !bytes.HasSuffix(line, []byte("\n")) {
			// The file's last line, without its newline: stored as
			// every archived line is, ending in one.
			line = append(line[:len(line):len(line)], '\n')
		}
		if err := importLetter(ctx, tx, st.Name, msgs[0], line, true); err != nil {
			return err
		}
	}
	return nil
}

// LiveIdempotency reduces an idempotency log (oldest first) to the records
// still in force at now: the last record of each member and key, unless a
// later line cancelled it or it expired.
func LiveIdempotency(log []core.IdempotencyRecord, now time.Time) []core.IdempotencyRecord {
	type key struct{ member, key string }
	live := map[key]int{}
	var out []core.IdempotencyRecord
	for _, r := range log {
		k := key{r.Member, r.Key}
		if r.Cancelled {
			if i, ok := live[k]; ok && sameLetter(out[i].Letter, r.Letter) {
				out[i].Member = "" // withdrawn
				delete(live, k)
			}
			continue
		}
		if i, ok := live[k]; ok {
			out[i].Member = ""
		}
		live[k] = len(out)
		out = append(out, r)
	}
	kept := out[:0]
	for _, r := range out {
		if r.Member != "" && now.Sub(r.At) < core.IdempotencyTTL {
			kept = append(kept, r)
		}
	}
	return kept
}

func sameLetter(a, b *core.Message) bool {
	if a == nil || b == nil {
		return a == b
	}
	return a.ID == b.ID
}
