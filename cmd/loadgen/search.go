package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"mailroom/internal/core"
	"mailroom/internal/mail"
	"mailroom/internal/pgstore"
	"mailroom/internal/pgtest"
)

// Phase s: search (docs/api.md, "Search"), `loadgen search`. On each
// store, one team of -letters letters (searchMembers inboxes, bodies of
// words drawn from a Zipf-distributed vocabulary, so that some words are
// in most letters and most are rare) is filled over HTTP; then the
// searches of a fixed mix of queries are timed over HTTP, as the admin
// (every letter) and as a member (its own). The file store's index is
// then deleted and the time to rebuild it from the inboxes at start is
// taken. Last, a send's cost with the index against without it: two file
// stores in the same run, one opened WithoutSearchIndex, sends alternating
// between them (one client, then 16 clients over 16 teams in pairs of 3 s
// windows and pairs of 20 s windows; sendCostFile).

const (
	searchMembers = 10
	searchVocab   = 5000
)

// runSearchBench is `loadgen search [-data DIR] [-letters N] [-queries N]
// [-sends N] [-store file|postgres|both] [-database-url URL] [-keep]`.
func runSearchBench(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	c := newSubcommand("search", "unused", stderr)
	letters := c.fs.Int("letters", 100000, "letters in the searched team")
	queries := c.fs.Int("queries", 300, "searches timed per store and caller")
	sends := c.fs.Int("sends", 2000, "one-client sends timed with and without the index, each")
	pairs := c.fs.Int("pairs", 5, "pairs of 16-client windows (with the index, without) timed per window length")
	stores := c.fs.String("store", "both", "file, postgres or both")
	dbURL := c.fs.String("database-url", "", "PostgreSQL `URL` of an empty database (default: a private cluster started for the run)")
	if err := c.fs.Parse(args); err != nil {
		return err
	}
	if *letters < searchMembers || *queries < 10 || *sends < 10 || *pairs < 1 {
		return errors.New("-letters at least 10, -queries and -sends at least 10, -pairs at least 1")
	}
	work, r, done, err := c.begin(stdout)
	if err != nil {
		return err
	}
	defer done()
	if *stores == "file" || *stores == "both" {
		if err := searchFile(ctx, work, *letters, *queries, r); err != nil {
			return fmt.Errorf("file store: %w", err)
		}
		if err := sendCostFile(ctx, work, *sends, *pairs, r); err != nil {
			return fmt.Errorf("send cost: %w", err)
		}
	}
	if *stores == "postgres" || *stores == "both" {
		if err := searchPostgres(ctx, *dbURL, *letters, *queries, r); err != nil {
			return fmt.Errorf("postgres: %w", err)
		}
	}
	r.printf("load average at end: %s\n", loadAvg())
	return nil
}

// vocabWord is word i of the vocabulary: short, distinct, pronounceable.
func vocabWord(i int) string {
	const cons, vows = "bcdfghklmnprstvz", "aeiou"
	var b strings.Builder
	for {
		b.WriteByte(cons[i%len(cons)])
		i /= len(cons)
		b.WriteByte(vows[i%len(vows)])
		i /= len(vows)
		if i == 0 {
			return b.String()
		}
	}
}

// searchBody is letter n's body: 15 to 40 words of the vocabulary, Zipf.
func searchBody(n int) string {
	rng := rand.New(rand.NewPCG(uint64(n), 7))
	words := 15 + rng.IntN(26)
	var b strings.Builder
	for i := range words {
		if i > 0 {
			b.WriteByte(' ')
		}
		// Zipf with s ≈ 1 by inverse transform on a log scale.
		k := int(float64(searchVocab)*pow(rng.Float64(), 3)) % searchVocab
		b.WriteString(vocabWord(k))
	}
	return b.String()
}

func pow(x float64, n int) float64 {
	out := 1.0
	for range n {
		out *= x
	}
	return out
}

// fillSearchTeam creates team "search" and sends it n letters over HTTP,
// 32 clients, each letter from one member to another.
func fillSearchTeam(ctx context.Context, p *inproc, n int) (map[string]string, time.Duration, error) {
	tokens, err := p.createTeam(ctx, "search", searchMembers-1, benchLimits(n/searchMembers+searchMembers+1000))
	if err != nil {
		return nil, 0, err
	}
	names := []string{core.LeadName}
	for i := 1; i < searchMembers; i++ {
		names = append(names, fmt.Sprintf("m%d", i))
	}
	began := time.Now()
	var next atomic.Int64
	var wg sync.WaitGroup
	errs := make(chan error, 32)
	for range 32 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				i := int(next.Add(1)) - 1
				if i >= n || ctx.Err() != nil {
					return
				}
				from, to := names[i%searchMembers], names[(i/searchMembers+i+1)%searchMembers]
				if err := p.call(ctx, http.MethodPost, "/teams/search/messages", tokens[from], map[string]string{"to": to, "body": searchBody(i)}, nil, http.StatusCreated); err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	return tokens, time.Since(began), <-errs
}

