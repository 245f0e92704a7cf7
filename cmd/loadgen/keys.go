package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"time"
)

// keysFigure is phase e: what remembered keys and a long history cost a
// write, and what a busy team costs a reader.
type keysFigure struct {
	keys, turns, inputBytes int
	// stateBytes and logBytes are the sizes of the team's state.json and
	// idempotency log (0 when it has none) after the setup.
	stateBytes, logBytes int64
	keyed, unkeyed       latencies
	idle, busy           latencies
	// busyWrites counts the writer's keyed sends while busy was measured.
	busyWrites int64
	// other and otherWrites are the same with the writer on another team.
	other       latencies
	otherWrites int64
}

// keysTeam is phase e's team: m1 writes, m2 reads its inbox, m3 holds
// the long history.
const keysTeam = "keys"

// measureKeys builds a team that remembers cfg.keys keyed sends and whose
// member m3 has taken cfg.turns turns, each carrying a tool input of
// cfg.inputBytes, all through the API. Then, one request at a time:
//   - keyed (a fresh Idempotency-Key each) and unkeyed sends from m1,
//     alternating, cfg.latencyN of each;
//   - m2's GET inbox, at random moments 0 to 2 ms apart, on the otherwise
//     idle team, then again while another client sends keyed letters from
//     m1 to lead without pause.
func measureKeys(ctx context.Context, dir string, cfg config) (keysFigure, error) {
	out := keysFigure{keys: cfg.keys, turns: cfg.turns, inputBytes: cfg.inputBytes}
	p, err := startInProcess(ctx, dir, 4)
	if err != nil {
		return out, err
	}
	defer p.close()
	letters := cfg.keys + 4*cfg.latencyN + 1000
	body := map[string]any{
		"name": keysTeam,
		"members": []map[string]string{
			{"name": "m1", "role": "writes"}, {"name": "m2", "role": "reads"}, {"name": "m3", "role": "remembers"},
		},
		"limits": map[string]int{"inbox_messages": letters, "inbox_bytes": 1 << 30, "turns": cfg.turns + 1, "history_entries": 8*cfg.turns + 8},
	}
	tok, err := p.postTeam(ctx, body)
	if err != nil {
		return out, err
	}

	// The long history: each turn's tool call carries a large input (the
	// tool refuses it: a body that long is over the limit).
	big := strings.Repeat("x", cfg.inputBytes)
	for i := range cfg.turns {
		turn := map[string]any{"prompt": fmt.Sprintf("turn %d", i), "responses": []map[string]any{
			{"tool": "send_message", "input": map[string]string{"to": "lead", "body": big}},
			{"text": "done"},
		}}
		if err := p.call(ctx, http.MethodPost, "/teams/"+keysTeam+"/members/m3/turns", adminToken, turn, nil, http.StatusOK); err != nil {
			return out, fmt.Errorf("turn %d: %w", i, err)
		}
	}
	var key atomic.Int64
	keyed := func() (time.Duration, error) {
		return p.sendKeyed(ctx, keysTeam, tok["m1"], "lead", fmt.Sprintf("key-%d", key.Add(1)))
	}
	for range cfg.keys {
		if _, err := keyed(); err != nil {
			return out, err
		}
	}
	out.stateBytes = fileSize(filepath.Join(dir, "teams", keysTeam, "state.json"))
	out.logBytes = fileSize(filepath.Join(dir, "teams", keysTeam, "idempotency.log"))

	// Keyed and unkeyed alternate, so drift hits both alike; the first
	// fifth warms up.
	for i := range cfg.latencyN + cfg.latencyN/5 {
		k, err := keyed()
		if err != nil {
			return out, err
		}
		u, err := p.send(ctx, keysTeam, tok["m1"], "lead")
		if err != nil {
			return out, err
		}
		if i >= cfg.latencyN/5 {
			out.keyed, out.unkeyed = append(out.keyed, k), append(out.unkeyed, u)
		}
	}

	// Reads come at random moments, as a teammate polls its inbox without
	// regard to the writer: back to back, most would slip in between two
	// writes. The pauses are the same sequence on the idle and busy team.
	pause := rand.New(rand.NewPCG(1, 2))
	read := func() (time.Duration, error) {
		time.Sleep(time.Duration(pause.Int64N(int64(2 * time.Millisecond))))
		t := time.Now()
		err := p.call(ctx, http.MethodGet, "/teams/"+keysTeam+"/members/m2/inbox", tok["m2"], nil, nil, http.StatusOK)
		return time.Since(t), err
	}
	for i := range cfg.latencyN + cfg.latencyN/5 {
		d, err := read()
		if err != nil {
			return out, err
		}
		if i >= cfg.latencyN/5 {
			out.idle = append(out.idle, d)
		}
	}
	// readsWhile measures reads while write runs without pause in
	// another goroutine, and counts the writes.
	readsWhile := func(write func() error) (latencies, int64, error) {
		pause = rand.New(rand.NewPCG(1, 2))
		var lat latencies
		var writes atomic.Int64
		wctx, stop := context.WithCancel(ctx)
		werr := make(chan error, 1)
		go func() {
			for wctx.Err() == nil {
				if err := write(); err != nil {
					werr <- err
					return
				}
				writes.Add(1)
			}
			werr <- nil
		}()
		var err error
		for range cfg.latencyN {
			var d time.Duration
			if d, err = read(); err != nil {
				break
			}
			lat = append(lat, d)
		}
		stop()
		return lat, writes.Load(), errors.Join(err, <-werr)
	}
	if out.busy, out.busyWrites, err = readsWhile(func() error { _, err := keyed(); return err }); err != nil {
		return out, err
	}
	// The control: the same writes to another team share the CPUs and
	// the disk with the reads, but not the team's lock.
	other, err := p.createTeam(ctx, keysTeam+"-other", 1, benchLimits(letters))
	if err != nil {
		return out, err
	}
	out.other, out.otherWrites, err = readsWhile(func() error {
		_, err := p.sendKeyed(ctx, keysTeam+"-other", other["m1"], "lead", fmt.Sprintf("key-%d", key.Add(1)))
		return err
	})
	if err != nil {
		return out, err
	}
	return out, ctx.Err()
}

// sendKeyed is send with an Idempotency-Key.
func (p *inproc) sendKeyed(ctx context.Context, team, token, to, key string) (time.Duration, error) {
	b, err := json.Marshal(map[string]string{"to": to, "body": sendBody})
	if err != nil {
		return 0, err
	}
	t := time.Now()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, p.url+"/api/v1/teams/"+team+"/messages", bytes.NewReader(b))
	if err != nil {
		return 0, err
	}
	req.Header.Set("Authorization", "Bearer "+token)
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Idempotency-Key", key)
	resp, err := p.client.Do(req)
	if err != nil {
		return 0, err
	}
	data, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil {
		return 0, err
	}
	if resp.StatusCode != http.StatusCreated {
		return 0, fmt.Errorf("keyed send: %s: %s", resp.Status, data)
	}
	return time.Since(t), nil
}

func fileSize(path string) int64 {
	fi, err := os.Stat(path)
	if err != nil {
		return 0
	}
	return fi.Size()
}
