package mail_test

import (
	"fmt"
	"os"
	"path/filepath"
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
