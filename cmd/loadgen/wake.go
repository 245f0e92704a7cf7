package main

import (
	"bufio"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"mailroom/internal/agent"
	"mailroom/internal/app"
	"mailroom/internal/core"
	"mailroom/internal/host"
	"mailroom/internal/runtime"
)

// runWake is `loadgen wake [-data DIR] [-samples N] [-teams N] [-slots N]
// [-pairs N] [-server BIN] [-keep]`: how fast a letter wakes its recipient
// (docs/api.md, E), and what a queued wake costs the server.
//
//   - 1 team, wake_delay_ms 0: a letter is sent, and the time from its
//     201 (and from the send's start) to the woken turn's first model
//     request at the provider is taken, one letter after the other;
//   - N teams with one wake member each, one letter to each at once by
//     64 clients, --max-running-turns -slots (32): every turn is to end
//     answered; the wake latency's p50 and p99.
//
// Both against the real handler, core and file store in this process
// and a Messages API stand-in that answers at once, on loopback. Then
// the memory of queued wakes alone, against the server binary in its own
// process (measureQueuedWakes).
func runWake(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	c := newSubcommand("wake", "server `binary` of the queued-wake figure (default: built with go build)", stderr)
	fs := c.fs
	samples := fs.Int("samples", 300, "letters of the one-team figure, one after the other")
	teams := fs.Int("teams", 1000, "teams of the burst and queued-wake figures, one wake member each")
	slots := fs.Int("slots", runtime.DefaultMaxRunningTurns, "--max-running-turns of the server: woken turns running at once")
	pairs := fs.Int("pairs", 3, "pairs of server runs without and with queued wakes (the pair with the median figure is reported)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *samples < 10 || *slots < 1 || *teams <= *slots || *pairs < 1 {
		return errors.New("-samples must be at least 10, -slots and -pairs at least 1, and -teams more than -slots")
	}
	work, r, done, err := c.begin(stdout)
	if err != nil {
		return err
	}
	defer done()

	fake, err := startFakeMessages(false)
	if err != nil {
		return err
	}
	defer fake.close()
	withModel := func(o *app.Options) {
		o.MaxRunningTurns = *slots
		env := map[string]string{agent.EnvAnthropicKey: "sk-loadgen", agent.EnvAnthropicBase: fake.url}
		o.Models = host.ModelOptions{
			Lookup:   func(k string) (string, bool) { v, ok := env[k]; return v, ok },
			Provider: agent.ProviderOptions{MaxRetries: -1, RequestTimeout: time.Minute},
		}
	}
	p, err := startInProcess(ctx, work, 64, withModel)
	if err != nil {
		return err
	}
	closeP := sync.OnceValue(p.close)
	defer closeP()

	one, issue, err := measureWakeOne(ctx, p, fake, *samples)
	if err != nil {
		return fmt.Errorf("one team: %w", err)
	}
	r.printf("wake latency, 1 team, wake_delay_ms 0, %d letters one after the other\n", len(one))
	r.printf("  send's 201 → first model request:   p50 %s   p99 %s   (negative: the request came first)\n", signedMS(one.pct(0.50)), signedMS(one.pct(0.99)))
	r.printf("  send issued → first model request:  p50 %s   p99 %s\n", ms(issue.pct(0.50)), ms(issue.pct(0.99)))
	r.target(one.pct(0.50) <= 5*time.Millisecond, "p50 201 → model request, ms", float64(one.pct(0.50))/float64(time.Millisecond), "≤ 5")
	r.target(one.pct(0.99) <= 25*time.Millisecond, "p99 201 → model request, ms", float64(one.pct(0.99))/float64(time.Millisecond), "≤ 25")
	r.printf("\n")

	burst, err := measureWakeBurst(ctx, p, fake, *teams)
	if err != nil {
		return fmt.Errorf("burst: %w", err)
	}
	r.printf("wake burst: %d teams, one letter each from 64 clients at once, %d slots\n", *teams, *slots)
	r.printf("  answered turns %d of %d in %s; most wakes queued at once %d\n", burst.answered, *teams, burst.elapsed.Round(time.Millisecond), burst.maxQueued)
	r.printf("  send's 201 → first model request:   p50 %s   p99 %s\n", signedMS(burst.lat.pct(0.50)), signedMS(burst.lat.pct(0.99)))
	r.target(burst.answered == *teams, "turns answered ÷ teams", float64(burst.answered)/float64(*teams), "= 1.00")
	r.printf("\n")
	_ = closeP() // the in-process server is done with: its goroutines leave the CPUs to the next figure

	bin, err := serverBinary(ctx, work, *c.server, stderr)
	if err != nil {
		return err
	}
	q, err := measureQueuedWakes(ctx, work, bin, *teams, *slots, *pairs)
	if err != nil {
		return fmt.Errorf("queued wakes: %w", err)
	}
	r.queuedWakes(q, *teams, *slots)
	r.printf("\nload average at end: %s\n", loadAvg())
	return nil
}

