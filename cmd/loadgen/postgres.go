package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"path/filepath"
	"time"

	"github.com/jackc/pgx/v5"

	"mailroom/internal/core"
	"mailroom/internal/pgstore"
	"mailroom/internal/pgtest"
)

// Phase p: the PostgreSQL store beside the file store, in the same run.
// Without -database-url it starts a private cluster (initdb in a
// temporary directory, pg_ctl on a free loopback port, fsync on, as the
// tests' internal/pgtest does) and removes it afterwards; with it, the
// URL must name an empty database that loadgen may fill.
//
//	1 client p50 (file, postgres); 64 clients over 64 teams on the file
//	store, on one PostgreSQL replica and on two (two services with their
//	own store and connection pool, in this process, clients split); and
//	the time to open the store and the service over -teams teams
//	(pgstore.Open + core.Service.Open, the work a replica does before it
//	listens).
//
// Beside each PostgreSQL window it reports what the database spent per
// send: its processes' CPU (read from /proc, only for the cluster loadgen
// started itself) and the WAL it wrote, so that the database's share of
// a send is measured rather than inferred from the rate.
//
// The windows above serve in this process, so their CPU is the clients'
// and the server's together. Then the server binary runs in its own
// process, once over a data directory (the file store) and once over the
// database, 64 clients over 64 teams each: its CPU per send on
// PostgreSQL against the file store's, and the database's CPU per send
// in the same window, are the figures a 2-core machine can judge.

type pgFigures struct {
	file1         sendFigure
	file64        sendFigure
	pg1, pg64     pgFigure
	pg64two       pgFigure
	teams         int
	openPG        time.Duration
	openPGNoTeams time.Duration
	bin           binaryStores
}

// binaryStores are the server binary's 64×64 windows on each store.
type binaryStores struct {
	file, pg       sendFigure
	fileCPU, pgCPU time.Duration // the Mailroom process's CPU per send
	dbCPU          time.Duration // the cluster's CPU per send; -1 unknown
}

