package main

import (
	"context"
	"fmt"
	"io"
	"math"
	"slices"
	"sync"
	"time"
)

// latencies is a sample of operation times.
type latencies []time.Duration

// pct returns the p-th percentile (0 < p ≤ 1) by nearest rank.
func (l latencies) pct(p float64) time.Duration {
	if len(l) == 0 {
		return 0
	}
	s := slices.Clone(l)
	slices.Sort(s)
	i := int(math.Ceil(p*float64(len(s)))) - 1
	return s[max(i, 0)]
}

func ms(d time.Duration) string { return fmt.Sprintf("%.3f ms", float64(d)/float64(time.Millisecond)) }

// report prints the figures as they come and the targets at the end.
type report struct{ w io.Writer }

func (r *report) printf(format string, args ...any) { fmt.Fprintf(r.w, format, args...) }

func (r *report) raw(f rawFigure) {
	r.printf("a. raw disk bound (append %d-byte line + fdatasync, file kept open)\n", rawLine)
	r.printf("   1 file:   p50 %s, p99 %s, %.0f appends/s\n", ms(f.single.pct(0.5)), ms(f.single.pct(0.99)), f.singleRate)
	if len(f.ready) > 0 {
		r.printf("   1 file, written into zeros fsynced beforehand (as the log writes): p50 %s, p99 %s (%.2f × the append)\n",
			ms(f.ready.pct(0.5)), ms(f.ready.pct(0.99)), float64(f.ready.pct(0.5))/float64(f.single.pct(0.5)))
	}
	r.printf("   %d files in parallel: %.0f appends/s aggregate\n", rawFiles, f.parallel)
	r.printf("   %d files, the store's recipe by hand, file kept open (lstat, write, set mtime, fsync, fstat): %.0f appends/s (%.2f × raw)\n", rawFiles, f.recipe, f.recipe/f.parallel)
	r.printf("   %d files, the same opening and closing the file each time (open, fstat, …, close): %.0f appends/s (%.2f × raw)\n", rawFiles, f.recipeOpen, f.recipeOpen/f.parallel)
	r.printf("   for comparison, the file store's own append (mail.Store LoadInbox + AppendInbox, no HTTP, no core):\n")
	r.printf("   1 inbox:  p50 %s, p99 %s (%.2f × raw p50)\n", ms(f.store.pct(0.5)), ms(f.store.pct(0.99)), ratio(f.store.pct(0.5), f.single.pct(0.5)))
	r.printf("   %d inboxes in parallel: %.0f appends/s aggregate (%.2f × raw)\n\n", rawFiles, f.storeParallel, f.storeParallel/f.parallel)
}

func (r *report) sendsHeader() {
	r.printf("b. durable sends over HTTP (in-process server: real handler, core and file store; loopback)\n")
	r.printf("   %-8s %-6s %10s %12s %12s %14s\n", "clients", "teams", "sends/s", "p50", "p99", "CPU per send")
}

func (r *report) send(f sendFigure) {
	r.printf("   %-8d %-6d %10.0f %12s %12s %14s\n", f.clients, f.teams, f.rate, ms(f.lat.pct(0.5)), ms(f.lat.pct(0.99)), ms(f.cpu))
}

func (r *report) inbox(f inboxFigure) {
	r.printf("\nc. send latency by inbox size (one client, sends alternating between the two inboxes)\n")
	r.printf("   %d-letter inbox: p50 %s, p99 %s\n", f.letters, ms(f.full.pct(0.5)), ms(f.full.pct(0.99)))
	r.printf("   empty inbox:        p50 %s, p99 %s\n", ms(f.empty.pct(0.5)), ms(f.empty.pct(0.99)))
	r.printf("   ratio of p50s: %.2f\n\n", ratio(f.full.pct(0.5), f.empty.pct(0.5)))
}

func (r *report) restart(f restartFigure, teams int) {
	r.printf("d. restart of the server binary (%d idle teams of 3 members on disk, page cache warm)\n", teams)
	r.printf("   start to /healthz 200: %s (median of %d: %v); with no teams: %s\n", ms(f.ready), len(f.runs), f.runs, ms(f.ready0))
	r.printf("   the same load in process (mail.Open + core.Service.Open, no process start, no HTTP): %s; live heap %.2f KiB per team\n", ms(f.open), f.heap/1024)
	r.printf("   VmRSS: %d KiB with %d teams, %d KiB with none: %.2f KiB per team\n\n", f.rss, teams, f.rss0, f.perTeam)
}

func ratio(a, b time.Duration) float64 {
	if b == 0 {
		return math.Inf(1)
	}
	return float64(a) / float64(b)
}

// figures are the results of the phases that ran; nil when a phase did
// not run.
type figures struct {
	raw     *rawFigure
	sends   []sendFigure
	inbox   *inboxFigure
	restart *restartFigure
	keys    *keysFigure
	ext     []extFigure
}