func signedMS(d time.Duration) string {
	if d < 0 {
		return "-" + ms(-d)
	}
	return ms(d)
}

// fakeMessages is a Messages API stand-in: it answers every request with
// a short end_turn text and reports each request's arrival with the team
// named in its system text. It answers at once, or, when it holds, once
// release is called: a turn waiting for its model request keeps its slot.
type fakeMessages struct {
	srv      *http.Server
	url      string
	arrivals chan arrival
	// hold, when not nil, is closed by release.
	hold    chan struct{}
	release func()
}

type arrival struct {
	team string
	at   time.Time
}

var teamInSystem = regexp.MustCompile(`a member of team ([a-z0-9-]+)\.`)

func startFakeMessages(hold bool) (*fakeMessages, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	f := &fakeMessages{url: "http://" + ln.Addr().String(), arrivals: make(chan arrival, 1<<16), release: func() {}}
	if hold {
		f.hold = make(chan struct{})
		f.release = sync.OnceFunc(func() { close(f.hold) })
	}
	answer, _ := json.Marshal(map[string]any{
		"id": "msg_loadgen", "type": "message", "role": "assistant", "model": "fake",
		"content":     []map[string]any{{"type": "text", "text": "Read."}},
		"stop_reason": "end_turn", "stop_sequence": nil,
		"usage": map[string]int{"input_tokens": 10, "output_tokens": 2},
	})
	f.srv = &http.Server{ReadHeaderTimeout: 5 * time.Second, Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		at := time.Now()
		body, _ := io.ReadAll(r.Body)
		var req struct {
			System json.RawMessage `json:"system"`
		}
		_ = json.Unmarshal(body, &req)
		team := ""
		if m := teamInSystem.FindSubmatch(req.System); m != nil {
			team = string(m[1])
		}
		f.arrivals <- arrival{team: team, at: at}
		if f.hold != nil {
			select {
			case <-f.hold:
			case <-r.Context().Done():
				return
			}
		}
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write(answer)
	})}
	go func() { _ = f.srv.Serve(ln) }()
	return f, nil
}

func (f *fakeMessages) close() { _ = f.srv.Close() }

// wakeTeam creates team name with reader woken on mail (unless wake is
// false), on the fake's model, with room for n letters and turns.
func wakeTeam(ctx context.Context, p *inproc, name string, n int, wake bool) (map[string]string, error) {
	return p.postTeam(ctx, map[string]any{
		"name":    name,
		"members": []map[string]any{{"name": "reader", "wake": wake}},
		"model":   map[string]any{"provider": "anthropic", "name": "fake"},
		"limits": map[string]any{"wake_delay_ms": 0, "turns": n + 1, "history_entries": 2*n + 10,
			"inbox_messages": n + 1, "inbox_bytes": 1 << 30, "model_tokens": 0},
	})
}

