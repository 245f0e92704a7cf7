package core_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"mailroom/internal/core"
)

// resFixture is a team (lead, reader, reviewer) over a real file store with
// a clock the test moves.
type resFixture struct{ *idemFixture }

func newResFixture(t *testing.T, limits *core.Limits) resFixture {
	return resFixture{newIdemFixture(t, limits)}
}

func (f resFixture) as(member string) context.Context {
	if member == "admin" {
		return core.AsAdmin(f.t.Context())
	}
	return core.AsMember(f.t.Context(), "demo", member)
}

func (f resFixture) reserve(member string, exclusive bool, paths ...string) (core.Reservation, error) {
	return f.svc.Reserve(f.as(member), "demo", core.ReserveInput{Paths: paths, Exclusive: &exclusive})
}

func (f resFixture) mustReserve(member string, exclusive bool, paths ...string) core.Reservation {
	f.t.Helper()
	r, err := f.reserve(member, exclusive, paths...)
	if err != nil {
		f.t.Fatalf("Reserve(%s, exclusive %v, %v): %v", member, exclusive, paths, err)
	}
	return r
}

func (f resFixture) live() []string {
	f.t.Helper()
	rs, err := f.svc.ListReservations(f.as("admin"), "demo", core.ReservationFilter{})
	if err != nil {
		f.t.Fatal(err)
	}
	var ids []string
	for _, r := range rs {
		ids = append(ids, r.ID)
	}
	return ids
}

func TestReserveGrantsAndConflicts(t *testing.T) {
	f := newResFixture(t, nil)
	reason := "  refactor the store  "
	r1, err := f.svc.Reserve(f.as("reader"), "demo", core.ReserveInput{Paths: []string{"internal/**"}, Reason: &reason})
	if err != nil {
		t.Fatal(err)
	}
	if r1.ID != "res-1" || !r1.Exclusive || r1.Member != "reader" || r1.Reason == nil || *r1.Reason != "refactor the store" {
		t.Fatalf("first grant = %+v; want res-1, exclusive by default, reader, reason trimmed", r1)
	}
	if got, want := r1.ExpiresAt.Sub(r1.CreatedAt), time.Hour; got != want {
		t.Fatalf("default TTL = %v, want %v", got, want)
	}
	// The holder's own reservations never conflict.
	f.mustReserve("reader", true, "internal/core/x.go")

	_, err = f.reserve("reviewer", true, "cmd/main.go", "internal/core/x.go")
	wantCode(t, err, core.CodeReservationConflict)
	var rc *core.ReservationConflicts
	if !errors.As(err, &rc) || len(rc.Conflicts) != 2 || rc.Conflicts[0].ReservationID != "res-1" || rc.Conflicts[1].ReservationID != "res-2" {
		t.Fatalf("conflicts = %+v; want res-1 and res-2 named", rc)
	}
	if c := rc.Conflicts[0]; c.Member != "reader" || !slices.Equal(c.Paths, []string{"internal/**"}) || !c.ExpiresAt.Equal(r1.ExpiresAt) {
		t.Fatalf("conflict = %+v; want reader's internal/** until %v", c, r1.ExpiresAt)
	}
	if !strings.Contains(core.ErrorMessage(err), "res-1 of reader") {
		t.Fatalf("message %q does not name res-1 of reader", core.ErrorMessage(err))
	}
	// All or nothing: the path that was free was not reserved either.
	if got := f.live(); !slices.Equal(got, []string{"res-1", "res-2"}) {
		t.Fatalf("live after a refused grant = %v, want [res-1 res-2]", got)
	}
	// Shared next to shared is fine; shared next to exclusive is not.
	f.mustReserve("reviewer", false, "docs/**")
	f.mustReserve("lead", false, "docs/api.md")
	_, err = f.reserve("lead", false, "internal/core/y.go")
	wantCode(t, err, core.CodeReservationConflict)
	_, err = f.reserve("lead", true, "docs/{api,spec}.md")
	wantCode(t, err, core.CodeReservationConflict)
	// Patterns that share no path do not conflict.
	f.mustReserve("lead", true, "*.go", "web/static/*.js")
	// The refused grants used no id: the next is res-6.
	if r := f.mustReserve("reviewer", true, "e2e/**"); r.ID != "res-6" {
		t.Fatalf("next id = %s, want res-6", r.ID)
	}
}

