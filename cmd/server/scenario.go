package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"

	"mailroom/internal/agent"
	"mailroom/internal/core"
	"mailroom/internal/live"
	"mailroom/internal/mail"
	"mailroom/internal/runtime"
	"mailroom/internal/scenario"
)

// runScenario is the "scenario" command: it runs one lesson scenario
// without a server and prints its result document, the same JSON that
// POST /api/v1/scenarios/{name}/runs answers with. It returns an error,
// and so exits 1, when the run is not ok; mistakes on the command line,
// an unknown scenario or options it does not take exit 2; a data directory
// that a server holds exits 3.
func runScenario(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("mailroom scenario", flag.ContinueOnError)
	fs.SetOutput(stderr)
	plan := fs.String("plan", "", "team-protocols: lead's `decision` on the plan, approve or reject (default approve)")
	decision := fs.String("decision", "", "team-protocols: the host's `permission` to run main.py, allow or deny (default deny)")
	expected := fs.String("expected", "", "team-protocols: the expected `output` (default 42)")
	stepMS := fs.Int("step-ms", 0, "slow every step by this many `milliseconds` (0 to 10000)")
	modelFlag := fs.String("model", "", "drive every member with a real `model`, PROVIDER:NAME as in anthropic:claude-sonnet-4-5 or openai:gpt-4.1-mini, credentials from the environment (default: the lesson's script)")
	dataDir := fs.String("data", "", "keep the run's team, workspace and result in this `directory` (default: a temporary directory, removed afterwards)")
	fs.Usage = func() {
		fmt.Fprintf(fs.Output(), "Usage: mailroom scenario agent-teams|team-protocols [flags]\n\nRuns a lesson scenario and prints its result as JSON; exits 0 when every applicable check held, 1 when not, 2 on a usage mistake, 3 when --data names a directory a server is using.\n\nFlags:\n")
		fs.PrintDefaults()
	}
	// The name may come before or after the flags.
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	name := fs.Arg(0)
	if fs.NArg() > 0 {
		if err := parseFlags(fs, fs.Args()[1:]); err != nil {
			return err
		}
	}
	switch {
	case name == "":
		fs.Usage()
		return usageErrorf("scenario: name a scenario: %s or %s", scenario.AgentTeams, scenario.TeamProtocols)
	case fs.NArg() > 0:
		return usageErrorf("scenario: unexpected argument %q", fs.Arg(0))
	}
	opts := scenario.Options{Plan: *plan, Decision: *decision, Expected: *expected, StepMS: *stepMS}
	if *modelFlag != "" {
		cfg, err := agent.ParseModel(*modelFlag)
		if err != nil {
			return usageErrorf("scenario: --model: %s", core.ErrorMessage(err))
		}
		if cfg.Provider != agent.ProviderScripted {
			lookup := func(name string) (string, bool) { v := getenv(name); return v, v != "" }
			log := slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: logLevel(getenv)}))
			// Without credentials nothing is created, not even a
			// temporary directory.
			model, err := agent.NewModel(cfg, lookup, agent.ProviderOptions{Log: log})
			if err != nil {
				return fmt.Errorf("scenario: --model %s: %s", cfg, core.ErrorMessage(err))
			}
			opts.Model = model
		}
	}

	dir := *dataDir
	if dir == "" {
		tmp, err := os.MkdirTemp("", "mailroom-scenario-")
		if err != nil {
			return fmt.Errorf("scenario: temporary data directory: %w", err)
		}
		defer os.RemoveAll(tmp)
		dir = tmp
	} else {
		abs, err := filepath.Abs(dir)
		if err != nil {
			return fmt.Errorf("scenario: data directory %s: %w", dir, err)
		}
		if err := os.MkdirAll(abs, 0o700); err != nil {
			return fmt.Errorf("scenario: create data directory %s: %w", abs, err)
		}
		dir = abs
	}
	doc, err := runScenarioIn(ctx, dir, name, opts, stderr, logLevel(getenv))
	if err != nil {
		return err
	}
	enc := json.NewEncoder(stdout)
	enc.SetEscapeHTML(false)
	enc.SetIndent("", "  ")
	if err := enc.Encode(doc); err != nil {
		return fmt.Errorf("scenario: print the result: %w", err)
	}
	if !doc.OK {
		var failed []string
		for _, c := range doc.Checks {
			if !c.OK && c.Applies() {
				failed = append(failed, c.Name)
			}
		}
		return fmt.Errorf("scenario %s: run %s is not ok; failed checks: %s", name, doc.RunID, strings.Join(failed, ", "))
	}
	return nil
}