// waitTurnEnded polls turn id of team until it has ended and returns its
// status.
func waitTurnEnded(ctx context.Context, p *inproc, team, id string) (string, error) {
	deadline := time.Now().Add(time.Minute)
	for {
		var d struct {
			Status string `json:"status"`
		}
		err := p.call(ctx, http.MethodGet, "/teams/"+team+"/turns/"+id, adminToken, nil, &d, http.StatusOK)
		if err == nil && d.Status != core.TurnRunning {
			return d.Status, nil
		}
		if time.Now().After(deadline) {
			return "", fmt.Errorf("turn %s of %s did not end", id, team)
		}
		time.Sleep(time.Millisecond)
	}
}

// measureWakeOne sends n letters to one wake member, one after the
// other, each once the previous woken turn has ended.
func measureWakeOne(ctx context.Context, p *inproc, fake *fakeMessages, n int) (from201, fromIssue latencies, err error) {
	tokens, err := wakeTeam(ctx, p, "one", n, true)
	if err != nil {
		return nil, nil, err
	}
	for i := 1; i <= n; i++ {
		start := time.Now()
		if err := p.call(ctx, http.MethodPost, "/teams/one/messages", tokens["lead"], map[string]string{"to": "reader", "body": sendBody}, nil, http.StatusCreated); err != nil {
			return nil, nil, err
		}
		acked := time.Now()
		select {
		case a := <-fake.arrivals:
			from201 = append(from201, a.at.Sub(acked))
			fromIssue = append(fromIssue, a.at.Sub(start))
		case <-time.After(30 * time.Second):
			return nil, nil, fmt.Errorf("letter %d woke no turn", i)
		case <-ctx.Done():
			return nil, nil, ctx.Err()
		}
		status, err := waitTurnEnded(ctx, p, "one", "reader-t"+strconv.Itoa(i))
		if err != nil {
			return nil, nil, err
		}
		if status != core.TurnAnswered {
			return nil, nil, fmt.Errorf("turn %d ended %s", i, status)
		}
	}
	return from201, fromIssue, nil
}

type burstFigure struct {
	lat       latencies
	answered  int
	elapsed   time.Duration
	maxQueued int
}

// sendEach sends one letter to reader of each team prefix+i (i below
// len(tokens), the lead's token of each) from 64 clients at once, and
// calls acked with the team at each 201. The channel it returns yields
// the first error, and is closed once every send has been answered.
func sendEach(ctx context.Context, p *inproc, prefix string, tokens []string, acked func(team string)) <-chan error {
	errs := make(chan error, 1)
	var wg sync.WaitGroup
	for c := range 64 {
		wg.Go(func() {
			for i := c; i < len(tokens); i += 64 {
				team := prefix + strconv.Itoa(i)
				if err := p.call(ctx, http.MethodPost, "/teams/"+team+"/messages", tokens[i], map[string]string{"to": "reader", "body": sendBody}, nil, http.StatusCreated); err != nil {
					select {
					case errs <- err:
					default:
					}
					return
				}
				if acked != nil {
					acked(team)
				}
			}
		})
	}
	go func() {
		wg.Wait()
		close(errs)
	}()
	return errs
}

// measureWakeBurst creates n teams with one wake member each and sends
// one letter to each from 64 clients at once.
func measureWakeBurst(ctx context.Context, p *inproc, fake *fakeMessages, n int) (burstFigure, error) {
	var f burstFigure
	tokens := make([]string, n)
	for i := range n {
		tok, err := wakeTeam(ctx, p, "b"+strconv.Itoa(i), 1, true)
		if err != nil {
			return f, err
		}
		tokens[i] = tok["lead"]
	}
	var mu sync.Mutex
	acked := map[string]time.Time{}
	stop := make(chan struct{})
	peakDone := make(chan struct{})
	go func() {
		defer close(peakDone)
		for {
			f.maxQueued = max(f.maxQueued, p.app.Waker().Queued())
			select {
			case <-stop:
				return
			case <-time.After(time.Millisecond):
			}
		}
	}()
	start := time.Now()
	errs := sendEach(ctx, p, "b", tokens, func(team string) {
		mu.Lock()
		acked[team] = time.Now()
		mu.Unlock()
	})
	arrived := map[string]time.Time{}
	timeout := time.After(5 * time.Minute)
	for len(arrived) < n || errs != nil {
		select {
		case a := <-fake.arrivals:
			arrived[a.team] = a.at
		case err, open := <-errs:
			if open {
				close(stop)
				return f, err
			}
			errs = nil // every send answered
		case <-timeout:
			close(stop)
			return f, fmt.Errorf("%d of %d wakes reached the provider", len(arrived), n)
		}
	}
	close(stop)
	<-peakDone
	for i := range n {
		team := "b" + strconv.Itoa(i)
		status, err := waitTurnEnded(ctx, p, team, "reader-t1")
		if err != nil {
			return f, err
		}
		if status == core.TurnAnswered {
			f.answered++
		}
		f.lat = append(f.lat, arrived[team].Sub(acked[team]))
	}
	f.elapsed = time.Since(start)
	return f, nil
}

