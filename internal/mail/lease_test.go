package mail_test

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"mailroom/internal/core"
	"mailroom/internal/mail"
)

// TestLeaseRenewalRecordSize: renewing a running turn's lease logs the
// lease, not the team: the record a renewal adds to the log is the same
// size whether the member's history holds 10 entries or 80.
func TestLeaseRenewalRecordSize(t *testing.T) {
	s, _ := openStore(t)
	grown := map[int]int64{}
	for _, entries := range []int{10, 80} {
		team := fmt.Sprintf("h%d", entries)
		st := teamState(team, "lead", "reader")
		for i := range entries {
			st.Members[1].History = append(st.Members[1].History, core.Entry{Role: "user", Text: strings.Repeat("history ", 40) + fmt.Sprint(i)})
		}
		if err := s.CreateTeam(ctx, st); err != nil {
			t.Fatal(err)
		}
		start := time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)
		setLease := func(exp time.Time) {
			if err := core.Update(ctx, s, team, func(tx core.TeamTx) error {
				tx.State().Member("reader").Lease = &core.Lease{Holder: "p-0123456789abcdef", Expires: exp}
				return nil
			}); err != nil {
				t.Fatal(err)
			}
		}
		setLease(start)
		before := mail.WALBytes(s)
		setLease(start.Add(10 * time.Second))
		grown[entries] = mail.WALBytes(s) - before
		if got := state(t, s, team).Member("reader"); got.Lease == nil || !got.Lease.Expires.Equal(start.Add(10*time.Second)) || len(got.History) != entries {
			t.Fatalf("%s: reader after the renewal = lease %+v, %d history entries; want the new lease and %d entries", team, got.Lease, len(got.History), entries)
		}
	}
	if grown[10] != grown[80] || grown[10] <= 0 || grown[10] > 400 {
		t.Fatalf("a renewal grew the log by %d bytes with 10 history entries and %d with 80, want the same few hundred", grown[10], grown[80])
	}
	t.Logf("a lease renewal logs %d bytes", grown[10])
}

func state(t *testing.T, s *mail.Store, team string) *core.TeamState {
	t.Helper()
	var st *core.TeamState
	if err := core.View(ctx, s, team, func(tx core.TeamTx) error { st = tx.State(); return nil }); err != nil {
		t.Fatal(err)
	}
	return st
}
