package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"path/filepath"
	"time"

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

type pgFigures struct {
	file1, pg1    sendFigure
	file64, pg64  sendFigure
	pg64two       sendFigure
	teams         int
	openPG        time.Duration
	openPGNoTeams time.Duration
}

func measurePostgres(ctx context.Context, work string, cfg config, r *report) (pgFigures, error) {
	var f pgFigures
	url := cfg.databaseURL
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
	if f.pg1, err = measureSendConfig(ctx, p1, 1, 1, cfg.duration); err != nil {
		return f, fmt.Errorf("postgres, 1 client: %w", err)
	}
	if f.pg64, err = measureSendConfig(ctx, p1, 64, 64, cfg.duration); err != nil {
		return f, fmt.Errorf("postgres, 64 clients: %w", err)
	}
	p2, err := open()
	if err != nil {
		return f, err
	}
	defer p2.close()
	if f.pg64two, err = measureTwoReplicas(ctx, p1, p2, cfg.duration); err != nil {
		return f, fmt.Errorf("postgres, two replicas: %w", err)
	}
	r.printf("   store      replicas clients teams   sends/s          p50          p99   CPU per send\n")
	for _, row := range []struct {
		name string
		reps int
		fig  sendFigure
	}{{"file", 1, f.file1}, {"postgres", 1, f.pg1}, {"file", 1, f.file64}, {"postgres", 1, f.pg64}, {"postgres", 2, f.pg64two}} {
		r.printf("   %-10s %8d %7d %5d %9.0f %12s %12s %14s\n", row.name, row.reps, row.fig.clients, row.fig.teams, row.fig.rate,
			ms(row.fig.lat.pct(0.5)), ms(row.fig.lat.pct(0.99)), ms(row.fig.cpu))
	}

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
	for i := range cfg.teams - len(p1.svc.Teams()) {
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

// measureTwoReplicas is measureSendConfig for 64 clients over 64 teams
// with client i on replica i%2.
func measureTwoReplicas(ctx context.Context, a, b *inproc, d time.Duration) (sendFigure, error) {
	const n = 64
	limits := benchLimits(1 << 24)
	reps := []*inproc{a, b}
	routes := make([]route, n)
	for i := range n {
		name := fmt.Sprintf("two-%02d", i)
		tokens, err := a.createTeam(ctx, name, 1, limits)
		if err != nil {
			return sendFigure{}, err
		}
		routes[i] = route{team: name, token: tokens["m1"]}
		if _, err := reps[i%2].send(ctx, name, tokens["m1"], core.LeadName); err != nil {
			return sendFigure{}, err
		}
	}
	cpu0 := cpuTime()
	lat, elapsed, err := runWindow(ctx, n, d, func(i, _ int) error {
		_, err := reps[i%2].send(ctx, routes[i].team, routes[i].token, core.LeadName)
		return err
	})
	return newSendFigure(n, n, lat, elapsed, cpuTime()-cpu0), errors.Join(err)
}

// target prints one PASS or MISS line of phase p.
func (r *report) target(ok bool, name string, value float64, bound string) {
	word := "MISS"
	if ok {
		word = "PASS"
	}
	r.printf("   %s  %-56s %8.2f  (target %s)\n", word, name, value, bound)
}