// The memory of queued wakes alone. The server binary runs in its own
// process over a fresh data directory, with --max-running-turns slots
// and a Messages API stand-in that holds every request until released,
// so that the woken turns that start keep their slots and every later
// wake stays queued. Two runs of the same server, each over the same
// teams (one reader each, on the stand-in's model) and the same letters
// (one to each reader, sent from 64 clients at once), differ in one
// thing only:
//
//   - base: slots of the readers have wake set, the others not. Their
//     letters wake slots turns, which run (held at the provider); no wake
//     is queued; the other letters sit in inboxes.
//   - wake: every reader has wake set. The same slots turns run; the
//     other teams-slots wakes are queued (mailroom_wakes_queued says so
//     before anything is read).
//
// Both hold the same teams, letters, connections and running turns, so
// (wake − base) ÷ queued is what a queued wake costs (with what makes one:
// its member known to the waker as having wake set, its letter looked
// at), and none of the clients, letters or running turns.
// Each reading is taken at the same point of each run: 2 s after the
// state is reached, the server is made to collect garbage twice (GETs of
// /metrics until go_gc_duration_seconds_count has grown by two: the
// server has no way to be asked to collect), then 1 s later five
// readings 200 ms apart are taken and the median kept: VmRSS and RssAnon
// (VmRSS without the pages of the binary and other files) from /proc, and
// go_memstats_heap_inuse_bytes, go_memstats_next_gc_bytes and
// go_goroutines from /metrics. The heap in use holds whatever was
// allocated since the collection (a few answers of /metrics); the next
// collection's goal is fixed by the last one, at twice the heap it found
// live (GOGC 100) plus the stacks it scanned and the globals, so half its
// change is the change of the live heap, to within the stacks. After the
// readings the stand-in is released and every woken turn must end
// answered (teams of them in the wake run).
//
// Resident memory depends on the heap's highest point during the burst
// and on how much of it the runtime has returned to the system since,
// which differ from run to run by more than the heap in use after the
// collections does: -pairs repeats the two runs, and the pair with the
// median RSS figure is reported.

// Bounds and pacing of the queued-wake figure.
const (
	queuedDeadline = 2 * time.Minute        // to reach the state, and to collect twice
	queuedSettle   = 2 * time.Second        // after the state, before the collections
	queuedReadings = 5                      // readings, median kept
	queuedEvery    = 200 * time.Millisecond // between readings
)

// queuedRun is one server run of the queued-wake figure.
type queuedRun struct {
	wake            bool // every reader has wake set
	running, queued int  // at the readings (queued from /metrics)
	// rss is VmRSS and anon its RssAnon (without the binary's and other
	// files' pages), in KiB; heap is go_memstats_heap_inuse_bytes and goal
	// go_memstats_next_gc_bytes.
	rss, anon              int64
	heap, goal, goroutines float64
	answered               int           // woken turns answered after the release
	drain                  time.Duration // release → the last of them answered
}

// queuedFigure is the queued-wake figure: a base and a wake run per pair.
type queuedFigure struct {
	pairs [][2]queuedRun
}

