package mcpserver_test

import (
	"log/slog"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"mailroom/internal/core"
	"mailroom/internal/mcpserver"
	"mailroom/internal/pgstore"
	"mailroom/internal/pgtest"
	"mailroom/internal/testkit"
)

// TestToolsFollowLimitsChangedElsewhere (PostgreSQL, replicas): another
// replica changes a team's limits while this replica's LISTEN connection
// is gone, so the team event reaches nobody here. The resync that follows
// the listener's return rebuilds every open session's tools, and the
// client is told with notifications/tools/list_changed.
func TestToolsFollowLimitsChangedElsewhere(t *testing.T) {
	ctx := t.Context()
	place := testkit.NewPlace(t, testkit.BackendPostgres)
	svc := place.OpenService(t, core.Options{})
	h, err := mcpserver.New(svc, mcpserver.Options{AdminToken: adminToken, Logger: slog.New(slog.DiscardHandler), Workspaces: t.TempDir(), Live: testkit.Hub(svc)})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	e := &env{t: t, svc: svc, h: h, srv: srv, endpoint: srv.URL, tokens: map[string]map[string]string{}}
	reader, changed := e.connectWatchingTools(e.benchTeam())
	if got, want := toolDescription(t, reader, "run_main"), "up to 300 seconds"; !strings.Contains(got, want) {
		t.Fatalf("run_main before the change: %q, want it to say %q", got, want)
	}

	// The other replica: a bare store, whose writes announce nothing.
	other, err := pgstore.Open(ctx, place.DatabaseURL, pgstore.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()
	if err := core.Update(ctx, other, "bench", func(tx core.TeamTx) error {
		tx.State().Limits.PermissionTimeoutS = 600
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	select {
	case <-changed:
		t.Fatal("tools/list_changed before anything announced the change")
	default:
	}

	pgtest.DropListeners(ctx, t, place.DatabaseURL)
	select {
	case <-changed:
	case <-time.After(30 * time.Second): // a bound for the failure only; it comes at once
		t.Fatal("no notifications/tools/list_changed within 30 s of the resync")
	}
	if got, want := toolDescription(t, reader, "run_main"), "up to 600 seconds"; !strings.Contains(got, want) {
		t.Fatalf("run_main after the resync: %q, want it to say %q", got, want)
	}
}
