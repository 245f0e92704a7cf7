package httpapi_test

import (
	"fmt"
	"io"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"

	"mailroom/internal/httpapi"
	"mailroom/internal/testkit"
)

func (e *env) reservations(tm team, method, path, token string, body any) result {
	e.t.Helper()
	return e.do(call{method: method, path: "/api/v1/teams/" + tm.name + "/reservations" + path, token: token, json: body})
}

func (e *env) listReservations(tm team, query string) []httpapi.Reservation {
	e.t.Helper()
	r := e.reservations(tm, http.MethodGet, query, adminToken, nil)
	want(e.t, r, http.StatusOK, "")
	return decode[httpapi.ReservationList](e.t, r).Reservations
}

func reservationIDs(rs []httpapi.Reservation) []string {
	out := []string{}
	for _, r := range rs {
		out = append(out, r.ReservationID)
	}
	return out
}

// TestReservationRoutes: grant, conflict with the conflicts named and
// nothing reserved, check, list filters, renew, release and their
// refusals, limits.reservations, a restart (every backend: TestMain).
func TestReservationRoutes(t *testing.T) {
	e := newEnv(t)
	tm := e.newTeam("repo", map[string]int{"reservations": 3})
	lead, reader, reviewer := tm.tokens["lead"], tm.tokens["reader"], tm.tokens["reviewer"]
	other := e.newTeam("other", nil)

	r := e.reservations(tm, http.MethodPost, "", reader, map[string]any{"paths": []string{"internal/**"}, "reason": "store rework", "ttl_seconds": 600})
	want(t, r, http.StatusCreated, "")
	first := decode[httpapi.Reservation](t, r)
	if first.ReservationID != "res-1" || first.Member != "reader" || !first.Exclusive || first.Reason == nil || *first.Reason != "store rework" ||
		first.ExpiresAt.Sub(first.CreatedAt).Seconds() != 600 || first.ReleasedAt != nil {
		t.Fatalf("granted = %+v; want res-1 of reader, exclusive, 600 s", first)
	}

	r = e.reservations(tm, http.MethodPost, "", reviewer, map[string]any{"paths": []string{"docs/**", "internal/core/x.go"}})
	want(t, r, http.StatusConflict, "reservation_conflict")
	p := decode[httpapi.Problem](t, r)
	if p.Conflicts == nil || len(*p.Conflicts) != 1 {
		t.Fatalf("problem = %s; want one conflict", r.body)
	}
	if c := (*p.Conflicts)[0]; c.ReservationID != "res-1" || c.Member != "reader" || !slices.Equal(c.Paths, []string{"internal/**"}) || !c.ExpiresAt.Equal(first.ExpiresAt) {
		t.Fatalf("conflict = %+v; want res-1 of reader on internal/** until %v", c, first.ExpiresAt)
	}
	if got := reservationIDs(e.listReservations(tm, "")); !slices.Equal(got, []string{"res-1"}) {
		t.Fatalf("after a refused grant: %v, want only res-1 (all or nothing)", got)
	}
	r = e.reservations(tm, http.MethodPost, "", reviewer, map[string]any{"paths": []string{"docs/**"}, "exclusive": false})
	want(t, r, http.StatusCreated, "")

	long := strings.Repeat("a", 257)
	many := make([]string, 33)
	for i := range many {
		many[i] = fmt.Sprintf("p%d", i)
	}
	for _, tc := range []struct {
		name, method, path, token string
		body                      any
		status                    int
		code                      string
	}{
		{"ErrDotDot", http.MethodPost, "", lead, map[string]any{"paths": []string{"a/../b"}}, 400, "validation_failed"},
		{"ErrLeadingSlash", http.MethodPost, "", lead, map[string]any{"paths": []string{"/etc"}}, 400, "validation_failed"},
		{"ErrTooLong", http.MethodPost, "", lead, map[string]any{"paths": []string{long}}, 400, "validation_failed"},
		{"ErrTooMany", http.MethodPost, "", lead, map[string]any{"paths": many}, 400, "validation_failed"},
		{"ErrNoPaths", http.MethodPost, "", lead, map[string]any{"paths": []string{}}, 400, "validation_failed"},
		{"ErrBadGlob", http.MethodPost, "", lead, map[string]any{"paths": []string{"a/[b"}}, 400, "validation_failed"},
		{"ErrTTL", http.MethodPost, "", lead, map[string]any{"paths": []string{"a"}, "ttl_seconds": 59}, 400, "validation_failed"},
		{"ErrTTLHigh", http.MethodPost, "", lead, map[string]any{"paths": []string{"a"}, "ttl_seconds": 86401}, 400, "validation_failed"},
		{"ErrReason", http.MethodPost, "", lead, map[string]any{"paths": []string{"a"}, "reason": strings.Repeat("r", 201)}, 400, "validation_failed"},
		{"ErrUnknownField", http.MethodPost, "", lead, map[string]any{"paths": []string{"a"}, "ttl": 60}, 400, "validation_failed"},
		{"ErrAdminReserves", http.MethodPost, "", adminToken, map[string]any{"paths": []string{"a"}}, 403, "forbidden"},
		{"ErrOtherTeam", http.MethodPost, "", other.tokens["lead"], map[string]any{"paths": []string{"a"}}, 403, "forbidden"},
		{"ErrNoToken", http.MethodGet, "", "", nil, 401, "unauthorized"},
		{"ErrRenewOther", http.MethodPost, "/res-1/renew", reviewer, map[string]any{"ttl_seconds": 600}, 403, "forbidden"},
		{"ErrRenewTTL", http.MethodPost, "/res-1/renew", reader, map[string]any{"ttl_seconds": 10}, 400, "validation_failed"},
		{"ErrRenewUnknown", http.MethodPost, "/res-99/renew", reader, map[string]any{"ttl_seconds": 600}, 404, "not_found"},
		{"ErrBadID", http.MethodDelete, "/x-1", reader, nil, 400, "validation_failed"},
		{"ErrReleaseOther", http.MethodDelete, "/res-1", reviewer, nil, 403, "forbidden"},
		{"ErrCheckAbsolute", http.MethodPost, "/check", reviewer, map[string]any{"paths": []string{"/etc/passwd"}}, 400, "validation_failed"},
		{"ErrCheckDotDot", http.MethodPost, "/check", reviewer, map[string]any{"paths": []string{"a/../../b"}}, 400, "validation_failed"},
		{"ErrCheckAdmin", http.MethodPost, "/check", adminToken, map[string]any{"paths": []string{"a"}}, 403, "forbidden"},
		{"ErrPathQuery", http.MethodGet, "?path=../x", reader, nil, 400, "validation_failed"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			want(t, e.reservations(tm, tc.method, tc.path, tc.token, tc.body), tc.status, tc.code)
		})
	}
	if got := reservationIDs(e.listReservations(tm, "?all=true")); !slices.Equal(got, []string{"res-1", "res-2"}) {
		t.Fatalf("after bad input: %v, want [res-1 res-2]", got)
	}

	// check: the paths others hold, shared ones too; never the caller's own.
	r = e.reservations(tm, http.MethodPost, "/check", lead, map[string]any{"paths": []string{"internal/core/a.go", "README.md", "docs/api.md"}})
	want(t, r, http.StatusOK, "")
	got := decode[httpapi.PathCheckResult](t, r).Conflicts
	wantCheck := []httpapi.PathConflict{
		{Path: "internal/core/a.go", ReservationID: "res-1", Member: "reader", Exclusive: true},
		{Path: "docs/api.md", ReservationID: "res-2", Member: "reviewer", Exclusive: false},
	}
	if !slices.Equal(got, wantCheck) {
		t.Fatalf("check = %+v\nwant %+v", got, wantCheck)
	}
	r = e.reservations(tm, http.MethodPost, "/check", reader, map[string]any{"paths": []string{"internal/core/a.go"}})
	if got := decode[httpapi.PathCheckResult](t, r).Conflicts; len(got) != 0 {
		t.Fatalf("reader's check of its own path = %+v, want []", got)
	}
	if got := reservationIDs(e.listReservations(tm, "?path=docs/api.md")); !slices.Equal(got, []string{"res-2"}) {
		t.Fatalf("?path=docs/api.md = %v, want [res-2]", got)
	}
	if got := reservationIDs(e.listReservations(tm, "?member=reader")); !slices.Equal(got, []string{"res-1"}) {
		t.Fatalf("?member=reader = %v, want [res-1]", got)
	}

	// The limit (3 here) and its PATCH.
	want(t, e.reservations(tm, http.MethodPost, "", lead, map[string]any{"paths": []string{"web/**"}}), http.StatusCreated, "")
	want(t, e.reservations(tm, http.MethodPost, "", lead, map[string]any{"paths": []string{"cmd/**"}}), http.StatusConflict, "reservation_limit")
	r = e.patch("/api/v1/teams/repo", adminToken, `{"limits": {"reservations": 4}}`)
	want(t, r, http.StatusOK, "")
	if got := decode[httpapi.Team](t, r).Limits.Reservations; got != 4 {
		t.Fatalf("limits.reservations = %d, want 4", got)
	}
	want(t, e.reservations(tm, http.MethodPost, "", lead, map[string]any{"paths": []string{"cmd/**"}}), http.StatusCreated, "")

	// Renew by the holder; release by the holder, lead or admin.
	r = e.reservations(tm, http.MethodPost, "/res-1/renew", reader, map[string]any{"ttl_seconds": 7200})
	want(t, r, http.StatusOK, "")
	if got := decode[httpapi.Reservation](t, r); !got.ExpiresAt.After(first.ExpiresAt) {
		t.Fatalf("renewed expires_at %v is not after %v", got.ExpiresAt, first.ExpiresAt)
	}
	r = e.reservations(tm, http.MethodDelete, "/res-1", lead, nil)
	want(t, r, http.StatusOK, "")
	if got := decode[httpapi.Reservation](t, r); got.ReleasedAt == nil {
		t.Fatalf("released = %+v, want released_at set", got)
	}
	want(t, e.reservations(tm, http.MethodDelete, "/res-1", reader, nil), http.StatusConflict, "reservation_closed")
	want(t, e.reservations(tm, http.MethodPost, "/res-1/renew", reader, map[string]any{"ttl_seconds": 600}), http.StatusConflict, "reservation_closed")
	want(t, e.reservations(tm, http.MethodDelete, "/res-2", adminToken, nil), http.StatusOK, "")

	// Restarted over the same data: the live ones and the counter are kept.
	if c, ok := e.store.(io.Closer); ok {
		if err := c.Close(); err != nil {
			t.Fatal(err)
		}
	}
	e2 := startEnv(t, envOptions{place: e.place})
	if got := reservationIDs(e2.listReservations(tm, "")); !slices.Equal(got, []string{"res-3", "res-4"}) {
		t.Fatalf("live after restart = %v, want [res-3 res-4]", got)
	}
	r = e2.reservations(tm, http.MethodPost, "", reader, map[string]any{"paths": []string{"internal/**"}})
	want(t, r, http.StatusCreated, "")
	if got := decode[httpapi.Reservation](t, r); got.ReservationID != "res-5" {
		t.Fatalf("next id after restart = %s, want res-5", got.ReservationID)
	}
}

