package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"regexp"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"time"

	"mailroom/internal/agent"
	"mailroom/internal/core"
	"mailroom/internal/httpapi"
)

// runWake is `loadgen wake [-data DIR] [-samples N] [-teams N] [-keep]`:
// how fast a letter wakes its recipient (docs/api.md, E), against the
// real handler, core and file store in this process and a Messages API
// stand-in that answers at once, on loopback.
//
//   - 1 team, wake_delay_ms 0: a letter is sent, and the time from its
//     201 (and from the send's start) to the woken turn's first model
//     request at the provider is taken, one letter after the other;
//   - N teams with one wake member each, one letter to each at once by
//     64 clients, --max-running-turns 32: every turn is to end answered;
//     the wake latency's p50 and p99, and the resident memory the queued
//     wakes took.
func runWake(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("loadgen wake", flag.ContinueOnError)
	fs.SetOutput(stderr)
	data := fs.String("data", os.TempDir(), "`directory` for the work directory")
	samples := fs.Int("samples", 300, "letters of the one-team figure, one after the other")
	teams := fs.Int("teams", 1000, "teams of the burst figure, one wake member each")
	keep := fs.Bool("keep", false, "keep the work directory")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *samples < 10 || *teams < 1 {
		return errors.New("-samples must be at least 10 and -teams at least 1")
	}
	work, err := os.MkdirTemp(*data, "mailroom-loadgen-wake-")
	if err != nil {
		return err
	}
	if !*keep {
		defer os.RemoveAll(work)
	}
	r := &report{w: stdout}
	r.printf("Mailroom loadgen wake: %s, %s/%s, %d CPUs; load average at start: %s\n\n", time.Now().Format("2006-01-02 15:04"), runtime.GOOS, runtime.GOARCH, runtime.NumCPU(), loadAvg())

	fake, err := startFakeMessages()
	if err != nil {
		return err
	}
	defer fake.close()
	withModel := func(svc *core.Options, h *httpapi.Options) {
		svc.MaxRunningTurns = 32
		env := map[string]string{agent.EnvAnthropicKey: "sk-loadgen", agent.EnvAnthropicBase: fake.url}
		h.Models = httpapi.ModelOptions{
			Lookup:   func(k string) (string, bool) { v, ok := env[k]; return v, ok },
			Provider: agent.ProviderOptions{MaxRetries: -1, RequestTimeout: time.Minute},
		}
	}
	p, err := startInProcess(ctx, work, 64, withModel)
	if err != nil {
		return err
	}
	defer p.close()

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
	r.printf("wake burst: %d teams, one letter each from 64 clients at once, 32 slots\n", *teams)
	r.printf("  answered turns %d of %d in %s; most wakes queued at once %d\n", burst.answered, *teams, burst.elapsed.Round(time.Millisecond), burst.maxQueued)
	r.printf("  send's 201 → first model request:   p50 %s   p99 %s\n", signedMS(burst.lat.pct(0.50)), signedMS(burst.lat.pct(0.99)))
	if burst.maxQueued > 0 {
		r.printf("  resident memory: %d KiB before, %d KiB at the most queued (%.1f KiB per queued wake, an upper bound: the clients and the turns running share it)\n",
			burst.rssBefore, burst.rssPeak, float64(burst.rssPeak-burst.rssBefore)/float64(burst.maxQueued))
	}
	r.target(burst.answered == *teams, "turns answered ÷ teams", float64(burst.answered)/float64(*teams), "= 1.00")
	r.printf("\nload average at end: %s\n", loadAvg())
	return nil
}

func signedMS(d time.Duration) string {
	if d < 0 {
		return "-" + ms(-d)
	}
	return ms(d)
}

// fakeMessages is a Messages API stand-in: it answers every request at
// once with a short end_turn text and reports each request's arrival with
// the team named in its system text.
type fakeMessages struct {
	srv      *http.Server
	url      string
	arrivals chan arrival
}

type arrival struct {
	team string
	at   time.Time
}

var teamInSystem = regexp.MustCompile(`a member of team ([a-z0-9-]+)\.`)

func startFakeMessages() (*fakeMessages, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	f := &fakeMessages{url: "http://" + ln.Addr().String(), arrivals: make(chan arrival, 1<<16)}
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
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write(answer)
	})}
	go func() { _ = f.srv.Serve(ln) }()
	return f, nil
}

func (f *fakeMessages) close() { _ = f.srv.Close() }

// wakeTeam creates team name with reader woken on mail, on the fake's
// model, with room for n letters and turns.
func wakeTeam(ctx context.Context, p *inproc, name string, n int) (map[string]string, error) {
	return p.postTeam(ctx, map[string]any{
		"name":    name,
		"members": []map[string]any{{"name": "reader", "wake": true}},
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
	tokens, err := wakeTeam(ctx, p, "one", n)
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
	lat                latencies
	answered           int
	elapsed            time.Duration
	maxQueued          int
	rssBefore, rssPeak int64
}

// measureWakeBurst creates n teams with one wake member each and sends
// one letter to each from 64 clients at once.
func measureWakeBurst(ctx context.Context, p *inproc, fake *fakeMessages, n int) (burstFigure, error) {
	var f burstFigure
	tokens := make([]string, n)
	for i := range n {
		tok, err := wakeTeam(ctx, p, fmt.Sprintf("b%d", i), 1)
		if err != nil {
			return f, err
		}
		tokens[i] = tok["lead"]
	}
	runtime.GC()
	f.rssBefore = rssKiB()
	var mu sync.Mutex
	acked := map[string]time.Time{}
	stop := make(chan struct{})
	peakDone := make(chan struct{})
	go func() {
		defer close(peakDone)
		for {
			if q := p.svc.QueuedWakes(); q > f.maxQueued {
				f.maxQueued = q
				f.rssPeak = rssKiB()
			}
			select {
			case <-stop:
				return
			case <-time.After(time.Millisecond):
			}
		}
	}()
	start := time.Now()
	var wg sync.WaitGroup
	errs := make(chan error, 64)
	for c := range 64 {
		wg.Go(func() {
			for i := c; i < n; i += 64 {
				team := fmt.Sprintf("b%d", i)
				if err := p.call(ctx, http.MethodPost, "/teams/"+team+"/messages", tokens[i], map[string]string{"to": "reader", "body": sendBody}, nil, http.StatusCreated); err != nil {
					errs <- err
					return
				}
				mu.Lock()
				acked[team] = time.Now()
				mu.Unlock()
			}
		})
	}
	arrived := map[string]time.Time{}
	timeout := time.After(5 * time.Minute)
	for len(arrived) < n {
		select {
		case a := <-fake.arrivals:
			arrived[a.team] = a.at
		case err := <-errs:
			close(stop)
			return f, err
		case <-timeout:
			close(stop)
			return f, fmt.Errorf("%d of %d wakes reached the provider", len(arrived), n)
		}
	}
	wg.Wait()
	close(stop)
	<-peakDone
	for i := range n {
		team := fmt.Sprintf("b%d", i)
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

// rssKiB is this process's resident memory.
func rssKiB() int64 {
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return 0
	}
	for _, line := range strings.Split(string(b), "\n") {
		if rest, ok := strings.CutPrefix(line, "VmRSS:"); ok {
			v, _ := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(rest), " kB"), 10, 64)
			return v
		}
	}
	return 0
}
