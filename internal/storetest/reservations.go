package storetest

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"mailroom/internal/core"
)

// RunReservations runs the file reservations' part of the contract: they
// live in the team's state (TeamState.Reservations, ReservationSeq), so a
// store keeps them with the state and needs no code of its own, and a
// grant is decided in the team's unit of work, so that of concurrent
// conflicting requests exactly one is granted.
func RunReservations(t *testing.T, newStore func(t *testing.T) core.Store) {
	t.Run("ReservationsKeptWithTheState", func(t *testing.T) { testReservationsKept(t, newStore(t)) })
	t.Run("ConcurrentReservationsOneGrant", func(t *testing.T) { testReservationRace(t, newStore(t)) })
}

// testReservationsKept: reservations and the id counter a unit of work
// sets come back as stored; a rolled-back unit leaves them unchanged.
func testReservationsKept(t *testing.T, s core.Store) {
	create(t, s, Team("alpha", "reader"))
	at := time.Now().UTC().Truncate(time.Millisecond)
	reason := "refactor"
	res := core.Reservation{ID: "res-3", Member: "reader", Paths: []string{"internal/**", "{a,b}/*.go"}, Exclusive: true,
		Reason: &reason, CreatedAt: at, ExpiresAt: at.Add(time.Hour)}
	if err := core.Update(t.Context(), s, "alpha", func(tx core.TeamTx) error {
		st := tx.State()
		st.Reservations = []core.Reservation{res}
		st.ReservationSeq = 3
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	err := core.Update(t.Context(), s, "alpha", func(tx core.TeamTx) error {
		tx.State().Reservations = nil
		tx.State().ReservationSeq = 9
		return fmt.Errorf("roll back")
	})
	if err == nil {
		t.Fatal("a failing unit of work committed")
	}
	st := state(t, s, "alpha")
	if st.ReservationSeq != 3 || len(st.Reservations) != 1 {
		t.Fatalf("state = seq %d, %d reservations; want seq 3 and 1", st.ReservationSeq, len(st.Reservations))
	}
	got := st.Reservations[0]
	if got.ID != res.ID || got.Member != "reader" || fmt.Sprint(got.Paths) != fmt.Sprint(res.Paths) || !got.Exclusive ||
		got.Reason == nil || *got.Reason != reason || !got.ExpiresAt.Equal(res.ExpiresAt) || got.ReleasedAt != nil {
		t.Fatalf("reservation = %+v, want %+v", got, res)
	}
}

// RaceMembers is how many members race in testReservationRace.
const RaceMembers = 64

// testReservationRace: 64 members ask at once for overlapping exclusive
// reservations (each its own file under src/ and all of src/**): exactly
// one is granted, every other is reservation_conflict naming it.
func testReservationRace(t *testing.T, s core.Store) {
	names := make([]string, RaceMembers)
	for i := range names {
		names[i] = fmt.Sprintf("m%02d", i)
	}
	create(t, s, Team("race", names...))
	svc := core.NewService(s, core.Options{})
	if err := svc.Open(t.Context()); err != nil {
		t.Fatal(err)
	}
	var (
		wg      sync.WaitGroup
		mu      sync.Mutex
		granted []core.Reservation
		others  []error
	)
	start := make(chan struct{})
	for i, name := range names {
		wg.Go(func() {
			<-start
			ctx := core.AsMember(context.Background(), "race", name)
			r, err := svc.Reserve(ctx, "race", core.ReserveInput{Paths: []string{"src/**", fmt.Sprintf("src/f%d.go", i)}})
			mu.Lock()
			defer mu.Unlock()
			if err == nil {
				granted = append(granted, r)
			} else {
				others = append(others, err)
			}
		})
	}
	close(start)
	wg.Wait()
	if len(granted) != 1 {
		t.Fatalf("%d grants among %d racing members, want exactly 1", len(granted), RaceMembers)
	}
	for _, err := range others {
		if core.ErrorCode(err) != core.CodeReservationConflict {
			t.Fatalf("a refused member got %v, want reservation_conflict", err)
		}
	}
	st := state(t, s, "race")
	if len(st.Reservations) != 1 || st.Reservations[0].ID != granted[0].ID || st.ReservationSeq != 1 {
		t.Fatalf("stored = %+v (seq %d), want only %s", st.Reservations, st.ReservationSeq, granted[0].ID)
	}
}
