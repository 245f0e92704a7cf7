package core_test

import (
	"fmt"
	"testing"

	"mailroom/internal/core"
	"mailroom/internal/testkit"
)

// BenchmarkReserveWith200Live: a grant of 32 patterns, released again
// (untimed cost included), on a team holding 200 live reservations of 32
// patterns each, on the file store.
func BenchmarkReserveWith200Live(b *testing.B) {
	svc := testkit.OpenService(b, b.TempDir())
	spec := core.TeamSpec{Name: "repo"}
	for i := range 20 {
		spec.Members = append(spec.Members, core.MemberSpec{Name: fmt.Sprintf("m%d", i)})
	}
	limits := core.DefaultLimits()
	limits.Reservations = 201
	spec.Limits = &limits
	if _, _, err := svc.CreateTeam(b.Context(), spec); err != nil {
		b.Fatal(err)
	}
	patterns := func(k int) []string {
		var out []string
		for i := range 32 {
			out = append(out, fmt.Sprintf("svc%d/part%d/**", k, i))
		}
		return out
	}
	for k := range 200 {
		ctx := core.AsMember(b.Context(), "repo", fmt.Sprintf("m%d", k%20))
		if _, err := svc.Reserve(ctx, "repo", core.ReserveInput{Paths: patterns(k)}); err != nil {
			b.Fatal(err)
		}
	}
	lead := core.AsMember(b.Context(), "repo", "lead")
	req := patterns(1000)
	for b.Loop() {
		r, err := svc.Reserve(lead, "repo", core.ReserveInput{Paths: req})
		if err != nil {
			b.Fatal(err)
		}
		if _, err := svc.ReleaseReservation(lead, "repo", r.ID); err != nil {
			b.Fatal(err)
		}
	}
}
