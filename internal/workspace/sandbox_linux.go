package workspace

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"syscall"
	"time"
	"unsafe"

	"github.com/landlock-lsm/go-landlock/landlock"
	llsys "github.com/landlock-lsm/go-landlock/landlock/syscall"
	"golang.org/x/sys/unix"
)

// How a run is confined (docs/api.md, "run_main's sandbox"):
//
//   - The server starts its own binary again as a small helper (see
//     helperCommand) in a new user, PID, network and IPC namespace.
//     Landlock can only restrict the calling process, and Go gives no
//     hook between fork and exec, so the helper restricts itself and
//     then execs python3: go-landlock's documented way for a Go program
//     to confine another.
//   - python3 becomes PID 1 of the namespace. When it exits or is
//     killed, the kernel kills every process left in the namespace,
//     those that started a session of their own included, so nothing
//     outlives the call; Pdeathsig kills it if the server dies.
//   - A root server's helper starts as root in a mount namespace of its
//     own, makes the workspace and the interpreter reachable to the
//     run's unprivileged identity (exposeDirs), sets everything up and
//     then becomes that identity (--sandbox-user, 65534 by default) with
//     no capability: a host file only root may read stays unreadable,
//     and a hard rlimit cannot be raised back. The workspace belongs to
//     that identity for the run only (Runner.Run hands it over and back).
//   - A server that is not root cannot take another identity: its
//     helper runs in a user namespace of its own too, as the server's
//     user, which likewise has no capability outside it.
//   - Landlock: the workspace read-write, the system's directories and
//     the interpreter's installation read-only, nothing else; no TCP.
//   - no_new_privs, and a seccomp filter (confine_linux.go) that refuses
//     the kernel's riskier calls with EPERM.

// helperCommand is the first argument that makes a binary linking this
// package the sandbox helper (see init).
const helperCommand = "sandbox-exec"

// helperFailed is the helper's exit status when it could not set the
// sandbox up; its stderr then says why.
const helperFailed = 125

// tmpName is the program's TMPDIR inside the workspace, made before each
// run and removed after it.
const tmpName = reservedPrefix + "tmp"

// systemDirs are read (and executed) by every program: the system's own
// directories. Missing ones are skipped.
var systemDirs = []string{"/usr", "/lib", "/lib64", "/bin", "/sbin", "/etc"}

// init turns the process into the sandbox helper when the runner started
// it so. Any binary that can start a run links this package, so the
// runner can always start its own binary (os.Executable) as the helper:
// the server, and the test binaries of the packages that run programs.
func init() {
	if len(os.Args) == 3 && os.Args[1] == helperCommand {
		err := helperMain(os.Args[2])
		fmt.Fprintf(os.Stderr, "sandbox: %v\n", err)
		os.Exit(helperFailed)
	}
}

// helperConfig is what the runner tells the helper, as its argument.
type helperConfig struct {
	Dir      string   `json:"dir"`
	Python   string   `json:"python"`
	Args     []string `json:"args"`
	ReadOnly []string `json:"ro"`
	Env      []string `json:"env"`
	CPU      uint64   `json:"cpu"`
	// User, when set, is the identity the helper (started as root)
	// becomes before it execs the program.
	User *Identity `json:"user,omitempty"`
}

