package main

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"mailroom/internal/core"
)

// runReserve is `loadgen reserve [-data DIR] [-server BIN] [-keep]
// [-count N] [-rounds N] [-guard-runs N]`: file reservations (phase k).
//
//  1. A grant of 32 patterns and a check of 100 concrete paths against
//     200 live reservations of 32 patterns each, beside a send on the same
//     team, one client over HTTP to the in-process server (as in b). Each
//     grant is released again, untimed, so that 200 stay live; grants,
//     checks and sends alternate, so drift hits them alike.
//  2. 64 members racing: in each round every member asks at once for an
//     exclusive reservation of the round's directory (and a file of its
//     own in it); exactly one may win each round.
//  3. `mailroom guard` (the real binary) in a git repository with 1,000
//     staged files, against the same server and its 200 reservations:
//     wall time of the whole command, none of the files held, and with 10
//     of them held (the guard then exits 1).
func runReserve(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	c := newSubcommand("reserve", "server `binary` to run as `mailroom guard` (default: built with go build)", stderr)
	count := c.fs.Int("count", 400, "timed grants, checks and sends each")
	rounds := c.fs.Int("rounds", 50, "rounds of 64 members racing")
	guardRuns := c.fs.Int("guard-runs", 20, "timed runs of mailroom guard in each configuration")
	if err := c.fs.Parse(args); err != nil {
		return err
	}
	if *count < 10 || *rounds < 1 || *guardRuns < 1 {
		return fmt.Errorf("-count at least 10, -rounds and -guard-runs at least 1")
	}
	work, r, done, err := c.begin(stdout)
	if err != nil {
		return err
	}
	defer done()
	bin, err := serverBinary(ctx, work, *c.server, stderr)
	if err != nil {
		return err
	}
	p, err := startInProcess(ctx, filepath.Join(work, "data"), 64)
	if err != nil {
		return err
	}
	defer p.close()

	f, tokens, err := measureGrants(ctx, p, *count)
	if err != nil {
		return fmt.Errorf("grants: %w", err)
	}
	r.printf("k. file reservations (in-process server as in b, one client; the team holds %d live reservations of %d patterns)\n", liveReservations, patternsEach)
	r.printf("   send (same team):                    p50 %s, p99 %s\n", ms(f.send.pct(0.5)), ms(f.send.pct(0.99)))
	r.printf("   grant of %d patterns:                p50 %s, p99 %s\n", patternsEach, ms(f.grant.pct(0.5)), ms(f.grant.pct(0.99)))
	r.printf("   check of %d paths (%d held):        p50 %s, p99 %s\n", checkPaths, heldInCheck, ms(f.check.pct(0.5)), ms(f.check.pct(0.99)))
	r.printf("   refused grant (conflict named):      p50 %s, p99 %s\n\n", ms(f.refused.pct(0.5)), ms(f.refused.pct(0.99)))

	race, err := measureRace(ctx, p, *rounds)
	if err != nil {
		return fmt.Errorf("race: %w", err)
	}
	r.printf("   %d members racing, %d rounds: %d grants, %d refusals (reservation_conflict), rounds with exactly one winner: %d of %d\n",
		raceMembers, *rounds, race.grants, race.refusals, race.oneWinner, *rounds)
	r.printf("   racing request:                      p50 %s, p99 %s\n\n", ms(race.lat.pct(0.5)), ms(race.lat.pct(0.99)))

	g, err := measureGuard(ctx, p, bin, work, tokens, *guardRuns)
	if err != nil {
		return fmt.Errorf("guard: %w", err)
	}
	r.printf("   mailroom guard, %d staged files, none held:  p50 %s, max %s (exit 0)\n", guardFiles, ms(g.clean.pct(0.5)), ms(g.clean.pct(1)))
	r.printf("   mailroom guard, %d staged files, %d held:    p50 %s, max %s (exit 1)\n", guardFiles, guardHeld, ms(g.held.pct(0.5)), ms(g.held.pct(1)))
	r.target(g.clean.pct(0.5) < 300*time.Millisecond && g.held.pct(0.5) < 300*time.Millisecond, "guard wall time p50, 1,000 staged files (ms)", float64(max(g.clean.pct(0.5), g.held.pct(0.5)))/float64(time.Millisecond), "< 300")
	r.target(race.oneWinner == *rounds, "rounds with exactly one grant", float64(race.oneWinner), fmt.Sprintf("= %d", *rounds))
	r.printf("\nload average at end: %s\n", loadAvg())
	return nil
}

// The shape of phase k.
const (
	liveReservations = 200
	patternsEach     = 32
	checkPaths       = 100
	heldInCheck      = 10
	raceMembers      = 64
	guardFiles       = 1000
	guardHeld        = 10
	resMembers       = 20 // holders of the 200 live reservations
)

