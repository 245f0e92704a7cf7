// Package pgtest starts a private PostgreSQL cluster for one test binary and
// hands each test a fresh database in it.
//
// The cluster is made with initdb in a temporary directory and started with
// pg_ctl on a free loopback port, with its unix socket in that directory and
// fsync on; it is never the machine's own PostgreSQL service. A package uses
// it from TestMain:
//
//	func TestMain(m *testing.M) { os.Exit(pgtest.Main(m)) }
//
// and each test asks for a database with [New]. The cluster starts with the
// first test that asks, so a package whose selected tests need none pays
// nothing. When the PostgreSQL server binaries cannot be found the test
// fails, with a message that says what to install; it never skips.
//
// Run as root (as CI does), the server binaries run as the unprivileged
// "postgres" user that Debian's package creates, because initdb and the
// server refuse root.
package pgtest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"net/url"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
)

// Superuser is the cluster's superuser; it authenticates with trust on
// loopback and the socket only.
const Superuser = "postgres"

// Cluster is one running private PostgreSQL server.
type Cluster struct {
	// Dir is the temporary directory holding the data directory, the
	// socket and the server log.
	Dir string
	// Port is the loopback TCP port the server listens on.
	Port int

	bin  string // directory of initdb, pg_ctl and postgres
	cred *syscall.Credential
	uid  int
	gid  int

	mu      sync.Mutex
	running bool
}

var (
	shared     *Cluster
	sharedErr  error
	sharedOnce sync.Once
	dbSeq      atomic.Int64
)

// Main runs the package's tests and stops the cluster, if one was started,
// afterwards. Its result is the exit code for os.Exit.
func Main(m *testing.M) int { return Finish(m.Run()) }

// Finish stops the test binary's cluster, if one was started, and returns
// code, or 1 when the cluster could not be stopped. For a TestMain that
// runs the tests through another helper:
//
//	os.Exit(pgtest.Finish(testkit.Main(m, &bin)))
func Finish(code int) int {
	if shared != nil {
		if err := shared.Close(); err != nil {
			fmt.Fprintf(os.Stderr, "pgtest: stop the cluster: %v\n", err)
			if code == 0 {
				code = 1
			}
		}
	}
	return code
}

// Shared returns the test binary's cluster, starting it on first use. A
// cluster that cannot be started fails t.
func Shared(t testing.TB) *Cluster {
	t.Helper()
	sharedOnce.Do(func() {
		shared, sharedErr = Start()
	})
	if sharedErr != nil {
		t.Fatalf("pgtest: %v", sharedErr)
	}
	return shared
}

// New creates a fresh, empty database in the test binary's cluster and
// returns its URL; the database is dropped when the test ends.
func New(t testing.TB) string {
	t.Helper()
	return Shared(t).NewDatabase(t)
}

// Start makes and starts a new cluster. The caller stops it with Close.
func Start() (*Cluster, error) {
	bin, err := findBinaries()
	if err != nil {
		return nil, err
	}
	c := &Cluster{bin: bin, uid: -1, gid: -1}
	if os.Geteuid() == 0 {
		u, err := user.Lookup("postgres")
		if err != nil {
			return nil, fmt.Errorf("running as root, the server must run as an unprivileged user, but there is no %q user (Debian's postgresql package creates it): %w", "postgres", err)
		}
		uid, _ := strconv.Atoi(u.Uid)
		gid, _ := strconv.Atoi(u.Gid)
		c.uid, c.gid = uid, gid
		c.cred = &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid), Groups: []uint32{}}
	}
	base := os.TempDir()
	if c.cred != nil && !reachableByOthers(base) {
		// A TMPDIR inside /root cannot be entered by the postgres user.
		base = "/tmp"
	}
	c.Dir, err = os.MkdirTemp(base, "pgtest-")
	if err != nil {
		return nil, fmt.Errorf("make the cluster directory: %w", err)
	}
	if c.cred != nil {
		if err := os.Chown(c.Dir, c.uid, c.gid); err != nil {
			os.RemoveAll(c.Dir)
			return nil, fmt.Errorf("hand the cluster directory to the postgres user: %w", err)
		}
	}
	if err := os.Chmod(c.Dir, 0o700); err != nil {
		os.RemoveAll(c.Dir)
		return nil, err
	}
	if err := c.initdb(); err != nil {
		os.RemoveAll(c.Dir)
		return nil, err
	}
	// The port is picked free and then handed to the server; another
	// process may take it in between, so a failed start picks again.
	for attempt := 0; ; attempt++ {
		c.Port, err = freePort()
		if err == nil {
			err = c.Start()
		}
		if err == nil {
			break
		}
		if attempt == 2 {
			os.RemoveAll(c.Dir)
			return nil, err
		}
	}
	c.watchdog()
	return c, nil
}