// TestReservationRace: 64 requests from the 33 members of a team race for
// overlapping exclusive reservations; one member wins (it may hold two of
// them, its own never conflict), every other request is
// reservation_conflict naming only the winner's. On PostgreSQL half the
// requests go to a second replica over the same database.
func TestReservationRace(t *testing.T) {
	e := newEnv(t)
	members := []map[string]string{}
	for i := range 32 {
		members = append(members, map[string]string{"name": fmt.Sprintf("m%02d", i)})
	}
	r := e.post("/api/v1/teams", adminToken, map[string]any{"name": "race", "members": members})
	want(t, r, http.StatusCreated, "")
	tm := team{name: "race", tokens: map[string]string{}}
	var names []string
	for _, m := range decode[httpapi.CreatedTeam](t, r).Members {
		tm.tokens[m.Name] = m.Token
		names = append(names, m.Name)
	}
	envs := []*env{e}
	if backend == testkit.BackendPostgres {
		envs = append(envs, startEnv(t, envOptions{place: e.place}))
	}
	var (
		wg       sync.WaitGroup
		mu       sync.Mutex
		granted  []httpapi.Reservation
		refusals []httpapi.Problem
	)
	start := make(chan struct{})
	for i := range 64 {
		name := names[i%len(names)]
		ev := envs[i%len(envs)]
		wg.Go(func() {
			<-start
			res := ev.reservations(tm, http.MethodPost, "", tm.tokens[name], map[string]any{"paths": []string{"src/**", fmt.Sprintf("src/f%d.go", i)}})
			mu.Lock()
			defer mu.Unlock()
			switch res.status {
			case http.StatusCreated:
				granted = append(granted, decode[httpapi.Reservation](t, res))
			case http.StatusConflict:
				refusals = append(refusals, decode[httpapi.Problem](t, res))
			default:
				t.Errorf("status %d: %s", res.status, res.body)
			}
		})
	}
	close(start)
	wg.Wait()
	if len(granted) == 0 || len(granted) > 2 {
		t.Fatalf("%d grants, want 1 or 2 (the winner's own)", len(granted))
	}
	winner := granted[0].Member
	for _, g := range granted {
		if g.Member != winner {
			t.Fatalf("grants to %s and %s: two members hold overlapping exclusive reservations", winner, g.Member)
		}
	}
	if len(refusals)+len(granted) != 64 {
		t.Fatalf("%d grants + %d refusals, want 64 answers", len(granted), len(refusals))
	}
	for _, p := range refusals {
		if p.Code != "reservation_conflict" || p.Conflicts == nil || len(*p.Conflicts) == 0 {
			t.Fatalf("refusal = %+v, want reservation_conflict with conflicts", p)
		}
		for _, c := range *p.Conflicts {
			if c.Member != winner {
				t.Fatalf("a refusal names %s's reservation, want only the winner %s", c.Member, winner)
			}
		}
	}
	if got := e.listReservations(tm, ""); len(got) != len(granted) {
		t.Fatalf("stored %d live reservations, want the %d granted", len(got), len(granted))
	}
}
