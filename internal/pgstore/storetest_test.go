package pgstore_test

import (
	"testing"

	"mailroom/internal/core"
	"mailroom/internal/pgtest"
	"mailroom/internal/storetest"
)

// TestStoreContract runs the backend-independent store suite on
// PostgreSQL, each subtest on a fresh database of the test binary's cluster.
func TestStoreContract(t *testing.T) {
	storetest.Run(t, func(t *testing.T) core.Store { return open(t, pgtest.New(t)) })
}
