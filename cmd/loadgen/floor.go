package main

import (
	"fmt"
	"time"
)

// The floor targets compare a send with what no server can avoid on this
// machine: a round trip over HTTP to the same binary (GET /healthz) and an
// append made durable (phase a); and with the lessons' own functions
// behind a minimal HTTP server (phase r). Each is a ratio from one run;
// -runs repeats phases a, f and r and counts the runs each target passed.

// floorRun is what one run of phases a, f and r measured; nil for a phase
// that did not run.
type floorRun struct {
	raw *rawFigure
	ext *extResult
	ref *refFigure
}

// floorTarget is one floor target of one run.
type floorTarget struct {
	key    string // short name, the same in every run
	name   string
	value  float64
	bound  float64
	atMost bool
}

func (t floorTarget) pass() bool {
	if t.atMost {
		return t.value <= t.bound
	}
	return t.value >= t.bound
}

// Bounds of the floor targets.
const (
	p1fBound   = 1.5 // 1-client send ÷ (round trip + durable append)
	p64Bound   = 0.5 // 64×64 sends/s ÷ raw 64-file appends/s
	cpu64Bound = 60  // µs of the server's CPU per send at 64×64
	vsRefBound = 20  // 64×64 sends/s ÷ the lessons' code's
)

// floorTargets are the targets the phases of one run allow.
func floorTargets(fr floorRun) []floorTarget {
	var out []floorTarget
	if fr.ext == nil {
		return nil
	}
	one, par := findExt(fr.ext.figs, 1, 1), findExt(fr.ext.figs, 64, 64)
	if fr.raw != nil {
		floor := fr.ext.health.pct(0.5) + fr.raw.single.pct(0.5)
		out = append(out,
			floorTarget{"p1f", "1-client send p50 ÷ (GET /healthz p50 + raw append+fdatasync p50)", ratio(one.lat.pct(0.5), floor), p1fBound, true},
			floorTarget{"p64", "64 clients over 64 teams sends/s ÷ raw 64-file appends/s", par.rate / fr.raw.parallel, p64Bound, false})
	}
	out = append(out, floorTarget{"cpu64", "server CPU per send at 64×64, µs", float64(par.serverCPU) / float64(time.Microsecond), cpu64Bound, true})
	if fr.ref != nil && fr.ref.rate > 0 {
		out = append(out, floorTarget{"vs-ref", "64×64 sends/s ÷ the lessons' code behind HTTP at 64×64", par.rate / fr.ref.rate, vsRefBound, false})
	}
	return out
}

// floorTally is how many runs one target passed.
type floorTally struct {
	key, name  string
	pass, runs int
}

// tallyFloor counts, per target in the order they first appear, the runs
// that measured it and those it passed.
func tallyFloor(runs [][]floorTarget) []floorTally {
	var out []floorTally
	index := map[string]int{}
	for _, ts := range runs {
		for _, t := range ts {
			i, ok := index[t.key]
			if !ok {
				i = len(out)
				index[t.key] = i
				out = append(out, floorTally{key: t.key, name: t.name})
			}
			out[i].runs++
			if t.pass() {
				out[i].pass++
			}
		}
	}
	return out
}

// quorum is how many of n runs a target must pass, when the target says:
// p64 in at least 4 runs of 5 (four fifths, rounded up); 0 for the
// others, which are reported run by run.
func quorum(key string, n int) int {
	if key == "p64" {
		return (4*n + 4) / 5
	}
	return 0
}

// floor prints one run's floor targets and the figure beside cpu64.
func (r *report) floor(fr floorRun, ts []floorTarget, run, runs int) {
	if len(ts) == 0 {
		return
	}
	if runs > 1 {
		r.printf("floor targets, run %d of %d\n", run, runs)
	} else {
		r.printf("floor targets\n")
	}
	for _, t := range ts {
		r.printf("   %s  %-6s %-66s %8.2f  (target %s %.2f)\n", passWord(t.pass()), t.key, t.name, t.value, op(t.atMost), t.bound)
	}
	if fr.ext != nil {
		r.printf("   figure: server CPU per GET /healthz at 64 clients (the HTTP stack's own floor): %.1f µs\n",
			float64(fr.ext.health64.serverCPU)/float64(time.Microsecond))
	}
	r.printf("\n")
}

// floorSummary prints how many runs each floor target passed.
func (r *report) floorSummary(tallies []floorTally, runs int) {
	if len(tallies) == 0 {
		return
	}
	r.printf("floor targets over %d run(s)\n", runs)
	for _, t := range tallies {
		line := fmt.Sprintf("   %-6s PASS in %d of %d runs", t.key, t.pass, t.runs)
		if q := quorum(t.key, t.runs); q > 0 {
			line += fmt.Sprintf(" (needs %d of %d: %s)", q, t.runs, passWord(t.pass >= q))
		}
		r.printf("%s\n", line)
	}
	r.printf("\n")
}

func passWord(ok bool) string {
	if ok {
		return "PASS"
	}
	return "MISS"
}

func op(atMost bool) string {
	if atMost {
		return "≤"
	}
	return "≥"
}
