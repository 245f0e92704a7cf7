package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

// Phase f: durable sends over HTTP to the real server binary, with the
// clients in this process and the server in its own, so that the
// server's CPU per send is measured apart from the clients' (from
// /proc/<pid>/stat). Before the sends it measures the floor of a round
// trip to the same binary over the same transport: GET /healthz with one
// client (p50), and with 64 clients the server's CPU per GET, which is
// what its HTTP stack costs before any handler does work. With -strace
// the server runs under `strace -f -c` and the system call counts of the
// whole phase are written to that file (the timings of such a run are
// strace's, not the server's).

// extConfigs are the (clients, teams) pairs of figure f.
var extConfigs = [][2]int{{1, 1}, {64, 64}, {64, 1}}

// healthWindow is how long each GET /healthz figure of phase f is measured.
const healthWindow = time.Second

// extFigure is one configuration's result, with the server's CPU.
type extFigure struct {
	sendFigure
	serverCPU time.Duration // per send
}

// extResult is what phase f measured.
type extResult struct {
	figs  []extFigure
	sends int // timed sends, for the strace note
	// health is GET /healthz timed with one client; health64 the same
	// with 64 clients, whose serverCPU is the server's CPU per GET.
	health   latencies
	health64 extFigure
}

// serverProcess is the server binary running in its own process, with an
// HTTP client for it in this one.
type serverProcess struct {
	p    *inproc // url and client only: no service in this process
	pid  int     // the server's own pid (strace's child when traced)
	logs *tail
	stop func() error
}

// startServerProcess runs bin with env (under strace -f -c writing to straceFile
// when it is set) on addr and waits until /healthz answers.
func startServerProcess(bin, addr string, env []string, straceFile string) (*serverProcess, error) {
	cmd := exec.Command(bin)
	if straceFile != "" {
		cmd = exec.Command("strace", "-f", "-c", "-o", straceFile, bin)
	}
	cmd.Env = env
	logs := &tail{}
	cmd.Stdout, cmd.Stderr = io.Discard, logs
	var logFile *os.File
	if straceFile != "" {
		// The server's log beside strace's counts.
		lf, err := os.Create(straceFile + ".log")
		if err != nil {
			return nil, err
		}
		logFile = lf
		cmd.Stderr = io.MultiWriter(logs, lf)
	}
	if err := cmd.Start(); err != nil {
		if logFile != nil {
			logFile.Close()
		}
		return nil, err
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	stopped := false
	tr := &http.Transport{MaxIdleConns: 128, MaxIdleConnsPerHost: 128, DisableCompression: true}
	b := &serverProcess{p: &inproc{url: "http://" + addr, client: &http.Client{Transport: tr, Timeout: time.Minute}}, pid: cmd.Process.Pid, logs: logs}
	b.stop = func() error {
		if stopped {
			return nil
		}
		stopped = true
		tr.CloseIdleConnections()
		// The server itself is stopped (strace, when it runs it, then
		// writes its counts and exits).
		if p, err := os.FindProcess(b.pid); err == nil {
			_ = p.Signal(os.Interrupt)
		}
		var err error
		select {
		case err = <-done:
		case <-time.After(exitDeadline):
			_ = cmd.Process.Kill()
			<-done
			err = fmt.Errorf("server did not stop within %v", exitDeadline)
		}
		if logFile != nil {
			err = errors.Join(err, logFile.Close())
		}
		return err
	}
	for start := time.Now(); ; time.Sleep(5 * time.Millisecond) { // polling interval of the start
		if resp, err := b.p.client.Get(b.p.url + "/healthz"); err == nil {
			resp.Body.Close()
			break
		}
		select {
		case err := <-done:
			done <- err // for stop
			return nil, errors.Join(fmt.Errorf("server exited before it was ready (%v): %s", err, logs.String()), b.stop())
		default:
		}
		if time.Since(start) > readyDeadline {
			return nil, errors.Join(fmt.Errorf("server not ready: %s", logs.String()), b.stop())
		}
	}
	b.pid = serverPID(cmd.Process.Pid, straceFile != "")
	return b, nil
}

// cpu is the server process's CPU time so far.
func (b *serverProcess) cpu() time.Duration { return procCPU(b.pid) }

func measureExternal(ctx context.Context, dataDir string, cfg config) (extResult, error) {
	var res extResult
	addr, err := freeAddr()
	if err != nil {
		return res, err
	}
	b, err := startServerProcess(cfg.server, addr, serverEnv(addr, dataDir), cfg.strace)
	if err != nil {
		return res, err
	}
	defer b.stop()
	p := b.p

	// The round trip's floor first, over the transport the sends use.
	if res.health, _, err = getWindow(ctx, p, 1, healthWindow); err != nil {
		return res, fmt.Errorf("GET /healthz, 1 client: %w", err)
	}
	cpu0 := b.cpu()
	lat, elapsed, err := getWindow(ctx, p, 64, healthWindow)
	if err != nil {
		return res, fmt.Errorf("GET /healthz, 64 clients: %w", err)
	}
	res.health64 = extFigure{sendFigure: newSendFigure(64, 0, lat, elapsed, 0), serverCPU: perOp(b.cpu()-cpu0, len(lat))}

	for _, c := range extConfigs {
		// The server's CPU over the window alone: creating the teams and
		// their first letters are not sends.
		f, cpu, err := measureMetered(ctx, p, c[0], c[1], cfg.duration, b.cpu)
		if err != nil {
			return res, fmt.Errorf("%d clients over %d teams: %w", c[0], c[1], err)
		}
		res.figs = append(res.figs, extFigure{sendFigure: f, serverCPU: cpu[0]})
		res.sends += len(f.lat)
	}
	return res, b.stop()
}

// getWindow times GET /healthz from clients goroutines for d.
func getWindow(ctx context.Context, p *inproc, clients int, d time.Duration) (latencies, time.Duration, error) {
	return runWindow(ctx, clients, d, func(int, int) error {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, p.url+"/healthz", nil)
		if err != nil {
			return err
		}
		resp, err := p.client.Do(req)
		if err != nil {
			return err
		}
		defer resp.Body.Close()
		if _, err := io.Copy(io.Discard, resp.Body); err != nil {
			return err
		}
		if resp.StatusCode != http.StatusOK {
			return fmt.Errorf("GET /healthz: %s", resp.Status)
		}
		return nil
	})
}