// searchQueries is the timed mix: a common word, a middling one, a rare
// one, two middling words, a phrase of two words taken from a letter, a
// common and a rare word together, and a word no letter holds.
func searchQueries() []string {
	phrase := strings.Fields(searchBody(12345))
	return []string{
		vocabWord(1), vocabWord(60), vocabWord(2500),
		vocabWord(40) + " " + vocabWord(90),
		`"` + phrase[3] + " " + phrase[4] + `"`,
		vocabWord(2) + " " + vocabWord(1800),
		"zzzzqq",
	}
}

// timeSearches runs n searches of the mix as token and returns their
// latencies, with how many results the first round found per query.
func timeSearches(ctx context.Context, p *inproc, token string, n int) (latencies, []int, error) {
	qs := searchQueries()
	var lat latencies
	found := make([]int, len(qs))
	for i := range n + len(qs) { // the first round warms up, untimed
		q := qs[i%len(qs)]
		var got struct {
			Results []struct{} `json:"results"`
		}
		t := time.Now()
		if err := p.call(ctx, http.MethodGet, "/teams/search/search?"+url.Values{"q": {q}}.Encode(), token, nil, &got, http.StatusOK); err != nil {
			return nil, nil, fmt.Errorf("search %q: %w", q, err)
		}
		if i < len(qs) {
			found[i] = len(got.Results)
			continue
		}
		lat = append(lat, time.Since(t))
	}
	return lat, found, nil
}

func (r *report) searches(store string, letters int, fill time.Duration, admin, member latencies, found []int) {
	r.printf("s. search on %s: one team of %d letters in %d inboxes (filled in %s over HTTP, 32 clients)\n", store, letters, searchMembers, fill.Round(time.Millisecond))
	r.printf("   queries %q, results per query (admin, limit 20): %v\n", searchQueries(), found)
	r.printf("   admin (every letter):      p50 %s, p99 %s over %d searches\n", ms(admin.pct(0.5)), ms(admin.pct(0.99)), len(admin))
	r.printf("   member m1 (its own only):  p50 %s, p99 %s over %d searches\n", ms(member.pct(0.5)), ms(member.pct(0.99)), len(member))
	r.target(admin.pct(0.5) <= 25*time.Millisecond && member.pct(0.5) <= 25*time.Millisecond, "search p50 (the slower of admin and member), ms", float64(max(admin.pct(0.5), member.pct(0.5)))/float64(time.Millisecond), "≤ 25.00")
}

// openFileStore serves a file store over dir in process.
func openFileStore(ctx context.Context, dir string, opts ...mail.Option) (*inproc, *mail.Store, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, nil, err
	}
	release, err := mail.LockDir(dir)
	if err != nil {
		return nil, nil, err
	}
	s, err := mail.Open(dir, append([]mail.Option{mail.WithLogger(slog.New(slog.DiscardHandler))}, opts...)...)
	if err != nil {
		release()
		return nil, nil, err
	}
	p, err := serveInProcess(ctx, s, 40)
	if err != nil {
		release()
		return nil, nil, err
	}
	p.release = release
	return p, s, nil
}

// waitIndex waits for the file store's index to be ready.
func waitIndex(ctx context.Context, s *mail.Store) (time.Duration, int, error) {
	for {
		if ready, took, n := s.SearchIndexStats(); ready {
			return took, n, nil
		}
		select {
		case <-ctx.Done():
			return 0, 0, ctx.Err()
		case <-time.After(10 * time.Millisecond):
		}
	}
}

