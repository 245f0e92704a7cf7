package testkit

import (
	"context"
	"fmt"
	"os"
	"strings"
	"testing"

	"mailroom/internal/core"
	"mailroom/internal/mail"
	"mailroom/internal/pgstore"
	"mailroom/internal/pgtest"
)

// The store backends a package's tests run on.
const (
	BackendFile     = "file"
	BackendPostgres = "postgres"
)

// EnvBackends names the environment variable that narrows MainBackends to
// one backend (file or postgres); unset runs both.
const EnvBackends = "MAILROOM_TEST_BACKEND"

// MainBackends runs the package's tests once per backend, file first,
// setting *backend before each run, and then stops the test binary's
// PostgreSQL cluster (pgtest) if one was started. Each run is announced on
// stdout ("=== backend postgres"), so a failure names its backend. It
// returns the exit code for os.Exit.
func MainBackends(m *testing.M, backend *string) int {
	backends := []string{BackendFile, BackendPostgres}
	if only := strings.TrimSpace(os.Getenv(EnvBackends)); only != "" {
		if only != BackendFile && only != BackendPostgres {
			fmt.Fprintf(os.Stderr, "%s=%q: want %s or %s\n", EnvBackends, only, BackendFile, BackendPostgres)
			return 2
		}
		backends = []string{only}
	}
	code := 0
	for _, b := range backends {
		*backend = b
		fmt.Printf("=== backend %s\n", b)
		if c := m.Run(); c != 0 {
			fmt.Printf("--- FAIL: backend %s\n", b)
			code = c
		}
	}
	return pgtest.Finish(code)
}

// Place is where a test's service keeps its data: a data directory (the
// file store's data, and on every backend the workspaces) and, on
// PostgreSQL, a database of the test binary's cluster. Opening a second
// store on one Place is a restart (the file store) or another replica
// (PostgreSQL).
type Place struct {
	Backend     string
	Dir         string
	DatabaseURL string
}

// NewPlace returns a fresh, empty Place on backend: a temporary directory
// and, on PostgreSQL, a fresh database.
func NewPlace(t testing.TB, backend string) *Place {
	t.Helper()
	p := &Place{Backend: backend, Dir: t.TempDir()}
	switch backend {
	case BackendFile:
	case BackendPostgres:
		p.DatabaseURL = pgtest.New(t)
	default:
		t.Fatalf("testkit: unknown backend %q", backend)
	}
	return p
}

// OpenStore opens the store of p (the file store with opts; opts are the
// file store's and ignored on PostgreSQL). It is closed when the test ends.
func (p *Place) OpenStore(t testing.TB, opts ...mail.Option) core.Store {
	t.Helper()
	switch p.Backend {
	case BackendPostgres:
		s, err := pgstore.Open(context.Background(), p.DatabaseURL, pgstore.Options{MaxConns: 8})
		if err != nil {
			t.Fatalf("open store: %v", err)
		}
		t.Cleanup(func() { _ = s.Close() })
		return s
	default:
		s, err := mail.Open(p.Dir, opts...)
		if err != nil {
			t.Fatalf("open store: %v", err)
		}
		t.Cleanup(func() { _ = s.Close() })
		return s
	}
}

// OpenService opens p's store and a core.Service over it with copts,
// loaded as at start, as the server wires them.
func (p *Place) OpenService(t testing.TB, copts core.Options, opts ...mail.Option) *core.Service {
	t.Helper()
	return Serve(t, p.OpenStore(t, opts...), copts)
}
