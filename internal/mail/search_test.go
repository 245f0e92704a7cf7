package mail_test

import (
	"database/sql"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"mailroom/internal/core"
	"mailroom/internal/mail"
	"mailroom/internal/storetest"
)

// waitSearchReady waits for the start's pass over the search index.
func waitSearchReady(t *testing.T, s *mail.Store) (took time.Duration, indexed int) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		ready, took, indexed := s.SearchIndexStats()
		if ready {
			return took, indexed
		}
		if time.Now().After(deadline) {
			t.Fatal("the search index was not ready after 30s")
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func searchIDs(t *testing.T, s *mail.Store, q string) []string {
	t.Helper()
	terms, err := core.ParseSearch(q)
	if err != nil {
		t.Fatal(err)
	}
	got, err := s.SearchLetters(t.Context(), core.SearchQuery{Team: "idx", Terms: terms, Limit: 100})
	if err != nil {
		t.Fatal(err)
	}
	var ids []string
	for _, m := range got {
		ids = append(ids, m.ID)
	}
	return ids
}

// TestSearchIndexRebuilt: the index is rebuilt from the inboxes when it is
// missing or damaged, and a store reopened over a sound index indexes
// nothing again; every time, every letter is found.
func TestSearchIndexRebuilt(t *testing.T) {
	dir := t.TempDir()
	open := func() *mail.Store {
		t.Helper()
		s, err := mail.Open(dir)
		if err != nil {
			t.Fatal(err)
		}
		if err := s.Start(t.Context()); err != nil {
			t.Fatal(err)
		}
		return s
	}
	s := open()
	st := storetest.Team("idx", "alice")
	st.Limits.InboxMessages = 100
	if err := s.CreateTeam(t.Context(), st); err != nil {
		t.Fatal(err)
	}
	const n = 30
	for i := range n {
		body := fmt.Sprintf("letter %d about walruses", i)
		if err := core.Update(t.Context(), s, "idx", func(tx core.TeamTx) error {
			return tx.AppendLetter(core.Message{ID: fmt.Sprintf("alice-%d", i+1), Sender: "lead", Recipient: "alice", Body: body})
		}); err != nil {
			t.Fatal(err)
		}
	}
	waitSearchReady(t, s)
	if got := searchIDs(t, s, "walruses"); len(got) != n {
		t.Fatalf("before restart: %d letters found, want %d", len(got), n)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}

	index := filepath.Join(dir, "search")
	for _, tc := range []struct {
		name    string
		harm    func()
		indexed int
	}{
		{"Sound", func() {}, 0},
		{"Missing", func() { _ = os.RemoveAll(index) }, n},
		{"Damaged", func() {
			_ = filepath.Walk(index, func(path string, info os.FileInfo, err error) error {
				if err == nil && !info.IsDir() {
					_ = os.WriteFile(path, []byte("not an index"), 0o600)
				}
				return nil
			})
		}, n},
		{"DamagedInside", func() {
			// The database's header stays sound, so it opens; a page of
			// its tables does not.
			f, err := os.OpenFile(filepath.Join(index, "letters.db"), os.O_WRONLY, 0)
			if err != nil {
				t.Fatal(err)
			}
			defer func() { _ = f.Close() }()
			fi, err := f.Stat()
			if err != nil {
				t.Fatal(err)
			}
			if fi.Size() < 3*4096 {
				t.Fatalf("index database is %d bytes, want at least 3 pages", fi.Size())
			}
			junk := make([]byte, fi.Size()-4096)
			for i := range junk {
				junk[i] = byte(i*131 + 7)
			}
			if _, err := f.WriteAt(junk, 4096); err != nil {
				t.Fatal(err)
			}
		}, n},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tc.harm()
			s := open()
			defer func() { _ = s.Close() }()
			// Found while the index catches up (the inboxes are scanned)
			// and after.
			if got := searchIDs(t, s, "walruses"); len(got) != n {
				t.Fatalf("while starting: %d letters found, want %d", len(got), n)
			}
			_, indexed := waitSearchReady(t, s)
			if indexed != tc.indexed {
				t.Errorf("letters indexed at start = %d, want %d", indexed, tc.indexed)
			}
			if got := searchIDs(t, s, `"letter 7 about"`); len(got) != 1 || got[0] != "alice-8" {
				t.Errorf("phrase from the index = %v, want [alice-8]", got)
			}
			if got := searchIDs(t, s, "walruses"); len(got) != n {
				t.Fatalf("from the index: %d letters found, want %d", len(got), n)
			}
		})
	}
}