func searchFile(ctx context.Context, work string, letters, queries int, r *report) error {
	dir := filepath.Join(work, "search-file")
	p, s, err := openFileStore(ctx, dir)
	if err != nil {
		return err
	}
	tokens, fill, err := fillSearchTeam(ctx, p, letters)
	if err == nil {
		// The searches are timed against the index: every letter in
		// it, none left in the tail (BenchmarkSearchTail in
		// internal/mail times a search over a full tail).
		_, _, err = waitIndex(ctx, s)
	}
	if err == nil {
		err = s.SearchIndexed(ctx)
	}
	var admin, member latencies
	var found []int
	if err == nil {
		admin, found, err = timeSearches(ctx, p, adminToken, queries)
	}
	if err == nil {
		member, _, err = timeSearches(ctx, p, tokens["m1"], queries)
	}
	if cerr := p.close(); err == nil {
		err = cerr
	}
	if err != nil {
		return err
	}
	r.searches("the file store", letters, fill, admin, member, found)
	size := dirSize(filepath.Join(dir, "search"))
	// The index from scratch: deleted, rebuilt from the inboxes at start.
	if err := os.RemoveAll(filepath.Join(dir, "search")); err != nil {
		return err
	}
	began := time.Now()
	p, s, err = openFileStore(ctx, dir)
	if err != nil {
		return err
	}
	defer p.close()
	if err := s.Start(ctx); err != nil {
		return err
	}
	took, n, err := waitIndex(ctx, s)
	if err != nil {
		return err
	}
	r.printf("   index on disk: %.1f MiB; rebuilt from scratch at start: %d letters in %s (%s from open)\n", float64(size)/(1<<20), n, took.Round(time.Millisecond), time.Since(began).Round(time.Millisecond))
	after, _, err := timeSearches(ctx, p, adminToken, queries/3)
	if err != nil {
		return err
	}
	r.printf("   admin after the rebuild:   p50 %s, p99 %s\n\n", ms(after.pct(0.5)), ms(after.pct(0.99)))
	return nil
}

func dirSize(dir string) int64 {
	var n int64
	_ = filepath.Walk(dir, func(_ string, info os.FileInfo, err error) error {
		if err == nil && !info.IsDir() {
			n += info.Size()
		}
		return nil
	})
	return n
}

