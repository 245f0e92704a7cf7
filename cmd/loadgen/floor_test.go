package main

import (
	"os"
	"strings"
	"testing"
	"time"
)

func TestStatCPU(t *testing.T) {
	// Fields 14 and 15 (utime, stime) are 250 and 50 ticks.
	rest := " S 1 2 3 0 -1 4194560 100 0 0 0 250 50 0 0 20 0 9 0 12345 1000000 500"
	tests := []struct {
		name, stat string
		want       time.Duration
		wantErr    bool
	}{
		{"plain name", "4242 (mailroom)" + rest, 3 * time.Second, false},
		{"name with spaces and parentheses", "4242 (a) b (c))" + rest, 3 * time.Second, false},
		{"no command name", "4242 mailroom" + rest, 0, true},
		{"too few fields", "4242 (mailroom) S 1 2 3", 0, true},
		{"utime not a number", "4242 (mailroom) S 1 2 3 0 -1 4194560 100 0 0 0 x 50", 0, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := statCPU(tt.stat)
			if (err != nil) != tt.wantErr {
				t.Fatalf("statCPU error = %v, want error %v", err, tt.wantErr)
			}
			if got != tt.want {
				t.Errorf("statCPU = %v, want %v", got, tt.want)
			}
		})
	}
}

func TestProcCPUOfThisProcess(t *testing.T) {
	// Burn some CPU so that at least one clock tick is charged.
	deadline := time.Now().Add(50 * time.Millisecond)
	for n := 0; time.Now().Before(deadline); n++ {
		_ = strings.Repeat("x", n%64)
	}
	if got := procCPU(0); got != 0 {
		t.Errorf("procCPU(0) = %v, want 0 (no such process)", got)
	}
	if got := procCPU(os.Getpid()); got <= 0 {
		t.Errorf("procCPU(self) = %v, want > 0 after 50 ms of work", got)
	}
}

// lat is a sample whose every value is d.
func lat(d time.Duration, n int) latencies {
	l := make(latencies, n)
	for i := range l {
		l[i] = d
	}
	return l
}

func TestFloorTargets(t *testing.T) {
	raw := &rawFigure{single: lat(200*time.Microsecond, 5), parallel: 10000}
	ext := &extResult{
		health: lat(100*time.Microsecond, 5),
		figs: []extFigure{
			{sendFigure: sendFigure{clients: 1, teams: 1, lat: lat(600*time.Microsecond, 5)}},
			{sendFigure: sendFigure{clients: 64, teams: 64, rate: 6000}, serverCPU: 50 * time.Microsecond},
		},
	}
	ref := &refFigure{rate: 500}
	got := floorTargets(floorRun{raw: raw, ext: ext, ref: ref})
	want := []struct {
		key   string
		value float64
		pass  bool
	}{
		{"p1f", 2.0, false}, // 600 ÷ (100 + 200)
		{"p64", 0.6, true},  // 6000 ÷ 10000
		{"cpu64", 50, true}, // µs
		{"vs-ref", 12, false},
	}
	if len(got) != len(want) {
		t.Fatalf("got %d targets %+v, want %d", len(got), got, len(want))
	}
	for i, w := range want {
		g := got[i]
		if g.key != w.key || g.value < w.value-1e-9 || g.value > w.value+1e-9 || g.pass() != w.pass {
			t.Errorf("target %d = %s %.4f pass %v, want %s %.4f pass %v", i, g.key, g.value, g.pass(), w.key, w.value, w.pass)
		}
	}

	if got := floorTargets(floorRun{raw: raw, ref: ref}); got != nil {
		t.Errorf("without phase f: %+v, want no targets", got)
	}
	keys := func(ts []floorTarget) string {
		var k []string
		for _, t := range ts {
			k = append(k, t.key)
		}
		return strings.Join(k, " ")
	}
	if got := keys(floorTargets(floorRun{ext: ext})); got != "cpu64" {
		t.Errorf("phase f alone gives %q, want %q", got, "cpu64")
	}
	if got := keys(floorTargets(floorRun{ext: ext, ref: &refFigure{}})); got != "cpu64" {
		t.Errorf("a reference with no sends gives %q, want %q", got, "cpu64")
	}
}

func TestTallyFloor(t *testing.T) {
	run := func(p64, cpu float64) []floorTarget {
		return []floorTarget{
			{key: "p64", value: p64, bound: 0.5},
			{key: "cpu64", value: cpu, bound: 60, atMost: true},
		}
	}
	runs := [][]floorTarget{run(0.6, 70), run(0.4, 60), run(0.5, 50), nil, {{key: "p64", value: 0.7, bound: 0.5}}}
	got := tallyFloor(runs)
	want := []floorTally{{key: "p64", pass: 3, runs: 4}, {key: "cpu64", pass: 2, runs: 3}}
	if len(got) != len(want) {
		t.Fatalf("tallyFloor = %+v, want %+v", got, want)
	}
	for i := range want {
		if got[i].key != want[i].key || got[i].pass != want[i].pass || got[i].runs != want[i].runs {
			t.Errorf("tally %d = %+v, want %+v", i, got[i], want[i])
		}
	}
}

func TestQuorum(t *testing.T) {
	for _, tt := range []struct {
		key  string
		n    int
		want int
	}{{"p64", 5, 4}, {"p64", 1, 1}, {"p64", 2, 2}, {"p64", 10, 8}, {"p64", 6, 5}, {"p1f", 5, 0}} {
		if got := quorum(tt.key, tt.n); got != tt.want {
			t.Errorf("quorum(%q, %d) = %d, want %d", tt.key, tt.n, got, tt.want)
		}
	}
}

func TestFloorSummaryLine(t *testing.T) {
	var b strings.Builder
	r := &report{w: &b}
	r.floorSummary([]floorTally{{key: "p64", pass: 3, runs: 5}, {key: "p1f", pass: 5, runs: 5}}, 5)
	for _, want := range []string{"p64    PASS in 3 of 5 runs (needs 4 of 5: MISS)", "p1f    PASS in 5 of 5 runs\n"} {
		if !strings.Contains(b.String(), want) {
			t.Errorf("summary %q lacks %q", b.String(), want)
		}
	}
}

// TestMeasureMetered checks that each meter is read once before and once
// after the window (not around the setup) and its growth divided per
// send, and that an unknown reading stays unknown.
func TestMeasureMetered(t *testing.T) {
	ctx := t.Context()
	p, err := startInProcess(ctx, t.TempDir(), 4)
	if err != nil {
		t.Fatal(err)
	}
	defer p.close()
	var reads int
	counting := func() time.Duration {
		reads++
		return time.Duration(reads) * time.Second // 1 s before, 2 s after
	}
	unknown := func() time.Duration { return -1 }
	f, per, err := measureMetered(ctx, p, 2, 3, 100*time.Millisecond, counting, unknown)
	if err != nil {
		t.Fatal(err)
	}
	if len(f.lat) == 0 || f.clients != 2 || f.teams != 3 {
		t.Fatalf("figure: %d sends, %d clients, %d teams; want some sends, 2 clients, 3 teams", len(f.lat), f.clients, f.teams)
	}
	if reads != 2 {
		t.Errorf("meter read %d times, want 2", reads)
	}
	if want := time.Second / time.Duration(len(f.lat)); len(per) != 2 || per[0] != want || per[1] != -1 {
		t.Errorf("per send = %v, want [%v -1]", per, want)
	}
}
