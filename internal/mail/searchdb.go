package mail

import (
	"cmp"
	"context"
	"database/sql"
	"encoding/hex"
	"errors"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"

	_ "modernc.org/sqlite" // the "sqlite" database/sql driver

	"mailroom/internal/core"
)

// The index itself (docs/api.md "Search"): SQLite's full-text search,
// FTS5, in <data>/search/letters.db. SQLite is the engine here because
// indexing a letter costs it about a tenth of a send (BENCHMARKS.md,
// "Search over 100,000 letters"), and it holds no rule: what a word is,
// what a letter matches and who may see it stay core's, checked on every
// letter a hit names.
//
// Two tables:
//
//   - teams: one row per team incarnation (teamKey), numbered once and
//     never again (AUTOINCREMENT);
//   - words: a contentless FTS5 table (no copy of any letter) of three
//     columns: the letter's id, kept and not searched (contentless_unindexed:
//     FTS5 keeps it in its own table, by row), the party tokens (sender
//     and recipient) and the body's words in order, each as appendToken
//     writes it, with their positions (phrases; bm25, the order of hits,
//     needs the counts they give).
//
// A team's letters have the rows of its own range (teamRows): the team's
// number in the high bits, then the letters in the order they were
// indexed. A search asks for its team's range, which FTS5 reads as a seek
// in each word's list of rows, so that it ranks and pages only its team's
// letters while every team shares one list per word (bm25's statistics
// count every team's letters).
//
// The database is written without waiting for the disk (synchronous NORMAL
// in WAL mode: a committed batch survives the process, not a power cut);
// what a crash lost is indexed again at the next start (catchUpSearch).

// searchFile is the index's database in searchDir.
const searchFile = "letters.db"

// searchSchema is the index's layout (PRAGMA user_version). An index of
// another layout, or no database at all (a directory bleve left, from
// before), is made anew from the inboxes.
const searchSchema = 2

// searchSchemaSQL makes the index. FTS5 keeps a transaction's words in
// memory up to hashsize bytes (1 MiB unless set) and writes them out as a
// segment at the commit or when that fills; 32 MiB holds a batch of
// letters of the usual size, so that a batch makes one segment, not
// several to merge. It merges segments of a level once automerge of them
// are there (4 unless set): at 8, a letter's words are written again
// fewer times over the index's life (a fifth of indexing's CPU at 4), and
// a search reads at most that many segments of a level.
const searchSchemaSQL = `
CREATE TABLE teams(id INTEGER PRIMARY KEY AUTOINCREMENT, key TEXT NOT NULL UNIQUE);
CREATE VIRTUAL TABLE words USING fts5(letter UNINDEXED, party, body, content='', contentless_delete=1, contentless_unindexed=1, tokenize='ascii');
INSERT INTO words(words, rank) VALUES('hashsize', 33554432);
INSERT INTO words(words, rank) VALUES('automerge', 8);
PRAGMA user_version = 2;
`

// searchConns bounds the index's connections: the indexer's one writer
// and searches beside it (WAL lets readers run while it writes).
const searchConns = 4

// openIndexDB opens the index's database at path with the settings every
// connection needs.
func openIndexDB(path string) (*sql.DB, error) {
	abs, err := filepath.Abs(path)
	if err != nil {
		return nil, err
	}
	// A file: URI, so that a '?' or '#' in the data directory's path is
	// escaped rather than read as the start of the parameters.
	dsn := (&url.URL{Scheme: "file", Path: abs}).String() +
		"?_pragma=busy_timeout(10000)&_pragma=journal_mode(WAL)&_pragma=synchronous(NORMAL)"
	db, err := sql.Open("sqlite", dsn)
	if err != nil {
		return nil, err
	}
	db.SetMaxOpenConns(searchConns)
	db.SetMaxIdleConns(searchConns)
	return db, nil
}

// openSearchDB opens the index in dir. An index that is missing, or that
// is not a database of this layout, is made anew, empty; why is the reason
// for the operator's log ("" when it was sound or only missing). Reading
// the whole index for damage takes seconds for a large one, so it is left
// to checkSearchDB, off the start's path.
func openSearchDB(dir string) (db *sql.DB, why string, err error) {
	path := filepath.Join(dir, searchFile)
	if _, err := os.Lstat(path); err == nil {
		db, err := openIndexDB(path)
		if err == nil {
			var version int
			if err = db.QueryRow(`PRAGMA user_version`).Scan(&version); err == nil && version != searchSchema {
				err = fmt.Errorf("index layout %d, want %d", version, searchSchema)
			}
			if err == nil {
				return db, "", nil
			}
			_ = db.Close()
		}
		why = err.Error()
	}
	db, err = newSearchIndex(dir)
	return db, why, err
}

