package mail_test

import (
	"bytes"
	"fmt"
	"os"
	"sync"
	"testing"
	"time"

	"mailroom/internal/core"
	"mailroom/internal/mail"
	"mailroom/internal/testkit"
)

// benchLimits let a benchmark's inbox grow by however many letters the
// benchmark loop appends.
func benchLimits() core.Limits {
	l := core.DefaultLimits()
	l.InboxMessages = 1 << 24
	l.InboxBytes = 1 << 32
	return l
}

// fillInbox writes n letters straight into reader's inbox, in the bytes the
// store itself writes.
func fillInbox(tb testing.TB, data string, team string, n int) []byte {
	tb.Helper()
	var buf bytes.Buffer
	for i := 1; i <= n; i++ {
		buf.Write(core.EncodeInboxLine(core.Message{
			ID: fmt.Sprintf("reader-%d", i), Sender: "lead", Recipient: "reader",
			Body: fmt.Sprintf("letter %d: the expected value is in expected.txt", i),
		}))
	}
	if err := os.WriteFile(inboxPath(data, team, "reader"), buf.Bytes(), 0o600); err != nil {
		tb.Fatal(err)
	}
	return buf.Bytes()
}

// benchmarkAppend measures one send as core makes it: LoadInbox, then
// AppendInbox of the next letter, on real files.
func benchmarkAppend(b *testing.B, existing int) {
	data := b.TempDir()
	s, err := mail.Open(data)
	if err != nil {
		b.Fatal(err)
	}
	if err := s.CreateTeam(ctx, teamState("bench", "lead", "reader", "reviewer")); err != nil {
		b.Fatal(err)
	}
	r := rules("reader", benchLimits())
	if existing > 0 {
		fillInbox(b, data, "bench", existing)
	}
	n := existing
	appendOne := func() {
		prev, err := s.LoadInbox(ctx, "bench", r)
		if err != nil {
			b.Fatal(err)
		}
		n++
		msg := core.Message{ID: fmt.Sprintf("reader-%d", n), Sender: "reviewer", Recipient: "reader", Body: "one more letter"}
		if err := s.AppendInbox(ctx, "bench", r, prev, msg); err != nil {
			b.Fatal(err)
		}
	}
	// The first send after a foreign write validates the whole file once.
	appendOne()
	for b.Loop() {
		appendOne()
	}
}

// BenchmarkAppendEmpty sends into an inbox that starts empty.
func BenchmarkAppendEmpty(b *testing.B) { benchmarkAppend(b, 0) }

// BenchmarkAppend10k sends into an inbox that already holds 10,000 letters.
func BenchmarkAppend10k(b *testing.B) { benchmarkAppend(b, 10000) }

// BenchmarkUnitSend measures sends through core and the file store's unit
// of work (write-ahead log, group commit), 64 goroutines over teams teams.
func BenchmarkUnitSend(b *testing.B) {
	for _, teams := range []int{1, 64} {
		b.Run(fmt.Sprintf("teams=%d", teams), func(b *testing.B) {
			data := b.TempDir()
			s, err := mail.Open(data)
			if err != nil {
				b.Fatal(err)
			}
			defer s.Close()
			sendInParallel(b, s, teams, 32, "the build passed; the report is in report.txt")
		})
	}
}

// BenchmarkSendBesideTail is a send's CPU beside the search index's tail,
// against a store without the index: 16 goroutines per CPU over 16 teams, with the
// tail's bounds set so far out that nothing is indexed while the loop runs.
// What it measures is the tail alone (the letter's copy, its lock, the
// garbage collector walking the letters it holds); the indexing itself is
// BenchmarkSearchIndexBatch's. Run it with a fixed count, e.g.
// -benchtime 18000x, so both sides hold the same letters, and read cpu-ns/op.
func BenchmarkSendBesideTail(b *testing.B) {
	for _, index := range []string{"tail", "none"} {
		b.Run("index="+index, func(b *testing.B) {
			var opts []mail.Option
			if index == "none" {
				opts = append(opts, mail.WithoutSearchIndex())
			}
			s, err := mail.Open(b.TempDir(), opts...)
			if err != nil {
				b.Fatal(err)
			}
			defer s.Close()
			mail.SetSearchPace(s, time.Hour, 1<<30)
			mail.SetSearchHard(s, 1<<30, 1<<30)
			mail.SetSearchBytes(s, 1<<40, 1<<40)
			cpu := sendInParallel(b, s, 16, 16, "the build passed; the report is in report.txt and the logs are in build.log")
			b.ReportMetric(float64(cpu)/float64(b.N), "cpu-ns/op")
			b.StopTimer()
			if index == "tail" {
				if got := mail.SearchTailLen(s); got < b.N {
					b.Fatalf("tail holds %d letters after %d sends, want all of them: the loop indexed", got, b.N)
				}
			}
		})
	}
}

// sendInParallel opens core over s with teams teams of one member, then
// runs b.N sends through core, parallelism goroutines per CPU spread over
// the teams, and returns the process's CPU spent while they ran.
func sendInParallel(b *testing.B, s *mail.Store, teams, parallelism int, body string) time.Duration {
	b.Helper()
	svc := core.NewService(s, core.Options{})
	if err := svc.Open(ctx); err != nil {
		b.Fatal(err)
	}
	limits := benchLimits()
	for i := range teams {
		if _, _, err := svc.CreateTeam(core.AsAdmin(ctx), core.TeamSpec{Name: fmt.Sprintf("t%d", i), Limits: &limits, Members: []core.MemberSpec{{Name: "reader", Role: "read"}}}); err != nil {
			b.Fatal(err)
		}
	}
	b.SetParallelism(parallelism)
	var n int
	var mu sync.Mutex
	b.ResetTimer()
	start := testkit.ProcessCPU(b)
	b.RunParallel(func(pb *testing.PB) {
		mu.Lock()
		team := fmt.Sprintf("t%d", n%teams)
		n++
		mu.Unlock()
		for pb.Next() {
			if _, err := svc.Send(core.AsMember(ctx, team, "reader"), core.SendInput{Team: team, To: core.LeadName, Body: body}); err != nil {
				b.Error(err)
				return
			}
		}
	})
	return testkit.ProcessCPU(b) - start
}