// helperMain confines the helper process and execs the program; it
// returns only on failure.
func helperMain(arg string) error {
	var cfg helperConfig
	if err := json.Unmarshal([]byte(arg), &cfg); err != nil {
		return fmt.Errorf("configuration: %w", err)
	}
	runtime.LockOSThread() // never unlocked: this thread execs
	if cfg.User != nil {
		if err := exposeDirs(*cfg.User, []string{cfg.Dir}, cfg.ReadOnly); err != nil {
			return fmt.Errorf("mounts: %w", err)
		}
		// The workspace as the program sees it: through its bind mount.
		if err := os.Chdir(cfg.Dir); err != nil {
			return err
		}
	}
	// The PID namespace's own pid_max bounds the processes of the run.
	// Kernels before 6.14 have one pid_max for all namespaces: a helper
	// in a user namespace may not change it, and a root helper must not.
	// The run then goes on without that bound.
	if cfg.User == nil || perNamespacePIDMax() {
		_ = os.WriteFile("/proc/sys/kernel/pid_max", []byte(fmt.Sprint(limitPIDs)), 0)
	}
	rules := []landlock.Rule{
		landlock.RODirs(systemDirs...).IgnoreIfMissing(),
		landlock.RODirs(cfg.ReadOnly...),
		landlock.RWDirs(cfg.Dir),
		landlock.RWFiles("/dev/null"),
		landlock.ROFiles("/dev/zero", "/dev/urandom"),
	}
	// No network rule: every TCP bind and connect is refused (ABI 4 and
	// up); scoping keeps abstract sockets and signals inside the run.
	fd, flags, err := landlock.V11.BestEffort().NewRulesetFD(rules...)
	if err != nil {
		return fmt.Errorf("landlock: %w", err)
	}
	if fd < 0 {
		return errors.New("landlock: not available")
	}
	if cfg.User != nil {
		if err := becomeUser(*cfg.User); err != nil {
			return err
		}
	}
	if err := unix.Prctl(unix.PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0); err != nil {
		return fmt.Errorf("no_new_privs: %w", err)
	}
	if err := llsys.LandlockRestrictSelf(fd, flags); err != nil {
		return fmt.Errorf("landlock: %w", err)
	}
	_ = unix.Close(fd)
	if err := loadSeccomp(); err != nil {
		return err
	}
	// argv[0] is the interpreter's own path: python finds its
	// installation from it, not from a PATH whose directories the
	// program's user may not reach. The exec's arguments are made before
	// any limit, so that nothing after the address-space limit allocates.
	path, argv := execArgv(cfg.Python, cfg.Args)
	pathp, err := syscall.BytePtrFromString(path)
	if err != nil {
		return err
	}
	argvp, err := syscall.SlicePtrFromStrings(argv)
	if err != nil {
		return err
	}
	envp, err := syscall.SlicePtrFromStrings(cfg.Env)
	if err != nil {
		return err
	}
	// The limits come last: a race-enabled helper (tests) has mapped
	// more than the address-space limit, and Go may still map memory
	// while it builds the ruleset.
	limits := []struct {
		res int
		val uint64
	}{
		{unix.RLIMIT_FSIZE, limitFileSize},
		{unix.RLIMIT_NOFILE, limitOpenFiles},
		{unix.RLIMIT_CPU, cfg.CPU},
		{unix.RLIMIT_CORE, 0},
	}
	for _, l := range limits {
		// syscall's Setrlimit, not x/sys's: it also tells the runtime not
		// to restore its own open-files limit at exec.
		if err := syscall.Setrlimit(l.res, &syscall.Rlimit{Cur: l.val, Max: l.val}); err != nil {
			return fmt.Errorf("rlimit %d: %w", l.res, err)
		}
	}
	// The address space last of all, and from it to the exec only raw
	// system calls.
	if !raceEnabled {
		as := syscall.Rlimit{Cur: limitAddressSpace, Max: limitAddressSpace}
		if _, _, e := syscall.RawSyscall(syscall.SYS_SETRLIMIT, unix.RLIMIT_AS, uintptr(unsafe.Pointer(&as)), 0); e != 0 {
			return fmt.Errorf("rlimit address space: %w", e)
		}
	}
	_, _, e := syscall.RawSyscall(syscall.SYS_EXECVE, uintptr(unsafe.Pointer(pathp)), uintptr(unsafe.Pointer(&argvp[0])), uintptr(unsafe.Pointer(&envp[0])))
	return fmt.Errorf("exec %s: %w", argv[0], e)
}

// raceShell is the shell a race-enabled helper (tests) limits python's
// address space with: such a helper cannot lower its own, which its race
// detector's runtime has mapped far past the limit and grows whenever Go
// code runs (a map the limit refuses kills the helper before python
// starts), so the shell sets the limit, drops the PWD it exported, and
// then becomes python. A binary built without the race detector, as
// every server is, sets the limit itself and execs python directly.
const raceShell = "/bin/sh"

// execArgv is the program the helper execs and its argv: python with
// args, or in a race-enabled helper the shell that limits python's
// address space first (raceShell).
func execArgv(python string, args []string) (string, []string) {
	argv := append([]string{python}, args...)
	if !raceEnabled {
		return python, argv
	}
	script := fmt.Sprintf(`ulimit -v %d && unset PWD && exec "$0" "$@"`, limitAddressSpace/1024)
	return raceShell, append([]string{raceShell, "-c", script}, argv...)
}

// sandboxEnv is what probe found.
type sandboxEnv struct {
	// user is the program's identity when the server is root (nil: the
	// server's own, in a user namespace).
	user          *Identity
	python        string   // the interpreter's executable, "" when none was found
	pythonDirs    []string // its installation, read-only in the sandbox
	helper        string   // this binary
	abi           int      // Landlock's ABI version
	netRestricted bool
	unavailable   string // why the sandbox cannot run, "" when it can
}

