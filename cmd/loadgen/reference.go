package main

import (
	"bufio"
	"context"
	_ "embed"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"
)

// Phase r: the lessons' own send_message behind a minimal HTTP server,
// measured with the same 64 clients over 64 teams as Mailroom's phase f.
// With -ref URL loadgen only sends to a server already running there;
// with -ref-lesson FILE it starts reference.py (embedded below) under
// python3, which loads the lesson's functions from FILE at run time.

//go:embed reference.py
var referenceProgram []byte

// refTeams is both the client and the team count of phase r, as in
// Mailroom's 64×64 figure.
const refTeams = 64

// refFigure is phase r's result.
type refFigure struct {
	source string // what was measured: the URL or the lesson file
	rate   float64
	lat    latencies
}

// Lines that bound the lesson's listing in the lesson page's text: the
// listing starts at the first and ends before the second.
const (
	listingStart = "from copy import deepcopy"
	listingEnd   = "def prepare_inbox"
)

// lessonListing returns the Python code in a lesson file. A file named
// *.py is Python already (the lesson's runtime.py) and is returned whole;
// any other file is taken as a lesson page's text, and the listing is
// its lines from the first line `from copy import deepcopy` up to the
// line before the next `def prepare_inbox…`.
func lessonListing(name, text string) (string, error) {
	if strings.HasSuffix(name, ".py") {
		return text, nil
	}
	lines := strings.Split(strings.ReplaceAll(text, "\r\n", "\n"), "\n")
	start := -1
	for i, l := range lines {
		l = strings.TrimRight(l, " \t")
		if start < 0 && l == listingStart {
			start = i
		} else if start >= 0 && strings.HasPrefix(l, listingEnd) {
			return strings.Join(lines[start:i], "\n") + "\n", nil
		}
	}
	if start < 0 {
		return "", fmt.Errorf("%s: no line %q starts a listing", name, listingStart)
	}
	return "", fmt.Errorf("%s: no line %q after the listing's start", name, listingEnd+"…")
}

func measureReference(ctx context.Context, dir string, cfg config) (refFigure, error) {
	f := refFigure{source: cfg.refURL}
	base := strings.TrimRight(cfg.refURL, "/")
	if base == "" {
		f.source = cfg.refLesson
		url, stop, err := startReference(dir, cfg.refLesson)
		if err != nil {
			return f, err
		}
		defer stop()
		base = url
	}
	tr := &http.Transport{MaxIdleConns: 2 * refTeams, MaxIdleConnsPerHost: 2 * refTeams, DisableCompression: true}
	defer tr.CloseIdleConnections()
	client := &http.Client{Transport: tr, Timeout: time.Minute}
	// The same request as Mailroom's sends (loadgen's postJSON; the
	// reference ignores the empty bearer token).
	body := map[string]string{"to": "lead", "body": sendBody}
	send := func(team int) error {
		if err := postJSON(ctx, client, fmt.Sprintf("%s/teams/loadgen-%02d/messages", base, team), "", body, nil); err != nil {
			return fmt.Errorf("POST to team %d: %w", team, err)
		}
		return nil
	}
	// Warm up: every team its directory, every client its connection,
	// all at once as in the window, so that no connection is still being
	// set up when the window starts.
	errs := make([]error, refTeams)
	var wg sync.WaitGroup
	for i := range refTeams {
		wg.Go(func() { errs[i] = send(i) })
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return f, err
	}
	lat, elapsed, err := runWindow(ctx, refTeams, cfg.duration, func(i, _ int) error { return send(i) })
	f.lat, f.rate = lat, float64(len(lat))/elapsed.Seconds()
	return f, err
}

// startReference writes the lesson's listing and reference.py into dir,
// starts the program with python3 on a port it picks, and returns its URL
// and how to stop it.
func startReference(dir, lessonFile string) (string, func(), error) {
	text, err := os.ReadFile(lessonFile)
	if err != nil {
		return "", nil, err
	}
	listing, err := lessonListing(filepath.Base(lessonFile), string(text))
	if err != nil {
		return "", nil, err
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return "", nil, err
	}
	lesson, program := filepath.Join(dir, "lesson.py"), filepath.Join(dir, "reference.py")
	if err := errors.Join(os.WriteFile(lesson, []byte(listing), 0o600), os.WriteFile(program, referenceProgram, 0o600)); err != nil {
		return "", nil, err
	}
	cmd := exec.Command("python3", program, "--lesson", lesson, "--root", filepath.Join(dir, "teams"), "--port", "0")
	cmd.Env = []string{"PATH=" + os.Getenv("PATH"), "HOME=" + os.Getenv("HOME"), "PYTHONDONTWRITEBYTECODE=1"}
	logs := &tail{}
	cmd.Stderr = logs
	out, err := cmd.StdoutPipe()
	if err != nil {
		return "", nil, err
	}
	if err := cmd.Start(); err != nil {
		return "", nil, fmt.Errorf("start python3: %w", err)
	}
	done := make(chan error, 1)
	lines := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(out)
		if sc.Scan() {
			lines <- sc.Text()
		}
		close(lines)
		_, _ = io.Copy(io.Discard, out)
		done <- cmd.Wait()
	}()
	stop := func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-done:
		case <-time.After(exitDeadline):
			_ = cmd.Process.Kill()
			<-done
		}
	}
	select {
	case l, ok := <-lines:
		if url, found := strings.CutPrefix(l, "listening on "); ok && found {
			return url, stop, nil
		}
		stop()
		return "", nil, fmt.Errorf("reference server did not start (first line %q): %s", l, logs.String())
	case <-time.After(readyDeadline):
		stop()
		return "", nil, fmt.Errorf("reference server not ready within %v: %s", readyDeadline, logs.String())
	}
}

func (r *report) reference(f refFigure, ext *extResult) {
	r.printf("r. the lessons' send_message behind a minimal HTTP server (python3, ThreadingHTTPServer), %d clients over %d teams\n", refTeams, refTeams)
	r.printf("   source: %s\n", f.source)
	r.printf("   reference: %.0f sends/s, p50 %s, p99 %s\n", f.rate, ms(f.lat.pct(0.5)), ms(f.lat.pct(0.99)))
	if ext == nil {
		r.printf("   (Mailroom's 64×64 figure comes from phase f, which did not run)\n\n")
		return
	}
	par := findExt(ext.figs, 64, 64)
	r.printf("   Mailroom (phase f, this run): %.0f sends/s; ratio %.1f\n\n", par.rate, par.rate/f.rate)
}