// findBinaries returns the directory holding initdb, pg_ctl and postgres:
// from PATH when initdb is there, else the newest /usr/lib/postgresql/*/bin.
func findBinaries() (string, error) {
	var dirs []string
	if p, err := exec.LookPath("initdb"); err == nil {
		if real, err := filepath.EvalSymlinks(p); err == nil {
			p = real
		}
		dirs = append(dirs, filepath.Dir(p))
	}
	matches, _ := filepath.Glob("/usr/lib/postgresql/*/bin")
	sort.Slice(matches, func(i, j int) bool { return versionOf(matches[i]) > versionOf(matches[j]) })
	dirs = append(dirs, matches...)
	for _, d := range dirs {
		ok := true
		for _, name := range []string{"initdb", "pg_ctl", "postgres"} {
			if fi, err := os.Stat(filepath.Join(d, name)); err != nil || fi.IsDir() {
				ok = false
				break
			}
		}
		if ok {
			return d, nil
		}
	}
	return "", errors.New("the PostgreSQL server binaries (initdb, pg_ctl, postgres) are neither on PATH nor in /usr/lib/postgresql/*/bin: install them (Debian: apt-get install postgresql); .ci/run does this")
}

func versionOf(binDir string) int {
	n, _ := strconv.Atoi(filepath.Base(filepath.Dir(binDir)))
	return n
}

// reachableByOthers reports whether every directory from / down to dir can
// be entered by a user that is neither its owner nor in its group.
func reachableByOthers(dir string) bool {
	dir, err := filepath.Abs(dir)
	if err != nil {
		return false
	}
	for d := dir; ; d = filepath.Dir(d) {
		fi, err := os.Stat(d)
		if err != nil || fi.Mode().Perm()&0o001 == 0 {
			return false
		}
		if d == filepath.Dir(d) {
			return true
		}
	}
}

func freePort() (int, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, fmt.Errorf("find a free loopback port: %w", err)
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port, nil
}

func (c *Cluster) dataDir() string { return filepath.Join(c.Dir, "data") }

// command runs one server binary, as the postgres user when we are root.
func (c *Cluster) command(name string, args ...string) *exec.Cmd {
	cmd := exec.Command(filepath.Join(c.bin, name), args...)
	cmd.Dir = c.Dir
	cmd.Env = append(os.Environ(), "LC_ALL=C", "LANG=C", "PGTZ=UTC")
	if c.cred != nil {
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: c.cred}
		cmd.Env = append(cmd.Env, "HOME="+c.Dir, "USER=postgres", "LOGNAME=postgres")
	}
	return cmd
}

func run(cmd *exec.Cmd) error {
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("%s: %w\n%s", strings.Join(cmd.Args, " "), err, strings.TrimSpace(out.String()))
	}
	return nil
}

func (c *Cluster) initdb() error {
	// --no-sync only skips initdb's own flush of the new files; the
	// server runs with fsync on.
	return run(c.command("initdb", "-D", c.dataDir(), "-U", Superuser, "--auth=trust",
		"-E", "UTF8", "--locale=C", "--no-sync", "--no-instructions"))
}

