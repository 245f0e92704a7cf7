package main

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"
)

// runHook is `loadgen hook [-data DIR] [-server BIN] [-keep] [-n N]
// [-inbox-letters N]`: phase h alone. It measures how fast mail reaches an
// agent through `mailroom hook` and what read cursors cost, on the real
// server binary:
//
//   - time to attention: a `hook --wait 60` process, fed a Stop event and
//     already waiting, and a send: the send's 201 to the hook's output;
//   - the hook's start-up: its process started to its exit on an event it
//     answers with nothing (no request made);
//   - a cursor move (POST inbox/read) against a send, 1 client, n of each;
//   - GET team over a member with 10,000 letters (unread counted) against
//     a team whose inboxes are empty;
//   - a hook's whole run (process start to exit) on PostToolUse with one
//     unread letter, against the healthy server, and against a server
//     that accepts connections and never answers (-stalled runs).
func runHook(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	c := newSubcommand("hook", "server `binary` (default: built with go build)", stderr)
	fs := c.fs
	n := fs.Int("n", 100, "hook processes timed (each figure), at least 10")
	letters := fs.Int("inbox-letters", 10000, "letters in the full inbox of the member document figure")
	stalled := fs.Int("stalled", 5, "hook runs timed against a server that never answers (each up to its budget)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *n < 10 || *letters < 1 {
		return fmt.Errorf("-n must be at least 10 and -inbox-letters at least 1")
	}
	work, r, done, err := c.begin(stdout)
	if err != nil {
		return err
	}
	defer done()
	f, err := measureHook(ctx, work, *c.server, *n, *letters, *stalled, stderr)
	if err != nil {
		return fmt.Errorf("hook: %w", err)
	}
	r.hook(f, *letters)
	r.printf("load average at end: %s\n", loadAvg())
	return nil
}

// hookFigure is what phase h measures.
type hookFigure struct {
	attention, startup      latencies
	cursor, send            latencies
	memberFull, memberEmpty latencies
	// healthy and stalled are whole hook runs: one unread letter on the
	// server, and a server that accepts and never answers.
	healthy, stalled latencies
}

// hookSettle is how long a hook process is given to reach its held read
// before the send: its start-up (milliseconds) and two requests, with
// room for a loaded machine. The figure is the send's 201 to the output,
// which does not include it.
const hookSettle = 300 * time.Millisecond

// binaryServer is the server binary running over a data directory of
// its own.
type binaryServer struct {
	base   string
	client *http.Client
	cmd    *exec.Cmd
	done   chan error
}

// startBinary starts bin over dir on a free port and returns once it
// answers /healthz.
func startBinary(bin, dir string) (*binaryServer, error) {
	addr, err := freeAddr()
	if err != nil {
		return nil, err
	}
	s := &binaryServer{base: "http://" + addr, done: make(chan error, 1)}
	s.cmd = exec.Command(bin)
	s.cmd.Env = serverEnv(addr, dir)
	var logs tail
	s.cmd.Stdout, s.cmd.Stderr = io.Discard, &logs
	if err := s.cmd.Start(); err != nil {
		return nil, err
	}
	go func() { s.done <- s.cmd.Wait() }()
	tr := &http.Transport{MaxIdleConnsPerHost: 4096, DisableCompression: true}
	s.client = &http.Client{Transport: tr, Timeout: 90 * time.Second}
	for start := time.Now(); ; time.Sleep(5 * time.Millisecond) { // polling interval of the start
		if resp, err := s.client.Get(s.base + "/healthz"); err == nil {
			resp.Body.Close()
			return s, nil
		}
		if time.Since(start) > readyDeadline {
			s.kill()
			return nil, fmt.Errorf("server not ready: %s", logs.String())
		}
	}
}

// kill ends the server and waits for it.
func (s *binaryServer) kill() {
	_ = s.cmd.Process.Kill()
	<-s.done
	s.client.CloseIdleConnections()
}

// createTeam creates team with lead and reader under limits and returns
// the tokens by member.
func (s *binaryServer) createTeam(ctx context.Context, team string, limits map[string]int) (map[string]string, error) {
	var created struct {
		Members []struct{ Name, Token string } `json:"members"`
	}
	body := map[string]any{"name": team, "members": []map[string]string{{"name": "reader", "role": "reads"}}}
	if limits != nil {
		body["limits"] = limits
	}
	if err := postJSON(ctx, s.client, s.base+"/api/v1/teams", adminToken, body, &created); err != nil {
		return nil, fmt.Errorf("create team: %w", err)
	}
	tokens := map[string]string{}
	for _, m := range created.Members {
		tokens[m.Name] = m.Token
	}
	return tokens, nil
}

