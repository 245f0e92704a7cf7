package mail

import (
	"database/sql"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"mailroom/internal/core"
)

// TestBodyTokensAsTheIndexReadsThem: the tokens SQLite's ascii tokenizer
// reads from what bodyTokens gives it are core's words of the body, each
// as appendToken writes it, in order: for a body of ASCII only, which is
// given as it is, and for any other, which is given word by word.
func TestBodyTokensAsTheIndexReadsThem(t *testing.T) {
	db, err := sql.Open("sqlite", ":memory:")
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = db.Close() }()
	db.SetMaxOpenConns(1) // one in-memory database
	if _, err := db.Exec(`CREATE VIRTUAL TABLE t USING fts5(body, tokenize='ascii');
		CREATE VIRTUAL TABLE v USING fts5vocab(t, 'instance');`); err != nil {
		t.Fatal(err)
	}
	var every strings.Builder
	for c := range 128 {
		every.WriteString("Ab9")
		every.WriteByte(byte(c))
	}
	bodies := []string{every.String(), "Hello, WORLD_x-ray\tTAB\nline 42nd", "", "   ", "café CRÈME x2a", "日本語 text", "a\x00b"}
	r := rand.New(rand.NewPCG(1, 2))
	for range 300 {
		b := make([]byte, r.IntN(40))
		for i := range b {
			b[i] = byte(r.IntN(128))
			if r.IntN(3) > 0 {
				b[i] = "aZ09 .Q_-"[r.IntN(9)]
			}
		}
		bodies = append(bodies, string(b))
	}
	for i, body := range bodies {
		if _, err := db.Exec(`INSERT INTO t(rowid, body) VALUES(?, ?)`, i+1, bodyTokens(body)); err != nil {
			t.Fatal(err)
		}
		rows, err := db.Query(`SELECT term FROM v WHERE doc = ? ORDER BY offset`, i+1)
		if err != nil {
			t.Fatal(err)
		}
		var got []string
		for rows.Next() {
			var term string
			if err := rows.Scan(&term); err != nil {
				t.Fatal(err)
			}
			got = append(got, term)
		}
		if err := rows.Err(); err != nil {
			t.Fatal(err)
		}
		_ = rows.Close()
		var want []string
		for _, w := range core.WordSpans(body) {
			want = append(want, string(appendToken(nil, w.Word)))
		}
		if !slices.Equal(got, want) {
			t.Errorf("body %q: the index reads %q, want core's words %q", body, got, want)
		}
	}
}
