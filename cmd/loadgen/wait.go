package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os/exec"
	"path/filepath"
	"runtime"
	"sync"
	"syscall"
	"time"
)

// runWait is `loadgen wait [-data DIR] [-server BIN] [-keep]`: phase w
// alone, with its own flags.
func runWait(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	c := newSubcommand("wait", "server `binary` (default: built with go build)", stderr)
	if err := c.fs.Parse(args); err != nil {
		return err
	}
	work, r, done, err := c.begin(stdout)
	if err != nil {
		return err
	}
	defer done()
	w, err := measureWait(ctx, work, *c.server, stderr)
	if err != nil {
		return fmt.Errorf("held reads: %w", err)
	}
	r.wait(w)
	r.printf("load average at end: %s\n", loadAvg())
	return nil
}

// Phase w: reads held for mail (GET inbox?wait=60) by the real server
// binary. waitTeams teams of waitMembers members give one inbox per
// waiting client.
const (
	waitTeams   = 100
	waitMembers = 10 // lead and nine others
	// waitSettle lets the server take every held read before its memory is
	// read; the reads wait for 60 s, far longer.
	waitSettle = 3 * time.Second
)

// waitFigure is what phase w measures.
type waitFigure struct {
	clients    int
	rssBefore  int64 // KiB, server idle with its teams
	rssHeld    int64 // KiB, with every read held
	latency    latencies
	releaseAll time.Duration // SIGTERM to the last held read answered
}

// perClient is the resident memory one held read costs, in KiB.
func (w waitFigure) perClient() float64 {
	return float64(w.rssHeld-w.rssBefore) / float64(w.clients)
}

type waitClient struct {
	team, member, token, sender string
}

