package main

import (
	"context"
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
// /proc/<pid>/stat). With -strace the server runs under `strace -f -c`
// and the system call counts of the whole phase are written to that file
// (the timings of such a run are strace's, not the server's).

// extConfigs are the (clients, teams) pairs of figure f.
var extConfigs = [][2]int{{1, 1}, {64, 64}, {64, 1}}

// extFigure is one configuration's result, with the server's CPU.
type extFigure struct {
	sendFigure
	serverCPU time.Duration // per send
}

func measureExternal(ctx context.Context, work string, cfg config, stderr io.Writer) ([]extFigure, int, error) {
	bin, err := serverBinary(ctx, work, cfg.server, stderr)
	if err != nil {
		return nil, 0, err
	}
	addr, err := freeAddr()
	if err != nil {
		return nil, 0, err
	}
	base := "http://" + addr
	cmd := exec.Command(bin)
	if cfg.strace != "" {
		cmd = exec.Command("strace", "-f", "-c", "-o", cfg.strace, bin)
	}
	cmd.Env = serverEnv(addr, filepath.Join(work, "external"))
	var logs tail
	cmd.Stdout, cmd.Stderr = io.Discard, &logs
	if cfg.strace != "" {
		// The server's log beside strace's counts.
		lf, err := os.Create(cfg.strace + ".log")
		if err != nil {
			return nil, 0, err
		}
		defer lf.Close()
		cmd.Stderr = io.MultiWriter(&logs, lf)
	}
	if err := cmd.Start(); err != nil {
		return nil, 0, err
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	stopped := false
	pid := cmd.Process.Pid
	stop := func() {
		if !stopped {
			stopped = true
			// The server itself is stopped (strace, when it runs it, then
			// writes its counts and exits).
			if p, err := os.FindProcess(pid); err == nil {
				_ = p.Signal(os.Interrupt)
			}
			<-done
		}
	}
	defer stop()

	tr := &http.Transport{MaxIdleConns: 128, MaxIdleConnsPerHost: 128, DisableCompression: true}
	p := &inproc{url: base, client: &http.Client{Transport: tr, Timeout: time.Minute}}
	defer tr.CloseIdleConnections()
	for start := time.Now(); ; time.Sleep(5 * time.Millisecond) { // polling interval of the start
		if resp, err := p.client.Get(base + "/healthz"); err == nil {
			resp.Body.Close()
			break
		}
		if time.Since(start) > readyDeadline {
			return nil, 0, fmt.Errorf("server not ready: %s", logs.String())
		}
	}
	pid = serverPID(cmd.Process.Pid, cfg.strace != "")
	var out []extFigure
	sends := 0
	for _, c := range extConfigs {
		cpu0 := procCPU(pid)
		f, err := measureSendConfig(ctx, p, c[0], c[1], cfg.duration)
		if err != nil {
			return nil, 0, fmt.Errorf("%d clients over %d teams: %w", c[0], c[1], err)
		}
		// The warm-up sends (one per route) are in the server's CPU too;
		// they are few beside the window's.
		out = append(out, extFigure{sendFigure: f, serverCPU: (procCPU(pid) - cpu0) / time.Duration(max(1, len(f.lat)))})
		sends += len(f.lat)
	}
	stop()
	return out, sends, nil
}

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

// procCPU is a process's user + system time, from /proc/<pid>/stat.
func procCPU(pid int) time.Duration {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0
	}
	s := string(b)
	// Fields after the command name, which is in parentheses.
	f := strings.Fields(s[strings.LastIndexByte(s, ')')+1:])
	if len(f) < 13 {
		return 0
	}
	utime, _ := strconv.ParseInt(f[11], 10, 64)
	stime, _ := strconv.ParseInt(f[12], 10, 64)
	const tick = 10 * time.Millisecond // USER_HZ 100
	return time.Duration(utime+stime) * tick
}

func (r *report) external(fs []extFigure, sends int, straceFile string) {
	r.printf("f. durable sends over HTTP to the server binary (clients in this process, server in its own)\n")
	r.printf("   clients  teams     sends/s          p50          p99   server CPU per send\n")
	for _, f := range fs {
		r.printf("   %-8d %-5d %11.0f %12s %12s %12s\n", f.clients, f.teams, f.rate, ms(f.lat.pct(0.5)), ms(f.lat.pct(0.99)), ms(f.serverCPU))
	}
	if straceFile != "" {
		r.printf("   server system calls (strace -f -c) written to %s over %d timed sends (plus setup and warm-up)\n", straceFile, sends)
	}
	r.printf("\n")
}
