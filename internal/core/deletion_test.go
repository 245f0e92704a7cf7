package core_test

import (
	"strings"
	"testing"
	"time"

	"mailroom/internal/core"
	"mailroom/internal/mail"
	"mailroom/internal/testkit"
)

// TestDeleteTeamCancelsTurns: deleting a team while one of its turns runs
// is no longer refused: the turn is cancelled (it ends cancelled) and the
// team is gone within 5 s (docs/api.md, "Deletion always wins").
func TestDeleteTeamCancelsTurns(t *testing.T) {
	f := newFixture(t, nil)
	done := testkit.WaitingTurn(t, f.svc, f.team, "reader")
	begin := time.Now()
	if err := f.svc.DeleteTeam(core.AsAdmin(t.Context()), f.team, nil); err != nil {
		t.Fatalf("DeleteTeam while a turn runs: %v, want it deleted", err)
	}
	if took := time.Since(begin); took > 5*time.Second {
		t.Errorf("the deletion took %v, want under 5 s", took)
	}
	select {
	case res := <-done:
		if res.Status != core.TurnCancelled {
			t.Errorf("the running turn ended %q, want cancelled", res.Status)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the running turn did not end")
	}
	if _, err := f.svc.Team(core.AsAdmin(t.Context()), f.team); core.ErrorCode(err) != core.CodeNotFound {
		t.Errorf("the team after its deletion: %v, want not_found", err)
	}
}

// works are the two ways core keeps the turns a process runs and the
// deletions in progress: the runtime's Work (as a server runs), and core
// alone (a Service built without one).
var works = []struct {
	name string
	open func(testing.TB, core.Store) *core.Service
}{
	{"runtime", func(t testing.TB, store core.Store) *core.Service {
		return testkit.Serve(t, store, core.Options{})
	}},
	{"core-alone", func(t testing.TB, store core.Store) *core.Service {
		svc := core.NewService(store, core.Options{})
		if err := svc.Open(t.Context()); err != nil {
			t.Fatal(err)
		}
		return svc
	}},
}

// TestNoTurnBeginsWhileTeamIsDeleted: while a deletion of the team is in
// progress here (its release still running), no turn of it begins
// (not_found, "being deleted"), and the deletion then removes the team;
// a turn of another team begins meanwhile and shows its member active.
func TestNoTurnBeginsWhileTeamIsDeleted(t *testing.T) {
	for _, w := range works {
		t.Run(w.name, func(t *testing.T) {
			store, err := mail.Open(t.TempDir())
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = store.Close() })
			svc := w.open(t, store)
			admin := core.AsAdmin(t.Context())
			for _, name := range []string{"doomed", "other"} {
				if _, _, err := svc.CreateTeam(admin, core.TeamSpec{Name: name, Members: []core.MemberSpec{{Name: "reader"}}}); err != nil {
					t.Fatal(err)
				}
			}
			releasing, release := make(chan struct{}), make(chan struct{})
			deleted := make(chan error, 1)
			go func() {
				deleted <- svc.DeleteTeam(admin, "doomed", func() error {
					close(releasing)
					<-release
					return nil
				})
			}()
			<-releasing
			_, err = svc.BeginTurn(admin, "doomed", "reader", core.ModelRef{})
			if core.ErrorCode(err) != core.CodeNotFound || !strings.Contains(err.Error(), "being deleted") {
				t.Errorf("BeginTurn while the team is being deleted: %v, want not_found (being deleted)", err)
			}
			tr, err := svc.BeginTurn(admin, "other", "reader", core.ModelRef{})
			if err != nil {
				t.Fatalf("BeginTurn of another team meanwhile: %v", err)
			}
			if m := memberOf(t, svc, "other", "reader"); !m.Active {
				t.Errorf("other's reader while its turn runs = %+v, want active", m)
			}
			close(release)
			if err := <-deleted; err != nil {
				t.Fatalf("DeleteTeam: %v", err)
			}
			if _, err := tr.Run(admin, answer("done")); err != nil {
				t.Fatalf("other's turn: %v", err)
			}
			if m := memberOf(t, svc, "other", "reader"); m.Active || m.Turns != 1 {
				t.Errorf("other's reader after its turn = %+v, want one turn, not active", m)
			}
		})
	}
}
