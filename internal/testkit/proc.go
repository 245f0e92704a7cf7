package testkit

import (
	"bytes"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"
)

// Sleepers returns the pids of the processes running `sleep marker`: the
// sandbox tests start such children from a program (a marker of their own
// each) and look for them in /proc to prove that none outlived its run.
func Sleepers(t testing.TB, marker string) []string {
	t.Helper()
	entries, err := os.ReadDir("/proc")
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, e := range entries {
		b, err := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		if err != nil {
			continue
		}
		if args := bytes.Split(bytes.TrimRight(b, "\x00"), []byte{0}); len(args) == 2 && filepath.Base(string(args[0])) == "sleep" && string(args[1]) == marker {
			out = append(out, e.Name())
		}
	}
	return out
}

// ProcessCPU is the CPU time, user and system, this process has used so
// far. A benchmark reads it before and after its loop: unlike wall time it
// does not move with what the other processes of a shared machine take.
func ProcessCPU(tb testing.TB) time.Duration {
	tb.Helper()
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		tb.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