// queuedCost is a pair's cost per queued wake: (wake − base) ÷ queued.
type queuedCost struct {
	rss, anon  float64 // KiB
	heap       float64 // bytes
	live       float64 // bytes: half the change of the collection's goal
	goroutines float64
}

func perWake(p [2]queuedRun) queuedCost {
	base, wake := p[0], p[1]
	n := float64(max(wake.queued, 1))
	return queuedCost{
		rss:        float64(wake.rss-base.rss) / n,
		anon:       float64(wake.anon-base.anon) / n,
		heap:       (wake.heap - base.heap) / n,
		live:       (wake.goal - base.goal) / 2 / n,
		goroutines: (wake.goroutines - base.goroutines) / n,
	}
}

// median is the pair with the median RSS per queued wake (of an even
// number, the higher of the middle two).
func (q queuedFigure) median() [2]queuedRun {
	s := slices.Clone(q.pairs)
	slices.SortFunc(s, func(a, b [2]queuedRun) int { return cmp.Compare(perWake(a).rss, perWake(b).rss) })
	return s[len(s)/2]
}

// medianOf is the median of readings (of an even number, the higher of
// the middle two).
func medianOf[T cmp.Ordered](readings []T) T {
	s := slices.Clone(readings)
	slices.Sort(s)
	return s[len(s)/2]
}

// procRSS reads a process's VmRSS and RssAnon in KiB.
func procRSS(pid int) (rss, anon int64, err error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0, 0, err
	}
	found := 0
	for line := range strings.SplitSeq(string(b), "\n") {
		name, value, ok := strings.Cut(line, ":")
		if !ok || (name != "VmRSS" && name != "RssAnon") {
			continue
		}
		v, err := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(value), " kB"), 10, 64)
		if err != nil {
			return 0, 0, fmt.Errorf("/proc status %s: %w", name, err)
		}
		if name == "VmRSS" {
			rss = v
		} else {
			anon = v
		}
		found++
	}
	if found != 2 {
		return 0, 0, errors.New("no VmRSS or RssAnon in /proc status")
	}
	return rss, anon, nil
}

func measureQueuedWakes(ctx context.Context, work, bin string, teams, slots, pairs int) (queuedFigure, error) {
	var q queuedFigure
	for i := range pairs {
		var pair [2]queuedRun
		// Base first in odd pairs, wake first in even ones, so that
		// whatever drifts over the runs (the machine's page cache, its
		// load) does not lean one way.
		order := []int{0, 1}
		if i%2 == 1 {
			order = []int{1, 0}
		}
		for _, j := range order {
			wake := j == 1
			dir := filepath.Join(work, fmt.Sprintf("queued-%d-%t", i, wake))
			run, err := measureQueuedRun(ctx, bin, dir, teams, slots, wake)
			if err != nil {
				return q, fmt.Errorf("pair %d (wake %t): %w", i+1, wake, err)
			}
			pair[j] = run
		}
		q.pairs = append(q.pairs, pair)
	}
	return q, nil
}

