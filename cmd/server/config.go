package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"strconv"
	"strings"
	"time"

	"mailroom/internal/agent"
	"mailroom/internal/core"
	"mailroom/internal/runtime"
	"mailroom/internal/workspace"
)

// config is everything the serve command needs, after defaults, environment
// and flags have been applied (in that order: a flag wins).
type config struct {
	addr       string
	dataDir    string
	adminToken string // empty: use or create <dataDir>/admin.token
	logLevel   slog.Level
	// maxTeams bounds how many teams exist at once, scenario runs' teams
	// included.
	maxTeams int
	// model is the model of a team created without one.
	model agent.ModelConfig
	// workspaces is the root of the teams' workspaces; empty means
	// <data>/workspaces.
	workspaces string
	// store is the storage backend: storeFile (the data directory) or
	// storePostgres (databaseURL, shared by replicas).
	store       string
	databaseURL string
	// lease (0: core.DefaultLeaseDuration) is how long a running turn's
	// or scenario run's lease holds without renewal: how soon a turn of a
	// replica that died stops keeping its member busy on the others, and
	// its run is answered as interrupted.
	lease time.Duration
	// sandbox says whether run_main's program runs confined (on, the
	// default) or not (off, for a kernel without Landlock).
	sandbox workspace.Mode
	// sandboxUser is the identity run_main's program has when the server
	// is root (docs/api.md, "run_main's sandbox").
	sandboxUser workspace.Identity
	// maxRunningTurns bounds the woken turns running at once.
	maxRunningTurns int
}

const (
	defaultAddr    = "127.0.0.1:8080"
	defaultDataDir = "./data"
	storeFile      = "file"
	storePostgres  = "postgres"
	// minAdminTokenLen keeps a hand-picked admin token from being guessable;
	// generated tokens are far longer.
	minAdminTokenLen = 16
)

// parseConfig reads the serve flags from args, falling back to the
// environment and then to the defaults, and validates the result.
func parseConfig(args []string, getenv func(string) string, stderr io.Writer) (config, error) {
	fs, build := serveFlags(getenv)
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return config{}, err
		}
		return config{}, usageErrorf("%v", err)
	}
	if fs.NArg() > 0 {
		return config{}, usageErrorf("unexpected argument %q", fs.Arg(0))
	}
	return build()
}