// measureWait starts the server binary, holds one read per inbox, reads
// the server's resident memory, then wakes each read with a send and
// times the send's 201 to the read's answer.
func measureWait(ctx context.Context, work, server string, stderr io.Writer) (waitFigure, error) {
	var out waitFigure
	bin, err := serverBinary(ctx, work, server, stderr)
	if err != nil {
		return out, err
	}
	addr, err := freeAddr()
	if err != nil {
		return out, err
	}
	base := "http://" + addr
	cmd := exec.Command(bin)
	cmd.Env = serverEnv(addr, filepath.Join(work, "wait"))
	var logs tail
	cmd.Stdout, cmd.Stderr = io.Discard, &logs
	if err := cmd.Start(); err != nil {
		return out, err
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	defer func() {
		_ = cmd.Process.Kill()
		<-done
	}()

	tr := &http.Transport{MaxIdleConnsPerHost: 4096, DisableCompression: true}
	client := &http.Client{Transport: tr, Timeout: 90 * time.Second}
	defer tr.CloseIdleConnections()
	for start := time.Now(); ; time.Sleep(5 * time.Millisecond) { // polling interval of the start
		if resp, err := client.Get(base + "/healthz"); err == nil {
			resp.Body.Close()
			break
		}
		if time.Since(start) > readyDeadline {
			return out, fmt.Errorf("server not ready: %s", logs.String())
		}
	}

	var clients []waitClient
	for i := range waitTeams {
		team := fmt.Sprintf("wait-%03d", i)
		members := []map[string]string{}
		for j := 1; j < waitMembers; j++ {
			members = append(members, map[string]string{"name": fmt.Sprintf("m%d", j), "role": "waits"})
		}
		var created struct {
			Members []struct{ Name, Token string } `json:"members"`
		}
		if err := postJSON(ctx, client, base+"/api/v1/teams", adminToken, map[string]any{"name": team, "members": members}, &created); err != nil {
			return out, fmt.Errorf("create team: %w", err)
		}
		tokens := map[string]string{}
		for _, m := range created.Members {
			tokens[m.Name] = m.Token
		}
		for _, m := range created.Members {
			sender := "lead"
			if m.Name == "lead" {
				sender = "m1"
			}
			clients = append(clients, waitClient{team: team, member: m.Name, token: m.Token, sender: tokens[sender]})
		}
	}
	out.clients = len(clients)
	runtime.GC()
	time.Sleep(time.Second) // let the server's own garbage collector settle after the creates
	if out.rssBefore, err = vmRSS(cmd.Process.Pid); err != nil {
		return out, err
	}

	answered := make([]chan time.Time, len(clients))
	var wg sync.WaitGroup
	errs := make(chan error, len(clients))
	for i, c := range clients {
		answered[i] = make(chan time.Time, 1)
		wg.Add(1)
		go func() {
			defer wg.Done()
			req, _ := http.NewRequestWithContext(ctx, http.MethodGet, base+"/api/v1/teams/"+c.team+"/members/"+c.member+"/inbox?wait=60", nil)
			req.Header.Set("Authorization", "Bearer "+c.token)
			resp, err := client.Do(req)
			if err != nil {
				errs <- err
				answered[i] <- time.Time{}
				return
			}
			_, _ = io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			answered[i] <- time.Now()
		}()
	}
	time.Sleep(waitSettle)
	if out.rssHeld, err = vmRSS(cmd.Process.Pid); err != nil {
		return out, err
	}

	// Wake half of the reads one by one with a send each, timing the
	// send's 201 to the read's answer.
	woken := len(clients) / 2
	for i := range woken {
		c := clients[i]
		if err := postJSON(ctx, client, base+"/api/v1/teams/"+c.team+"/messages", c.sender, map[string]string{"to": c.member, "body": "wake up"}, nil); err != nil {
			return out, fmt.Errorf("send: %w", err)
		}
		sent := time.Now()
		at := <-answered[i]
		if at.IsZero() {
			return out, fmt.Errorf("held read failed: %w", <-errs)
		}
		out.latency = append(out.latency, max(at.Sub(sent), 0))
	}
	// The other half are released by the shutdown.
	stopAt := time.Now()
	_ = cmd.Process.Signal(syscall.SIGTERM)
	for i := woken; i < len(clients); i++ {
		at := <-answered[i]
		if at.IsZero() {
			return out, fmt.Errorf("held read failed at shutdown: %w", <-errs)
		}
		out.releaseAll = max(out.releaseAll, at.Sub(stopAt))
	}
	wg.Wait()
	return out, nil
}

func postJSON(ctx context.Context, client *http.Client, url, token string, body, out any) error {
	b, err := json.Marshal(body)
	if err != nil {
		return err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, bytes.NewReader(b))
	if err != nil {
		return err
	}
	req.Header.Set("Authorization", "Bearer "+token)
	req.Header.Set("Content-Type", "application/json")
	resp, err := client.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	if err != nil {
		return err
	}
	if resp.StatusCode != http.StatusCreated {
		return fmt.Errorf("status %d: %s", resp.StatusCode, data)
	}
	if out != nil {
		return json.Unmarshal(data, out)
	}
	return nil
}

// wait prints phase w against its targets.
func (r *report) wait(w waitFigure) {
	per := w.perClient()
	p50, p99 := w.latency.pct(0.50), w.latency.pct(0.99)
	r.printf("w. held reads (GET inbox?wait=60) on the real server binary\n")
	r.printf("   %d clients waiting at once on %d inboxes\n", w.clients, w.clients)
	r.printf("   server RSS idle %d KiB, with every read held %d KiB: %.1f KiB per waiting client (target <= 16 KiB) %s\n",
		w.rssBefore, w.rssHeld, per, passMiss(per <= 16))
	r.printf("   send's 201 to the waiting client's answer over %d wakes: p50 %s (target <= 5 ms) %s, p99 %s (target <= 50 ms) %s\n",
		len(w.latency), ms(p50), passMiss(p50 <= 5*time.Millisecond), ms(p99), passMiss(p99 <= 50*time.Millisecond))
	r.printf("   SIGTERM to the last of %d held reads answered: %v\n\n", w.clients-len(w.latency), w.releaseAll)
}

func passMiss(ok bool) string {
	if ok {
		return "PASS"
	}
	return "MISS"
}