// TestSearchIndexYieldsToSends: letters wait in the tail while sends keep
// coming (no quiet), are found there, and go into the index once the
// tail reaches its bound, or once the store is quiet; a hit from the index
// is the letter as its inbox holds it.
func TestSearchIndexYieldsToSends(t *testing.T) {
	open := func(t *testing.T, dir string, quiet time.Duration, bound int, also ...func(*mail.Store)) *mail.Store {
		t.Helper()
		return startedStore(t, dir, append([]func(*mail.Store){func(s *mail.Store) { mail.SetSearchPace(s, quiet, bound) }}, also...)...)
	}
	send := func(t *testing.T, s *mail.Store, from, to int) {
		t.Helper()
		for i := from; i < to; i++ {
			body := fmt.Sprintf("letter %d about narwhals", i)
			if err := core.Update(t.Context(), s, "idx", func(tx core.TeamTx) error {
				return tx.AppendLetter(core.Message{ID: fmt.Sprintf("alice-%d", i+1), Sender: "lead", Recipient: "alice", Body: body})
			}); err != nil {
				t.Fatal(err)
			}
		}
	}
	waitTail := func(t *testing.T, s *mail.Store, want int) {
		t.Helper()
		deadline := time.Now().Add(10 * time.Second)
		for mail.SearchTailLen(s) != want {
			if time.Now().After(deadline) {
				t.Fatalf("tail = %d letters after 10s, want %d", mail.SearchTailLen(s), want)
			}
			time.Sleep(5 * time.Millisecond)
		}
	}

	// stays checks that the tail still holds tail letters a while later,
	// and that searches find all of them and the indexed ones.
	stays := func(t *testing.T, s *mail.Store, tail, all int, why string) {
		t.Helper()
		time.Sleep(300 * time.Millisecond)
		if got := mail.SearchTailLen(s); got != tail {
			t.Fatalf("tail = %d letters, want %d (%s)", got, tail, why)
		}
		if got := searchIDs(t, s, "narwhals"); len(got) != all {
			t.Fatalf("found in the index and the tail: %d letters, want %d", len(got), all)
		}
	}

	t.Run("Bound", func(t *testing.T) {
		dir := t.TempDir()
		s := open(t, dir, time.Hour, 10) // never quiet: only the bound indexes
		send(t, s, 0, 9)
		stays(t, s, 9, 9, "below its bound, nothing indexed while not quiet")
		send(t, s, 9, 10)
		waitTail(t, s, 0)
		if got := searchIDs(t, s, "narwhals"); len(got) != 10 {
			t.Fatalf("found in the index: %d letters, want 10", len(got))
		}
		terms, err := core.ParseSearch(`"letter 4 about"`)
		if err != nil {
			t.Fatal(err)
		}
		got, err := s.SearchLetters(t.Context(), core.SearchQuery{Team: "idx", Terms: terms, Limit: 10})
		want := core.Message{ID: "alice-5", Sender: "lead", Recipient: "alice", Body: "letter 4 about narwhals"}
		if err != nil || len(got) != 1 || got[0] != want {
			t.Fatalf("phrase from the index = %+v, %v; want [%+v]", got, err, want)
		}
		// Letters left in the tail at close are indexed by Close: the
		// next start has nothing to catch up.
		send(t, s, 10, 13)
		if err := s.Close(); err != nil {
			t.Fatal(err)
		}
		s2, err := mail.Open(dir)
		if err != nil {
			t.Fatal(err)
		}
		defer func() { _ = s2.Close() }()
		if err := s2.Start(t.Context()); err != nil {
			t.Fatal(err)
		}
		if _, indexed := waitSearchReady(t, s2); indexed != 0 {
			t.Errorf("letters indexed at the next start = %d, want 0", indexed)
		}
		if got := searchIDs(t, s2, "narwhals"); len(got) != 13 {
			t.Errorf("after the restart: %d letters found, want 13", len(got))
		}
	})
	t.Run("PacedUntilHard", func(t *testing.T) {
		// Sends never pause (no quiet): the first batch over the bound
		// is indexed at once, the next waits for its pace (here: for
		// good), and the hard bound indexes at full speed.
		s := open(t, t.TempDir(), time.Hour, 10, func(s *mail.Store) { mail.SetSearchHard(s, 30, 1<<30) })
		defer func() { _ = s.Close() }()
		send(t, s, 0, 10)
		waitTail(t, s, 0)
		send(t, s, 10, 29)
		stays(t, s, 19, 29, "over its bound, paced: the pace not yet over")
		send(t, s, 29, 30+10)
		waitTail(t, s, 0)
		if got := searchIDs(t, s, "narwhals"); len(got) != 40 {
			t.Fatalf("after the hard bound: %d letters found, want 40", len(got))
		}
	})
	t.Run("PacedUntilHardByBytes", func(t *testing.T) {
		// The same by the tail's bytes, its letter counts never reached:
		// a letter here takes 239 to 241 bytes (letterBytes), so the
		// bound of 2,300 bytes is passed at the 10th letter, and the
		// hard bound of 7,200 bytes at the 30th held.
		s := open(t, t.TempDir(), time.Hour, 1000, func(s *mail.Store) {
			mail.SetSearchHard(s, 100000, 1<<30)
			mail.SetSearchBytes(s, 2300, 7200)
		})
		defer func() { _ = s.Close() }()
		send(t, s, 0, 9)
		stays(t, s, 9, 9, "below its bound in bytes, nothing indexed while not quiet")
		send(t, s, 9, 10)
		waitTail(t, s, 0)
		send(t, s, 10, 39)
		stays(t, s, 29, 39, "over its bound in bytes, paced: the pace not yet over")
		send(t, s, 39, 40)
		waitTail(t, s, 0)
		if got := searchIDs(t, s, "narwhals"); len(got) != 40 {
			t.Fatalf("after the hard bound in bytes: %d letters found, want 40", len(got))
		}
	})
	t.Run("PacedThenQuiet", func(t *testing.T) {
		// A tail held by its pace is indexed as soon as the sends stop
		// for the quiet, not at the pace's end.
		s := open(t, t.TempDir(), time.Second, 10, func(s *mail.Store) { mail.SetSearchHard(s, 1000, 1<<30) })
		defer func() { _ = s.Close() }()
		send(t, s, 0, 10) // the first batch over the bound: at once
		waitTail(t, s, 0)
		send(t, s, 10, 25) // over the bound again, held by the pace
		if got := mail.SearchTailLen(s); got != 15 {
			t.Fatalf("tail right after the sends = %d letters, want 15 (held by the pace)", got)
		}
		waitTail(t, s, 0) // within a second of quiet, not at the pace's end
		if got := searchIDs(t, s, "narwhals"); len(got) != 25 {
			t.Fatalf("after the quiet: %d letters found, want 25", len(got))
		}
	})
	t.Run("PhraseAmongItsWords", func(t *testing.T) {
		// The index keeps no positions: a phrase is asked as its words
		// and matched on each letter, page after page, so letters that
		// hold the phrase are found behind many that hold its words in
		// another order.
		s := open(t, t.TempDir(), 20*time.Millisecond, 1000)
		defer func() { _ = s.Close() }()
		var want []string
		for i := range 90 {
			// The phrase's letters score lower (its words once, in a
			// longer body) than the others.
			body := fmt.Sprintf("about about narwhals, a letter, a letter %d", i)
			if i%30 == 29 {
				body = fmt.Sprintf("%d: a letter about narwhals, with many more words than the others hold", i)
				want = append(want, fmt.Sprintf("alice-%d", i+1))
			}
			if err := core.Update(t.Context(), s, "idx", func(tx core.TeamTx) error {
				return tx.AppendLetter(core.Message{ID: fmt.Sprintf("alice-%d", i+1), Sender: "lead", Recipient: "alice", Body: body})
			}); err != nil {
				t.Fatal(err)
			}
		}
		waitTail(t, s, 0)
		terms, err := core.ParseSearch(`"letter about"`)
		if err != nil {
			t.Fatal(err)
		}
		for _, limit := range []int{2, 20} {
			got, err := s.SearchLetters(t.Context(), core.SearchQuery{Team: "idx", Terms: terms, Limit: limit})
			if err != nil {
				t.Fatal(err)
			}
			ids := make([]string, 0, len(got))
			for _, m := range got {
				ids = append(ids, m.ID)
			}
			slices.Sort(ids)
			if w := want[:min(limit, len(want))]; len(ids) != len(w) || (limit > len(want) && !slices.Equal(ids, want)) {
				t.Errorf("limit %d: got %v, want %d of %v", limit, ids, len(w), want)
			}
		}
	})
	t.Run("Quiet", func(t *testing.T) {
		s := open(t, t.TempDir(), 50*time.Millisecond, 1000)
		defer func() { _ = s.Close() }()
		send(t, s, 0, 5)
		waitTail(t, s, 0)
		if err := s.SearchIndexed(t.Context()); err != nil {
			t.Fatal(err)
		}
		if got := searchIDs(t, s, "narwhals"); len(got) != 5 {
			t.Fatalf("found in the index: %d letters, want 5", len(got))
		}
	})
}

