package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"mailroom/internal/app"
	"mailroom/internal/core"
	"mailroom/internal/mail"
)

// adminToken is the admin token of every server loadgen starts.
const adminToken = "loadgen-admin-token-0123456789"

// sendBody makes a line of about rawLine bytes once in its envelope.
var sendBody = strings.Repeat("the build passed; the report is in report.txt. ", 2)[:88]

// benchLimits let an inbox take every letter a run sends.
func benchLimits(letters int) core.Limits {
	l := core.DefaultLimits()
	l.InboxMessages = letters
	l.InboxBytes = 1 << 30
	return l
}

// inproc is the real HTTP handler over the real core and file store,
// served in this process on a loopback port. Running it here, rather than
// as a child process, lets -cpuprofile see the server's work.
type inproc struct {
	srv     *http.Server
	url     string
	app     *app.App
	svc     *core.Service
	store   interface{ Close() error }
	release func() error
	client  *http.Client
}

func startInProcess(ctx context.Context, dir string, conns int, opts ...inprocOption) (*inproc, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, err
	}
	release, err := mail.LockDir(dir)
	if err != nil {
		return nil, err
	}
	quiet := slog.New(slog.DiscardHandler)
	store, err := mail.Open(dir, mail.WithLogger(quiet))
	if err != nil {
		release()
		return nil, err
	}
	p, err := serveInProcess(ctx, store, conns, opts...)
	if err != nil {
		release()
		return nil, err
	}
	p.release = release
	return p, nil
}

// inprocOption changes the options of an in-process server (the wake
// phase gives it a model and a slot count).
type inprocOption func(*app.Options)

// serveInProcess serves the real handler and core over store on a
// loopback port in this process; closing it closes store.
func serveInProcess(ctx context.Context, store interface {
	core.Store
	Close() error
}, conns int, opts ...inprocOption) (*inproc, error) {
	quiet := slog.New(slog.DiscardHandler)
	release := func() error { return nil }
	aOpts := app.Options{Core: core.Options{Logger: quiet}, AdminToken: adminToken, Logger: quiet}
	for _, o := range opts {
		o(&aOpts)
	}
	a, err := app.New(ctx, store, aOpts)
	if err != nil {
		release()
		return nil, err
	}
	h := a.Handler()
	// A plain http.Server, as cmd/server runs, rather than httptest's,
	// whose connection tracking takes a global lock on every request.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		release()
		return nil, err
	}
	srv := &http.Server{Handler: h, ReadHeaderTimeout: 5 * time.Second}
	go func() { _ = srv.Serve(ln) }()
	tr := &http.Transport{MaxIdleConns: conns + 8, MaxIdleConnsPerHost: conns + 8, DisableCompression: true}
	return &inproc{srv: srv, url: "http://" + ln.Addr().String(), app: a, svc: a.Service(), store: store, release: release, client: &http.Client{Transport: tr, Timeout: time.Minute}}, nil
}

func (p *inproc) close() error {
	p.client.CloseIdleConnections()
	err := p.srv.Close()
	// What the server started (the waker, woken turns) ends before the
	// store closes.
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	return errors.Join(err, p.app.Shutdown(ctx), p.store.Close(), p.release())
}

// call makes one API call and decodes a response with status want into out.
func (p *inproc) call(ctx context.Context, method, path, token string, body, out any, want int) error {
	var rd io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			return err
		}
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, method, p.url+"/api/v1"+path, rd)
	if err != nil {
		return err
	}
	req.Header.Set("Authorization", "Bearer "+token)
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := p.client.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	if err != nil {
		return err
	}
	if resp.StatusCode != want {
		return fmt.Errorf("%s %s: %s: %s", method, path, resp.Status, data)
	}
	if out != nil {
		return json.Unmarshal(data, out)
	}
	return nil
}

// createTeam creates a team with lead and members m1..mN over HTTP and
// returns each member's token.
func (p *inproc) createTeam(ctx context.Context, name string, members int, limits core.Limits) (map[string]string, error) {
	list := []map[string]string{}
	for i := 1; i <= members; i++ {
		list = append(list, map[string]string{"name": fmt.Sprintf("m%d", i), "role": "sends"})
	}
	return p.postTeam(ctx, map[string]any{"name": name, "members": list, "limits": map[string]int{
		"inbox_messages": limits.InboxMessages, "inbox_bytes": limits.InboxBytes,
	}})
}

// postTeam creates the team body describes and returns each member's token.
func (p *inproc) postTeam(ctx context.Context, body map[string]any) (map[string]string, error) {
	var created struct {
		Members []struct {
			Name  string `json:"name"`
			Token string `json:"token"`
		} `json:"members"`
	}
	if err := p.call(ctx, http.MethodPost, "/teams", adminToken, body, &created, http.StatusCreated); err != nil {
		return nil, err
	}
	tokens := map[string]string{}
	for _, m := range created.Members {
		tokens[m.Name] = m.Token
	}
	return tokens, nil
}

