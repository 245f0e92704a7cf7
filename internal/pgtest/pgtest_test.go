package pgtest_test

import (
	"context"
	"os"
	"path/filepath"
	"strconv"
	"testing"

	"github.com/jackc/pgx/v5"

	"mailroom/internal/pgtest"
)

func TestMain(m *testing.M) { os.Exit(pgtest.Main(m)) }

// TestClusterIsPrivate checks what the harness promises: a loopback server
// of our own with fsync on, its socket in the cluster's directory, and a
// fresh database per test.
func TestClusterIsPrivate(t *testing.T) {
	ctx := context.Background()
	c := pgtest.Shared(t)
	url := pgtest.New(t)
	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	var fsync, addrs, sockDir string
	var tables int
	if err := conn.QueryRow(ctx, `SELECT current_setting('fsync'), current_setting('listen_addresses'),
		current_setting('unix_socket_directories'),
		(SELECT count(*) FROM pg_tables WHERE schemaname = 'public')`).Scan(&fsync, &addrs, &sockDir, &tables); err != nil {
		t.Fatal(err)
	}
	if fsync != "on" || addrs != "127.0.0.1" || sockDir != c.Dir || tables != 0 {
		t.Errorf("fsync %q, listen_addresses %q, socket dir %q (want %q), %d tables", fsync, addrs, sockDir, c.Dir, tables)
	}
	if _, err := os.Stat(filepath.Join(c.Dir, ".s.PGSQL."+strconv.Itoa(c.Port))); err != nil {
		t.Errorf("no socket in the cluster directory: %v", err)
	}
	if _, err := conn.Exec(ctx, `CREATE TABLE mine (x int)`); err != nil {
		t.Fatal(err)
	}
	// Another test's database does not see this one's table.
	other := c.NewDatabase(t)
	conn2, err := pgx.Connect(ctx, other)
	if err != nil {
		t.Fatal(err)
	}
	defer conn2.Close(ctx)
	if err := conn2.QueryRow(ctx, `SELECT count(*) FROM pg_tables WHERE schemaname = 'public'`).Scan(&tables); err != nil || tables != 0 {
		t.Errorf("fresh database has %d tables (err %v)", tables, err)
	}
}

// TestStopAndStart checks that a test can take the server away and bring
// it back (immediate stop: crash recovery at the next start), and that a
// committed row survives.
func TestStopAndStart(t *testing.T) {
	ctx := context.Background()
	c := pgtest.Shared(t)
	url := c.NewDatabase(t)
	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := conn.Exec(ctx, `CREATE TABLE kept (x int); INSERT INTO kept VALUES (7)`); err != nil {
		t.Fatal(err)
	}
	conn.Close(ctx)
	if err := c.Stop("immediate"); err != nil {
		t.Fatal(err)
	}
	if _, err := pgx.Connect(ctx, url); err == nil {
		t.Fatal("connected to a stopped server")
	}
	if err := c.Start(); err != nil {
		t.Fatal(err)
	}
	conn, err = pgx.Connect(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	var x int
	if err := conn.QueryRow(ctx, `SELECT x FROM kept`).Scan(&x); err != nil || x != 7 {
		t.Fatalf("after restart: x=%d err=%v", x, err)
	}
}