// startedStore is the store in dir, started with its index ready, and
// team "idx" with member alice (an inbox of 100 letters); before is
// applied to the store before Start.
func startedStore(t *testing.T, dir string, before ...func(*mail.Store)) *mail.Store {
	t.Helper()
	s, err := mail.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range before {
		f(s)
	}
	if err := s.Start(t.Context()); err != nil {
		t.Fatal(err)
	}
	waitSearchReady(t, s)
	st := storetest.Team("idx", "alice")
	st.Limits.InboxMessages = 100
	if err := s.CreateTeam(t.Context(), st); err != nil {
		t.Fatal(err)
	}
	return s
}

// indexedStore is a started store whose member alice holds a letter of
// each body (alice-1, alice-2, ...), every one of them in the index (none
// left in the tail); before is applied before Start.
func indexedStore(t *testing.T, before []func(*mail.Store), bodies ...string) *mail.Store {
	t.Helper()
	s := startedStore(t, t.TempDir(), before...)
	t.Cleanup(func() { _ = s.Close() })
	for i, body := range bodies {
		if err := core.Update(t.Context(), s, "idx", func(tx core.TeamTx) error {
			return tx.AppendLetter(core.Message{ID: fmt.Sprintf("alice-%d", i+1), Sender: "lead", Recipient: "alice", Body: body})
		}); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.SearchIndexed(t.Context()); err != nil {
		t.Fatal(err)
	}
	if n := mail.SearchTailLen(s); n != 0 {
		t.Fatalf("tail holds %d letters after SearchIndexed, want 0 (the index must answer)", n)
	}
	return s
}

// TestSearchIndexTokensMatchedAgain: the index holds a word that is not
// plain ASCII letters and digits as "x" and its bytes in hex, so the
// plain word "xc3a9" and "é" share a token there. A hit is matched again
// on its letter, so a search for one never finds the other.
func TestSearchIndexTokensMatchedAgain(t *testing.T) {
	s := indexedStore(t, nil, "the code xc3a9 again", "café é crème")
	for q, want := range map[string][]string{"é": {"alice-2"}, "xc3a9": {"alice-1"}, "CAFÉ": {"alice-2"}} {
		if got := searchIDs(t, s, q); !slices.Equal(got, want) {
			t.Errorf("search %q = %v, want %v", q, got, want)
		}
	}
}

// TestSearchIndexWindows: the index ranks the newest matches a window at a
// time, best first by bm25 within each (here the letter that says
// "walrus" most), the newest window first, and a search goes on to older
// windows until its limit is filled or the matches end.
func TestSearchIndexWindows(t *testing.T) {
	const n = 10
	bodies := make([]string, n)
	for i := range bodies {
		k := (i+1)%3 + 1
		bodies[i] = strings.Repeat("walrus ", k) + strings.Repeat("pad ", 5-k)
	}
	s := indexedStore(t, []func(*mail.Store){func(s *mail.Store) { mail.SetSearchWindow(s, 3) }}, bodies...)
	got := searchIDs(t, s, "walrus")
	if len(got) != n {
		t.Fatalf("found %d letters (%v), want all %d across the windows", len(got), got, n)
	}
	// alice-8 says it three times, alice-10 twice, alice-9 once.
	if want := []string{"alice-8", "alice-10", "alice-9"}; !slices.Equal(got[:3], want) {
		t.Errorf("newest window = %v, want %v (bm25: more walruses first)", got[:3], want)
	}
	for i, window := range [][]string{{"alice-5", "alice-6", "alice-7"}, {"alice-2", "alice-3", "alice-4"}} {
		if part := got[3+3*i : 6+3*i]; !slices.Equal(slices.Sorted(slices.Values(part)), window) {
			t.Errorf("window %d = %v, want %v in any order", i+2, part, window)
		}
	}
	if got[9] != "alice-1" {
		t.Errorf("last = %s, want alice-1 (the oldest window)", got[9])
	}
}

// TestSearchIndexPassOverlapsTail: letters sent while the start's pass
// has yet to read their team are both in the pass's read and in the tail;
// each is indexed once.
func TestSearchIndexPassOverlapsTail(t *testing.T) {
	dir := t.TempDir()
	s := startedStore(t, dir)
	send := func(s *mail.Store, from, to int) {
		t.Helper()
		for i := from; i < to; i++ {
			if err := core.Update(t.Context(), s, "idx", func(tx core.TeamTx) error {
				return tx.AppendLetter(core.Message{ID: fmt.Sprintf("alice-%d", i+1), Sender: "lead", Recipient: "alice", Body: fmt.Sprintf("letter %d about otters", i)})
			}); err != nil {
				t.Fatal(err)
			}
		}
	}
	send(s, 0, 50)
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if err := os.RemoveAll(filepath.Join(dir, "search")); err != nil {
		t.Fatal(err)
	}

	s, err := mail.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = s.Close() }()
	release, held := make(chan struct{}), make(chan struct{})
	mail.SetSearchBeforePass(s, func() { close(held); <-release })
	if err := s.Start(t.Context()); err != nil {
		t.Fatal(err)
	}
	<-held
	send(s, 50, 90) // committed before the pass reads the team
	close(release)
	_, indexed := waitSearchReady(t, s)
	if indexed != 90 {
		t.Errorf("letters indexed by the start's pass = %d, want 90", indexed)
	}
	if err := s.SearchIndexed(t.Context()); err != nil {
		t.Fatal(err)
	}
	if n, err := mail.SearchIndexHeld(s, "idx"); err != nil || n != 90 {
		t.Fatalf("letters the index holds = %d (%v), want 90: each once", n, err)
	}
	send(s, 90, 100) // after the pass: not looked up, indexed once
	if err := s.SearchIndexed(t.Context()); err != nil {
		t.Fatal(err)
	}
	if n, err := mail.SearchIndexHeld(s, "idx"); err != nil || n != 100 {
		t.Fatalf("letters the index holds = %d (%v), want 100", n, err)
	}
	if got := searchIDs(t, s, "otters"); len(got) != 100 {
		t.Fatalf("search found %d letters, want 100", len(got))
	}
}

