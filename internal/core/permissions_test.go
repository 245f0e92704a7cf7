package core_test

import (
	"context"
	"encoding/json"
	"os"
	"sync"
	"testing"

	"mailroom/internal/core"
	"mailroom/internal/testkit"
)

// asking runs AskHost for reader in the background and returns the
// permission it recorded (once recorded) and a channel with its answer.
func (f *fixture) asking(ctx context.Context) (core.Permission, <-chan core.HostAnswer) {
	f.t.Helper()
	asked := make(chan core.Permission, 1)
	done := make(chan core.HostAnswer, 1)
	go func() {
		ans, err := f.svc.AskHost(ctx, f.team, "reader", "run_main", json.RawMessage(`{}`), "req-1", func(p core.Permission) { asked <- p })
		if err != nil {
			f.t.Errorf("AskHost: %v", err)
		}
		done <- ans
	}()
	select {
	case p := <-asked:
		return p, done
	case ans := <-done:
		f.t.Fatalf("AskHost answered %+v without asking", ans)
	}
	return core.Permission{}, nil
}

func TestAskHostAllowedByAdmin(t *testing.T) {
	f := newFixture(t, nil)
	var mu sync.Mutex
	var events []core.Permission
	testkit.Hub(f.svc).SetObserver(func(ev core.Event) {
		if ev.Type == "permission" {
			mu.Lock()
			events = append(events, ev.Data.(core.Permission))
			mu.Unlock()
		}
	})
	p, done := f.asking(t.Context())
	if p.ID != "perm-1" || p.Status != core.PermissionPending || p.Member != "reader" || p.Tool != "run_main" || p.PlanRequestID != "req-1" || p.DecidedAt != nil || p.DecidedBy != nil {
		t.Fatalf("asked permission = %+v, want perm-1 pending for reader's run_main under req-1, undecided", p)
	}
	if got, want := p.ExpiresAt.Sub(p.CreatedAt), core.DefaultPermissionTimeoutS*1e9; int64(got) != int64(want) {
		t.Fatalf("expires_at - created_at = %v, want the default timeout %ds", got, core.DefaultPermissionTimeoutS)
	}
	decided, err := f.svc.DecidePermission(t.Context(), f.team, p.ID, true)
	if err != nil {
		t.Fatal(err)
	}
	if decided.Status != core.PermissionAllowed || decided.DecidedBy == nil || *decided.DecidedBy != "admin" || decided.DecidedAt == nil {
		t.Fatalf("decision = %+v, want allowed by admin with a time", decided)
	}
	ans := <-done
	if !ans.Allowed || ans.Permission == nil || ans.Permission.Status != core.PermissionAllowed {
		t.Fatalf("answer = %+v, want allowed through the permission", ans)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(events) != 2 || events[0].Status != core.PermissionPending || events[1].Status != core.PermissionAllowed {
		t.Fatalf("permission events = %+v, want pending then allowed", events)
	}
}

func TestAskHostDeniedAndSecondDecisionNotPending(t *testing.T) {
	f := newFixture(t, nil)
	p, done := f.asking(t.Context())
	if _, err := f.svc.DecidePermission(t.Context(), f.team, p.ID, false); err != nil {
		t.Fatal(err)
	}
	if ans := <-done; ans.Allowed || ans.Permission.Status != core.PermissionDenied {
		t.Fatalf("answer = %+v, want denied", ans)
	}
	_, err := f.svc.DecidePermission(t.Context(), f.team, p.ID, true)
	wantCode(t, err, core.CodeNotPending)
	_, err = f.svc.DecidePermission(t.Context(), f.team, "perm-9", true)
	wantCode(t, err, core.CodeNotFound)
	list, err := f.svc.Permissions(t.Context(), f.team)
	if err != nil {
		t.Fatal(err)
	}
	if len(list) != 1 || list[0].Status != core.PermissionDenied {
		t.Fatalf("permissions = %+v, want the one denied", list)
	}
}

func TestAskHostExpires(t *testing.T) {
	limits := core.DefaultLimits()
	limits.PermissionTimeoutS = 1
	f := newFixture(t, &limits)
	p, done := f.asking(t.Context())
	ans := <-done
	if ans.Allowed || ans.Permission.Status != core.PermissionExpired || ans.Permission.DecidedBy != nil {
		t.Fatalf("answer = %+v, want expired, decided by no one", ans)
	}
	_, err := f.svc.DecidePermission(t.Context(), f.team, p.ID, true)
	wantCode(t, err, core.CodeNotPending)
}

func TestAskHostEndsWithItsTurn(t *testing.T) {
	f := newFixture(t, nil)
	ctx, cancel := context.WithCancel(t.Context())
	p, done := f.asking(ctx)
	cancel()
	if ans := <-done; ans.Allowed || ans.Permission.Status != core.PermissionExpired {
		t.Fatalf("answer after the turn was cancelled = %+v, want expired", ans)
	}
	_, err := f.svc.DecidePermission(t.Context(), f.team, p.ID, true)
	wantCode(t, err, core.CodeNotPending)
}

func TestAskHostPolicies(t *testing.T) {
	for _, tc := range []struct {
		policy string
		want   bool
	}{{core.HostAllow, true}, {core.HostDeny, false}} {
		t.Run(tc.policy, func(t *testing.T) {
			svc := newFixture(t, nil).svc
			if _, _, err := svc.CreateTeam(t.Context(), core.TeamSpec{Name: "policy", HostPermission: tc.policy, Members: []core.MemberSpec{{Name: "reader"}}}); err != nil {
				t.Fatal(err)
			}
			ans, err := svc.AskHost(t.Context(), "policy", "reader", "run_main", nil, "req-1", func(p core.Permission) { t.Errorf("asked %+v under policy %s", p, tc.policy) })
			if err != nil {
				t.Fatal(err)
			}
			if ans.Allowed != tc.want || ans.Policy != tc.policy || ans.Permission != nil {
				t.Fatalf("answer = %+v, want allowed=%v by policy %s without a permission", ans, tc.want, tc.policy)
			}
			list, _ := svc.Permissions(t.Context(), "policy")
			if len(list) != 0 {
				t.Fatalf("permissions = %+v, want none recorded", list)
			}
		})
	}
}

// A restart keeps every decision, and expires what was pending: the turn
// that waited for it is gone.
func TestPermissionsSurviveRestart(t *testing.T) {
	f := newFixture(t, nil)
	p1, done := f.asking(t.Context())
	if _, err := f.svc.DecidePermission(t.Context(), f.team, p1.ID, true); err != nil {
		t.Fatal(err)
	}
	<-done
	// The second one is still pending when the process "dies": the
	// restart opens a copy of the data directory taken while it waits.
	ctx, cancel := context.WithCancel(t.Context())
	p2, done2 := f.asking(ctx)
	copied := t.TempDir()
	if err := os.CopyFS(copied, os.DirFS(f.dir)); err != nil {
		t.Fatal(err)
	}
	cancel()
	<-done2
	f.dir = copied
	svc := f.reopen()
	list, err := svc.Permissions(t.Context(), f.team)
	if err != nil {
		t.Fatal(err)
	}
	if len(list) != 2 || list[0].ID != p1.ID || list[0].Status != core.PermissionAllowed || list[0].DecidedBy == nil || *list[0].DecidedBy != "admin" ||
		list[1].ID != p2.ID || list[1].Status != core.PermissionExpired || list[1].DecidedBy != nil {
		t.Fatalf("after restart = %+v, want %s allowed by admin and %s expired", list, p1.ID, p2.ID)
	}
	_, err = svc.DecidePermission(t.Context(), f.team, p2.ID, true)
	wantCode(t, err, core.CodeNotPending)
	// A new question after the restart takes a new number.
	f.svc = svc
	p3, done3 := f.asking(t.Context())
	if p3.ID != "perm-3" {
		t.Fatalf("next permission after restart = %s, want perm-3", p3.ID)
	}
	if _, err := svc.DecidePermission(t.Context(), f.team, p3.ID, false); err != nil {
		t.Fatal(err)
	}
	<-done3
}

// TestOnePendingPermissionPerMember: asking again while a question is
// pending records nothing new and returns the pending one; one decision
// answers both.
func TestOnePendingPermissionPerMember(t *testing.T) {
	f := newFixture(t, nil)
	first, done1 := f.asking(t.Context())
	second, done2 := f.asking(t.Context())
	if second.ID != first.ID {
		t.Fatalf("second question = %s, want the pending %s again", second.ID, first.ID)
	}
	perms, err := f.svc.Permissions(t.Context(), f.team)
	if err != nil {
		t.Fatal(err)
	}
	if len(perms) != 1 {
		t.Fatalf("permissions = %+v, want only %s", perms, first.ID)
	}
	if _, err := f.svc.DecidePermission(t.Context(), f.team, first.ID, true); err != nil {
		t.Fatal(err)
	}
	for i, done := range []<-chan core.HostAnswer{done1, done2} {
		if ans := <-done; !ans.Allowed || ans.Permission == nil || ans.Permission.ID != first.ID {
			t.Fatalf("answer %d = %+v, want allowed through %s", i+1, ans, first.ID)
		}
	}
	// Decided, it no longer blocks a new question.
	third, done3 := f.asking(t.Context())
	if third.ID == first.ID || third.Status != core.PermissionPending {
		t.Fatalf("question after the decision = %+v, want a new pending one", third)
	}
	if _, err := f.svc.DecidePermission(t.Context(), f.team, third.ID, false); err != nil {
		t.Fatal(err)
	}
	<-done3
}
