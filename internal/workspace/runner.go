package workspace

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"mailroom/internal/core"
)

// Bounds of one run of the fixed program.
const (
	// RunTimeout bounds one run: the program is killed, with every
	// process it started, when it is up. It is also the CPU time limit.
	RunTimeout = 10 * time.Second
	// MaxOutputBytes is the most of the program's stdout kept.
	MaxOutputBytes = 64 << 10
	// maxStderrBytes is the most of the sandbox helper's stderr kept, to
	// log why a sandbox could not be set up.
	maxStderrBytes = 4 << 10
)

// Limits of the sandbox (docs/api.md, "run_main's sandbox").
const (
	limitAddressSpace = 1 << 30  // bytes of virtual memory per process
	limitFileSize     = 64 << 20 // bytes of one file written
	limitOpenFiles    = 256      // descriptors per process
	// limitPIDs bounds the processes of one run: the PID namespace's
	// pid_max (301 is the smallest the kernel accepts).
	limitPIDs = 301
)

// Codes of run_main refusals that are the runner's own.
const (
	// CodeSandboxUnavailable: this kernel cannot confine the program
	// (no Landlock, no namespaces) and the operator did not turn the
	// sandbox off.
	CodeSandboxUnavailable core.Code = "sandbox_unavailable"
	// CodeRunInProgress: the team's program is running already; one run
	// per team at a time.
	CodeRunInProgress core.Code = "run_in_progress"
	// CodeNoProgram: the workspace has no regular main.py.
	CodeNoProgram core.Code = core.CodeNotFound
	// CodeWorkspaceFull: the workspace holds more than its team's
	// quota; a run that ends so keeps nothing it added (see Quota).
	CodeWorkspaceFull = core.CodeWorkspaceFull
	// CodeRunFailed: the program could not be started for another
	// reason (logged). The agent's tools also answer it for a program
	// that ran and failed.
	CodeRunFailed core.Code = "run_failed"
)

// RunError is a run that did not happen: its code says why.
type RunError struct {
	Code    core.Code
	Message string
}

func (e *RunError) Error() string { return e.Message }

// Outcome is what a run that started gave: the exit status (0 for
// success, -1 when a signal ended it) and the first MaxOutputBytes of its
// stdout, whatever the status.
type Outcome struct {
	ExitCode int
	Output   string
	// Signal names the signal that ended it, if one did.
	Signal string
	// TimedOut is set when RunTimeout ended it.
	TimedOut bool
	// WorkspaceFull is set when the run left the workspace over its
	// quota: what it added was removed and what it grew cut back.
	WorkspaceFull bool
	// Stderr is the first bytes of the program's standard error (a
	// Python traceback, "can't open file"), which a failed run reports
	// beside its output; the sandbox's own refusal to start is told
	// apart from it (RunError).
	Stderr string
}

// StderrTail is the last n bytes of o.Stderr, trimmed, at a character
// boundary: what a failure message quotes of it.
func (o Outcome) StderrTail(n int) string {
	s := strings.TrimSpace(o.Stderr)
	if len(s) <= n {
		return s
	}
	s = s[len(s)-n:]
	for len(s) > 0 && !utf8.RuneStart(s[0]) {
		s = s[1:]
	}
	return "…" + s
}

// Mode says whether run_main runs in the sandbox.
type Mode string

// The modes: ModeOn (the default) confines every run and refuses to run
// (sandbox_unavailable) where the kernel cannot; ModeOff runs the program
// unconfined, as the server's user, still in a process group of its own
// killed whole at the end and with an environment holding PATH only.
const (
	ModeOn  Mode = "on"
	ModeOff Mode = "off"
)

// ParseMode parses the --sandbox flag's value.
func ParseMode(s string) (Mode, error) {
	switch Mode(strings.ToLower(strings.TrimSpace(s))) {
	case "", ModeOn:
		return ModeOn, nil
	case ModeOff:
		return ModeOff, nil
	}
	return "", fmt.Errorf("sandbox mode %q: want on or off", s)
}

// Runner runs the workspaces' fixed program, one run per workspace at a
// time. One Runner serves every door of a server, so that the rule holds
// whichever door a call came through.
type Runner struct {
	mode Mode
	log  *slog.Logger
	// env is the sandbox as probed once at start (see probe).
	env sandboxEnv

	mu   sync.Mutex
	busy map[string]bool // workspace directories with a run going
}

// NewRunner returns a runner in mode whose programs, when the server is
// root, run as DefaultUser (see NewRunnerAs).
func NewRunner(mode Mode, log *slog.Logger) *Runner {
	return NewRunnerAs(mode, DefaultUser, log)
}