func TestReserveBadInputStoresNothing(t *testing.T) {
	f := newResFixture(t, nil)
	long := strings.Repeat("a", 257)
	many := make([]string, 33)
	for i := range many {
		many[i] = fmt.Sprintf("p%d", i)
	}
	reason := strings.Repeat("r", 201)
	for name, in := range map[string]core.ReserveInput{
		"dotdot":    {Paths: []string{"a/../b"}},
		"leading /": {Paths: []string{"/etc/passwd"}},
		"too long":  {Paths: []string{long}},
		"too many":  {Paths: many},
		"none":      {Paths: nil},
		"empty":     {Paths: []string{""}},
		"syntax":    {Paths: []string{"a/[b"}},
		"ttl low":   {Paths: []string{"a"}, TTLSeconds: intPtr(59)},
		"ttl high":  {Paths: []string{"a"}, TTLSeconds: intPtr(86401)},
		"reason":    {Paths: []string{"a"}, Reason: &reason},
	} {
		_, err := f.svc.Reserve(f.as("reader"), "demo", in)
		if core.ErrorCode(err) != core.CodeValidation {
			t.Errorf("%s: err = %v, want validation_failed", name, err)
		}
	}
	if got := f.live(); len(got) != 0 {
		t.Fatalf("reservations after bad input = %v, want none", got)
	}
	_, err := f.svc.Reserve(f.as("admin"), "demo", core.ReserveInput{Paths: []string{"a"}})
	wantCode(t, err, core.CodeForbidden)
	if r := f.mustReserve("reader", true, "a"); r.ID != "res-1" {
		t.Fatalf("first id after refusals = %s, want res-1", r.ID)
	}
	_, err = f.svc.RenewReservation(f.as("reader"), "demo", "res-1", 30)
	wantCode(t, err, core.CodeValidation)
	_, err = f.svc.RenewReservation(f.as("reader"), "demo", "res-9", 60)
	wantCode(t, err, core.CodeNotFound)
	_, err = f.svc.ReleaseReservation(f.as("reader"), "demo", "nope")
	wantCode(t, err, core.CodeNotFound)
	for _, p := range [][]string{{"/abs"}, {"a/../b"}, {""}, nil} {
		_, err = f.svc.CheckPaths(f.as("reviewer"), "demo", p)
		wantCode(t, err, core.CodeValidation)
	}
}

func TestReservationRenewReleaseExpire(t *testing.T) {
	f := newResFixture(t, nil)
	r := f.mustReserve("reader", true, "src/**")
	_, err := f.svc.RenewReservation(f.as("reviewer"), "demo", r.ID, 600)
	wantCode(t, err, core.CodeForbidden)
	f.clock.advance(30 * time.Minute)
	renewed, err := f.svc.RenewReservation(f.as("reader"), "demo", r.ID, 7200)
	if err != nil {
		t.Fatal(err)
	}
	if want := f.clock.Now().Add(2 * time.Hour); !renewed.ExpiresAt.Equal(want) {
		t.Fatalf("renewed expires_at = %v, want %v", renewed.ExpiresAt, want)
	}
	// Past its expiry a reservation conflicts with nothing and cannot be
	// renewed or released.
	f.clock.advance(2*time.Hour + time.Second)
	f.mustReserve("reviewer", true, "src/main.go")
	_, err = f.svc.RenewReservation(f.as("reader"), "demo", r.ID, 600)
	wantCode(t, err, core.CodeReservationClosed)
	_, err = f.svc.ReleaseReservation(f.as("reader"), "demo", r.ID)
	wantCode(t, err, core.CodeReservationClosed)

	// Release: the holder, the lead or the admin; nobody else.
	a := f.mustReserve("reader", true, "a/**")
	b := f.mustReserve("reader", true, "b/**")
	c := f.mustReserve("reader", true, "c/**")
	_, err = f.svc.ReleaseReservation(f.as("reviewer"), "demo", a.ID)
	wantCode(t, err, core.CodeForbidden)
	for who, id := range map[string]string{"reader": a.ID, "lead": b.ID, "admin": c.ID} {
		got, err := f.svc.ReleaseReservation(f.as(who), "demo", id)
		if err != nil || got.ReleasedAt == nil {
			t.Fatalf("release %s by %s = %+v, %v; want released", id, who, got, err)
		}
	}
	_, err = f.svc.ReleaseReservation(f.as("reader"), "demo", a.ID)
	wantCode(t, err, core.CodeReservationClosed)
	f.mustReserve("reviewer", true, "a/x", "b/y", "c/z")

	all, err := f.svc.ListReservations(f.as("reader"), "demo", core.ReservationFilter{All: true})
	if err != nil || len(all) != 6 {
		t.Fatalf("?all = %d reservations, %v; want 6", len(all), err)
	}
	mine, _ := f.svc.ListReservations(f.as("reader"), "demo", core.ReservationFilter{Member: "reviewer"})
	if len(mine) != 2 {
		t.Fatalf("?member=reviewer = %+v; want its 2 live ones", mine)
	}
	at, _ := f.svc.ListReservations(f.as("reader"), "demo", core.ReservationFilter{Path: "a/x"})
	if len(at) != 1 || at[0].ID != "res-6" {
		t.Fatalf("?path=a/x = %+v; want res-6", at)
	}
}

