// Package app is the composition root of a Mailroom server: the one place
// that wires the store, core, the runtime (the waker), the host (turns,
// workspaces, scenario runs) and both doors, REST (internal/httpapi) and
// MCP (internal/mcpserver), which are peers and know nothing of each
// other. It also stops them, in order, waiting for every goroutine it
// started before the store is closed (Shutdown).
package app

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"net"
	"net/http"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"mailroom/internal/core"
	"mailroom/internal/host"
	"mailroom/internal/httpapi"
	"mailroom/internal/mcpserver"
	"mailroom/internal/runtime"
	"mailroom/internal/workspace"
)

// Options configure a server.
type Options struct {
	// Core configures the domain over the store.
	Core core.Options
	// AdminToken is the token that creates teams and reads everything. It
	// must not be empty.
	AdminToken string
	// Logger receives what every part logs; nil discards it.
	Logger *slog.Logger
	// Static, when not nil, is served at / (the status page and its assets).
	Static fs.FS
	// DataDir, when not empty, enables scenario runs and, by default, the
	// teams' workspaces (DataDir/workspaces).
	DataDir string
	// Workspaces is the root of the teams' workspaces; empty means
	// DataDir/workspaces, and no workspaces when DataDir is empty too.
	Workspaces string
	// Models configure the real models of turns.
	Models host.ModelOptions
	// Programs runs run_main's program for every door and the scenario
	// runs; nil means workspace.Default().
	Programs *workspace.Runner
	// MaxRunningTurns bounds the woken turns running at once; 0 means
	// runtime.DefaultMaxRunningTurns.
	MaxRunningTurns int
	// REST and MCP, when not nil, change the doors' own options last
	// (stream and session bounds).
	REST func(*httpapi.Options)
	MCP  func(*mcpserver.Options)
	// CloseStore, when not nil, closes the store: Shutdown calls it last,
	// once nothing it started can write any more.
	CloseStore func() error
}

// OpenError is New's error when the store could not be opened: its teams
// could not be loaded (or repaired), or the database could not be reached.
type OpenError struct{ Err error }

func (e *OpenError) Error() string { return e.Err.Error() }

// Unwrap returns the store's error.
func (e *OpenError) Unwrap() error { return e.Err }

// App is one server: its service, the parts around it and their handler.
type App struct {
	svc   *core.Service
	log   *slog.Logger
	host  *host.Host
	waker *runtime.Waker
	held  *httpapi.HeldReads
	mcp   *mcpserver.Handler
	// handler is both doors behind endStreamsOnShutdown.
	handler http.Handler
	// stopping is cancelled when shutdown begins (see Shutdown).
	stopping context.Context
	stopWork context.CancelFunc
	close    func() error

	mu  sync.Mutex
	srv *http.Server
	// served is closed when Serve's server has returned, with serveErr.
	served   chan struct{}
	serveErr error
	shutdown bool
}

// New opens core over store (the store's start-up: loading and repairing
// its teams) and wires the server around it. The waker starts here: a
// wake pending when the server last stopped is found now.
func New(ctx context.Context, store core.Store, opts Options) (*App, error) {
	if opts.AdminToken == "" {
		return nil, errors.New("app: empty admin token")
	}
	log := opts.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	if opts.Core.Logger == nil {
		opts.Core.Logger = log
	}
	svc := core.NewService(store, opts.Core)
	if err := svc.Open(ctx); err != nil {
		return nil, &OpenError{Err: err}
	}
	a := &App{svc: svc, log: log, held: &httpapi.HeldReads{}, close: opts.CloseStore}
	// stopping is cancelled when shutdown begins. It ends open event
	// streams (endStreamsOnShutdown), refuses new turns and scenario runs
	// and cancels the running ones and the woken turns, which then end at
	// their next boundary and record it; other requests run to completion.
	a.stopping, a.stopWork = context.WithCancel(context.Background())
	a.host = host.New(svc, host.Options{Logger: log, Models: opts.Models, DataDir: opts.DataDir, Workspaces: opts.Workspaces, Programs: opts.Programs})
	a.host.RemoveTrash()

	reg := prometheus.NewRegistry()
	restOpts := httpapi.Options{
		AdminToken: opts.AdminToken,
		Logger:     log,
		Static:     opts.Static,
		Host:       a.host,
		Metrics:    reg,
		Stopping:   a.stopping,
		HeldReads:  a.held,
	}
	if opts.REST != nil {
		opts.REST(&restOpts)
	}
	if restOpts.HeldReads != nil {
		a.held = restOpts.HeldReads
	}
	rest, err := httpapi.NewHandler(svc, restOpts)
	if err != nil {
		a.stopWork()
		return nil, fmt.Errorf("build HTTP handler: %w", err)
	}
	// /mcp is the door for agents outside Mailroom (Model Context
	// Protocol). Its members of a team with a workspace work on the same
	// files, and run one program at a time, as the team's turns.
	mcpOpts := mcpserver.Options{AdminToken: opts.AdminToken, Logger: log, Workspaces: a.host.WorkspacesRoot(), Runner: a.host.Programs()}
	if opts.MCP != nil {
		opts.MCP(&mcpOpts)
	}
	if a.mcp, err = mcpserver.New(svc, mcpOpts); err != nil {
		a.stopWork()
		return nil, fmt.Errorf("build MCP handler: %w", err)
	}
	a.handler = endStreamsOnShutdown(doors(rest, a.mcp), a.stopping)
	// Members with wake set are woken on mail from now on; their turns
	// are built by the host as requested ones are.
	a.waker = runtime.NewWaker(svc, runtime.WakeConfig{
		Stopping: a.stopping, Build: a.host.WokenTurn, Observer: newWakeMetrics(reg),
		MaxRunning: opts.MaxRunningTurns, Logger: log,
	})
	a.waker.Start()
	return a, nil
}

