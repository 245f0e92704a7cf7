package main

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"time"

	"mailroom/internal/pgstore"
	"mailroom/internal/pgtest"
)

// Phase t: the task board's claim-next against a send, one client, over
// HTTP to the in-process server (as in b). Each claim-next is released
// again (untimed) so that the board stays as it was: n tasks of which
// the last is the only one claimable, the others claimed by another
// member, so that finding it passes every task before it. Sends and the
// claims on both boards alternate, so drift hits them alike.

// taskFigure is phase t's result.
type taskFigure struct {
	send, small, large latencies
	smallN, largeN     int
}

func measureTasks(ctx context.Context, dir string, cfg config) (taskFigure, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return taskFigure{}, err
	}
	p, err := startInProcess(ctx, dir, 2)
	if err != nil {
		return taskFigure{}, err
	}
	defer p.close()
	return measureTasksOn(ctx, p, cfg)
}

// measureTasksOn measures phase t on the server p serves, on teams of
// its own.
func measureTasksOn(ctx context.Context, p *inproc, cfg config) (taskFigure, error) {
	out := taskFigure{smallN: 5, largeN: 500}
	sendTokens, err := p.createTeam(ctx, "sends", 1, benchLimits(2*cfg.latencyN+100))
	if err != nil {
		return out, err
	}
	board := func(name string, n int) (map[string]string, error) {
		tokens, err := p.createTeam(ctx, name, 2, benchLimits(8))
		if err != nil {
			return nil, err
		}
		for i := 1; i <= n; i++ {
			if err := p.call(ctx, http.MethodPost, "/teams/"+name+"/tasks", tokens["lead"], map[string]string{"title": fmt.Sprintf("task %d", i)}, nil, http.StatusCreated); err != nil {
				return nil, err
			}
			if i < n {
				if err := p.call(ctx, http.MethodPost, fmt.Sprintf("/teams/%s/tasks/task-%d/claim", name, i), tokens["m2"], nil, nil, http.StatusOK); err != nil {
					return nil, err
				}
			}
		}
		return tokens, nil
	}
	small, err := board("tasks-small", out.smallN)
	if err != nil {
		return out, err
	}
	large, err := board("tasks-large", out.largeN)
	if err != nil {
		return out, err
	}
	claim := func(team string, n int, tokens map[string]string) (time.Duration, error) {
		var got struct {
			ID string `json:"task_id"`
		}
		t := time.Now()
		if err := p.call(ctx, http.MethodPost, "/teams/"+team+"/tasks/claim-next", tokens["m1"], nil, &got, http.StatusOK); err != nil {
			return 0, err
		}
		lat := time.Since(t)
		if want := fmt.Sprintf("task-%d", n); got.ID != want {
			return 0, fmt.Errorf("claim-next on %s handed out %s, want %s", team, got.ID, want)
		}
		return lat, p.call(ctx, http.MethodPost, "/teams/"+team+"/tasks/"+got.ID+"/release", tokens["m1"], nil, nil, http.StatusOK)
	}
	for i := range cfg.latencyN + cfg.latencyN/5 {
		warm := i < cfg.latencyN/5
		s, err := p.send(ctx, "sends", sendTokens["lead"], "m1")
		if err != nil {
			return out, err
		}
		a, err := claim("tasks-small", out.smallN, small)
		if err != nil {
			return out, err
		}
		b, err := claim("tasks-large", out.largeN, large)
		if err != nil {
			return out, err
		}
		if !warm {
			out.send, out.small, out.large = append(out.send, s), append(out.small, a), append(out.large, b)
		}
	}
	return out, ctx.Err()
}

func (r *report) tasks(f taskFigure, store string) {
	r.printf("t. the task board on %s: claim-next against a send (one client, in-process server as in b; each claim released again, untimed)\n", store)
	r.printf("   send:                              p50 %s, p99 %s\n", ms(f.send.pct(0.5)), ms(f.send.pct(0.99)))
	r.printf("   claim-next, %3d tasks on the team: p50 %s, p99 %s\n", f.smallN, ms(f.small.pct(0.5)), ms(f.small.pct(0.99)))
	r.printf("   claim-next, %3d tasks on the team: p50 %s, p99 %s\n", f.largeN, ms(f.large.pct(0.5)), ms(f.large.pct(0.99)))
	r.target(ratio(f.small.pct(0.5), f.send.pct(0.5)) <= 1.2, "claim-next p50 ÷ send p50", ratio(f.small.pct(0.5), f.send.pct(0.5)), "≤ 1.20")
	r.target(ratio(f.large.pct(0.5), f.small.pct(0.5)) <= 1.2, fmt.Sprintf("claim-next p50, %d tasks ÷ %d tasks", f.largeN, f.smallN), ratio(f.large.pct(0.5), f.small.pct(0.5)), "≤ 1.20")
	r.printf("\n")
}

// measureTasksPostgres is phase t on PostgreSQL: a private cluster (or
// -database-url), one replica in process.
func measureTasksPostgres(ctx context.Context, cfg config) (taskFigure, error) {
	url := cfg.databaseURL
	if url == "" {
		cl, err := pgtest.Start()
		if err != nil {
			return taskFigure{}, fmt.Errorf("start a private PostgreSQL cluster: %w", err)
		}
		defer cl.Close()
		if err := cl.Exec(ctx, "postgres", "CREATE DATABASE loadgen_tasks"); err != nil {
			return taskFigure{}, err
		}
		url = cl.URL("loadgen_tasks")
	}
	s, err := pgstore.Open(ctx, url, pgstore.Options{Logger: slog.New(slog.DiscardHandler), MaxConns: 8})
	if err != nil {
		return taskFigure{}, err
	}
	p, err := serveInProcess(ctx, s, 2)
	if err != nil {
		return taskFigure{}, err
	}
	defer p.close()
	return measureTasksOn(ctx, p, cfg)
}
