package testkit

import (
	"testing"

	"mailroom/internal/core"
	"mailroom/internal/mail"
)

// OpenService opens the real file store over dir (with opts, for example a
// fault-injecting file system) and a core.Service over it, loaded as at
// start, as the server wires them. Any failure ends the test.
func OpenService(t testing.TB, dir string, opts ...mail.Option) *core.Service {
	t.Helper()
	store, err := mail.Open(dir, opts...)
	if err != nil {
		t.Fatalf("open store: %v", err)
	}
	t.Cleanup(func() { _ = store.Close() })
	svc := core.NewService(store, core.Options{})
	if err := svc.Open(t.Context()); err != nil {
		t.Fatalf("open service: %v", err)
	}
	return svc
}
