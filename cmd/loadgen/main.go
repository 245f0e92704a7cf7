// Command loadgen measures Mailroom's durability costs against the limits
// of the disk it runs on, and prints each figure next to its bound as a
// ratio, with PASS or MISS per target.
//
// In one run it measures, in a work directory it creates under -data (so
// every figure comes from the same file system):
//
//	a. the raw disk bound: append + fdatasync of 150-byte lines to one
//	   file (p50, rate) and to 64 files in parallel (aggregate rate);
//	b. durable sends over HTTP for 1, 8 and 64 clients over 1 and 64
//	   teams (rate, p50, p99), against the real handler, core and file
//	   store served in this process over loopback;
//	c. send latency into an inbox of 10,000 letters against an empty one;
//	d. restart-to-ready time and resident memory per idle team of the real
//	   server binary over 10,000 teams;
//	f. durable sends over HTTP to the real server binary, the clients in
//	   this process: 1 client, 64 clients over 64 teams and 64 clients on
//	   one team, with the server's CPU per send (-strace: its system
//	   calls, counted by strace -c);
//	e. what remembered keys and a long history cost: keyed against unkeyed
//	   sends after 10,000 keyed sends to a team whose member took 12 turns
//	   carrying 1 MB tool inputs, and a member's GET inbox on that team
//	   idle and while another client writes to it;
//	t. the task board: claim-next's p50 against a send's, and on a board
//	   of 500 tasks against one of 5 (tasks.go); q, the same on PostgreSQL;
//	r. the lessons' send_message behind a minimal HTTP server (-ref URL,
//	   or -ref-lesson FILE to start reference.py over the lesson's code),
//	   64 clients over 64 teams, beside phase f's figure (reference.go).
//
// Phase f also times GET /healthz on the same binary, and the floor
// targets (floor.go) set a send against it and the raw disk bound. With
// -runs N, phases a, f and r run N times and each floor target reports
// the number of runs it passed.
//
// Usage:
//
//	go run ./cmd/loadgen -data /var/tmp [-server ./mailroom] [-cpuprofile cpu.out] [-phases abcde]
//	go run ./cmd/loadgen wait    held reads (phase w)
//	go run ./cmd/loadgen hook    mail reaching an agent through `mailroom hook` (phase h)
//	go run ./cmd/loadgen reserve file reservations and the commit guard (phase k)
//	go run ./cmd/loadgen archive archiving 10,000 read letters, on both stores (phase r)
//	go run ./cmd/loadgen search  search over 100,000 letters on both stores, the index's rebuild and its cost to a send (phase s)
//
// Every phase is bounded by a count or a duration, every connection is to
// 127.0.0.1, and the work directory is removed at the end unless -keep is
// given. Timings depend on the machine; nothing here is a test.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"runtime"
	"runtime/pprof"
	"strings"
	"syscall"
	"time"
)

// config is the command line.
type config struct {
	data        string
	server      string
	duration    time.Duration
	rawCount    int
	rawWindow   time.Duration
	latencyN    int
	bigInbox    int
	teams       int
	restarts    int
	cpuProfile  string
	openProfile string
	keep        bool
	phases      string
	keys        int
	turns       int
	inputBytes  int
	databaseURL string
	strace      string
	runs        int
	refURL      string
	refLesson   string
}

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, os.Args[1:], os.Stdout, os.Stderr); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			os.Exit(0)
		}
		fmt.Fprintf(os.Stderr, "loadgen: %v\n", err)
		os.Exit(1)
	}
}