// NewRunnerAs returns a runner in mode whose programs, when the server is
// root, run as user. It probes once what the kernel offers and where the
// python3 on PATH lives, and logs it: a warning when the sandbox is off,
// or when the kernel cannot confine the program's network or at all.
func NewRunnerAs(mode Mode, user Identity, log *slog.Logger) *Runner {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	r := &Runner{mode: mode, log: log, busy: map[string]bool{}}
	r.env = probe(mode, user)
	switch {
	case mode == ModeOff:
		log.Warn("run_main's sandbox is off: programs run unconfined as the server's user (--sandbox off)")
	case r.env.unavailable != "":
		log.Warn("run_main's sandbox is not available on this machine; run_main answers sandbox_unavailable (--sandbox off runs programs unconfined)", "reason", r.env.unavailable)
	case !r.env.netRestricted:
		log.Warn("run_main's sandbox: this kernel's Landlock has no network rules (ABI below 4), so Landlock does not restrict the network; files are confined, and the program's network namespace of its own has no interface up", "landlock_abi", r.env.abi)
	case r.env.user != nil:
		log.Info("run_main's sandbox is on", "landlock_abi", r.env.abi, "python", r.env.python, "user", r.env.user.String())
	default:
		log.Info("run_main's sandbox is on", "landlock_abi", r.env.abi, "python", r.env.python, "user", "the server's, in a user namespace")
	}
	return r
}

var (
	defaultOnce   sync.Once
	defaultRunner *Runner
)

// Default is the process's runner with the sandbox on, for callers given
// none (tests, the scenario command). Being one, it keeps the one-run-
// per-workspace rule across them.
func Default() *Runner {
	defaultOnce.Do(func() { defaultRunner = NewRunner(ModeOn, nil) })
	return defaultRunner
}

// Available reports why the sandbox cannot run programs ("" when it can,
// or when it is off).
func (r *Runner) Available() string {
	if r.mode == ModeOff {
		return ""
	}
	return r.env.unavailable
}

// Run runs the fixed program of the workspace dir and returns how it
// ended. The program runs under ctx and RunTimeout: when either ends, it
// is killed with every process it started. A second run in the same
// workspace while one is going is refused (CodeRunInProgress), and so is
// a run in a workspace already over q (CodeWorkspaceFull).
//
// When the server is root the workspace belongs to the program's
// identity during the run. After it, whatever happened, the workspace
// is settled: no setuid or setgid bit is left, its files are the
// server's again, its directory has the mode and owner it had, and when
// it holds more than q what the run added is taken back
// (Outcome.WorkspaceFull).
func (r *Runner) Run(ctx context.Context, dir string, q Quota) (Outcome, error) {
	if why := r.Available(); why != "" {
		return Outcome{}, &RunError{Code: CodeSandboxUnavailable, Message: "the sandbox that run_main needs is not available on this server"}
	}
	dir = filepath.Clean(dir)
	if !r.acquire(dir) {
		return Outcome{}, &RunError{Code: CodeRunInProgress, Message: Program + " is already running in this team's workspace; one run at a time"}
	}
	defer r.release(dir)
	root, err := os.OpenRoot(dir)
	if err != nil {
		return Outcome{}, &RunError{Code: core.CodeNotFound, Message: "the workspace is not available"}
	}
	defer root.Close()
	info, err := root.Lstat(Program)
	if err != nil || !info.Mode().IsRegular() {
		return Outcome{}, &RunError{Code: CodeNoProgram, Message: "the workspace has no regular " + Program}
	}
	before, err := scan(root)
	if err != nil {
		r.log.WarnContext(ctx, "run_main's workspace could not be listed", "err", err)
		return Outcome{}, &RunError{Code: CodeRunFailed, Message: Program + " could not be started"}
	}
	if !q.holds(before.use) {
		return Outcome{}, &RunError{Code: CodeWorkspaceFull, Message: fmt.Sprintf("the workspace holds %s, more than its quota (%s); nothing was run", before.use, q)}
	}
	user := r.env.user
	if r.mode == ModeOff {
		user = nil
	}
	if user != nil {
		if err := handOver(root, before, *user); err != nil {
			r.log.WarnContext(ctx, "run_main's workspace could not be handed to the program's user", "err", err)
			if _, serr := settle(root, before, user, Quota{}); serr != nil {
				r.log.ErrorContext(ctx, "run_main's workspace could not be settled", "err", serr)
			}
			return Outcome{}, &RunError{Code: CodeRunFailed, Message: Program + " could not be started"}
		}
	}
	runCtx, cancel := context.WithTimeout(ctx, RunTimeout)
	defer cancel()
	out, err := r.run(runCtx, dir)
	full, serr := settle(root, before, user, q)
	if serr != nil {
		r.log.ErrorContext(ctx, "run_main's workspace could not be settled after the run", "err", serr)
	}
	out.WorkspaceFull = full
	if err != nil {
		r.log.WarnContext(ctx, "run_main's program could not be started", "err", err)
		return Outcome{}, &RunError{Code: CodeRunFailed, Message: Program + " could not be started"}
	}
	if runCtx.Err() == context.DeadlineExceeded {
		out.TimedOut = true
	}
	return out, nil
}

func (r *Runner) acquire(dir string) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.busy[dir] {
		return false
	}
	r.busy[dir] = true
	return true
}

func (r *Runner) release(dir string) {
	r.mu.Lock()
	delete(r.busy, dir)
	r.mu.Unlock()
}