// call makes one request and requires status want.
func (s *binaryServer) call(ctx context.Context, method, path, token, body string, want int) error {
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	req, err := http.NewRequestWithContext(ctx, method, s.base+"/api/v1"+path, rd)
	if err != nil {
		return err
	}
	req.Header.Set("Authorization", "Bearer "+token)
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := s.client.Do(req)
	if err != nil {
		return err
	}
	data, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil {
		return err
	}
	if resp.StatusCode != want {
		return fmt.Errorf("%s %s: status %d: %s", method, path, resp.StatusCode, data)
	}
	return nil
}

func measureHook(ctx context.Context, work, server string, n, letters, stalled int, stderr io.Writer) (hookFigure, error) {
	var out hookFigure
	bin, err := serverBinary(ctx, work, server, stderr)
	if err != nil {
		return out, err
	}
	s, err := startBinary(bin, filepath.Join(work, "hook"))
	if err != nil {
		return out, err
	}
	defer s.kill()
	big := map[string]int{"inbox_messages": letters + 2*n + 10, "inbox_bytes": 200 * (letters + 2*n + 10)}
	tok, err := s.createTeam(ctx, "attention", big)
	if err != nil {
		return out, err
	}
	hookEnv := []string{"PATH=" + os.Getenv("PATH"), "MAILROOM_URL=" + s.base, "MAILROOM_TOKEN=" + tok["reader"]}

	// Start-up: an event the hook answers with nothing, before any request.
	for range n {
		cmd := exec.CommandContext(ctx, bin, "hook")
		cmd.Env = hookEnv
		cmd.Stdin = strings.NewReader(`{"hook_event_name":"Notification","session_id":"s"}`)
		start := time.Now()
		if err := cmd.Run(); err != nil {
			return out, fmt.Errorf("hook on Notification: %w", err)
		}
		out.startup = append(out.startup, time.Since(start))
	}

	// Time to attention.
	for i := range n {
		cmd := exec.CommandContext(ctx, bin, "hook", "--wait", "60")
		cmd.Env = hookEnv
		cmd.Stdin = strings.NewReader(`{"hook_event_name":"Stop","session_id":"s","stop_hook_active":false}`)
		pipe, err := cmd.StdoutPipe()
		if err != nil {
			return out, err
		}
		if err := cmd.Start(); err != nil {
			return out, err
		}
		outAt := make(chan time.Time, 1)
		go func() {
			rd := bufio.NewReader(pipe)
			_, _ = rd.ReadByte()
			outAt <- time.Now()
			_, _ = io.Copy(io.Discard, rd)
		}()
		time.Sleep(hookSettle)
		if err := s.call(ctx, http.MethodPost, "/teams/attention/messages", tok["lead"], fmt.Sprintf(`{"to":"reader","body":"wake up %d"}`, i), http.StatusCreated); err != nil {
			return out, err
		}
		sent := time.Now()
		at := <-outAt
		if err := cmd.Wait(); err != nil {
			return out, fmt.Errorf("hook --wait: %w", err)
		}
		out.attention = append(out.attention, max(at.Sub(sent), 0))
	}

	// A cursor move against a send, 1 client, each in a run of its own:
	// alternated, each fdatasync of the log would also carry the previous
	// send's inbox append (its file's new size) to the disk, which is the
	// send's cost, not the move's.
	for range n {
		start := time.Now()
		if err := s.call(ctx, http.MethodPost, "/teams/attention/messages", tok["lead"], `{"to":"reader","body":"one more"}`, http.StatusCreated); err != nil {
			return out, err
		}
		out.send = append(out.send, time.Since(start))
	}
	for i := range n {
		start := time.Now()
		through := fmt.Sprintf(`{"through":"reader-%d"}`, n+i+1)
		if err := s.call(ctx, http.MethodPost, "/teams/attention/members/reader/inbox/read", tok["reader"], through, http.StatusOK); err != nil {
			return out, err
		}
		out.cursor = append(out.cursor, time.Since(start))
	}

	// A whole run with one unread letter, against this server.
	for i := range n {
		if err := s.call(ctx, http.MethodPost, "/teams/attention/messages", tok["lead"], fmt.Sprintf(`{"to":"reader","body":"letter %d"}`, i), http.StatusCreated); err != nil {
			return out, err
		}
		d, err := timeHook(ctx, bin, hookEnv)
		if err != nil {
			return out, err
		}
		out.healthy = append(out.healthy, d)
	}
	// ...and against a server that accepts and never answers.
	silent, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return out, err
	}
	defer silent.Close()
	go func() {
		var held []net.Conn
		for {
			c, err := silent.Accept()
			if err != nil {
				for _, c := range held {
					c.Close()
				}
				return
			}
			held = append(held, c)
		}
	}()
	silentEnv := []string{"PATH=" + os.Getenv("PATH"), "MAILROOM_URL=http://" + silent.Addr().String(), "MAILROOM_TOKEN=" + tok["reader"]}
	for range stalled {
		d, err := timeHook(ctx, bin, silentEnv)
		if err != nil {
			return out, err
		}
		out.stalled = append(out.stalled, d)
	}

	// A member document over a full inbox against empty ones.
	full, err := s.createTeam(ctx, "full", big)
	if err != nil {
		return out, err
	}
	if _, err := s.createTeam(ctx, "empty", nil); err != nil {
		return out, err
	}
	for i := range letters {
		if err := s.call(ctx, http.MethodPost, "/teams/full/messages", full["lead"], fmt.Sprintf(`{"to":"reader","body":"letter %d"}`, i), http.StatusCreated); err != nil {
			return out, err
		}
	}
	if err := s.call(ctx, http.MethodPost, "/teams/full/members/reader/inbox/read", full["reader"], `{"through":"reader-1"}`, http.StatusOK); err != nil {
		return out, err
	}
	for range 4 * n {
		for _, t := range []struct {
			team string
			into *latencies
		}{{"full", &out.memberFull}, {"empty", &out.memberEmpty}} {
			start := time.Now()
			if err := s.call(ctx, http.MethodGet, "/teams/"+t.team, adminToken, "", http.StatusOK); err != nil {
				return out, err
			}
			*t.into = append(*t.into, time.Since(start))
		}
	}
	return out, nil
}