func (r *report) keys(f keysFigure) {
	r.printf("e. remembered keys and a long history (one team; in-process server as in b; one request at a time)\n")
	r.printf("   setup: %d turns of one member, each with a %d-byte tool input; then %d keyed sends\n", f.turns, f.inputBytes, f.keys)
	r.printf("   state.json: %d bytes; idempotency log: %d bytes\n", f.stateBytes, f.logBytes)
	r.printf("   keyed send:   p50 %s, p99 %s\n", ms(f.keyed.pct(0.5)), ms(f.keyed.pct(0.99)))
	r.printf("   unkeyed send: p50 %s, p99 %s\n", ms(f.unkeyed.pct(0.5)), ms(f.unkeyed.pct(0.99)))
	r.printf("   another member's GET inbox (at random moments), team idle: p50 %s, p99 %s\n", ms(f.idle.pct(0.5)), ms(f.idle.pct(0.99)))
	r.printf("   the same while a client sends keyed letters to the team:   p50 %s, p99 %s (%d writes meanwhile)\n", ms(f.busy.pct(0.5)), ms(f.busy.pct(0.99)), f.busyWrites)
	r.printf("   the same while that client writes to another team:         p50 %s, p99 %s (%d writes meanwhile)\n\n", ms(f.other.pct(0.5)), ms(f.other.pct(0.99)), f.otherWrites)
}

// targets prints each target of the phases that ran as measured ÷
// reference against its bound.
func (r *report) targets(f figures, teams int) {
	type target struct {
		name   string
		value  float64
		bound  float64
		atMost bool
	}
	var list []target
	if f.raw != nil && f.sends != nil {
		one, par := find(f.sends, 1, 1), find(f.sends, 64, 64)
		list = append(list,
			target{"1-client send p50 ÷ raw 1-file append+fdatasync p50", ratio(one.lat.pct(0.5), f.raw.single.pct(0.5)), 2, true},
			target{"64 clients over 64 teams sends/s ÷ raw 64-file rate", par.rate / f.raw.parallel, 0.5, false})
	}
	if f.raw != nil && f.ext != nil {
		one, par, team := findExt(f.ext, 1, 1), findExt(f.ext, 64, 64), findExt(f.ext, 64, 1)
		list = append(list,
			target{"f: 1-client send p50 ÷ raw 1-file append+fdatasync p50", ratio(one.lat.pct(0.5), f.raw.single.pct(0.5)), 2, true},
			target{"f: 64 clients over 64 teams sends/s ÷ raw 64-file rate", par.rate / f.raw.parallel, 0.5, false},
			target{"f: 64 clients on one team sends/s ÷ raw 64-file rate", team.rate / f.raw.parallel, 0.25, false})
	}
	if f.inbox != nil {
		list = append(list, target{fmt.Sprintf("%d-letter inbox send p50 ÷ empty inbox p50", f.inbox.letters), ratio(f.inbox.full.pct(0.5), f.inbox.empty.pct(0.5)), 1.2, true})
	}
	if rs := f.restart; rs != nil {
		list = append(list,
			target{"restart to ready, seconds", rs.ready.Seconds(), 2, true},
			target{fmt.Sprintf("RSS per idle team at %d teams, KiB", teams), rs.perTeam, 8, true})
	}
	if k := f.keys; k != nil {
		list = append(list,
			target{fmt.Sprintf("keyed send p50 after %d keys ÷ unkeyed send p50", k.keys), ratio(k.keyed.pct(0.5), k.unkeyed.pct(0.5)), 1.5, true},
			target{"GET inbox p50, team busy ÷ team idle", ratio(k.busy.pct(0.5), k.idle.pct(0.5)), 2, true})
	}
	r.printf("targets\n")
	for _, t := range list {
		ok := t.value >= t.bound
		op := "≥"
		if t.atMost {
			ok, op = t.value <= t.bound, "≤"
		}
		word := "MISS"
		if ok {
			word = "PASS"
		}
		r.printf("   %s  %-56s %8.2f  (target %s %.2f)\n", word, t.name, t.value, op, t.bound)
	}
}

func findExt(fs []extFigure, clients, teams int) extFigure {
	for _, f := range fs {
		if f.clients == clients && f.teams == teams {
			return f
		}
	}
	return extFigure{}
}

func find(sends []sendFigure, clients, teams int) sendFigure {
	for _, s := range sends {
		if s.clients == clients && s.teams == teams {
			return s
		}
	}
	return sendFigure{}
}

// runWindow runs op from workers goroutines at once, each calling it with its
// worker number and a call count from 0, until d has passed or ctx ends.
// It returns every call's latency, the wall time of the whole window and
// the first error; a worker stops at its first error.
func runWindow(ctx context.Context, workers int, d time.Duration, op func(worker, n int) error) (latencies, time.Duration, error) {
	lats := make([]latencies, workers)
	errs := make([]error, workers)
	var wg sync.WaitGroup
	start := time.Now()
	deadline := start.Add(d)
	for i := range workers {
		wg.Go(func() {
			for n := 0; time.Now().Before(deadline) && ctx.Err() == nil; n++ {
				t := time.Now()
				if err := op(i, n); err != nil {
					errs[i] = err
					return
				}
				lats[i] = append(lats[i], time.Since(t))
			}
		})
	}
	wg.Wait()
	elapsed := time.Since(start)
	var all latencies
	for i := range workers {
		if errs[i] != nil {
			return nil, elapsed, errs[i]
		}
		all = append(all, lats[i]...)
	}
	return all, elapsed, ctx.Err()
}
