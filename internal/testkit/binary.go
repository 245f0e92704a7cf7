// Package testkit is what the tests of several packages share: the real
// server binary, built once per test binary (with the race detector when
// the tests run under it, so the real process is race-checked too), and a
// real service over a temporary data directory.
package testkit

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"testing"
)

// Main builds mailroom/cmd/server into a temporary directory, stores its
// path in *bin, runs the tests and removes the directory. It returns the
// exit code for os.Exit, as TestMain needs.
func Main(m *testing.M, bin *string) int {
	dir, err := os.MkdirTemp("", "mailroom-bin-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer os.RemoveAll(dir)
	*bin = filepath.Join(dir, "mailroom")
	// -buildvcs=false: the tests need no version stamp, and the build must
	// not depend on the state or ownership of a git checkout.
	args := []string{"build", "-buildvcs=false", "-o", *bin}
	if raceEnabled {
		args = append(args, "-race")
	}
	build := exec.Command("go", append(args, "mailroom/cmd/server")...)
	build.Stdout, build.Stderr = os.Stderr, os.Stderr
	if err := build.Run(); err != nil {
		fmt.Fprintln(os.Stderr, "build server:", err)
		return 1
	}
	return m.Run()
}

// Output collects a process's output for the test to read while the
// process still writes it.
type Output struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

// Write appends p; the process's stdout or stderr writes here.
func (o *Output) Write(p []byte) (int, error) {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.buf.Write(p)
}

// String returns everything written so far.
func (o *Output) String() string {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.buf.String()
}