// probe finds the interpreter and, unless mode is off, checks that the
// sandbox works here by running python3 in it once.
func probe(mode Mode, user Identity) sandboxEnv {
	var env sandboxEnv
	env.python, env.pythonDirs = findPython()
	if mode == ModeOff {
		return env
	}
	if os.Geteuid() == 0 {
		env.user = &user
	}
	if env.python == "" {
		env.unavailable = "no python3 on PATH"
		return env
	}
	abi, err := llsys.LandlockGetABIVersion()
	if err != nil || abi < 1 {
		env.unavailable = "the kernel has no Landlock"
		return env
	}
	env.abi, env.netRestricted = abi, abi >= 4
	if env.helper, err = os.Executable(); err != nil {
		env.unavailable = "the server's binary cannot be found: " + err.Error()
		return env
	}
	dir, err := os.MkdirTemp("", "mailroom-sandbox-probe-")
	if err != nil {
		env.unavailable = "no temporary directory: " + err.Error()
		return env
	}
	defer os.RemoveAll(dir)
	if err := env.handTo(dir); err != nil {
		env.unavailable = "the probe's directory cannot be handed over: " + err.Error()
		return env
	}
	ctx, cancel := context.WithTimeout(context.Background(), RunTimeout)
	defer cancel()
	out, err := run(ctx, ModeOn, env, dir, []string{"-I", "-c", "print('ok')"})
	switch {
	case err != nil:
		env.unavailable = err.Error()
	case out.ExitCode != 0 || out.Output != "ok\n":
		env.unavailable = fmt.Sprintf("a test program in the sandbox exited %d: %s", out.ExitCode, strings.TrimSpace(out.Stderr))
	}
	return env
}

// findPython returns the executable of the python3 found on PATH and
// its installation's directories, as the interpreter itself reports them
// (PATH may hold a wrapper, such as a pyenv shim, that the sandbox could
// not run): ("", nil) when there is none.
func findPython() (string, []string) {
	if _, err := exec.LookPath("python3"); err != nil {
		return "", nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), RunTimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, "python3", "-I", "-c", "import sys; print(sys.executable); print(sys.base_prefix); print(sys.prefix)")
	cmd.Env = []string{"PATH=" + os.Getenv("PATH")}
	b, err := cmd.Output()
	if err != nil {
		return "", nil
	}
	lines := strings.Split(strings.TrimSpace(string(b)), "\n")
	if len(lines) != 3 || !filepath.IsAbs(lines[0]) {
		return "", nil
	}
	exe, err := filepath.EvalSymlinks(lines[0])
	if err != nil {
		return "", nil
	}
	dirs := []string{filepath.Dir(exe)}
	for _, p := range lines[1:] {
		// A prefix of "/" would open everything; the system's own
		// directories cover such an installation anyway.
		if p, err := filepath.EvalSymlinks(p); err == nil && p != "/" {
			dirs = append(dirs, p)
		}
	}
	return exe, dirs
}

// run runs python3 with args in dir: confined (ModeOn) or only in a
// process group of its own (ModeOff).
func (r *Runner) run(ctx context.Context, dir string) (Outcome, error) {
	return run(ctx, r.mode, r.env, dir, []string{"-B", Program})
}