// timeHook runs `hook` on a PostToolUse event under env and times the
// process from its start to its exit.
func timeHook(ctx context.Context, bin string, env []string) (time.Duration, error) {
	cmd := exec.CommandContext(ctx, bin, "hook")
	cmd.Env = env
	cmd.Stdin = strings.NewReader(`{"hook_event_name":"PostToolUse","session_id":"s"}`)
	start := time.Now()
	if err := cmd.Run(); err != nil {
		return 0, fmt.Errorf("hook on PostToolUse: %w", err)
	}
	return time.Since(start), nil
}

// hook prints phase h against its targets.
func (r *report) hook(f hookFigure, letters int) {
	a50, a99, s50 := f.attention.pct(0.50), f.attention.pct(0.99), f.startup.pct(0.50)
	r.printf("h. mail reaching an agent through `mailroom hook` (the real server binary and hook processes)\n")
	r.printf("   time to attention, a send's 201 to the output of a `hook --wait 60` already waiting, over %d hooks: p50 %s (target <= 5 ms) %s, p99 %s (target <= 25 ms) %s\n",
		len(f.attention), ms(a50), passMiss(a50 <= 5*time.Millisecond), ms(a99), passMiss(a99 <= 25*time.Millisecond))
	r.printf("   hook start-up, process start to exit on an event it answers with nothing: p50 %s (target <= 20 ms) %s, p99 %s\n",
		ms(s50), passMiss(s50 <= 20*time.Millisecond), ms(f.startup.pct(0.99)))
	c50, sd50 := f.cursor.pct(0.50), f.send.pct(0.50)
	r.printf("   a cursor move (POST inbox/read) p50 %s against a send's p50 %s, 1 client (target: no more than a send) %s\n",
		ms(c50), ms(sd50), passMiss(c50 <= sd50))
	full, empty := f.memberFull.pct(0.50), f.memberEmpty.pct(0.50)
	r.printf("   GET team with a member of %d letters (unread counted) p50 %s against empty inboxes p50 %s: %.2fx (target <= 1.2x) %s\n",
		letters, ms(full), ms(empty), ratio(full, empty), passMiss(ratio(full, empty) <= 1.2))
	r.printf("   a whole hook run on PostToolUse with one unread letter, over %d runs: p50 %s, p99 %s\n", len(f.healthy), ms(f.healthy.pct(0.50)), ms(f.healthy.pct(0.99)))
	if len(f.stalled) > 0 {
		worst := f.stalled.pct(1)
		r.printf("   a whole hook run against a server that accepts and never answers, over %d runs: p50 %s, max %s (target <= 2 s) %s\n",
			len(f.stalled), ms(f.stalled.pct(0.50)), ms(worst), passMiss(worst <= 2*time.Second+100*time.Millisecond))
	}
	r.printf("\n")
}