// measureQueuedRun is one run: a fresh server over dir, teams teams whose
// readers all have wake set (wake) or only the first slots of them.
func measureQueuedRun(ctx context.Context, bin, dir string, teams, slots int, wake bool) (queuedRun, error) {
	out := queuedRun{wake: wake}
	fake, err := startFakeMessages(true)
	if err != nil {
		return out, err
	}
	defer fake.close()
	addr, err := freeAddr()
	if err != nil {
		return out, err
	}
	// The server is stopped as the process ends: SIGTERM, and a kill if it
	// has not exited exitDeadline later.
	stop, cancel := context.WithCancel(context.Background())
	cmd := exec.CommandContext(stop, bin)
	cmd.Cancel = func() error { return cmd.Process.Signal(syscall.SIGTERM) }
	cmd.WaitDelay = exitDeadline
	cmd.Env = append(serverEnv(addr, dir),
		agent.EnvAnthropicKey+"=sk-loadgen", agent.EnvAnthropicBase+"="+fake.url,
		"MAILROOM_MAX_RUNNING_TURNS="+strconv.Itoa(slots))
	var logs tail
	cmd.Stdout, cmd.Stderr = io.Discard, &logs
	if err := cmd.Start(); err != nil {
		cancel()
		return out, err
	}
	defer func() {
		cancel()
		_ = cmd.Wait()
	}()
	// On an early return too, the held turns are answered before the
	// server stops, rather than interrupted.
	defer fake.release()
	tr := &http.Transport{MaxIdleConns: 128, MaxIdleConnsPerHost: 128, DisableCompression: true}
	defer tr.CloseIdleConnections()
	p := &inproc{url: "http://" + addr, client: &http.Client{Transport: tr, Timeout: time.Minute}}
	for start := time.Now(); ; time.Sleep(5 * time.Millisecond) { // polling interval of the start
		if resp, err := p.client.Get(p.url + "/healthz"); err == nil {
			resp.Body.Close()
			break
		}
		if time.Since(start) > readyDeadline {
			return out, fmt.Errorf("server not ready: %s", logs.String())
		}
	}

	// The teams, from 8 clients: their creation is setup, not measured.
	tokens := make([]string, teams)
	var next atomic.Int64
	var wg sync.WaitGroup
	errs := make([]error, 8)
	for w := range errs {
		wg.Go(func() {
			for i := int(next.Add(1)) - 1; i < teams; i = int(next.Add(1)) - 1 {
				tok, err := wakeTeam(ctx, p, "q"+strconv.Itoa(i), 1, wake || i < slots)
				if err != nil {
					errs[w] = err
					return
				}
				tokens[i] = tok["lead"]
			}
		})
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return out, fmt.Errorf("create teams: %w", err)
	}

	// The letters, and the state: slots turns held at the provider, the
	// rest of the wakes queued (none in the base run).
	wantQueued := 0
	if wake {
		wantQueued = teams - slots
	}
	sent := sendEach(ctx, p, "q", tokens, nil)
	deadline := time.After(queuedDeadline)
	for sent != nil || out.running < slots || out.queued != wantQueued {
		select {
		case <-fake.arrivals:
			out.running++
			if out.running > slots {
				return out, fmt.Errorf("%d model requests at once, want at most %d", out.running, slots)
			}
		case err, open := <-sent:
			if open {
				return out, err
			}
			sent = nil
		case <-time.After(20 * time.Millisecond): // polling interval of the gauge
			m, err := scrapeMetrics(p)
			if err != nil {
				return out, err
			}
			out.queued = int(m["mailroom_wakes_queued"])
		case <-deadline:
			return out, fmt.Errorf("state not reached within %v: %d turns running, %d wakes queued (want %d, %d): %s",
				queuedDeadline, out.running, out.queued, slots, wantQueued, logs.String())
		}
	}

	time.Sleep(queuedSettle)
	if err := collectTwice(p); err != nil {
		return out, err
	}
	time.Sleep(time.Second)
	var rss, anons []int64
	var heap, goal, goroutines []float64
	for range queuedReadings {
		kib, anon, err := procRSS(cmd.Process.Pid)
		if err != nil {
			return out, err
		}
		m, err := scrapeMetrics(p)
		if err != nil {
			return out, err
		}
		if q := int(m["mailroom_wakes_queued"]); q != wantQueued {
			return out, fmt.Errorf("%d wakes queued during the readings, want %d", q, wantQueued)
		}
		rss = append(rss, kib)
		anons = append(anons, anon)
		heap = append(heap, m["go_memstats_heap_inuse_bytes"])
		goal = append(goal, m["go_memstats_next_gc_bytes"])
		goroutines = append(goroutines, m["go_goroutines"])
		time.Sleep(queuedEvery)
	}
	out.rss, out.anon, out.heap, out.goal, out.goroutines = medianOf(rss), medianOf(anons), medianOf(heap), medianOf(goal), medianOf(goroutines)

	// Released, every woken turn runs and ends answered.
	released := time.Now()
	fake.release()
	woken := slots
	if wake {
		woken = teams
	}
	for i := range woken {
		status, err := waitTurnEnded(ctx, p, "q"+strconv.Itoa(i), "reader-t1")
		if err != nil {
			return out, err
		}
		if status == core.TurnAnswered {
			out.answered++
		}
	}
	out.drain = time.Since(released)
	return out, nil
}