// perOp divides a CPU time over n operations (at least one).
func perOp(d time.Duration, n int) time.Duration { return d / time.Duration(max(1, n)) }

// serverPID is the server's pid: under strace, strace's child.
func serverPID(pid int, traced bool) int {
	if !traced {
		return pid
	}
	for range 200 { // strace starts its child at once
		b, err := os.ReadFile(fmt.Sprintf("/proc/%d/task/%d/children", pid, pid))
		if err == nil {
			if f := strings.Fields(string(b)); len(f) > 0 {
				if child, err := strconv.Atoi(f[0]); err == nil {
					return child
				}
			}
		}
		time.Sleep(10 * time.Millisecond)
	}
	return pid
}

// procCPU is a process's user + system time, from /proc/<pid>/stat; 0
// when it cannot be read.
func procCPU(pid int) time.Duration {
	b, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "stat"))
	if err != nil {
		return 0
	}
	d, err := statCPU(string(b))
	if err != nil {
		return 0
	}
	return d
}

// statCPU reads utime + stime from the text of /proc/<pid>/stat
// (proc(5)). The command name, field 2, is in parentheses and may hold
// spaces and parentheses itself, so the fields are counted from the last
// ')'.
func statCPU(stat string) (time.Duration, error) {
	i := strings.LastIndexByte(stat, ')')
	if i < 0 {
		return 0, errors.New("stat: no command name")
	}
	// f[0] is field 3 (state); utime and stime are fields 14 and 15.
	f := strings.Fields(stat[i+1:])
	if len(f) < 13 {
		return 0, fmt.Errorf("stat: %d fields after the command name, want at least 13", len(f))
	}
	utime, err := strconv.ParseInt(f[11], 10, 64)
	if err != nil {
		return 0, fmt.Errorf("stat: utime: %w", err)
	}
	stime, err := strconv.ParseInt(f[12], 10, 64)
	if err != nil {
		return 0, fmt.Errorf("stat: stime: %w", err)
	}
	const tick = 10 * time.Millisecond // USER_HZ 100
	return time.Duration(utime+stime) * tick, nil
}

func (r *report) external(res extResult, straceFile string) {
	r.printf("f. durable sends over HTTP to the server binary (clients in this process, server in its own)\n")
	r.printf("   GET /healthz, same binary and transport: 1 client p50 %s, p99 %s; 64 clients %.0f GETs/s, server CPU %s per GET\n",
		ms(res.health.pct(0.5)), ms(res.health.pct(0.99)), res.health64.rate, ms(res.health64.serverCPU))
	r.printf("   clients  teams     sends/s          p50          p99   server CPU per send\n")
	for _, f := range res.figs {
		r.printf("   %-8d %-5d %11.0f %12s %12s %12s\n", f.clients, f.teams, f.rate, ms(f.lat.pct(0.5)), ms(f.lat.pct(0.99)), ms(f.serverCPU))
	}
	if straceFile != "" {
		r.printf("   server system calls (strace -f -c) written to %s over %d timed sends (plus setup, warm-up and the GETs)\n", straceFile, res.sends)
	}
	r.printf("\n")
}