// sendCostFile times sends into two file stores of the same run, one
// with the index and one without, alternating so that drift hits both.
// Before each timed part the with-index store's index is left to take in
// every letter sent so far (mail.Store.SearchIndexed), so that its
// indexing never runs in the other store's window: a window sees the
// indexing its own sends cause, and no other. The short windows are
// within the tail's bound (nothing indexed while sends arrive); the
// sustained one sends more than the bound, so that indexing runs under
// load.
func sendCostFile(ctx context.Context, work string, n, pairs int, r *report) error {
	with, ws, err := openFileStore(ctx, filepath.Join(work, "send-index"))
	if err != nil {
		return err
	}
	defer with.close()
	without, _, err := openFileStore(ctx, filepath.Join(work, "send-noindex"), mail.WithoutSearchIndex())
	if err != nil {
		return err
	}
	defer without.close()
	if _, _, err := waitIndex(ctx, ws); err != nil {
		return err
	}
	const teams = 16
	toks := [2][]map[string]string{}
	for k, p := range []*inproc{with, without} {
		for i := range teams {
			t, err := p.createTeam(ctx, fmt.Sprintf("send%d", i), 1, benchLimits(4*n+400000))
			if err != nil {
				return err
			}
			toks[k] = append(toks[k], t)
		}
	}
	// settle waits for the with-index store's index and returns how long
	// it took: the indexing the last part's letters left behind.
	settle := func() (time.Duration, error) {
		t := time.Now()
		err := ws.SearchIndexed(ctx)
		return time.Since(t), err
	}
	if _, err := settle(); err != nil {
		return err
	}
	// One client, alternating letter by letter.
	var one [2]latencies
	for i := range n + 100 {
		for k, p := range []*inproc{with, without} {
			d, err := p.sendBody(ctx, "send0", toks[k][0]["lead"], "m1", searchBody(i))
			if err != nil {
				return err
			}
			if i >= 100 {
				one[k] = append(one[k], d)
			}
		}
	}
	sent := 0 // letters sent per team and store so far, for distinct bodies
	// window runs 16 clients over 16 teams of store k for d and returns
	// its sends/s, latencies and the process's CPU per send over the
	// window; and the CPU per send counting what the window left for after
	// it: for the with-index store until its index is idle again, for the
	// store without over as long after its window as the last with-index
	// window took to settle, so that both are charged the same time of the
	// process's own work after a window (the garbage collector finishing
	// the window's garbage, timers), and the difference is the indexing.
	// Both stores run in this process, and the other store's index is
	// idle, so the CPU is this window's sends' (and the clients', the same
	// for both); unlike sends/s it does not move with what other processes
	// of the machine take.
	type part struct {
		rate            float64
		lat             latencies
		cpu, cpuIndexed time.Duration // per send
		after           time.Duration
	}
	var lastAfter time.Duration // the last with-index window's settling
	window := func(k int, d time.Duration) (part, error) {
		if _, err := settle(); err != nil {
			return part{}, err
		}
		p := []*inproc{with, without}[k]
		base := sent
		cpu0 := cpuTime()
		lat, took, err := runWindow(ctx, teams, d, func(w, i int) error {
			_, err := p.sendBody(ctx, fmt.Sprintf("send%d", w), toks[k][w]["lead"], "m1", searchBody((base+i)*teams+w))
			return err
		})
		cpu := cpuTime() - cpu0
		if err != nil || len(lat) == 0 {
			return part{}, errors.Join(err, errors.New("no send in a window"))
		}
		sent += len(lat)/teams + 1
		out := part{rate: float64(len(lat)) / took.Seconds(), lat: lat, cpu: cpu / time.Duration(len(lat))}
		if k == 0 {
			if out.after, err = settle(); err != nil {
				return part{}, err
			}
			lastAfter = out.after
		} else {
			out.after = lastAfter
			time.Sleep(out.after)
		}
		out.cpuIndexed = (cpuTime() - cpu0) / time.Duration(len(lat))
		return out, nil
	}
	// sum adds parts of one store: sends/s and CPU averaged, latencies
	// pooled.
	sum := func(parts ...part) part {
		var out part
		for _, x := range parts {
			n := time.Duration(len(parts))
			out.rate += x.rate / float64(len(parts))
			out.cpu += x.cpu / n
			out.cpuIndexed += x.cpuIndexed / n
			out.after += x.after / n
			out.lat = append(out.lat, x.lat...)
		}
		return out
	}
	// series is pairs of windows of d, one of each store back to back,
	// the first pair with then without, the next without then with, and
	// so on: the machine's own speed drifts by a fifth over minutes here,
	// so each pair's ratio compares windows seconds apart, and the
	// figure is the median of the pairs' ratios.
	type series struct {
		name         string
		x            [2]part // each store's windows summed
		cpu, indexed []float64
	}
	run := func(d time.Duration) (series, error) {
		out := series{name: fmt.Sprintf("%s windows, %d pairs", d, pairs)}
		var parts [2][]part
		for i := range pairs {
			var pair [2]part
			for _, k := range [][]int{{0, 1}, {1, 0}}[i%2] {
				x, err := window(k, d)
				if err != nil {
					return series{}, err
				}
				pair[k] = x
				parts[k] = append(parts[k], x)
			}
			out.cpu = append(out.cpu, ratio(pair[0].cpu, pair[1].cpu))
			out.indexed = append(out.indexed, ratio(pair[0].cpuIndexed, pair[1].cpuIndexed))
		}
		out.x = [2]part{sum(parts[0]...), sum(parts[1]...)}
		return out, nil
	}
	// 3 s windows: within the tail's bound, so nothing is indexed while
	// sends arrive.
	short, err := run(3 * time.Second)
	if err != nil {
		return err
	}
	// 20 s windows: more letters than the tail's bound, so that indexing
	// runs under the load.
	const sustained = 20 * time.Second
	long, err := run(sustained)
	if err != nil {
		return err
	}
	r.printf("s. a send's cost with the search index against without it (file store, same run; the index idle before each part)\n")
	r.printf("   1 client, alternating letter by letter: with p50 %s, p99 %s; without p50 %s, p99 %s\n", ms(one[0].pct(0.5)), ms(one[0].pct(0.99)), ms(one[1].pct(0.5)), ms(one[1].pct(0.99)))
	for _, w := range []series{short, long} {
		r.printf("   16 clients×16 teams, %s:\n", w.name)
		r.printf("     with:    %5.0f sends/s, p50 %s, p99 %s, CPU %s per send in the window, %s with the indexing after it (%s until the index was idle)\n",
			w.x[0].rate, ms(w.x[0].lat.pct(0.5)), ms(w.x[0].lat.pct(0.99)), us(w.x[0].cpu), us(w.x[0].cpuIndexed), w.x[0].after.Round(time.Millisecond))
		r.printf("     without: %5.0f sends/s, p50 %s, p99 %s, CPU %s per send in the window, %s with as long after it (%s)\n",
			w.x[1].rate, ms(w.x[1].lat.pct(0.5)), ms(w.x[1].lat.pct(0.99)), us(w.x[1].cpu), us(w.x[1].cpuIndexed), w.x[1].after.Round(time.Millisecond))
		r.printf("     with ÷ without, pair by pair: CPU in the window %s; with the indexing %s\n", ratios(w.cpu), ratios(w.indexed))
	}
	// The 3 s windows' letters are all indexed after the window, while
	// no send runs: what the process spent then beyond the store
	// without an index (its own idle work over as long) is the indexing
	// alone, with nothing of the machine's drift between windows in it.
	indexing := (short.x[0].cpuIndexed - short.x[0].cpu) - (short.x[1].cpuIndexed - short.x[1].cpu)
	send := short.x[1].cpu
	r.printf("   the indexing alone, after the 3 s windows: %s per letter; a send without the index: %s in its windows; together ÷ the send: %.2f\n",
		us(indexing), us(send), ratio(send+indexing, send))
	r.target(ratio(send+indexing, send) <= 1.1, "CPU per send plus its indexing alone ÷ without (3 s)", ratio(send+indexing, send), "≤ 1.10")
	r.target(ratio(one[0].pct(0.5), one[1].pct(0.5)) <= 1.1, "send p50 with the index ÷ without (1 client)", ratio(one[0].pct(0.5), one[1].pct(0.5)), "≤ 1.10")
	r.target(short.x[1].rate/short.x[0].rate <= 1.1, "16×16 sends/s without ÷ with (3 s)", short.x[1].rate/short.x[0].rate, "≤ 1.10")
	r.target(medianOf(short.cpu) <= 1.1, "16×16 CPU per send with ÷ without (3 s, median of pairs)", medianOf(short.cpu), "≤ 1.10")
	r.target(long.x[1].rate/long.x[0].rate <= 1.1, "16×16 sends/s without ÷ with (20 s)", long.x[1].rate/long.x[0].rate, "≤ 1.10")
	r.target(medianOf(long.cpu) <= 1.1, "16×16 CPU per send with ÷ without (20 s, median of pairs)", medianOf(long.cpu), "≤ 1.10")
	r.target(medianOf(short.indexed) <= 1.1, "CPU per send with its indexing ÷ without, same time after (3 s, median of pairs)", medianOf(short.indexed), "≤ 1.10")
	r.target(medianOf(long.indexed) <= 1.1, "CPU per send with its indexing ÷ without, same time after (20 s, median of pairs)", medianOf(long.indexed), "≤ 1.10")
	r.printf("\n")
	return nil
}