// send mails sendBody from the token's member to "to" and times it.
func (p *inproc) send(ctx context.Context, team, token, to string) (time.Duration, error) {
	t := time.Now()
	err := p.call(ctx, http.MethodPost, "/teams/"+team+"/messages", token, map[string]string{"to": to, "body": sendBody}, nil, http.StatusCreated)
	return time.Since(t), err
}

// sendFigure is one HTTP send configuration's result.
type sendFigure struct {
	clients, teams int
	rate           float64
	lat            latencies
	// cpu is this process's CPU time (user + system, client included) per
	// send during the measured window.
	cpu time.Duration
}

// newSendFigure summarises one measured window of sends.
func newSendFigure(clients, teams int, lat latencies, elapsed, cpu time.Duration) sendFigure {
	return sendFigure{clients: clients, teams: teams, lat: lat,
		rate: float64(len(lat)) / elapsed.Seconds(),
		cpu:  cpu / time.Duration(max(1, len(lat)))}
}

// cpuTime is the process's user + system time so far.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// maxMembers is the API's bound on a team's members.
const maxMembers = 32

// sendConfigs are the (clients, teams) pairs of figure b.
var sendConfigs = [][2]int{{1, 1}, {8, 1}, {64, 1}, {1, 64}, {8, 64}, {64, 64}}

// route is what one client sends: from a member of a team to its lead.
type route struct{ team, token string }

func measureSends(ctx context.Context, dir string, cfg config, r *report) ([]sendFigure, error) {
	p, err := startInProcess(ctx, dir, 64)
	if err != nil {
		return nil, err
	}
	defer p.close()
	r.sendsHeader()
	var out []sendFigure
	for _, c := range sendConfigs {
		f, err := measureSendConfig(ctx, p, c[0], c[1], cfg.duration)
		if err != nil {
			return nil, fmt.Errorf("%d clients over %d teams: %w", c[0], c[1], err)
		}
		r.send(f)
		out = append(out, f)
	}
	core64, err := measureCoreSends(ctx, p.svc, rawFiles, cfg.duration)
	if err != nil {
		return nil, fmt.Errorf("core sends: %w", err)
	}
	r.printf("   for comparison, core.Service.Send called directly (no HTTP), %d goroutines over %d teams: %.0f sends/s, p50 %s, CPU %s per send\n\n",
		rawFiles, rawFiles, core64.rate, ms(core64.lat.pct(0.5)), ms(core64.cpu))
	return out, nil
}

// measureCoreSends calls core's Send from n goroutines, one team each,
// for d: the service and the store without the HTTP layer.
func measureCoreSends(ctx context.Context, svc *core.Service, n int, d time.Duration) (sendFigure, error) {
	limits := benchLimits(1 << 24)
	for i := range n {
		spec := core.TeamSpec{Name: fmt.Sprintf("core-%02d", i), Members: []core.MemberSpec{{Name: "m1", Role: "sends"}}, Limits: &limits}
		if _, _, err := svc.CreateTeam(ctx, spec); err != nil {
			return sendFigure{}, err
		}
		if _, err := svc.Send(core.AsMember(ctx, spec.Name, "m1"), core.SendInput{Team: spec.Name, To: core.LeadName, Body: sendBody}); err != nil {
			return sendFigure{}, err
		}
	}
	cpu0 := cpuTime()
	lat, elapsed, err := runWindow(ctx, n, d, func(i, _ int) error {
		_, err := svc.Send(core.AsMember(ctx, fmt.Sprintf("core-%02d", i), "m1"), core.SendInput{Team: fmt.Sprintf("core-%02d", i), To: core.LeadName, Body: sendBody})
		return err
	})
	return newSendFigure(n, n, lat, elapsed, cpuTime()-cpu0), err
}

// measureSendConfig runs clients concurrent clients over teams fresh teams
// for d. With at least as many teams as clients, client i sends to teams
// i, i+clients, ... in turn; otherwise clients share teams, each client as
// its own member. Every letter goes to the team's lead.
func measureSendConfig(ctx context.Context, p *inproc, clients, teams int, d time.Duration) (sendFigure, error) {
	f, _, err := measureMetered(ctx, p, clients, teams, d)
	return f, err
}

// measureMetered is measureSendConfig that also reads each meter just
// before and just after the window, so that the setup (teams created,
// first letters) is not in the figure, and returns each meter's growth
// per send (-1 where a meter read -1: unknown). Phases f and p meter the
// server process's CPU and the database's this way.
func measureMetered(ctx context.Context, p *inproc, clients, teams int, d time.Duration, meters ...func() time.Duration) (sendFigure, []time.Duration, error) {
	routes, err := sendRoutes(ctx, p, clients, teams)
	if err != nil {
		return sendFigure{}, nil, err
	}
	before := make([]time.Duration, len(meters))
	for i, m := range meters {
		before[i] = m()
	}
	cpu0 := cpuTime()
	lat, elapsed, err := runWindow(ctx, clients, d, func(i, n int) error {
		rt := routes[i][n%len(routes[i])]
		_, err := p.send(ctx, rt.team, rt.token, core.LeadName)
		return err
	})
	cpu := cpuTime() - cpu0
	per := make([]time.Duration, len(meters))
	for i, m := range meters {
		after := m()
		per[i] = -1
		if before[i] >= 0 && after >= 0 {
			per[i] = perOp(after-before[i], len(lat))
		}
	}
	return newSendFigure(clients, teams, lat, elapsed, cpu), per, err
}