func run(ctx context.Context, mode Mode, env sandboxEnv, dir string, args []string) (Outcome, error) {
	root, err := os.OpenRoot(dir)
	if err != nil {
		return Outcome{}, err
	}
	defer root.Close()
	_ = root.RemoveAll(tmpName) // a leftover of a run the server did not see end
	if err := root.Mkdir(tmpName, 0o700); err != nil {
		return Outcome{}, err
	}
	defer func() { _ = root.RemoveAll(tmpName) }()
	if mode == ModeOn {
		if err := env.handTo(filepath.Join(dir, tmpName)); err != nil {
			return Outcome{}, err
		}
	}
	progEnv := []string{"PATH=" + os.Getenv("PATH"), "TMPDIR=" + filepath.Join(dir, tmpName)}

	var cmd *exec.Cmd
	if mode == ModeOff {
		python := env.python
		if python == "" {
			python = "python3"
		}
		cmd = exec.Command(python, args...)
		cmd.Env = progEnv
		cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	} else {
		cfg, err := json.Marshal(helperConfig{Dir: dir, Python: env.python, Args: args, ReadOnly: env.pythonDirs, Env: progEnv, CPU: uint64(RunTimeout / time.Second), User: env.user})
		if err != nil {
			return Outcome{}, err
		}
		cmd = exec.Command(env.helper, helperCommand, string(cfg))
		cmd.Env = []string{} // the helper needs none; the program gets progEnv
		uid, gid := os.Getuid(), os.Getgid()
		if env.user != nil {
			// Root on the host until it becomes env.user: no user
			// namespace, a mount namespace for exposeDirs.
			cmd.SysProcAttr = &syscall.SysProcAttr{
				Cloneflags: syscall.CLONE_NEWNS | syscall.CLONE_NEWPID | syscall.CLONE_NEWNET | syscall.CLONE_NEWIPC,
				Pdeathsig:  syscall.SIGKILL,
			}
		} else {
			cmd.SysProcAttr = &syscall.SysProcAttr{
				// A network and an IPC namespace of its own too: no
				// interface but a loopback that is down, whatever
				// Landlock's ABI, and no System V IPC shared with the host.
				Cloneflags:  syscall.CLONE_NEWUSER | syscall.CLONE_NEWPID | syscall.CLONE_NEWNET | syscall.CLONE_NEWIPC,
				UidMappings: []syscall.SysProcIDMap{{ContainerID: 0, HostID: uid, Size: 1}},
				GidMappings: []syscall.SysProcIDMap{{ContainerID: 0, HostID: gid, Size: 1}},
				Pdeathsig:   syscall.SIGKILL,
			}
		}
	}
	cmd.Dir = dir
	stdout, err := newCapture(MaxOutputBytes)
	if err != nil {
		return Outcome{}, err
	}
	defer stdout.close()
	stderr, err := newCapture(maxStderrBytes)
	if err != nil {
		return Outcome{}, err
	}
	defer stderr.close()
	cmd.Stdout, cmd.Stderr = stdout.w, stderr.w

	// Pdeathsig fires when the thread that started the child ends, so
	// that thread is kept until the child has been waited for.
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	if err := cmd.Start(); err != nil {
		return Outcome{}, err
	}
	stdout.start()
	stderr.start()
	pid := cmd.Process.Pid
	// kill ends the run whole: in the sandbox the program is PID 1 of its
	// namespace, whose end takes every other process in it along;
	// unconfined it is its process group.
	kill := func() {
		if mode == ModeOff {
			_ = syscall.Kill(-pid, syscall.SIGKILL)
		} else {
			_ = cmd.Process.Kill()
		}
	}
	done := make(chan struct{})
	go func() {
		select {
		case <-ctx.Done():
			kill()
		case <-done:
		}
	}()
	werr := cmd.Wait()
	close(done)
	// Unconfined, children still in the group go now; one that left it
	// may keep the pipes open, which the readers stop waiting for.
	kill()
	out := Outcome{Output: stdout.finish(), Stderr: stderr.finish()}
	var exit *exec.ExitError
	if werr != nil && !errors.As(werr, &exit) {
		return Outcome{}, werr
	}
	out.ExitCode = cmd.ProcessState.ExitCode()
	if ws, ok := cmd.ProcessState.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
		out.Signal = ws.Signal().String()
	}
	if mode == ModeOn && out.ExitCode == helperFailed && strings.HasPrefix(out.Stderr, "sandbox: ") {
		return Outcome{}, errors.New(strings.TrimSpace(out.Stderr))
	}
	return out, nil
}

// capture reads one output pipe of the program, keeping the first max
// bytes. The pipe is the program's own descriptor (no copying goroutine
// of os/exec), so Wait returns when the program ends even while a
// process it left behind holds the pipe open.
type capture struct {
	r, w *os.File
	max  int
	buf  bytes.Buffer
	wg   sync.WaitGroup
}

func newCapture(max int) (*capture, error) {
	r, w, err := os.Pipe()
	if err != nil {
		return nil, err
	}
	return &capture{r: r, w: w, max: max}, nil
}

// start closes the server's copy of the write end (the program has its
// own) and reads until every writer has closed it.
func (c *capture) start() {
	_ = c.w.Close()
	c.wg.Add(1)
	go func() {
		defer c.wg.Done()
		_, _ = io.Copy(&limitedBuffer{buf: &c.buf, max: c.max}, c.r)
	}()
}

// drainGrace is how long the output is still read after the program
// ended, for what it wrote just before; only a process that escaped the
// run (possible only with the sandbox off) makes the reader wait it out.
const drainGrace = time.Second

// finish waits for the reader (at most drainGrace) and returns the output.
func (c *capture) finish() string {
	_ = c.r.SetReadDeadline(time.Now().Add(drainGrace))
	c.wg.Wait()
	return c.buf.String()
}

func (c *capture) close() {
	_ = c.w.Close()
	_ = c.r.Close()
}

// limitedBuffer keeps the first max bytes written and drops the rest, so
// a chatty program cannot grow memory without bound.
type limitedBuffer struct {
	buf *bytes.Buffer
	max int
}

func (b *limitedBuffer) Write(p []byte) (int, error) {
	if room := b.max - b.buf.Len(); room > 0 {
		b.buf.Write(p[:min(len(p), room)])
	}
	return len(p), nil
}

// handTo gives path to the program's identity, if it has one of its own.
func (env sandboxEnv) handTo(path string) error {
	if env.user == nil {
		return nil
	}
	return os.Lchown(path, env.user.UID, env.user.GID)
}