// Start starts the server (again, after Stop) and waits until it accepts
// connections.
func (c *Cluster) Start() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	opts := strings.Join([]string{
		"-c listen_addresses=127.0.0.1",
		"-p " + strconv.Itoa(c.Port),
		"-k " + c.Dir,
		"-c fsync=on",
		"-c max_connections=200",
		"-c shared_buffers=32MB",
		"-c log_min_messages=warning",
	}, " ")
	if err := run(c.command("pg_ctl", "-D", c.dataDir(), "-l", filepath.Join(c.Dir, "server.log"),
		"-w", "-t", "60", "-o", opts, "start")); err != nil {
		return fmt.Errorf("start PostgreSQL: %w\n%s", err, c.logTail())
	}
	c.running = true
	return nil
}

// Stop stops the server with a pg_ctl shutdown mode: "fast" for a clean
// stop, "immediate" for one that leaves crash recovery to the next start.
func (c *Cluster) Stop(mode string) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if !c.running {
		return nil
	}
	if err := run(c.command("pg_ctl", "-D", c.dataDir(), "-m", mode, "-w", "-t", "60", "stop")); err != nil {
		return err
	}
	c.running = false
	return nil
}

// Close stops the server and removes its directory.
func (c *Cluster) Close() error {
	err := c.Stop("fast")
	if rerr := os.RemoveAll(c.Dir); err == nil {
		err = rerr
	}
	return err
}

func (c *Cluster) logTail() string {
	b, _ := os.ReadFile(filepath.Join(c.Dir, "server.log"))
	if len(b) > 4000 {
		b = b[len(b)-4000:]
	}
	return string(b)
}

// watchdog starts a small shell that outlives this process only to stop
// the server (SIGQUIT: immediate shutdown) and remove its directory when
// the test binary ends without Close, e.g. killed by go test's timeout.
func (c *Cluster) watchdog() {
	script := `while kill -0 "$1" 2>/dev/null; do sleep 1; done
if [ -f "$2/data/postmaster.pid" ]; then kill -QUIT "$(head -n 1 "$2/data/postmaster.pid")" 2>/dev/null; sleep 2; fi
rm -rf "$2"`
	cmd := exec.Command("/bin/sh", "-c", script, "pgtest-watchdog", strconv.Itoa(os.Getpid()), c.Dir)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	if err := cmd.Start(); err == nil {
		go cmd.Wait() //nolint:errcheck // it outlives us by design
	}
}

// URL returns a connection URL for database db over loopback TCP.
func (c *Cluster) URL(db string) string {
	u := url.URL{
		Scheme:   "postgres",
		User:     url.User(Superuser),
		Host:     net.JoinHostPort("127.0.0.1", strconv.Itoa(c.Port)),
		Path:     "/" + db,
		RawQuery: "sslmode=disable",
	}
	return u.String()
}

// Exec runs one statement in database db.
func (c *Cluster) Exec(ctx context.Context, db, sql string) error {
	conn, err := pgx.Connect(ctx, c.URL(db))
	if err != nil {
		return err
	}
	defer conn.Close(ctx)
	_, err = conn.Exec(ctx, sql)
	return err
}

// NewDatabase creates an empty database and returns its URL; it is dropped
// when t ends.
func (c *Cluster) NewDatabase(t testing.TB) string {
	t.Helper()
	return c.NewDatabaseFrom(t, "template0")
}

