package mail_test

import (
	"testing"

	"mailroom/internal/core"
	"mailroom/internal/mail"
	"mailroom/internal/storetest"
)

// TestStoreContract runs the backend-independent store suite on the file
// store.
func TestStoreContract(t *testing.T) {
	storetest.Run(t, func(t *testing.T) core.Store {
		s, err := mail.Open(t.TempDir())
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = s.Close() })
		return s
	})
}