// checkSearchDB reads the whole index and says why it is damaged, if it
// is.
func checkSearchDB(ctx context.Context, db *sql.DB) error {
	var verdict string
	if err := db.QueryRowContext(ctx, `PRAGMA quick_check`).Scan(&verdict); err != nil {
		return err
	}
	if verdict != "ok" {
		return fmt.Errorf("quick check: %s", verdict)
	}
	// The full-text table's own structures, which quick_check does not
	// read.
	_, err := db.ExecContext(ctx, `INSERT INTO words(words, rank) VALUES('integrity-check', 0)`)
	return err
}

// newSearchIndex makes an empty index in dir, removing whatever was there.
func newSearchIndex(dir string) (*sql.DB, error) {
	if err := os.RemoveAll(dir); err != nil {
		return nil, err
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, err
	}
	db, err := openIndexDB(filepath.Join(dir, searchFile))
	if err != nil {
		return nil, err
	}
	if _, err := db.Exec(searchSchemaSQL); err != nil {
		_ = db.Close()
		return nil, err
	}
	return db, nil
}

// teamRowBits is how many low bits of a row number the team's letters
// number within its range: 2^40 letters per team, 2^23 teams.
const teamRowBits = 40

// maxIndexTeams bounds the teams' numbers, so that every row fits in 63
// bits: 8,388,608 team incarnations over the index's life.
const maxIndexTeams = 1 << (63 - teamRowBits)

// teamRows is the range of rows of the team numbered id.
func teamRows(id int64) (lo, hi int64) {
	lo = id << teamRowBits
	return lo, lo + 1<<teamRowBits - 1
}

// appendToken appends word as the index holds it: the word itself when it
// is plain ASCII letters and digits (most are), else "x" and its bytes in
// hex, so that SQLite's ascii tokenizer reads every word of core's as
// exactly one token, whatever its script. Two words may share a token ("é"
// and the plain word "xc3a9"); a hit is always matched again on the letter
// (core.MatchLetter), so that costs only a wasted lookup.
func appendToken(b []byte, word string) []byte {
	for i := 0; i < len(word); i++ {
		if c := word[i]; (c < 'a' || c > 'z') && (c < '0' || c > '9') {
			b = append(b, 'x')
			return hex.AppendEncode(b, []byte(word))
		}
	}
	return append(b, word...)
}

// partyToken is the token of a member as sender (s) or recipient (r), in
// its own column, which queries name.
func partyToken(role byte, member string) string {
	return string(role) + hex.EncodeToString([]byte(member))
}

// bodyTokens is the body's words as the index holds them, in order. A
// body of ASCII only is given as it is: its words by core's rule (runs of
// letters and digits, lower case) are exactly the ascii tokenizer's tokens
// (it separates at every other ASCII byte and folds A-Z), and each is
// plain, so appendToken would write it as it is.
func bodyTokens(body string) string {
	for i := 0; i < len(body); i++ {
		if body[i] >= 0x80 {
			return wordTokens(body)
		}
	}
	return body
}

// wordTokens is bodyTokens for any body: core's words, each as
// appendToken writes it, between spaces.
func wordTokens(body string) string {
	spans := core.WordSpans(body)
	b := make([]byte, 0, len(body)+len(spans))
	for _, w := range spans {
		if len(b) > 0 {
			b = append(b, ' ')
		}
		b = appendToken(b, w.Word)
	}
	return string(b)
}

