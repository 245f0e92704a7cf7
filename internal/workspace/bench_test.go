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
// PATH, no process group). BENCHMARKS.md has the figures.
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
		{"sandbox", func() error { _, err := sandboxed.Run(context.Background(), ws); return err }},
		{"off", func() error { _, err := off.Run(context.Background(), ws); return err }},
		{"before", func() error {
			cmd := exec.Command("python3", Program)
			cmd.Dir = ws
			cmd.Env = []string{"PATH=" + os.Getenv("PATH")}
			return cmd.Run()
		}},
	}
	for _, c := range cases {
		b.Run(c.name, func(b *testing.B) {
			var times []time.Duration
			for b.Loop() {
				start := time.Now()
				if err := c.run(); err != nil {
					b.Fatal(err)
				}
				times = append(times, time.Since(start))
			}
			slices.Sort(times)
			b.ReportMetric(float64(times[len(times)/2].Microseconds())/1000, "p50-ms")
		})
	}
}
