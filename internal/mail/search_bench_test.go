package mail

import (
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"mailroom/internal/core"
	"mailroom/internal/storetest"
)

// benchBody is a body of 30 words of a vocabulary of 5,000.
func benchBody(i int) string {
	var b strings.Builder
	for w := range 30 {
		if w > 0 {
			b.WriteByte(' ')
		}
		fmt.Fprintf(&b, "w%d", (i*31+w*w*7)%5000)
	}
	return b.String()
}

// BenchmarkSearchIndexBatch is the indexer's work per letter: one batch of
// searchBatch letters into the index.
func BenchmarkSearchIndexBatch(b *testing.B) {
	db, err := newSearchIndex(filepath.Join(b.TempDir(), searchDir))
	if err != nil {
		b.Fatal(err)
	}
	defer func() { _ = db.Close() }()
	batch := make([]tailLetter, searchBatch)
	n := 0
	b.ResetTimer()
	for range b.N {
		for i := range batch {
			n++
			batch[i] = tailLetter{key: "t/1/x", msg: core.Message{ID: fmt.Sprintf("m-%d", n), Sender: "lead", Recipient: "m", Body: benchBody(n)}}
		}
		if _, err := indexLetters(b.Context(), db, batch); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*searchBatch), "ns/letter")
}

// BenchmarkSearchTail is a search that walks a full tail (searchTailBound
// letters of its team): what a search costs at worst while sends keep the
// indexer waiting.
func BenchmarkSearchTail(b *testing.B) {
	s, err := Open(b.TempDir())
	if err != nil {
		b.Fatal(err)
	}
	s.search.quiet, s.search.bound = time.Hour, 1<<30
	defer func() { _ = s.Close() }()
	ctx := b.Context()
	if err := s.Start(ctx); err != nil {
		b.Fatal(err)
	}
	st := storetest.Team("tail", "m")
	if err := s.CreateTeam(ctx, st); err != nil {
		b.Fatal(err)
	}
	e, err := s.entry(ctx, "tail")
	if err != nil {
		b.Fatal(err)
	}
	for i := range searchTailBound {
		s.indexSearch(teamKey(e.st), &core.Message{ID: fmt.Sprintf("m-%d", i+1), Sender: "lead", Recipient: "m", Body: benchBody(i)}, false)
	}
	for _, q := range []string{"w7", "zzz"} {
		terms, err := core.ParseSearch(q)
		if err != nil {
			b.Fatal(err)
		}
		b.Run(q, func(b *testing.B) {
			for b.Loop() {
				if _, err := s.SearchLetters(ctx, core.SearchQuery{Team: "tail", Terms: terms, Limit: 20}); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkSearchIndexSettled is the index's whole work per letter:
// 20,000 letters from the tail into the index, written to disk and merged
// (SearchIndexed), as the indexer does it after a burst of sends.
func BenchmarkSearchIndexSettled(b *testing.B) { benchIndexSettled(b, 1) }

// BenchmarkSearchIndexTeams is BenchmarkSearchIndexSettled with the
// letters spread over 16 teams, as loadgen's search phase sends them: each
// team's letters have their own range of rows, and the teams share the
// index's words.
func BenchmarkSearchIndexTeams(b *testing.B) { benchIndexSettled(b, 16) }

// benchIndexSettled indexes 20,000 letters a round, spread over teams
// teams, and waits until the index is idle.
func benchIndexSettled(b *testing.B, teams int) {
	s, err := Open(b.TempDir())
	if err != nil {
		b.Fatal(err)
	}
	defer func() { _ = s.Close() }()
	ctx := b.Context()
	if err := s.Start(ctx); err != nil {
		b.Fatal(err)
	}
	var keys []string
	for i := range teams {
		name := fmt.Sprintf("tail%d", i)
		if err := s.CreateTeam(ctx, storetest.Team(name, "m")); err != nil {
			b.Fatal(err)
		}
		e, err := s.entry(ctx, name)
		if err != nil {
			b.Fatal(err)
		}
		keys = append(keys, teamKey(e.st))
	}
	n := 0
	for b.Loop() {
		for range 20000 {
			n++
			s.indexSearch(keys[n%len(keys)], &core.Message{ID: fmt.Sprintf("m-%d", n), Sender: "lead", Recipient: "m", Body: benchBody(n)}, false)
		}
		if err := s.SearchIndexed(ctx); err != nil {
			b.Fatal(err)
		}
	}
}