// serveFlags is the server's flag set, its defaults taken from getenv,
// and what makes the configuration of it once parsed. `mailroom -h`
// lists it under an empty environment.
func serveFlags(getenv func(string) string) (*flag.FlagSet, func() (config, error)) {
	fs := flag.NewFlagSet("mailroom", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	addr := fs.String("addr", envOr(getenv, "MAILROOM_ADDR", defaultAddr), "listen address `host:port` (env MAILROOM_ADDR)")
	dataDir := fs.String("data", envOr(getenv, "MAILROOM_DATA", defaultDataDir), "data `directory` (env MAILROOM_DATA)")
	token := fs.String("admin-token", getenv("MAILROOM_ADMIN_TOKEN"), "admin `token` (env MAILROOM_ADMIN_TOKEN; default: generated once and kept in <data>/admin.token)")
	envMaxTeams, envTeamsErr := intEnv(getenv, "MAILROOM_MAX_TEAMS", core.DefaultMaxTeams)
	maxTeams := fs.Int("max-teams", envMaxTeams, "most `teams` at once, scenario runs' teams included (env MAILROOM_MAX_TEAMS)")
	model := fs.String("model", envOr(getenv, "MAILROOM_MODEL", agent.ProviderScripted), "default `model` of a team that names none: PROVIDER:NAME, e.g. anthropic:claude-sonnet-4-5 or openai:gpt-4.1-mini, or scripted (env MAILROOM_MODEL)")
	workspaces := fs.String("workspaces", getenv("MAILROOM_WORKSPACES"), "workspaces root `directory` (env MAILROOM_WORKSPACES; default <data>/workspaces)")
	store := fs.String("store", envOr(getenv, "MAILROOM_STORE", storeFile), "storage `backend`: file (the data directory) or postgres (--database-url, shared by replicas) (env MAILROOM_STORE)")
	databaseURL := fs.String("database-url", getenv("MAILROOM_DATABASE_URL"), "PostgreSQL `URL` for --store postgres, e.g. postgres://mailroom:PASSWORD@db:5432/mailroom (env MAILROOM_DATABASE_URL)")
	envRunning, envRunningErr := intEnv(getenv, "MAILROOM_MAX_RUNNING_TURNS", runtime.DefaultMaxRunningTurns)
	maxRunning := fs.Int("max-running-turns", envRunning, "most woken `turns` (members woken on mail) running at once; the others wait, oldest letter first (env MAILROOM_MAX_RUNNING_TURNS)")
	envLease, envLeaseErr := durationEnv(getenv, "MAILROOM_LEASE", 0)
	lease := fs.Duration("lease", envLease, "how long a running turn's or scenario run's `lease` holds without renewal (renewed every third of it); a turn of a replica that died keeps its member busy on the others this long, and its run in progress; 0 means 30s (env MAILROOM_LEASE)")
	sandboxUser := fs.String("sandbox-user", envOr(getenv, "MAILROOM_SANDBOX_USER", workspace.DefaultUser.String()), "UID[:GID] that run_main's program runs as when the server is root; not 0 (env MAILROOM_SANDBOX_USER)")
	sandbox := fs.String("sandbox", envOr(getenv, "MAILROOM_SANDBOX", string(workspace.ModeOn)), "run_main's sandbox: on (Landlock, namespaces, limits; without Landlock run_main answers sandbox_unavailable) or off (programs run unconfined as the server's user) (env MAILROOM_SANDBOX)")
	level := fs.String("log-level", envOr(getenv, "MAILROOM_LOG_LEVEL", "info"), "log `level`: debug, info, warn or error (env MAILROOM_LOG_LEVEL)")
	return fs, func() (config, error) {
		if envTeamsErr != nil {
			return config{}, usageErrorf("%v", envTeamsErr)
		}
		if envLeaseErr != nil {
			return config{}, usageErrorf("%v", envLeaseErr)
		}
		if envRunningErr != nil {
			return config{}, usageErrorf("%v", envRunningErr)
		}
		cfg := config{addr: *addr, dataDir: *dataDir, adminToken: *token, maxTeams: *maxTeams, workspaces: *workspaces,
			store: *store, databaseURL: *databaseURL, lease: *lease, maxRunningTurns: *maxRunning}
		m, err := agent.ParseModel(*model)
		if err != nil {
			return config{}, usageErrorf("model %q: %v", *model, err)
		}
		cfg.model = m
		if cfg.sandbox, err = workspace.ParseMode(*sandbox); err != nil {
			return config{}, usageErrorf("%v", err)
		}
		if cfg.sandboxUser, err = workspace.ParseIdentity(*sandboxUser); err != nil {
			return config{}, usageErrorf("%v", err)
		}
		if err := cfg.logLevel.UnmarshalText([]byte(*level)); err != nil {
			return config{}, usageErrorf("log level %q: want debug, info, warn or error", *level)
		}
		if err := cfg.validate(); err != nil {
			return config{}, usageErrorf("%v", err)
		}
		return cfg, nil
	}
}

// validate rejects a configuration the server could only fail with later.
func (c config) validate() error {
	if err := validateAddr(c.addr); err != nil {
		return err
	}
	if c.lease != 0 && c.lease < 300*time.Millisecond {
		return fmt.Errorf("lease %v: must be at least 300ms", c.lease)
	}
	if c.maxTeams < 1 {
		return fmt.Errorf("max teams %d: must be at least 1", c.maxTeams)
	}
	if c.maxRunningTurns < 1 {
		return fmt.Errorf("max running turns %d: must be at least 1", c.maxRunningTurns)
	}
	if strings.TrimSpace(c.dataDir) == "" {
		return errors.New("data directory must not be empty")
	}
	switch c.store {
	case storeFile:
	case storePostgres:
		if strings.TrimSpace(c.databaseURL) == "" {
			return errors.New("--store postgres needs --database-url (or MAILROOM_DATABASE_URL)")
		}
		// Replicas must agree on the admin token: none is generated.
		if c.adminToken == "" {
			return errors.New("--store postgres needs --admin-token (or MAILROOM_ADMIN_TOKEN), the same on every replica")
		}
	default:
		return fmt.Errorf("store %q: want file or postgres", c.store)
	}
	if c.adminToken != "" {
		if err := validateAdminToken(c.adminToken); err != nil {
			return fmt.Errorf("admin token: %w", err)
		}
	}
	return nil
}

func validateAddr(addr string) error {
	_, port, err := net.SplitHostPort(addr)
	if err != nil {
		return fmt.Errorf("listen address %q: want host:port", addr)
	}
	if n, err := strconv.Atoi(port); err != nil || n < 0 || n > 65535 {
		return fmt.Errorf("listen address %q: port must be a number from 0 to 65535", addr)
	}
	return nil
}

// validateAdminToken accepts only tokens that travel unchanged in an
// Authorization header and in the ready URL's fragment (#token=...), so
// the status page reads back exactly what the server expects.
func validateAdminToken(tok string) error {
	if len(tok) < minAdminTokenLen {
		return fmt.Errorf("must be at least %d characters", minAdminTokenLen)
	}
	for _, r := range tok {
		if !isTokenChar(r) {
			return errors.New("may hold only letters, digits and - . _ ~")
		}
	}
	return nil
}

func isTokenChar(r rune) bool {
	switch {
	case 'a' <= r && r <= 'z', 'A' <= r && r <= 'Z', '0' <= r && r <= '9':
		return true
	}
	return strings.ContainsRune("-._~", r)
}

// intEnv reads an integer from the environment; unset or empty gives def.
func intEnv(getenv func(string) string, key string, def int) (int, error) {
	v := getenv(key)
	if v == "" {
		return def, nil
	}
	n, err := strconv.Atoi(strings.TrimSpace(v))
	if err != nil {
		return def, fmt.Errorf("%s %q: want a whole number", key, v)
	}
	return n, nil
}

// durationEnv reads a duration (e.g. 30s) from the environment; unset or
// empty gives def.
func durationEnv(getenv func(string) string, key string, def time.Duration) (time.Duration, error) {
	v := getenv(key)
	if v == "" {
		return def, nil
	}
	d, err := time.ParseDuration(strings.TrimSpace(v))
	if err != nil {
		return def, fmt.Errorf("%s %q: want a duration such as 30s", key, v)
	}
	return d, nil
}

func envOr(getenv func(string) string, key, def string) string {
	if v := getenv(key); v != "" {
		return v
	}
	return def
}
