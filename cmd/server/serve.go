package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"time"

	"mailroom/internal/agent"
	"mailroom/internal/core"
	"mailroom/internal/httpapi"
	"mailroom/internal/mail"
	"mailroom/internal/mcpserver"
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
	// Runs after the HTTP server has stopped (defers run last-in first-out
	// before the lock is released): no append is in flight any more.
	defer func() {
		if cerr := closeStore(); cerr != nil {
			log.Error("close inbox files", "err", cerr)
		}
	}()
	svc := core.NewService(store, core.Options{Logger: log, MaxTeams: cfg.maxTeams, LeaseDuration: cfg.lease, MaxRunningTurns: cfg.maxRunningTurns})
	if err := svc.Open(ctx); err != nil {
		return fmt.Errorf("load teams from %s: %w", dataDir, err)
	}
	warnModelUnavailable(log, cfg.model, os.LookupEnv)
	logProviders(log, os.LookupEnv)
	// stopping is cancelled when shutdown begins. It ends open event
	// streams (see endStreamsOnShutdown), refuses new turns and scenario
	// runs and cancels the running ones, which then end at their next
	// boundary and record it; other requests run to completion.
	stopping, stopWork := context.WithCancel(context.Background())
	defer stopWork()
	held := &httpapi.HeldReads{}
	// One runner for both doors: one run_main per team at a time,
	// whichever door asked. It logs whether the sandbox is on.
	programs := workspace.NewRunnerAs(cfg.sandbox, cfg.sandboxUser, log)
	handler, err := httpapi.NewHandler(svc, httpapi.Options{
		AdminToken: adminToken,
		Logger:     log,
		Static:     web.FS(),
		DataDir:    dataDir,
		Workspaces: cfg.workspaces,
		Runner:     programs,
		Stopping:   stopping,
		HeldReads:  held,
		// Credentials are read from the environment at each turn and
		// never kept anywhere else.
		Models: httpapi.ModelOptions{Default: cfg.model, Lookup: os.LookupEnv, Provider: agent.ProviderOptions{Log: log}},
	})
	if err != nil {
		return fmt.Errorf("build HTTP handler: %w", err)
	}
	// /mcp is the door for agents outside Mailroom (Model Context Protocol).
	// Its members of a team with a workspace work on the same files as
	// the team's turns (the default root is the one httpapi uses).
	workspaces := cfg.workspaces
	if workspaces == "" {
		workspaces = filepath.Join(dataDir, "workspaces")
	}
	if handler, err = mcpserver.Mount(handler, svc, mcpserver.Options{AdminToken: adminToken, Logger: log, Workspaces: workspaces, Runner: programs}); err != nil {
		return fmt.Errorf("build MCP handler: %w", err)
	}

	srv := &http.Server{
		Handler:           endStreamsOnShutdown(handler, stopping),
		ReadHeaderTimeout: 5 * time.Second,
		ReadTimeout:       30 * time.Second,
		// WriteTimeout stays 0 (no limit): it would cut the Server-Sent
		// Events stream, which writes for as long as the page is open, and
		// scenario runs slowed with step_ms legitimately take long. Slow
		// clients are bounded by ReadTimeout, IdleTimeout and the shutdown
		// timeout instead.
		WriteTimeout: 0,
		IdleTimeout:  120 * time.Second,
		ErrorLog:     slog.NewLogLogger(log.Handler(), slog.LevelWarn),
	}
	// Reads held for mail (REST wait, MCP wait_for_mail) answer at once.
	srv.RegisterOnShutdown(svc.StopWaiting)

	// Listen before serving, so a taken port is reported here and now.
	ln, err := net.Listen("tcp", cfg.addr)
	if err != nil {
		return fmt.Errorf("listen on %s: %w", cfg.addr, err)
	}
	serveErr := make(chan error, 1)
	go func() { serveErr <- srv.Serve(ln) }()

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
	case err := <-serveErr:
		return fmt.Errorf("serve: %w", err)
	case <-ctx.Done():
	}
	// The order matters: stop starting work and cancel what runs, then
	// stop accepting and wait (bounded) for every request in flight, the
	// turns and runs included, to return after recording how they ended;
	// only then is the store closed (deferred above) and the process ends.
	log.Info("shutting down", "timeout", shutdownTimeout.String())
	stopWork()
	sctx, cancel := context.WithTimeout(context.Background(), shutdownTimeout)
	defer cancel()
	if err := srv.Shutdown(sctx); err != nil {
		// Requests still running after the timeout are cut off; their
		// storage writes are atomic, so nothing is left half done.
		log.Warn("shutdown timed out; closing remaining connections", "err", err)
		_ = srv.Close()
	}
	// Reads held for mail left net/http with their connections; released
	// by StopWaiting, they take one last look at the store before it closes.
	if err := held.Wait(sctx); err != nil {
		log.Warn("shutdown timed out before every held read was answered", "err", err)
	}
	// Turns started with Prefer: respond-async have no request to wait
	// for: wait for them too, so that they record their end before the
	// store is closed.
	if err := svc.WaitTurns(sctx); err != nil {
		log.Warn("shutdown timed out before every turn recorded its end", "err", err)
	}
	if err := <-serveErr; !errors.Is(err, http.ErrServerClosed) {
		return fmt.Errorf("serve: %w", err)
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