// doors serves mcpserver.Path with mcp and every other path with rest, as
// the request names it: an http.ServeMux would clean a path first and
// redirect, so that a workspace file path naming "." or ".." never
// reached the REST door, which refuses it with a problem of its own.
func doors(rest, mcp http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == mcpserver.Path {
			mcp.ServeHTTP(w, r)
			return
		}
		rest.ServeHTTP(w, r)
	})
}

// Service is the domain the server serves.
func (a *App) Service() *core.Service { return a.svc }

// Host is the server's host (turns, workspaces, scenario runs).
func (a *App) Host() *host.Host { return a.host }

// Waker is the server's waker.
func (a *App) Waker() *runtime.Waker { return a.waker }

// HeldReads counts the reads held for mail off net/http.
func (a *App) HeldReads() *httpapi.HeldReads { return a.held }

// Handler serves both doors.
func (a *App) Handler() http.Handler { return a.handler }

// Serve serves the handler on ln until Shutdown. It returns at once; a
// server that fails before Shutdown closes Failed, and Shutdown returns
// its error. It is called at most once.
func (a *App) Serve(ln net.Listener) {
	srv := &http.Server{
		Handler:           a.handler,
		ReadHeaderTimeout: 5 * time.Second,
		ReadTimeout:       30 * time.Second,
		// WriteTimeout stays 0 (no limit): it would cut the Server-Sent
		// Events stream, which writes for as long as the page is open, and
		// scenario runs slowed with step_ms legitimately take long. Slow
		// clients are bounded by ReadTimeout, IdleTimeout and the shutdown
		// timeout instead.
		WriteTimeout: 0,
		IdleTimeout:  120 * time.Second,
		ErrorLog:     slog.NewLogLogger(a.log.Handler(), slog.LevelWarn),
	}
	// Reads held for mail (REST wait, MCP wait_for_mail) answer at once.
	srv.RegisterOnShutdown(a.svc.StopWaiting)
	served := make(chan struct{})
	a.mu.Lock()
	a.srv, a.served = srv, served
	a.mu.Unlock()
	go func() {
		err := srv.Serve(ln)
		a.mu.Lock()
		a.serveErr = err
		a.mu.Unlock()
		close(served)
	}()
}

// Failed is closed when the server Serve started has stopped serving:
// after Shutdown, or before it when it failed (Shutdown then returns
// why). It is nil before Serve.
func (a *App) Failed() <-chan struct{} {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.served
}

// Shutdown stops the server in order, within ctx: it stops starting work
// and cancels what runs (turns, runs, wakes, event streams), stops
// accepting and waits for every request in flight, then for the reads
// held for mail, the MCP sessions, the running turns, the waker's
// goroutines and the lease renewals of turns and runs, each of which
// records how it ended; only then does it close the store. What still runs when ctx ends is cut off (its
// storage writes are atomic, so nothing is left half done) and the store
// is closed anyway. It may be called once; later calls do nothing.
func (a *App) Shutdown(ctx context.Context) error {
	a.mu.Lock()
	if a.shutdown {
		a.mu.Unlock()
		return nil
	}
	a.shutdown = true
	srv, served := a.srv, a.served
	a.mu.Unlock()

	var errs []error
	a.stopWork()
	if srv != nil {
		if err := srv.Shutdown(ctx); err != nil {
			a.log.Warn("shutdown timed out; closing remaining connections", "err", err)
			_ = srv.Close()
		}
	} else {
		a.svc.StopWaiting()
	}
	// Reads held for mail left net/http with their connections; released
	// by StopWaiting, they take one last look at the store before it closes.
	if err := a.held.Wait(ctx); err != nil {
		a.log.Warn("shutdown timed out before every held read was answered", "err", err)
	}
	// MCP sessions outlive their requests: each is ended and counted off
	// its member now, while the store is open.
	if err := a.mcp.Close(ctx); err != nil {
		a.log.Warn("shutdown timed out before every MCP session ended", "err", err)
	}
	// Turns started with Prefer: respond-async and woken turns have no
	// request to wait for: wait for them too, so that they record their
	// end before the store is closed.
	if err := a.svc.WaitTurns(ctx); err != nil {
		a.log.Warn("shutdown timed out before every turn recorded its end", "err", err)
	}
	if err := a.waker.Wait(ctx); err != nil {
		a.log.Warn("shutdown timed out before the waker stopped", "err", err)
	}
	if err := errors.Join(a.svc.WaitBackground(ctx), a.host.Wait(ctx)); err != nil {
		a.log.Warn("shutdown timed out before every lease renewal ended", "err", err)
	}
	if a.close != nil {
		if err := a.close(); err != nil {
			errs = append(errs, fmt.Errorf("close store: %w", err))
		}
	}
	if served != nil {
		<-served
		a.mu.Lock()
		err := a.serveErr
		a.mu.Unlock()
		if !errors.Is(err, http.ErrServerClosed) {
			errs = append(errs, fmt.Errorf("serve: %w", err))
		}
	}
	return errors.Join(errs...)
}