// holderPatterns are reservation k's 32 patterns: directory trees, files
// of a kind under them, single files and alternatives, each under a
// directory of its own, as agents working on separate parts reserve.
func holderPatterns(k int) []string {
	out := make([]string, patternsEach)
	for i := range out {
		base := fmt.Sprintf("svc%d/part%d", k, i)
		switch i % 4 {
		case 0:
			out[i] = base + "/**"
		case 1:
			out[i] = base + "/**/*_test.go"
		case 2:
			out[i] = base + "/cmd/main.go"
		default:
			out[i] = base + "/{web,docs}/page.*"
		}
	}
	return out
}

type grantFigure struct{ send, grant, check, refused latencies }

// measureGrants makes the team with its 200 live reservations and times
// grants, checks, refused grants and sends, interleaved.
func measureGrants(ctx context.Context, p *inproc, count int) (grantFigure, map[string]string, error) {
	var out grantFigure
	members := []map[string]string{}
	for i := 1; i <= resMembers; i++ {
		members = append(members, map[string]string{"name": fmt.Sprintf("m%d", i)})
	}
	tokens, err := p.postTeam(ctx, map[string]any{"name": "repo", "members": members,
		"limits": map[string]int{"inbox_messages": 2*count + 100, "inbox_bytes": 1 << 30, "reservations": liveReservations + 1}})
	if err != nil {
		return out, nil, err
	}
	for k := range liveReservations {
		holder := fmt.Sprintf("m%d", 1+k%resMembers)
		if err := p.call(ctx, http.MethodPost, "/teams/repo/reservations", tokens[holder], map[string]any{"paths": holderPatterns(k)}, nil, http.StatusCreated); err != nil {
			return out, nil, err
		}
	}
	// The grant: 32 patterns under a directory nobody holds; the check:
	// 100 files, 10 of them under reservations of others; the refused
	// grant: 32 patterns, the last overlapping reservation 199.
	var grant, refused []string
	for i := range patternsEach {
		grant = append(grant, fmt.Sprintf("svc%d/part%d/**", liveReservations+1, i))
		refused = append(refused, fmt.Sprintf("svc%d/part%d/**", liveReservations+2, i))
	}
	refused[patternsEach-1] = fmt.Sprintf("svc%d/part0/x.go", liveReservations-1)
	var paths []string
	for i := range checkPaths {
		if i%(checkPaths/heldInCheck) == 0 {
			paths = append(paths, fmt.Sprintf("svc%d/part%d/internal/file%d.go", i, 4*(i%8), i))
		} else {
			paths = append(paths, fmt.Sprintf("free/dir%d/file%d.go", i%7, i))
		}
	}
	granter := tokens["lead"]
	for i := range count + count/5 {
		warm := i < count/5
		s, err := p.send(ctx, "repo", granter, "m1")
		if err != nil {
			return out, nil, err
		}
		var res struct {
			ID string `json:"reservation_id"`
		}
		t := time.Now()
		if err := p.call(ctx, http.MethodPost, "/teams/repo/reservations", granter, map[string]any{"paths": grant}, &res, http.StatusCreated); err != nil {
			return out, nil, err
		}
		g := time.Since(t)
		if err := p.call(ctx, http.MethodDelete, "/teams/repo/reservations/"+res.ID, granter, nil, nil, http.StatusOK); err != nil {
			return out, nil, err
		}
		var checked struct {
			Conflicts []core.PathConflict `json:"conflicts"`
		}
		t = time.Now()
		if err := p.call(ctx, http.MethodPost, "/teams/repo/reservations/check", granter, map[string]any{"paths": paths}, &checked, http.StatusOK); err != nil {
			return out, nil, err
		}
		c := time.Since(t)
		if len(checked.Conflicts) != heldInCheck {
			return out, nil, fmt.Errorf("the check found %d held paths, want %d", len(checked.Conflicts), heldInCheck)
		}
		t = time.Now()
		if err := p.call(ctx, http.MethodPost, "/teams/repo/reservations", granter, map[string]any{"paths": refused}, nil, http.StatusConflict); err != nil {
			return out, nil, err
		}
		rf := time.Since(t)
		if !warm {
			out.send, out.grant, out.check, out.refused = append(out.send, s), append(out.grant, g), append(out.check, c), append(out.refused, rf)
		}
	}
	return out, tokens, ctx.Err()
}

type raceFigure struct {
	grants, refusals, oneWinner int
	lat                         latencies
}