// sendRoutes creates the teams of one send configuration and returns each
// client's routes, every inbox given its first letter and every client
// its connection.
func sendRoutes(ctx context.Context, p *inproc, clients, teams int) ([][]route, error) {
	// A team has at most 32 members (lead included); clients beyond that
	// share member tokens.
	perTeam := min(max(1, (clients+teams-1)/teams), maxMembers-1)
	routes := make([][]route, clients)
	limits := benchLimits(1 << 24)
	for j := range teams {
		name := fmt.Sprintf("s%dc%dt-%d", clients, teams, j)
		tokens, err := p.createTeam(ctx, name, perTeam, limits)
		if err != nil {
			return nil, err
		}
		if teams >= clients {
			i := j % clients
			routes[i] = append(routes[i], route{team: name, token: tokens["m1"]})
			continue
		}
		for i := j; i < clients; i += teams {
			k := (i / teams) % perTeam
			routes[i] = append(routes[i], route{team: name, token: tokens[fmt.Sprintf("m%d", k+1)]})
		}
	}
	// Warm up: every inbox gets its first letter (written whole, not
	// appended) and every client its connection.
	for _, rs := range routes {
		for _, rt := range rs {
			if _, err := p.send(ctx, rt.team, rt.token, core.LeadName); err != nil {
				return nil, err
			}
		}
	}
	return routes, nil
}

// inboxFigure compares sends into a full inbox and an empty one.
type inboxFigure struct {
	letters     int
	full, empty latencies
}

// measureInbox creates a team whose member "full" holds cfg.bigInbox
// letters (written straight to its file in the store's own bytes, which
// is what thousands of sends would leave), restarts over it so the inbox
// is read and validated as after any restart, then alternates single
// sends into "full" and into "empty".
func measureInbox(ctx context.Context, dir string, cfg config) (inboxFigure, error) {
	out := inboxFigure{letters: cfg.bigInbox}
	limits := benchLimits(cfg.bigInbox + 2*cfg.latencyN + 100)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return out, err
	}
	store, err := mail.Open(dir, mail.WithLogger(slog.New(slog.DiscardHandler)))
	if err != nil {
		return out, err
	}
	defer store.Close()
	svc := core.NewService(store, core.Options{})
	_, created, err := svc.CreateTeam(ctx, core.TeamSpec{
		Name:    "big",
		Members: []core.MemberSpec{{Name: "full", Role: "holds many letters"}, {Name: "empty", Role: "holds none"}},
		Limits:  &limits,
	})
	if err != nil {
		return out, err
	}
	var lead string
	for _, m := range created {
		if m.Name == core.LeadName {
			lead = m.Token
		}
	}
	var buf bytes.Buffer
	for i := 1; i <= cfg.bigInbox; i++ {
		buf.Write(core.EncodeInboxLine(core.Message{ID: fmt.Sprintf("full-%d", i), Sender: core.LeadName, Recipient: "full", Body: sendBody}))
	}
	path := filepath.Join(dir, "teams", "big", "inboxes", "full.jsonl")
	if err := writeSynced(path, buf.Bytes()); err != nil {
		return out, err
	}

	p, err := startInProcess(ctx, dir, 1)
	if err != nil {
		return out, err
	}
	defer p.close()
	for i := range 2 * cfg.latencyN {
		// Warm-up first (a fifth of the sends), then timed sends; the
		// order within each pair alternates, so drift hits both alike.
		warm := i < cfg.latencyN/5
		order := []string{"full", "empty"}
		if i%2 == 1 {
			order = []string{"empty", "full"}
		}
		for _, to := range order {
			lat, err := p.send(ctx, "big", lead, to)
			if err != nil {
				return out, err
			}
			if warm {
				continue
			}
			if to == "full" && len(out.full) < cfg.latencyN {
				out.full = append(out.full, lat)
			} else if to == "empty" && len(out.empty) < cfg.latencyN {
				out.empty = append(out.empty, lat)
			}
		}
		if len(out.full) >= cfg.latencyN && len(out.empty) >= cfg.latencyN {
			break
		}
	}
	return out, ctx.Err()
}

func writeSynced(path string, data []byte) error {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o600)
	if err != nil {
		return err
	}
	if _, err := f.Write(data); err != nil {
		f.Close()
		return err
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}