func TestReservationLimitAndCheck(t *testing.T) {
	limits := core.DefaultLimits()
	limits.Reservations = 2
	f := newResFixture(t, &limits)
	f.mustReserve("reader", true, "internal/**")
	f.mustReserve("reviewer", false, "docs/*.md")
	_, err := f.reserve("lead", true, "web/**")
	wantCode(t, err, core.CodeReservationLimit)
	got, err := f.svc.CheckPaths(f.as("lead"), "demo", []string{"internal/core/a.go", "README.md", "docs/api.md", "docs/x/y.md"})
	if err != nil {
		t.Fatal(err)
	}
	want := []core.PathConflict{
		{Path: "internal/core/a.go", ReservationID: "res-1", Member: "reader", Exclusive: true},
		{Path: "docs/api.md", ReservationID: "res-2", Member: "reviewer", Exclusive: false},
	}
	if !slices.Equal(got, want) {
		t.Fatalf("check = %+v\nwant %+v", got, want)
	}
	// A member's own reservations are not conflicts of its check.
	own, _ := f.svc.CheckPaths(f.as("reader"), "demo", []string{"internal/core/a.go"})
	if len(own) != 0 {
		t.Fatalf("reader's check of its own path = %+v, want none", own)
	}
	// The limit is PATCHable like the others.
	three := 3
	if _, err := f.svc.UpdateLimits(f.as("admin"), "demo", core.LimitsUpdate{Reservations: &three}); err != nil {
		t.Fatal(err)
	}
	f.mustReserve("lead", true, "web/**")
	zero := 0
	_, err = f.svc.UpdateLimits(f.as("admin"), "demo", core.LimitsUpdate{Reservations: &zero})
	wantCode(t, err, core.CodeValidation)
}

func TestReservationsReleasedOnCloseResetAndRestart(t *testing.T) {
	f := newResFixture(t, nil)
	f.mustReserve("reader", true, "a/**")
	f.mustReserve("reviewer", true, "b/**")
	f.mustReserve("reviewer", true, "c/**")

	// Durable: a restart keeps them, and the next id.
	f.open()
	if got := f.live(); !slices.Equal(got, []string{"res-1", "res-2", "res-3"}) {
		t.Fatalf("live after restart = %v", got)
	}
	if _, err := f.svc.ResetMemberWith(f.as("admin"), "demo", "reviewer", core.ResetOptions{ClearHistory: true}); err != nil {
		t.Fatal(err)
	}
	if got := f.live(); !slices.Equal(got, []string{"res-1"}) {
		t.Fatalf("live after reviewer's reset = %v, want [res-1]", got)
	}
	// Shutdown approved: reader is closed and holds nothing.
	open, err := f.svc.OpenRequest(f.as("lead"), core.OpenInput{Team: "demo", Target: "reader", Kind: core.KindShutdown, Payload: "done"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.svc.Reply(f.as("reader"), core.ReplyInput{Team: "demo", RequestID: open.RequestID, Approve: true}); err != nil {
		t.Fatal(err)
	}
	if got := f.live(); len(got) != 0 {
		t.Fatalf("live after reader's shutdown = %v, want none", got)
	}
	_, err = f.reserve("reader", true, "z")
	wantCode(t, err, core.CodeMemberClosed)
	if r := f.mustReserve("reviewer", true, "a/**"); r.ID != "res-4" {
		t.Fatalf("next id = %s, want res-4 (never reused)", r.ID)
	}
}

// TestReservationEvents: every change is announced with the reservation
// as it is now.
func TestReservationEvents(t *testing.T) {
	f := newResFixture(t, nil)
	var got []string
	stop := f.svc.Subscribe(func(ev core.Event) {
		if ev.Type == core.EventReservation {
			r := ev.Data.(core.Reservation)
			got = append(got, fmt.Sprintf("%s:%v", r.ID, r.ReleasedAt != nil))
		}
	})
	defer stop()
	r := f.mustReserve("reader", true, "a")
	if _, err := f.svc.RenewReservation(f.as("reader"), "demo", r.ID, 120); err != nil {
		t.Fatal(err)
	}
	if _, err := f.svc.ReleaseReservation(f.as("reader"), "demo", r.ID); err != nil {
		t.Fatal(err)
	}
	if want := []string{"res-1:false", "res-1:false", "res-1:true"}; !slices.Equal(got, want) {
		t.Fatalf("events = %v, want %v", got, want)
	}
}

func intPtr(n int) *int { return &n }

// TestReservationEventCrossesProcesses: a reservation event decodes to the
// same Reservation, as another replica's subscribers receive it.
func TestReservationEventCrossesProcesses(t *testing.T) {
	reason := "why"
	at := time.Date(2026, 3, 1, 9, 0, 0, 0, time.UTC)
	r := core.Reservation{ID: "res-2", Member: "reader", Paths: []string{"a/**"}, Exclusive: true, Reason: &reason, CreatedAt: at, ExpiresAt: at.Add(time.Hour)}
	b, err := json.Marshal(core.Event{Type: core.EventReservation, Team: "demo", Data: r})
	if err != nil {
		t.Fatal(err)
	}
	var ev core.Event
	if err := json.Unmarshal(b, &ev); err != nil {
		t.Fatal(err)
	}
	got, ok := ev.Data.(core.Reservation)
	if !ok || got.ID != r.ID || *got.Reason != reason || !got.ExpiresAt.Equal(r.ExpiresAt) || got.ReleasedAt != nil {
		t.Fatalf("decoded %#v, want %+v", ev.Data, r)
	}
}