// indexLetters adds letters to the index in one transaction and says how
// many it added. A letter marked recheck (the start's pass may have
// indexed it) that the index holds already is left as it is.
func indexLetters(ctx context.Context, db *sql.DB, letters []tailLetter) (int, error) {
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		return 0, err
	}
	defer func() { _ = tx.Rollback() }()
	// The teams' numbers, next rows and held letters first: a statement
	// that needs a statement journal (an upsert, RETURNING) makes FTS5
	// write out the words it holds in memory, and the words of a batch are
	// to be written once, at its commit.
	type teamNext struct {
		id, next int64
		held     map[string]bool // the letters indexed, for a recheck
	}
	teams := map[string]*teamNext{}
	for _, t := range letters {
		team := teams[t.key]
		if team == nil {
			var id, last int64
			if err := tx.QueryRowContext(ctx, `INSERT INTO teams(key) VALUES(?) ON CONFLICT(key) DO UPDATE SET key = excluded.key RETURNING id`, t.key).Scan(&id); err != nil {
				return 0, err
			}
			if id >= maxIndexTeams {
				// Numbers are never reused; an index made anew starts at 1.
				return 0, fmt.Errorf("mail: search index: %d team incarnations numbered; remove %s to rebuild the index", id, filepath.Join(searchDir, searchFile))
			}
			lo, hi := teamRows(id)
			if err := tx.QueryRowContext(ctx, `SELECT coalesce((SELECT rowid FROM words WHERE rowid BETWEEN ? AND ? ORDER BY rowid DESC LIMIT 1), ?)`, lo, hi, lo-1).Scan(&last); err != nil {
				return 0, err
			}
			team = &teamNext{id: id, next: last + 1}
			teams[t.key] = team
		}
		if t.recheck && team.held == nil {
			if team.held, err = heldLetters(ctx, tx, team.id); err != nil {
				return 0, err
			}
		}
	}
	// Team by team, in the order of their ranges, so that rows only grow
	// within the transaction: FTS5 writes out what it holds whenever a row
	// comes before the last one.
	sorted := slices.Clone(letters)
	slices.SortStableFunc(sorted, func(a, b tailLetter) int { return cmp.Compare(teams[a.key].id, teams[b.key].id) })
	words, err := tx.PrepareContext(ctx, `INSERT INTO words(rowid, letter, party, body) VALUES(?, ?, ?, ?)`)
	if err != nil {
		return 0, err
	}
	defer func() { _ = words.Close() }()
	added := 0
	for _, t := range sorted {
		team := teams[t.key]
		if team.held != nil {
			if team.held[t.msg.ID] {
				continue // indexed already
			}
			team.held[t.msg.ID] = true
		}
		if _, hi := teamRows(team.id); team.next > hi {
			return 0, fmt.Errorf("mail: search index: team %d has no rows left", team.id)
		}
		party := partyToken('s', t.msg.Sender) + " " + partyToken('r', t.msg.Recipient)
		if _, err := words.ExecContext(ctx, team.next, t.msg.ID, party, bodyTokens(t.msg.Body)); err != nil {
			return 0, err
		}
		team.next++
		added++
	}
	return added, tx.Commit()
}

// querier is a database or a transaction of it.
type querier interface {
	QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error)
}

// heldLetters is the ids of the letters of the team numbered id that the
// index holds.
func heldLetters(ctx context.Context, db querier, id int64) (map[string]bool, error) {
	lo, hi := teamRows(id)
	rows, err := db.QueryContext(ctx, `SELECT letter FROM words WHERE rowid BETWEEN ? AND ?`, lo, hi)
	if err != nil {
		return nil, err
	}
	defer func() { _ = rows.Close() }()
	held := map[string]bool{}
	for rows.Next() {
		var letter string
		if err := rows.Scan(&letter); err != nil {
			return nil, err
		}
		held[letter] = true
	}
	return held, rows.Err()
}

// teamIndexID is the number of the team with key in the index, with ok
// false when the index holds none of its letters.
func teamIndexID(ctx context.Context, db *sql.DB, key string) (id int64, ok bool, err error) {
	err = db.QueryRowContext(ctx, `SELECT id FROM teams WHERE key = ?`, key).Scan(&id)
	if errors.Is(err, sql.ErrNoRows) {
		return 0, false, nil
	}
	return id, err == nil, err
}

// countTeamLetters is how many letters of the team with key the index
// holds.
func countTeamLetters(ctx context.Context, db *sql.DB, key string) (int, error) {
	var n int
	id, ok, err := teamIndexID(ctx, db, key)
	if err != nil || !ok {
		return 0, err
	}
	lo, hi := teamRows(id)
	err = db.QueryRowContext(ctx, `SELECT count(*) FROM words WHERE rowid BETWEEN ? AND ?`, lo, hi).Scan(&n)
	return n, err
}