// measureRace makes a team of 64 members (through core: the API creates
// at most 32 with a team) and races them, round after round.
func measureRace(ctx context.Context, p *inproc, rounds int) (raceFigure, error) {
	var out raceFigure
	spec := core.TeamSpec{Name: "race"}
	for i := range raceMembers {
		spec.Members = append(spec.Members, core.MemberSpec{Name: fmt.Sprintf("r%d", i)})
	}
	limits := core.DefaultLimits()
	limits.Reservations = raceMembers * rounds
	spec.Limits = &limits
	_, created, err := p.svc.CreateTeam(core.AsAdmin(ctx), spec)
	if err != nil {
		return out, err
	}
	tokens := map[string]string{}
	for _, m := range created {
		tokens[m.Name] = m.Token
	}
	for round := range rounds {
		var (
			wg      sync.WaitGroup
			mu      sync.Mutex
			winners int
			failed  error
		)
		start := make(chan struct{})
		for i := range raceMembers {
			name := fmt.Sprintf("r%d", i)
			wg.Go(func() {
				<-start
				body := map[string]any{"paths": []string{fmt.Sprintf("round%d/**", round), fmt.Sprintf("round%d/%s.go", round, name)}}
				t := time.Now()
				err := p.call(ctx, http.MethodPost, "/teams/race/reservations", tokens[name], body, nil, http.StatusCreated)
				lat := time.Since(t)
				mu.Lock()
				defer mu.Unlock()
				out.lat = append(out.lat, lat)
				switch {
				case err == nil:
					winners++
				case strings.Contains(err.Error(), "reservation_conflict"):
					out.refusals++
				default:
					failed = err
				}
			})
		}
		close(start)
		wg.Wait()
		if failed != nil {
			return out, failed
		}
		out.grants += winners
		if winners == 1 {
			out.oneWinner++
		}
	}
	return out, ctx.Err()
}

type guardFigure struct{ clean, held latencies }

// measureGuard stages 1,000 files in a fresh repository and times the
// real binary's `mailroom guard` as a member that holds none of them.
func measureGuard(ctx context.Context, p *inproc, bin, work string, tokens map[string]string, runs int) (guardFigure, error) {
	var out guardFigure
	repo := filepath.Join(work, "repo")
	env := append(os.Environ(), "MAILROOM_URL="+p.url, "MAILROOM_TOKEN="+tokens["lead"],
		"GIT_AUTHOR_NAME=loadgen", "GIT_AUTHOR_EMAIL=loadgen@example.com", "GIT_COMMITTER_NAME=loadgen", "GIT_COMMITTER_EMAIL=loadgen@example.com")
	git := func(args ...string) error {
		cmd := exec.CommandContext(ctx, "git", args...)
		cmd.Dir, cmd.Env = repo, env
		if b, err := cmd.CombinedOutput(); err != nil {
			return fmt.Errorf("git %s: %v: %s", strings.Join(args, " "), err, b)
		}
		return nil
	}
	stage := func(held int) error {
		if err := os.RemoveAll(repo); err != nil {
			return err
		}
		if err := os.MkdirAll(repo, 0o755); err != nil {
			return err
		}
		if err := git("init", "-q"); err != nil {
			return err
		}
		for i := range guardFiles {
			name := fmt.Sprintf("free/dir%d/file%d.go", i%40, i)
			if i < held {
				name = fmt.Sprintf("svc%d/part0/held%d.go", i, i)
			}
			path := filepath.Join(repo, name)
			if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
				return err
			}
			if err := os.WriteFile(path, []byte("package x\n"), 0o644); err != nil {
				return err
			}
		}
		return git("add", "-A")
	}
	timeGuard := func(wantExit int) (time.Duration, error) {
		cmd := exec.CommandContext(ctx, bin, "guard")
		cmd.Dir, cmd.Env = repo, env
		t := time.Now()
		b, err := cmd.CombinedOutput()
		d := time.Since(t)
		code := 0
		if ee, ok := err.(*exec.ExitError); ok {
			code = ee.ExitCode()
		} else if err != nil {
			return 0, err
		}
		if code != wantExit {
			return 0, fmt.Errorf("mailroom guard exited %d, want %d: %s", code, wantExit, b)
		}
		return d, nil
	}
	for _, cfg := range []struct {
		held int
		dst  *latencies
		exit int
	}{{0, &out.clean, 0}, {guardHeld, &out.held, 1}} {
		if err := stage(cfg.held); err != nil {
			return out, err
		}
		for i := range runs + 2 {
			d, err := timeGuard(cfg.exit)
			if err != nil {
				return out, err
			}
			if i >= 2 { // the first runs warm the page cache
				*cfg.dst = append(*cfg.dst, d)
			}
		}
	}
	return out, nil
}
