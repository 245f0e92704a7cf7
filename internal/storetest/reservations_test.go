package storetest_test

import (
	"context"
	"os"
	"testing"

	"mailroom/internal/core"
	"mailroom/internal/mail"
	"mailroom/internal/pgstore"
	"mailroom/internal/pgtest"
	"mailroom/internal/storetest"
)

func TestMain(m *testing.M) { os.Exit(pgtest.Main(m)) }

// TestReservationsContract runs the reservations' part of the store
// contract on both stores, the file store and PostgreSQL.
func TestReservationsContract(t *testing.T) {
	t.Run("file", func(t *testing.T) {
		storetest.RunReservations(t, func(t *testing.T) core.Store {
			s, err := mail.Open(t.TempDir())
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = s.Close() })
			return s
		})
	})
	t.Run("postgres", func(t *testing.T) {
		storetest.RunReservations(t, func(t *testing.T) core.Store {
			s, err := pgstore.Open(context.Background(), pgtest.New(t), pgstore.Options{})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { s.Close() })
			return s
		})
	})
}