// removeTeamLetters removes every letter of the team with key from the
// index, searchBatch at a time.
func removeTeamLetters(ctx context.Context, db *sql.DB, key string) error {
	id, ok, err := teamIndexID(ctx, db, key)
	if err != nil || !ok {
		return err
	}
	for {
		n, err := removeSomeLetters(ctx, db, id)
		if err != nil {
			return err
		}
		if n == 0 {
			_, err := db.ExecContext(ctx, `DELETE FROM teams WHERE id = ?`, id)
			return err
		}
	}
}

// removeSomeLetters removes up to searchBatch letters of the team numbered
// id, in one transaction, and says how many.
func removeSomeLetters(ctx context.Context, db *sql.DB, id int64) (int, error) {
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		return 0, err
	}
	defer func() { _ = tx.Rollback() }()
	lo, hi := teamRows(id)
	rows, err := tx.QueryContext(ctx, `SELECT rowid FROM words WHERE rowid BETWEEN ? AND ? LIMIT ?`, lo, hi, searchBatch)
	if err != nil {
		return 0, err
	}
	var ids []int64
	for rows.Next() {
		var row int64
		if err := rows.Scan(&row); err != nil {
			_ = rows.Close()
			return 0, err
		}
		ids = append(ids, row)
	}
	if err := errors.Join(rows.Err(), rows.Close()); err != nil {
		return 0, err
	}
	for _, row := range ids {
		if _, err := tx.ExecContext(ctx, `DELETE FROM words WHERE rowid = ?`, row); err != nil {
			return 0, err
		}
	}
	return len(ids), tx.Commit()
}

// matchExpr is q as an FTS5 query: every term (a phrase as FTS5's phrase
// of its words' tokens, which the index holds one after the other as the
// body has them), the viewer as sender or recipient, the sender and the
// recipient. Every token is quoted, so no word is read as an operator. The
// team is the range of rows asked (teamRows).
func matchExpr(q *core.SearchQuery) string {
	quote := func(col string, toks ...string) string { return col + `:"` + strings.Join(toks, " ") + `"` }
	var all []string
	for _, t := range q.Terms {
		toks := make([]string, len(t.Words))
		for i, w := range t.Words {
			toks[i] = string(appendToken(nil, w))
		}
		all = append(all, quote("body", toks...))
	}
	if q.Viewer != "" {
		all = append(all, "("+quote("party", partyToken('s', q.Viewer))+" OR "+quote("party", partyToken('r', q.Viewer))+")")
	}
	if q.From != "" {
		all = append(all, quote("party", partyToken('s', q.From)))
	}
	if q.To != "" {
		all = append(all, quote("party", partyToken('r', q.To)))
	}
	return strings.Join(all, " AND ")
}

// searchWindow is how many of the letters that match a query bm25 ranks
// at a time, those indexed last first (in the order they were sent; inbox
// by inbox after a rebuild, since an inbox keeps no time): ranking costs a
// few µs per letter, so a word most of a large team's letters hold would
// otherwise cost a search hundreds of ms.
const searchWindow = 2000

// hitWindow is the first row of the window of size matches of expr among
// rows lo through upTo, the last indexed first: the size-th such match,
// or lo when there are fewer (the window then holds every one of them).
func hitWindow(ctx context.Context, db *sql.DB, expr string, lo, upTo int64, size int) (int64, error) {
	var from int64
	err := db.QueryRowContext(ctx, `SELECT rowid FROM words WHERE words MATCH ? AND rowid BETWEEN ? AND ?
		ORDER BY rowid DESC LIMIT 1 OFFSET ?`, expr, lo, upTo, size-1).Scan(&from)
	if errors.Is(err, sql.ErrNoRows) {
		return lo, nil
	}
	return from, err
}

// searchPage is the ids of the letters the index finds for expr among rows
// from through upTo, best first by bm25 over the bodies, limit of them
// from offset on.
func searchPage(ctx context.Context, db *sql.DB, expr string, from, upTo int64, limit, offset int) ([]string, error) {
	rows, err := db.QueryContext(ctx, `SELECT letter FROM words
		WHERE words MATCH ? AND rowid BETWEEN ? AND ?
		ORDER BY bm25(words, 0.0, 0.0, 1.0), rowid DESC LIMIT ? OFFSET ?`, expr, from, upTo, limit, offset)
	if err != nil {
		return nil, err
	}
	defer func() { _ = rows.Close() }()
	var ids []string
	for rows.Next() {
		var id string
		if err := rows.Scan(&id); err != nil {
			return nil, err
		}
		ids = append(ids, id)
	}
	return ids, rows.Err()
}
