package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"sync"
	"time"

	"mailroom/internal/agent"
	"mailroom/internal/app"
	"mailroom/internal/core"
	"mailroom/internal/host"
	"mailroom/internal/mail"
	"mailroom/internal/workspace"
	"mailroom/web"
)

// shutdownTimeout is the grace period: how long the turns, runs and other
// requests in flight at SIGINT or SIGTERM may take to end and record
// before their connections are closed. It stays under the 10 s that
// supervisors commonly wait (docker stop, Kubernetes) before SIGKILL, so
// that closing the store and exiting fit in as well.
const shutdownTimeout = 8 * time.Second

// serve runs the HTTP server until ctx is cancelled, then shuts it down
// cleanly. It owns the data directory lock for its whole lifetime.
func serve(ctx context.Context, cfg config, stdout, stderr io.Writer) (err error) {
	log := slog.New(slog.NewJSONHandler(stderr, &slog.HandlerOptions{Level: cfg.logLevel}))

	dataDir, err := filepath.Abs(cfg.dataDir)
	if err != nil {
		return fmt.Errorf("data directory %s: %w", cfg.dataDir, err)
	}
	if err := os.MkdirAll(dataDir, 0o700); err != nil {
		return fmt.Errorf("create data directory %s: %w", dataDir, err)
	}
	// The file store needs its directory to itself (an exclusive lock). On
	// PostgreSQL the directory holds only this host's files (workspaces,
	// scenario run files), so replicas may share one (a shared lock), but
	// never with a file-store server.
	lockDir := mail.LockDir
	if cfg.store == storePostgres {
		lockDir = mail.LockDirShared
	}
	release, err := lockDir(dataDir)
	if err != nil {
		// The error names the directory and says whether another server
		// holds it.
		return fmt.Errorf("refusing to start: %w", err)
	}
	defer func() {
		if rerr := release(); rerr != nil {
			log.Error("release data directory lock", "dir", dataDir, "err", rerr)
			err = errors.Join(err, fmt.Errorf("release data directory lock: %w", rerr))
		}
	}()

	adminToken := cfg.adminToken
	if adminToken == "" {
		if adminToken, err = loadOrCreateAdminToken(dataDir, log); err != nil {
			return err
		}
	}

	store, closeStore, err := openStore(ctx, cfg, dataDir, log)
	if err != nil {
		return err
	}
	// One runner for both doors: one run_main per team at a time,
	// whichever door asked. It logs whether the sandbox is on.
	programs := workspace.NewRunnerAs(cfg.sandbox, cfg.sandboxUser, log)
	// The store is closed by the server's Shutdown, after everything that
	// writes to it has ended, or here when the server could not be made.
	closeOnce := sync.OnceValue(func() error {
		if cerr := closeStore(); cerr != nil {
			log.Error("close inbox files", "err", cerr)
		}
		return nil
	})
	a, err := app.New(ctx, store, app.Options{
		Core:            core.Options{Logger: log, MaxTeams: cfg.maxTeams, LeaseDuration: cfg.lease},
		AdminToken:      adminToken,
		Logger:          log,
		Static:          web.FS(),
		DataDir:         dataDir,
		Workspaces:      cfg.workspaces,
		Programs:        programs,
		MaxRunningTurns: cfg.maxRunningTurns,
		// Credentials are read from the environment at each turn and
		// never kept anywhere else.
		Models:     host.ModelOptions{Default: cfg.model, Lookup: os.LookupEnv, Provider: agent.ProviderOptions{Log: log}},
		CloseStore: closeOnce,
	})
	if err != nil {
		_ = closeOnce()
		if open := (*app.OpenError)(nil); errors.As(err, &open) {
			return fmt.Errorf("load teams from %s: %w", dataDir, open.Err)
		}
		return err
	}
	warnModelUnavailable(log, cfg.model, os.LookupEnv)
	logProviders(log, os.LookupEnv)
	// The order matters: stop starting work and cancel what runs, then
	// stop accepting and wait (bounded) for every request in flight, the
	// turns and runs included, to return after recording how they ended,
	// and for everything else the server started; only then is the store
	// closed and the process ends (app.App.Shutdown).
	shutdown := func() error {
		sctx, cancel := context.WithTimeout(context.Background(), shutdownTimeout)
		defer cancel()
		return a.Shutdown(sctx)
	}
	stop := func() error {
		log.Info("shutting down", "timeout", shutdownTimeout.String())
		return shutdown()
	}

	// Listen before serving, so a taken port is reported here and now.
	ln, err := net.Listen("tcp", cfg.addr)
	if err != nil {
		_ = shutdown()
		return fmt.Errorf("listen on %s: %w", cfg.addr, err)
	}
	a.Serve(ln)

	// The ready line on standard output is the one place a generated admin
	// token is shown; the log line names the page without it, because log
	// collectors keep what they are given. A token the operator gave is
	// never written anywhere (standard output is a log too, under
	// compose or systemd): the operator has it already.
	log.Info("ready", "addr", ln.Addr().String(), "data", dataDir, "url", pageURL(ln.Addr()))
	if cfg.adminToken != "" {
		fmt.Fprintf(stdout, "Mailroom is ready: %s\n", pageURL(ln.Addr()))
		fmt.Fprintln(stdout, "The admin token is the one given in MAILROOM_ADMIN_TOKEN (or --admin-token); open the page and enter it.")
	} else {
		fmt.Fprintf(stdout, "Mailroom is ready: %s\n", readyURL(ln.Addr(), adminToken))
	}

	select {
	case <-a.Failed():
		return stop()
	case <-ctx.Done():
	}
	if err := stop(); err != nil {
		log.Error("shutdown", "err", err)
		return err
	}
	log.Info("stopped")
	return nil
}

