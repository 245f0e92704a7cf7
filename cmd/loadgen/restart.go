package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"mailroom/internal/core"
	"mailroom/internal/mail"
)

// Bounds of the restart phase: a server that is not ready or not gone
// within these fails the run instead of hanging it.
const (
	readyDeadline = time.Minute
	exitDeadline  = 20 * time.Second
)

// restartFigure is the restart phase's result. Memory is in KiB.
type restartFigure struct {
	ready   time.Duration // median of runs
	runs    []time.Duration
	rss     int64 // median VmRSS with the teams, at ready
	rss0    int64 // VmRSS of the same binary with no teams, at ready
	ready0  time.Duration
	perTeam float64
	// open is the same load done in this process (mail.Open and
	// core.Service.Open), without process start or HTTP; heap is the live
	// heap it leaves per team, in bytes, after a collection.
	open time.Duration
	heap float64
}

func measureRestart(ctx context.Context, work string, cfg config, stderr io.Writer) (restartFigure, error) {
	var out restartFigure
	bin, err := serverBinary(ctx, work, cfg.server, stderr)
	if err != nil {
		return out, err
	}
	empty := filepath.Join(work, "restart-none")
	full := filepath.Join(work, "restart-teams")
	if err := createIdleTeams(ctx, full, cfg.teams); err != nil {
		return out, fmt.Errorf("create %d teams: %w", cfg.teams, err)
	}
	if out.open, out.heap, err = openInProcess(ctx, full, cfg); err != nil {
		return out, fmt.Errorf("open in process: %w", err)
	}
	ready0, rss0, err := startAndMeasure(ctx, bin, empty)
	if err != nil {
		return out, err
	}
	var rss []int64
	for range cfg.restarts {
		d, kib, err := startAndMeasure(ctx, bin, full)
		if err != nil {
			return out, err
		}
		out.runs = append(out.runs, d.Round(time.Millisecond))
		rss = append(rss, kib)
	}
	sorted := slices.Clone(out.runs)
	slices.Sort(sorted)
	slices.Sort(rss)
	out.ready = sorted[len(sorted)/2]
	out.rss, out.rss0, out.ready0 = rss[len(rss)/2], rss0, ready0
	out.perTeam = float64(out.rss-out.rss0) / float64(cfg.teams)
	return out, nil
}

// openInProcess loads the teams as the server does at start, timed and
// optionally profiled, and measures the live heap they hold.
func openInProcess(ctx context.Context, dir string, cfg config) (time.Duration, float64, error) {
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	var svc *core.Service
	start := time.Now()
	err := withProfile(cfg.openProfile, func() error {
		store, err := mail.Open(dir, mail.WithLogger(slog.New(slog.DiscardHandler)))
		if err != nil {
			return err
		}
		defer store.Close()
		svc = core.NewService(store, core.Options{})
		return svc.Open(ctx)
	})
	elapsed := time.Since(start)
	if err != nil {
		return 0, 0, err
	}
	if n := len(svc.Teams(ctx)); n != cfg.teams {
		return 0, 0, fmt.Errorf("loaded %d teams, want %d", n, cfg.teams)
	}
	runtime.GC()
	runtime.ReadMemStats(&after)
	runtime.KeepAlive(svc)
	return elapsed, float64(int64(after.HeapAlloc)-int64(before.HeapAlloc)) / float64(cfg.teams), nil
}

// createIdleTeams writes n teams (lead and two teammates, lesson limits,
// one letter in lead's inbox) through the real store and core. To keep
// setup short the store's fsyncs are skipped and one sync(2) makes
// everything durable at the end; the files are the same bytes.
func createIdleTeams(ctx context.Context, dir string, n int) error {
	store, err := mail.Open(dir, mail.WithFS(noSyncFS{mail.OS()}), mail.WithLogger(slog.New(slog.DiscardHandler)))
	if err != nil {
		return err
	}
	defer store.Close()
	svc := core.NewService(store, core.Options{})
	var next atomic.Int64
	errs := make([]error, runtime.NumCPU())
	var wg sync.WaitGroup
	for w := range errs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				i := int(next.Add(1)) - 1
				if i >= n || ctx.Err() != nil {
					return
				}
				name := fmt.Sprintf("idle-%05d", i)
				spec := core.TeamSpec{Name: name, Members: []core.MemberSpec{{Name: "reader", Role: "reads"}, {Name: "writer", Role: "writes"}}}
				if _, _, err := svc.CreateTeam(ctx, spec); err != nil {
					errs[w] = err
					return
				}
				if _, err := svc.Send(core.AsMember(ctx, name, "reader"), core.SendInput{Team: name, To: core.LeadName, Body: sendBody}); err != nil {
					errs[w] = err
					return
				}
			}
		}()
	}
	wg.Wait()
	syscall.Sync()
	return errors.Join(append(errs, ctx.Err())...)
}

