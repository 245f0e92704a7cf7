package httpapi_test

import (
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"testing"

	"mailroom/internal/core"
	"mailroom/internal/httpapi"
	"mailroom/internal/testkit"
)

// TestDamagedTeam restarts on a data directory whose team state was broken
// by someone else: the team is still shown, with damaged set, and its inbox
// is answered with inbox_corrupt rather than served as if nothing happened.
func TestDamagedTeam(t *testing.T) {
	fileOnly(t, "the team's state file is broken on disk")
	e := newEnv(t)
	a := e.newTeam("alpha", nil)
	want(t, e.send(a, "lead", "reader", "hello"), http.StatusCreated, "")
	if err := os.WriteFile(filepath.Join(e.dir, "teams", "alpha", "state.json"), []byte("{broken"), 0o600); err != nil {
		t.Fatal(err)
	}

	svc := e.place.OpenService(t, core.Options{})
	h, err := httpapi.NewHandler(svc, httpapi.Options{AdminToken: adminToken, Logger: slog.New(slog.DiscardHandler), Live: testkit.Hub(svc)})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	e.srv = srv // same validating client, restarted server

	r := e.get("/api/v1/teams/alpha", adminToken)
	want(t, r, http.StatusOK, "")
	if got := decode[httpapi.Team](t, r); !got.Damaged || got.Name != "alpha" {
		t.Fatalf("team = %+v, want damaged", got)
	}
	want(t, e.get("/api/v1/teams/alpha/members/reader/inbox", adminToken), http.StatusInternalServerError, "inbox_corrupt")
}