func measurePostgres(ctx context.Context, work string, cfg config, r *report) (pgFigures, error) {
	var f pgFigures
	url := cfg.databaseURL
	var server func() (time.Duration, error) // the database's CPU so far
	if url == "" {
		cl, err := pgtest.Start()
		if err != nil {
			return f, fmt.Errorf("start a private PostgreSQL cluster: %w", err)
		}
		defer cl.Close()
		if err := cl.Exec(ctx, "postgres", "CREATE DATABASE loadgen"); err != nil {
			return f, err
		}
		url = cl.URL("loadgen")
		server = cl.ServerCPU
		r.printf("p. PostgreSQL: private cluster on 127.0.0.1:%d (fsync on)\n", cl.Port)
	} else {
		r.printf("p. PostgreSQL: %s\n", pgstore.Describe(url))
	}
	quiet := slog.New(slog.DiscardHandler)
	open := func() (*inproc, error) {
		s, err := pgstore.Open(ctx, url, pgstore.Options{Logger: quiet, MaxConns: 32})
		if err != nil {
			return nil, err
		}
		return serveInProcess(ctx, s, 64)
	}

	// File store, same configurations.
	fp, err := startInProcess(ctx, filepath.Join(work, "pgcmp-file"), 64)
	if err != nil {
		return f, err
	}
	if f.file1, err = measureSendConfig(ctx, fp, 1, 1, cfg.duration); err == nil {
		f.file64, err = measureSendConfig(ctx, fp, 64, 64, cfg.duration)
	}
	fp.close()
	if err != nil {
		return f, fmt.Errorf("file store: %w", err)
	}

	p1, err := open()
	if err != nil {
		return f, err
	}
	defer p1.close()
	m := &pgMeter{url: url, server: server}
	if f.pg1, err = m.measure(ctx, "one", []*inproc{p1}, 1, cfg.duration); err != nil {
		return f, fmt.Errorf("postgres, 1 client: %w", err)
	}
	if f.pg64, err = m.measure(ctx, "sixty-four", []*inproc{p1}, 64, cfg.duration); err != nil {
		return f, fmt.Errorf("postgres, 64 clients: %w", err)
	}
	p2, err := open()
	if err != nil {
		return f, err
	}
	defer p2.close()
	if f.pg64two, err = m.measure(ctx, "two", []*inproc{p1, p2}, 64, cfg.duration); err != nil {
		return f, fmt.Errorf("postgres, two replicas: %w", err)
	}
	r.printf("   store      replicas clients teams   sends/s          p50          p99   CPU per send  database CPU  WAL bytes\n")
	for _, row := range []struct {
		name string
		reps int
		fig  pgFigure
	}{{"file", 1, pgFigure{sendFigure: f.file1}}, {"postgres", 1, f.pg1}, {"file", 1, pgFigure{sendFigure: f.file64}}, {"postgres", 1, f.pg64}, {"postgres", 2, f.pg64two}} {
		db, wal := "", ""
		if row.name == "postgres" {
			db, wal = "-", "-"
			if row.fig.server >= 0 {
				db = ms(row.fig.server)
			}
			if row.fig.wal >= 0 {
				wal = fmt.Sprintf("%.0f", row.fig.wal)
			}
		}
		r.printf("   %-10s %8d %7d %5d %9.0f %12s %12s %14s %13s %10s\n", row.name, row.reps, row.fig.clients, row.fig.teams, row.fig.rate,
			ms(row.fig.lat.pct(0.5)), ms(row.fig.lat.pct(0.99)), ms(row.fig.cpu), db, wal)
	}
	r.printf("   (CPU per send: this process, clients included; database CPU: the cluster's processes, per send, when loadgen started it; WAL bytes per send)\n")

	if f.bin, err = measureBinaryStores(ctx, work, cfg, url, m.serverCPU); err != nil {
		return f, fmt.Errorf("the server binary: %w", err)
	}
	r.binaryStores(f.bin)

	// Start-up over many teams: time pgstore.Open + core.Service.Open.
	t0 := time.Now()
	p3, err := open()
	if err != nil {
		return f, err
	}
	f.openPGNoTeams = time.Since(t0)
	p3.close()
	f.teams = cfg.teams
	limits := core.DefaultLimits()
	// The database already holds the send phases' teams; the server's
	// limit (core.DefaultMaxTeams) counts them too.
	for i := range cfg.teams - len(p1.svc.Teams(ctx)) {
		spec := core.TeamSpec{Name: fmt.Sprintf("idle-%05d", i), Members: []core.MemberSpec{{Name: "ann", Role: "writes"}, {Name: "bob", Role: "reviews"}}, Limits: &limits}
		if _, _, err = p1.svc.CreateTeam(core.AsAdmin(ctx), spec); err != nil {
			return f, fmt.Errorf("create idle team %d: %w", i, err)
		}
	}
	t0 = time.Now()
	p3, err = open()
	if err != nil {
		return f, err
	}
	f.openPG = time.Since(t0)
	p3.close()
	r.printf("   open store + service (what a replica does before it listens): %s with %d teams in the database, %s before they were created\n\n",
		ms(f.openPG), cfg.teams, ms(f.openPGNoTeams))
	return f, nil
}

// pgFigure is one measured window on PostgreSQL: the sends, and what
// the database spent on each (-1 when unknown).
type pgFigure struct {
	sendFigure
	server time.Duration // the cluster's CPU per send
	wal    float64       // WAL bytes written per send
}

// pgMeter measures windows of sends on PostgreSQL with the database's
// own cost beside Mailroom's.
type pgMeter struct {
	url    string
	server func() (time.Duration, error) // nil: not our cluster
}