func parseFlags(args []string, stderr io.Writer) (config, error) {
	var c config
	fs := flag.NewFlagSet("loadgen", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.StringVar(&c.data, "data", os.TempDir(), "`directory` to measure in; a work directory is created inside it")
	fs.StringVar(&c.server, "server", "", "server `binary` for the restart phase (default: built with go build)")
	fs.DurationVar(&c.duration, "duration", 3*time.Second, "measured `time` of each HTTP send configuration")
	fs.IntVar(&c.rawCount, "raw-count", 2000, "appends to one file for the raw single-file figure")
	fs.DurationVar(&c.rawWindow, "raw-duration", 3*time.Second, "measured `time` of the raw 64-file figure")
	fs.IntVar(&c.latencyN, "latency-count", 400, "sends into each of the full and the empty inbox")
	fs.IntVar(&c.bigInbox, "inbox-letters", 10000, "letters in the full inbox")
	fs.IntVar(&c.teams, "teams", 10000, "idle teams on disk for the restart phase")
	fs.IntVar(&c.restarts, "restarts", 3, "restarts timed in the restart phase (the median is reported)")
	fs.StringVar(&c.cpuProfile, "cpuprofile", "", "write a CPU profile of the HTTP send phase (b, or p) to `file`")
	fs.StringVar(&c.openProfile, "openprofile", "", "write a CPU profile of loading the restart phase's teams in process to `file`")
	fs.BoolVar(&c.keep, "keep", false, "keep the work directory")
	fs.StringVar(&c.phases, "phases", "abcdefr", "the `letters` of the phases to run: abcdef, r for the lessons' code (with -ref or -ref-lesson), t for the task board (q: the same on PostgreSQL), and p for PostgreSQL beside the file store")
	fs.IntVar(&c.runs, "runs", 1, "run phases a, f and r this many `times`, and count the runs each floor target passed")
	fs.StringVar(&c.refURL, "ref", "", "`URL` of a running reference server for phase r (POST /teams/{team}/messages)")
	fs.StringVar(&c.refLesson, "ref-lesson", "", "lesson `file` for phase r: a Python file (*.py) defining send_message and the functions it calls, or the lesson page's text; loadgen starts reference.py over it with python3")
	fs.StringVar(&c.databaseURL, "database-url", "", "PostgreSQL `URL` of an empty database for phase p (default: a private cluster started for the run)")
	store := fs.String("store", "", "postgres: the same as -phases p")
	fs.StringVar(&c.strace, "strace", "", "run phase f's server under strace -f -c, writing its counts to `file`")
	fs.IntVar(&c.keys, "keys", 10000, "keyed sends remembered before the keyed/unkeyed figure (phase e)")
	fs.IntVar(&c.turns, "turns", 12, "turns with a large tool input taken before phase e's figures")
	fs.IntVar(&c.inputBytes, "tool-input-bytes", 1000000, "size of each of those tool inputs (a request body is at most 1 MiB)")
	if err := fs.Parse(args); err != nil {
		return c, err
	}
	if fs.NArg() > 0 {
		return c, fmt.Errorf("unexpected argument %q", fs.Arg(0))
	}
	if c.duration <= 0 || c.rawWindow <= 0 || c.rawCount < 10 || c.latencyN < 10 || c.bigInbox < 1 || c.teams < 1 || c.restarts < 1 ||
		c.keys < 0 || c.turns < 0 || c.inputBytes < 1 || c.runs < 1 {
		return c, errors.New("durations must be positive; counts at least 10 (inbox-letters, teams, restarts and runs at least 1; keys and turns at least 0)")
	}
	if c.refURL != "" && c.refLesson != "" {
		return c, errors.New("-ref and -ref-lesson: give one")
	}
	switch *store {
	case "":
	case "postgres":
		c.phases = "p"
	default:
		return c, fmt.Errorf("-store %q: want postgres", *store)
	}
	if strings.Trim(c.phases, "abcdefpqrt") != "" || c.phases == "" {
		return c, fmt.Errorf("-phases takes letters from abcdefpqrt, not %q", c.phases)
	}
	return c, nil
}

func run(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	if len(args) > 0 && args[0] == "wait" {
		return runWait(ctx, args[1:], stdout, stderr) // wait.go
	}
	if len(args) > 0 && args[0] == "hook" {
		return runHook(ctx, args[1:], stdout, stderr) // hook.go
	}
	if len(args) > 0 && args[0] == "wake" {
		return runWake(ctx, args[1:], stdout, stderr) // wake.go
	}
	if len(args) > 0 && args[0] == "search" {
		return runSearchBench(ctx, args[1:], stdout, stderr) // search.go
	}
	if len(args) > 0 && args[0] == "reserve" {
		return runReserve(ctx, args[1:], stdout, stderr) // reserve.go
	}
	if len(args) > 0 && args[0] == "archive" {
		return runArchive(ctx, args[1:], stdout, stderr) // archive.go
	}
	cfg, err := parseFlags(args, stderr)
	if err != nil {
		return err
	}
	if err := os.MkdirAll(cfg.data, 0o700); err != nil {
		return err
	}
	work, err := os.MkdirTemp(cfg.data, "mailroom-loadgen-")
	if err != nil {
		return err
	}
	if !cfg.keep {
		defer os.RemoveAll(work)
	}
	r := &report{w: stdout}
	r.printf("Mailroom loadgen: %s, %s/%s, %d CPUs, GOMAXPROCS %d\n", time.Now().Format("2006-01-02 15:04"), runtime.GOOS, runtime.GOARCH, runtime.NumCPU(), runtime.GOMAXPROCS(0))
	r.printf("work directory: %s\n", work)
	r.printf("load average at start: %s\n\n", loadAvg())

	var f figures
	phase := func(p byte) bool { return strings.IndexByte(cfg.phases, p) >= 0 }
	if cfg.server == "" && strings.ContainsAny(cfg.phases, "dfp") {
		// Built once for every phase and run that starts it.
		if cfg.server, err = serverBinary(ctx, work, "", stderr); err != nil {
			return err
		}
	}
	var floors [][]floorTarget
	for run := 1; run <= cfg.runs; run++ {
		if cfg.runs > 1 {
			r.printf("=== run %d of %d (phases a, f and r) ===\n\n", run, cfg.runs)
		}
		var fr floorRun
		if phase('a') {
			raw, err := measureRaw(ctx, runDir(work, "raw", run), cfg)
			if err != nil {
				return fmt.Errorf("raw disk: %w", err)
			}
			r.raw(raw)
			f.raw, fr.raw = &raw, &raw
		}
		if run == 1 {
			if err := f.once(ctx, work, cfg, r, stderr); err != nil {
				return err
			}
		}
		if phase('f') {
			ext, err := measureExternal(ctx, runDir(work, "external", run), cfg)
			if err != nil {
				return fmt.Errorf("sends to the server binary: %w", err)
			}
			r.external(ext, cfg.strace)
			f.ext, fr.ext = ext.figs, &ext
		}
		if phase('r') {
			if cfg.refURL == "" && cfg.refLesson == "" {
				r.printf("r. the lessons' code behind HTTP: skipped (give -ref URL or -ref-lesson FILE)\n\n")
			} else {
				ref, err := measureReference(ctx, runDir(work, "reference", run), cfg)
				if err != nil {
					return fmt.Errorf("the lessons' code behind HTTP: %w", err)
				}
				r.reference(ref, fr.ext)
				fr.ref = &ref
			}
		}
		ts := floorTargets(fr)
		r.floor(fr, ts, run, cfg.runs)
		floors = append(floors, ts)
	}

	if phase('t') {
		tasks, err := measureTasks(ctx, filepath.Join(work, "tasks"), cfg)
		if err != nil {
			return fmt.Errorf("task board: %w", err)
		}
		r.tasks(tasks, "the file store")
	}
	if phase('q') {
		tasks, err := measureTasksPostgres(ctx, cfg)
		if err != nil {
			return fmt.Errorf("task board on PostgreSQL: %w", err)
		}
		r.tasks(tasks, "PostgreSQL")
	}
	if phase('p') {
		var pg pgFigures
		err := withProfile(cfg.cpuProfile, func() error {
			var err error
			pg, err = measurePostgres(ctx, work, cfg, r)
			return err
		})
		if err != nil {
			return fmt.Errorf("postgres: %w", err)
		}
		r.printf("targets (PostgreSQL)\n")
		r.target(pg.pg64.rate/pg.file64.rate >= 1, "64×64 sends/s on PostgreSQL ÷ the file store's", pg.pg64.rate/pg.file64.rate, "≥ 1.00")
		r.target(pg.openPG <= time.Second, fmt.Sprintf("open with %d teams, seconds", pg.teams), pg.openPG.Seconds(), "≤ 1.00")
		cpu := ratio(pg.bin.pgCPU, pg.bin.fileCPU)
		r.target(cpu <= 1.2, "binary: Mailroom CPU per send at 64×64, PostgreSQL ÷ file", cpu, "≤ 1.20")
		if pg.bin.dbCPU >= 0 {
			db := float64(pg.bin.dbCPU) / float64(time.Millisecond)
			r.target(db <= 0.2, "binary: database CPU per send at 64×64, ms", db, "≤ 0.20")
		}
		r.printf("\n")
	}
	r.floorSummary(tallyFloor(floors), cfg.runs)
	r.targets(f, cfg.teams)
	r.printf("\nload average at end: %s\n", loadAvg())
	return nil
}

// once runs the phases that run once however many runs there are: b, c,
// d and e, between the first run's phase a and its phase f.
func (f *figures) once(ctx context.Context, work string, cfg config, r *report, stderr io.Writer) error {
	phase := func(p byte) bool { return strings.IndexByte(cfg.phases, p) >= 0 }
	if phase('b') {
		var err error
		err = withProfile(cfg.cpuProfile, func() error {
			f.sends, err = measureSends(ctx, filepath.Join(work, "sends"), cfg, r)
			return err
		})
		if err != nil {
			return fmt.Errorf("sends: %w", err)
		}
	}
	if phase('c') {
		inbox, err := measureInbox(ctx, filepath.Join(work, "inbox"), cfg)
		if err != nil {
			return fmt.Errorf("inbox size: %w", err)
		}
		r.inbox(inbox)
		f.inbox = &inbox
	}
	if phase('d') {
		restart, err := measureRestart(ctx, work, cfg, stderr)
		if err != nil {
			return fmt.Errorf("restart: %w", err)
		}
		r.restart(restart, cfg.teams)
		f.restart = &restart
	}
	if phase('e') {
		keys, err := measureKeys(ctx, filepath.Join(work, "keys"), cfg)
		if err != nil {
			return fmt.Errorf("remembered keys: %w", err)
		}
		r.keys(keys)
		f.keys = &keys
	}
	return nil
}

// runDir is a phase's directory in run n: the phase's name in the first
// run, as before -runs, and name-n in later ones, so that no run finds
// another's files.
func runDir(work, name string, n int) string {
	if n > 1 {
		name = fmt.Sprintf("%s-%d", name, n)
	}
	return filepath.Join(work, name)
}

// loadAvg is the first three fields of /proc/loadavg: other work on the
// machine shares the disk and the CPUs, and shows here.
func loadAvg() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "unknown"
	}
	f := strings.Fields(string(b))
	if len(f) < 3 {
		return "unknown"
	}
	return strings.Join(f[:3], " ")
}

// withProfile runs f under a CPU profile written to path, if path is set.
func withProfile(path string, f func() error) error {
	if path == "" {
		return f()
	}
	out, err := os.Create(path)
	if err != nil {
		return err
	}
	if err := pprof.StartCPUProfile(out); err != nil {
		out.Close()
		return err
	}
	ferr := f()
	pprof.StopCPUProfile()
	return errors.Join(ferr, out.Close())
}