// NewDatabaseFrom creates a database as a copy of template (which must
// have no open connection) and returns its URL; it is dropped when t ends.
func (c *Cluster) NewDatabaseFrom(t testing.TB, template string) string {
	t.Helper()
	name := fmt.Sprintf("t%d_%d", os.Getpid(), dbSeq.Add(1))
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := c.Exec(ctx, "postgres", "CREATE DATABASE "+pgx.Identifier{name}.Sanitize()+" TEMPLATE "+pgx.Identifier{template}.Sanitize()); err != nil {
		t.Fatalf("pgtest: create database %s: %v", name, err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		c.mu.Lock()
		running := c.running
		c.mu.Unlock()
		if !running {
			return
		}
		if err := c.Exec(ctx, "postgres", "DROP DATABASE IF EXISTS "+pgx.Identifier{name}.Sanitize()+" WITH (FORCE)"); err != nil {
			t.Errorf("pgtest: drop database %s: %v", name, err)
		}
	})
	return c.URL(name)
}

// DropListeners ends the connections that LISTEN in the database at url
// (a replica's event listener; see internal/pgstore), as a network that
// drops them would, once there is at least one: LISTEN gives no signal
// to wait on, so it looks every 10 ms until ctx ends.
func DropListeners(ctx context.Context, t testing.TB, url string) {
	t.Helper()
	db, err := pgx.Connect(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close(context.Background())
	for {
		var n int
		if err := db.QueryRow(ctx, `SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity
			WHERE datname = current_database() AND pid <> pg_backend_pid() AND query LIKE 'LISTEN %'`).Scan(&n); err != nil {
			t.Fatal(err)
		}
		if n > 0 {
			return
		}
		select {
		case <-ctx.Done():
			t.Fatal("no connection listens in the database")
		case <-time.After(10 * time.Millisecond): // polling interval, not synchronisation
		}
	}
}

// ServerCPU is the CPU time (user + system) the cluster's processes have
// used so far: the postmaster's own and that of the children it has
// reaped, plus each live child's (backends, WAL writer, checkpointer…).
// Benchmarks read it before and after a window to tell the database's
// cost per operation from the client's. Linux only (/proc); the figure
// has the kernel's clock-tick resolution (usually 10 ms).
func (c *Cluster) ServerCPU() (time.Duration, error) {
	b, err := os.ReadFile(filepath.Join(c.dataDir(), "postmaster.pid"))
	if err != nil {
		return 0, err
	}
	pid, err := strconv.Atoi(strings.TrimSpace(strings.SplitN(string(b), "\n", 2)[0]))
	if err != nil {
		return 0, fmt.Errorf("postmaster.pid: %w", err)
	}
	own, err := procTicks(pid)
	if err != nil {
		return 0, err
	}
	total := own.utime + own.stime + own.cutime + own.cstime
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return 0, err
	}
	for _, e := range entries {
		child, err := strconv.Atoi(e.Name())
		if err != nil || child == pid {
			continue
		}
		t, err := procTicks(child)
		if err != nil || t.ppid != pid {
			continue // gone meanwhile, or not the cluster's
		}
		total += t.utime + t.stime
	}
	// USER_HZ is 100 on every Linux that Go supports.
	return time.Duration(total) * 10 * time.Millisecond, nil
}

type ticks struct {
	ppid                         int
	utime, stime, cutime, cstime int64
}

// procTicks reads /proc/pid/stat (proc(5)): the fields after the
// command name, which is parenthesised and may hold spaces.
func procTicks(pid int) (ticks, error) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return ticks{}, err
	}
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	if i < 0 {
		return ticks{}, fmt.Errorf("/proc/%d/stat: no command name", pid)
	}
	f := strings.Fields(s[i+1:])
	// f[0] is field 3 (state): ppid is field 4, utime..cstime 14..17.
	if len(f) < 15 {
		return ticks{}, fmt.Errorf("/proc/%d/stat: %d fields", pid, len(f))
	}
	var t ticks
	t.ppid, _ = strconv.Atoi(f[1])
	for j, p := range []*int64{&t.utime, &t.stime, &t.cutime, &t.cstime} {
		*p, _ = strconv.ParseInt(f[11+j], 10, 64)
	}
	return t, nil
}