// collectTwice makes the server collect garbage twice, by reading its
// /metrics (an answer of a few KiB, garbage once written) until
// go_gc_duration_seconds_count has grown by two: the second collection
// finds the first one's sweeping done. A small answer keeps small what a
// collection counts as live only because it was allocated while the
// collection ran (the list of 1,000 teams is far larger).
func collectTwice(p *inproc) error {
	m, err := scrapeMetrics(p)
	if err != nil {
		return err
	}
	from := m["go_gc_duration_seconds_count"]
	for start := time.Now(); m["go_gc_duration_seconds_count"] < from+2; {
		if time.Since(start) > queuedDeadline {
			return fmt.Errorf("the server did not collect garbage twice within %v", queuedDeadline)
		}
		if m, err = scrapeMetrics(p); err != nil {
			return err
		}
	}
	return nil
}

// scrapeMetrics reads the server's /metrics: the value of every sample
// without labels, by name.
func scrapeMetrics(p *inproc) (map[string]float64, error) {
	resp, err := p.client.Get(p.url + "/metrics")
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("GET /metrics: %s", resp.Status)
	}
	out := map[string]float64{}
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) != 2 || strings.HasPrefix(f[0], "#") || strings.ContainsRune(f[0], '{') {
			continue
		}
		if v, err := strconv.ParseFloat(f[1], 64); err == nil {
			out[f[0]] = v
		}
	}
	return out, sc.Err()
}

func (r *report) queuedWakes(q queuedFigure, teams, slots int) {
	r.printf("queued wakes alone: the server binary in its own process, --max-running-turns %d, the provider holding every request;\n", slots)
	r.printf("  %d teams of one reader, one letter to each from 64 clients at once; base: %d readers with wake (%d turns run, none queued),\n", teams, slots, slots)
	r.printf("  wake: every reader with wake (%d turns run, the rest queued); the same teams, letters and running turns in both;\n", slots)
	r.printf("  readings after two forced collections, median of %d\n", queuedReadings)
	r.printf("  pair run   running  queued   VmRSS KiB  RssAnon KiB  heap in use KiB  GC goal KiB  goroutines  answered after release\n")
	for i, p := range q.pairs {
		for _, run := range p {
			name := "base"
			if run.wake {
				name = "wake"
			}
			r.printf("  %4d %-5s %7d %7d %11d %12d %16.0f %12.0f %11.0f  %d in %s\n", i+1, name, run.running, run.queued, run.rss, run.anon, run.heap/1024, run.goal/1024, run.goroutines, run.answered, run.drain.Round(time.Millisecond))
		}
	}
	m := q.median()
	c := perWake(m)
	r.printf("  per queued wake, (wake − base) ÷ %d, pair %d of %d (the median RSS figure):\n", m[1].queued, slices.Index(q.pairs, m)+1, len(q.pairs))
	r.printf("    VmRSS %.2f KiB, RssAnon %.2f KiB, heap in use %.0f bytes, live heap %.0f bytes (half the GC goal's change), goroutines %.3f\n", c.rss, c.anon, c.heap, c.live, c.goroutines)
	r.printf("    live heap per queued wake in each pair:")
	for _, p := range q.pairs {
		r.printf(" %.0f", perWake(p).live)
	}
	r.printf(" bytes\n")
	answered, woken := 0, 0
	for _, p := range q.pairs {
		answered += p[0].answered + p[1].answered
		woken += slots + teams
	}
	r.target(answered == woken, "turns answered after the release ÷ woken", float64(answered)/float64(woken), "= 1.00")
	r.target(c.rss <= 8, "RSS growth per queued wake, KiB", c.rss, "≤ 8")
}