// parseFlags parses args into fs, turning a flag mistake into a usage error.
func parseFlags(fs *flag.FlagSet, args []string) error {
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return err
		}
		return usageErrorf("%v", err)
	}
	return nil
}

// runScenarioIn runs scenario name over the data directory dir, holding the
// directory's lock so that it never shares it with a running server.
func runScenarioIn(ctx context.Context, dir, name string, opts scenario.Options, stderr io.Writer, level slog.Level) (doc scenario.Result, err error) {
	log := slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: level}))
	release, err := mail.LockDir(dir)
	if errors.Is(err, mail.ErrBusy) {
		return scenario.Result{}, &busyError{msg: fmt.Sprintf(
			"scenario: %v; run it through that server instead (POST /api/v1/scenarios/%s/runs), or give --data another directory (or none, for a temporary one)",
			err, name)}
	}
	if err != nil {
		return scenario.Result{}, fmt.Errorf("scenario: %w", err)
	}
	defer func() {
		if rerr := release(); rerr != nil {
			err = errors.Join(err, fmt.Errorf("scenario: release data directory lock: %w", rerr))
		}
	}()
	store, err := mail.Open(dir, mail.WithLogger(log))
	if err != nil {
		return scenario.Result{}, fmt.Errorf("scenario: open data directory %s: %w", dir, err)
	}
	defer store.Close()
	// Core with the runtime that renews its turns' leases (waited for
	// before the store closes) and the hub its events go to, as a server
	// wires them.
	work := runtime.NewWork(log)
	svc, _, err := live.Open(ctx, store, core.Options{Logger: log, Work: work}, live.Options{Logger: log})
	if err != nil {
		return scenario.Result{}, fmt.Errorf("scenario: load teams from %s: %w", dir, err)
	}
	defer func() {
		// The lease renewals end with their turns: the store closes after.
		_ = work.WaitTurns(ctx)
		_ = work.Wait(ctx)
	}()
	// The run's workspace is its team's, where a server over dir keeps it.
	doc, err = scenario.NewRunner(svc, filepath.Join(dir, "workspaces"), scenario.Config{Logger: log}).Run(ctx, name, opts)
	switch code := core.ErrorCode(err); {
	case err == nil:
		return doc, nil
	case errors.Is(err, scenario.ErrInterrupted) && doc.RunID != "":
		// Ctrl-C or SIGTERM: the run stopped at its next boundary and its
		// document, not ok with an interrupted check, is what it did.
		return doc, nil
	case code == core.CodeNotFound:
		return scenario.Result{}, usageErrorf("scenario: unknown scenario %q; the scenarios are %s and %s", name, scenario.AgentTeams, scenario.TeamProtocols)
	case code == core.CodeValidation:
		return scenario.Result{}, usageErrorf("scenario %s: %s", name, core.ErrorMessage(err))
	default:
		return scenario.Result{}, fmt.Errorf("scenario %s: %w", name, err)
	}
}

// logLevel is MAILROOM_LOG_LEVEL, or warn: a scenario's output is its
// document, so routine progress stays out of the way.
func logLevel(getenv func(string) string) slog.Level {
	level := slog.LevelWarn
	if v := getenv("MAILROOM_LOG_LEVEL"); v != "" {
		_ = level.UnmarshalText([]byte(v))
	}
	return level
}