// measure is measureSendConfig for n clients over n teams (one member
// each, sending to its lead), client i on replica i%len(reps), with the
// database's CPU and WAL per send over the same window.
func (m *pgMeter) measure(ctx context.Context, prefix string, reps []*inproc, n int, d time.Duration) (pgFigure, error) {
	limits := benchLimits(1 << 24)
	routes := make([]route, n)
	for i := range n {
		name := fmt.Sprintf("%s-%02d", prefix, i)
		tokens, err := reps[0].createTeam(ctx, name, 1, limits)
		if err != nil {
			return pgFigure{}, err
		}
		routes[i] = route{team: name, token: tokens["m1"]}
		// Warm up: every inbox its first letter, every client its
		// connection.
		if _, err := reps[i%len(reps)].send(ctx, name, tokens["m1"], core.LeadName); err != nil {
			return pgFigure{}, err
		}
	}
	conn, err := pgx.Connect(ctx, m.url)
	if err != nil {
		return pgFigure{}, err
	}
	defer conn.Close(ctx)
	lsn := func() (int64, error) {
		var v int64
		err := conn.QueryRow(ctx, `SELECT pg_current_wal_lsn() - '0/0'`).Scan(&v)
		return v, err
	}
	server := m.serverCPU
	wal0, walErr := lsn()
	srv0, cpu0 := server(), cpuTime()
	lat, elapsed, err := runWindow(ctx, n, d, func(i, _ int) error {
		_, err := reps[i%len(reps)].send(ctx, routes[i].team, routes[i].token, core.LeadName)
		return err
	})
	cpu, srv1 := cpuTime()-cpu0, server()
	wal1, walErr1 := lsn()
	f := pgFigure{sendFigure: newSendFigure(n, n, lat, elapsed, cpu), server: -1, wal: -1}
	sends := max(1, len(lat))
	if srv0 >= 0 && srv1 >= 0 {
		f.server = (srv1 - srv0) / time.Duration(sends)
	}
	if walErr == nil && walErr1 == nil {
		f.wal = float64(wal1-wal0) / float64(sends)
	}
	return f, err
}

// serverCPU is the database's CPU so far, -1 when unknown.
func (m *pgMeter) serverCPU() time.Duration {
	if m.server == nil {
		return -1
	}
	v, err := m.server()
	if err != nil {
		return -1
	}
	return v
}

// measureBinaryStores runs the server binary on the file store and then on
// the database at url, 64 clients over 64 teams each, with its CPU per
// send and, on PostgreSQL, the database's (db: -1 when unknown).
func measureBinaryStores(ctx context.Context, work string, cfg config, url string, db func() time.Duration) (binaryStores, error) {
	out := binaryStores{dbCPU: -1}
	for _, store := range []string{"file", "postgres"} {
		addr, err := freeAddr()
		if err != nil {
			return out, err
		}
		env := serverEnv(addr, filepath.Join(work, "pgcmp-binary-"+store))
		if store == "postgres" {
			env = append(env, "MAILROOM_STORE=postgres", "MAILROOM_DATABASE_URL="+url)
		}
		s, err := startServerProcess(cfg.server, addr, env, "")
		if err != nil {
			return out, fmt.Errorf("%s store: %w", store, err)
		}
		meters := []func() time.Duration{s.cpu}
		if store == "postgres" {
			meters = append(meters, db)
		}
		fig, cpu, err := measureMetered(ctx, s.p, rawFiles, rawFiles, cfg.duration, meters...)
		err = errors.Join(err, s.stop())
		if err != nil {
			return out, fmt.Errorf("%s store: %w", store, err)
		}
		if store == "file" {
			out.file, out.fileCPU = fig, cpu[0]
		} else {
			out.pg, out.pgCPU, out.dbCPU = fig, cpu[0], cpu[1]
		}
	}
	return out, nil
}

func (r *report) binaryStores(b binaryStores) {
	r.printf("   the server binary in its own process, %d clients over %d teams (its CPU from /proc/<pid>/stat, clients excluded):\n", b.file.clients, b.file.teams)
	r.printf("   file store:  %6.0f sends/s, p50 %s, Mailroom CPU %s per send\n", b.file.rate, ms(b.file.lat.pct(0.5)), ms(b.fileCPU))
	db := "not measured (a database loadgen did not start)"
	if b.dbCPU >= 0 {
		db = ms(b.dbCPU) + " per send (postmaster and its children)"
	}
	r.printf("   PostgreSQL:  %6.0f sends/s, p50 %s, Mailroom CPU %s per send; database CPU %s\n", b.pg.rate, ms(b.pg.lat.pct(0.5)), ms(b.pgCPU), db)
}

// target prints one PASS or MISS line of phase p.
func (r *report) target(ok bool, name string, value float64, bound string) {
	word := "MISS"
	if ok {
		word = "PASS"
	}
	r.printf("   %s  %-56s %8.2f  (target %s)\n", word, name, value, bound)
}