// TestSearchIndexCatchesUpOnlyWhatItLacks: an index that lost some of a
// team's letters (a crash before the tail was indexed) gets back exactly
// those at the next start, and holds each letter once.
func TestSearchIndexCatchesUpOnlyWhatItLacks(t *testing.T) {
	dir := t.TempDir()
	s := startedStore(t, dir)
	for i := range 40 {
		if err := core.Update(t.Context(), s, "idx", func(tx core.TeamTx) error {
			return tx.AppendLetter(core.Message{ID: fmt.Sprintf("alice-%d", i+1), Sender: "lead", Recipient: "alice", Body: fmt.Sprintf("letter %d about herons", i)})
		}); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	db, err := sql.Open("sqlite", filepath.Join(dir, "search", "letters.db"))
	if err != nil {
		t.Fatal(err)
	}
	res, err := db.Exec(`DELETE FROM words WHERE rowid IN (SELECT rowid FROM words ORDER BY rowid DESC LIMIT 15)`)
	if err != nil {
		t.Fatal(err)
	}
	if n, err := res.RowsAffected(); err != nil || n != 15 {
		t.Fatalf("rows removed from the index = %d (%v), want 15", n, err)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}

	s, err = mail.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = s.Close() }()
	if err := s.Start(t.Context()); err != nil {
		t.Fatal(err)
	}
	if _, indexed := waitSearchReady(t, s); indexed != 15 {
		t.Errorf("letters indexed by the start's pass = %d, want the 15 missing", indexed)
	}
	if n, err := mail.SearchIndexHeld(s, "idx"); err != nil || n != 40 {
		t.Fatalf("letters the index holds = %d (%v), want 40: each once", n, err)
	}
	if got := searchIDs(t, s, `"letter 39 about"`); !slices.Equal(got, []string{"alice-40"}) {
		t.Errorf("phrase of a letter indexed again = %v, want [alice-40]", got)
	}
}