// readyURL is the status page address with the admin token in the fragment,
// which browsers never send to the server.
func readyURL(addr net.Addr, token string) string {
	return pageURL(addr) + "#token=" + token
}

// pageURL is the status page address without any token.
func pageURL(addr net.Addr) string {
	return "http://" + dialAddr(addr.String()) + "/"
}

// dialAddr turns a listen address into one a browser or client can open: a
// server listening on every interface (0.0.0.0, [::] or an empty host,
// dual-stack in Go) is reached through IPv4 loopback.
func dialAddr(addr string) string {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return addr
	}
	if ip := net.ParseIP(host); host == "" || (ip != nil && ip.IsUnspecified()) {
		host = "127.0.0.1"
	}
	return net.JoinHostPort(host, port)
}

// warnModelUnavailable logs a warning at start when the server's default
// model cannot answer with the environment it has (no key for its
// provider): the server still starts, and a turn on that model still
// answers 409 model_unavailable, but the operator learns it now rather than
// at the first turn. The message names the variable, never a value.
func warnModelUnavailable(log *slog.Logger, model agent.ModelConfig, lookup func(string) (string, bool)) {
	if model.Provider == agent.ProviderScripted {
		return
	}
	if _, err := agent.NewModel(model, lookup, agent.ProviderOptions{Log: log}); err != nil {
		log.Warn("the default model cannot answer: turns on it will be refused until the server is restarted with its credentials",
			"model", model.String(), "reason", core.ErrorMessage(err))
	}
}

// logProviders logs which model providers have credentials in the
// environment, by name only (never a key), so an operator sees at start
// which models can answer.
func logProviders(log *slog.Logger, lookup func(string) (string, bool)) {
	have := agent.CredentialedProviders(lookup)
	if have == nil {
		have = []string{}
	}
	log.Info("model providers", "with_credentials", have,
		"hint", "anthropic reads "+agent.EnvAnthropicKey+"; openai reads "+agent.EnvOpenAIKey+" or "+agent.EnvOpenAIBase)
}
