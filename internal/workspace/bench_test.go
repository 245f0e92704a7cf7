package workspace

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"testing"
	"time"
)

// BenchmarkStartup measures what the sandbox adds to a run's start: the
// p50 of runs of a print(1) program, confined, unconfined (--sandbox off)
// and as run_main started it before the sandbox (python3 looked up on
// PATH, no process group), taking turns. BENCHMARKS.md has the figures.
//
//	go test -run '^$' -bench Startup -benchtime 50x ./internal/workspace/
func BenchmarkStartup(b *testing.B) {
	ws := b.TempDir()
	if err := os.WriteFile(filepath.Join(ws, Program), []byte("print(1)\n"), 0o600); err != nil {
		b.Fatal(err)
	}
	sandboxed := Default()
	off := NewRunner(ModeOff, nil)
	if why := sandboxed.Available(); why != "" {
		b.Fatalf("the sandbox is not available: %s", why)
	}
	cases := []struct {
		name string
		run  func() error
	}{
		{"sandbox", func() error { _, err := sandboxed.Run(context.Background(), ws, Quota{}); return err }},
		{"off", func() error { _, err := off.Run(context.Background(), ws, Quota{}); return err }},
		{"before", func() error {
			cmd := exec.Command("python3", Program)
			cmd.Dir = ws
			cmd.Env = []string{"PATH=" + os.Getenv("PATH")}
			return cmd.Run()
		}},
	}
	// The cases take turns, so that a busy machine's drift weighs on
	// each alike.
	times := make([][]time.Duration, len(cases))
	for b.Loop() {
		for i, c := range cases {
			start := time.Now()
			if err := c.run(); err != nil {
				b.Fatalf("%s: %v", c.name, err)
			}
			times[i] = append(times[i], time.Since(start))
		}
	}
	for i, c := range cases {
		slices.Sort(times[i])
		b.ReportMetric(float64(times[i][len(times[i])/2].Microseconds())/1000, "p50-ms-"+c.name)
	}
}