// startAndMeasure starts the server binary over dataDir on a free
// loopback port and returns the time from exec to the first 200 from
// /healthz, and its VmRSS then. It stops the server with SIGTERM.
func startAndMeasure(ctx context.Context, bin, dataDir string) (time.Duration, int64, error) {
	addr, err := freeAddr()
	if err != nil {
		return 0, 0, err
	}
	cmd := exec.Command(bin)
	cmd.Env = serverEnv(addr, dataDir)
	var logs tail
	cmd.Stdout, cmd.Stderr = io.Discard, &logs
	client := &http.Client{Timeout: time.Second}
	start := time.Now()
	if err := cmd.Start(); err != nil {
		return 0, 0, err
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	stop := func() error {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		select {
		case err := <-done:
			return err
		case <-time.After(exitDeadline):
			_ = cmd.Process.Kill()
			<-done
			return fmt.Errorf("server did not stop within %v", exitDeadline)
		}
	}
	var ready time.Duration
	for {
		resp, err := client.Get("http://" + addr + "/healthz")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				ready = time.Since(start)
				break
			}
		}
		select {
		case err := <-done:
			return 0, 0, fmt.Errorf("server exited before it was ready (%v): %s", err, logs.String())
		case <-ctx.Done():
			return 0, 0, errors.Join(ctx.Err(), stop())
		default:
		}
		if time.Since(start) > readyDeadline {
			return 0, 0, errors.Join(fmt.Errorf("server not ready within %v", readyDeadline), stop())
		}
		time.Sleep(2 * time.Millisecond) // polling interval of the measurement
	}
	rss, rerr := vmRSS(cmd.Process.Pid)
	if err := stop(); err != nil {
		return 0, 0, fmt.Errorf("stop server: %w: %s", err, logs.String())
	}
	return ready, rss, rerr
}

// freeAddr returns a loopback address with a port that was free a moment
// ago. Knowing it before the start lets the first /healthz poll go out at
// once.
func freeAddr() (string, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	addr := ln.Addr().String()
	return addr, ln.Close()
}

// vmRSS reads a process's resident set size in KiB.
func vmRSS(pid int) (int64, error) {
	f, err := os.Open(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0, err
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if rest, ok := strings.CutPrefix(sc.Text(), "VmRSS:"); ok {
			return strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(rest), " kB"), 10, 64)
		}
	}
	return 0, errors.New("no VmRSS in /proc status")
}

// tail keeps the last few KiB written to it, for error messages.
type tail struct {
	mu  sync.Mutex
	buf []byte
}

func (t *tail) Write(p []byte) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.buf = append(t.buf, p...)
	if len(t.buf) > 4096 {
		t.buf = t.buf[len(t.buf)-4096:]
	}
	return len(p), nil
}

func (t *tail) String() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	return string(t.buf)
}

// noSyncFS is the store's file system without fsync, for setup only.
type noSyncFS struct{ mail.FS }

func (noSyncFS) SyncDir(string) error { return nil }

func (f noSyncFS) OpenFile(name string, flag int, perm fs.FileMode) (mail.File, error) {
	file, err := f.FS.OpenFile(name, flag, perm)
	if err != nil {
		return nil, err
	}
	return noSyncFile{file}, nil
}

func (f noSyncFS) CreateTemp(dir, pattern string) (mail.File, error) {
	file, err := f.FS.CreateTemp(dir, pattern)
	if err != nil {
		return nil, err
	}
	return noSyncFile{file}, nil
}

type noSyncFile struct{ mail.File }

func (noSyncFile) Sync() error { return nil }

// serverBinary returns the server binary the phases that run it as a
// process use: server when given (-server), else one built into work.
func serverBinary(ctx context.Context, work, server string, stderr io.Writer) (string, error) {
	if server != "" {
		return server, nil
	}
	bin := filepath.Join(work, "bin", "mailroom")
	build := exec.CommandContext(ctx, "go", "build", "-o", bin, "mailroom/cmd/server")
	build.Stdout, build.Stderr = stderr, stderr
	if err := build.Run(); err != nil {
		return "", fmt.Errorf("build the server (or pass -server): %w", err)
	}
	return bin, nil
}

// serverEnv is the whole environment of a measured server process: its
// address, data directory and admin token, and only warnings in its log.
func serverEnv(addr, dataDir string) []string {
	return []string{
		"PATH=" + os.Getenv("PATH"),
		"MAILROOM_ADDR=" + addr,
		"MAILROOM_DATA=" + dataDir,
		"MAILROOM_ADMIN_TOKEN=" + adminToken,
		"MAILROOM_LOG_LEVEL=warn",
	}
}