// ratios is readings as a list of figures, in the order taken.
func ratios(readings []float64) string {
	out := make([]string, len(readings))
	for i, x := range readings {
		out[i] = fmt.Sprintf("%.2f", x)
	}
	return strings.Join(out, " ")
}

// us is d in microseconds, for a figure's CPU per send.
func us(d time.Duration) string { return fmt.Sprintf("%.0f µs", float64(d)/float64(time.Microsecond)) }

// sendBody sends body and returns how long the 201 took.
func (p *inproc) sendBody(ctx context.Context, team, token, to, body string) (time.Duration, error) {
	t := time.Now()
	err := p.call(ctx, http.MethodPost, "/teams/"+team+"/messages", token, map[string]string{"to": to, "body": body}, nil, http.StatusCreated)
	return time.Since(t), err
}

func searchPostgres(ctx context.Context, dbURL string, letters, queries int, r *report) error {
	if dbURL == "" {
		cl, err := pgtest.Start()
		if err != nil {
			return fmt.Errorf("start a private PostgreSQL cluster: %w", err)
		}
		defer cl.Close()
		if err := cl.Exec(ctx, "postgres", "CREATE DATABASE loadgen_search"); err != nil {
			return err
		}
		dbURL = cl.URL("loadgen_search")
	}
	s, err := pgstore.Open(ctx, dbURL, pgstore.Options{Logger: slog.New(slog.DiscardHandler), MaxConns: 40})
	if err != nil {
		return err
	}
	p, err := serveInProcess(ctx, s, 40)
	if err != nil {
		return err
	}
	defer p.close()
	tokens, fill, err := fillSearchTeam(ctx, p, letters)
	if err != nil {
		return err
	}
	admin, found, err := timeSearches(ctx, p, adminToken, queries)
	if err != nil {
		return err
	}
	member, _, err := timeSearches(ctx, p, tokens["m1"], queries)
	if err != nil {
		return err
	}
	r.searches("PostgreSQL", letters, fill, admin, member, found)
	r.printf("\n")
	return nil
}