// TestSearchIndexForgetsDeletedTeam: a deleted team's letters leave the
// index (in the background), and another team's stay.
func TestSearchIndexForgetsDeletedTeam(t *testing.T) {
	s := indexedStore(t, nil, "first about gulls", "second about gulls", "third about gulls")
	other := storetest.Team("keep", "bob")
	if err := s.CreateTeam(t.Context(), other); err != nil {
		t.Fatal(err)
	}
	if err := core.Update(t.Context(), s, "keep", func(tx core.TeamTx) error {
		return tx.AppendLetter(core.Message{ID: "bob-1", Sender: "lead", Recipient: "bob", Body: "kept gulls"})
	}); err != nil {
		t.Fatal(err)
	}
	if err := s.SearchIndexed(t.Context()); err != nil {
		t.Fatal(err)
	}
	if n, err := mail.SearchIndexRows(s); err != nil || n != 4 {
		t.Fatalf("letters indexed = %d (%v), want 4", n, err)
	}
	if err := s.DeleteTeam(t.Context(), "idx"); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		n, err := mail.SearchIndexRows(s)
		if err != nil {
			t.Fatal(err)
		}
		if n == 1 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("letters indexed 10s after the team's deletion = %d, want 1 (the other team's)", n)
		}
		time.Sleep(5 * time.Millisecond)
	}
	if held, err := mail.SearchIndexHeld(s, "keep"); err != nil || held != 1 {
		t.Fatalf("the other team's letters indexed = %d (%v), want 1", held, err)
	}
}
