package testkit

import (
	"sync"
	"testing"

	"mailroom/internal/core"
	"mailroom/internal/mail"
)

// OpenService opens the real file store over dir (with opts, for example a
// fault-injecting file system) and a core.Service over it, loaded as at
// start, as the server wires them. Any failure ends the test.
func OpenService(t testing.TB, dir string, opts ...mail.Option) *core.Service {
	t.Helper()
	return OpenServiceWith(t, dir, core.Options{}, opts...)
}

// OpenServiceWith is OpenService with the Service's options.
func OpenServiceWith(t testing.TB, dir string, svcOpts core.Options, opts ...mail.Option) *core.Service {
	t.Helper()
	store, err := mail.Open(dir, opts...)
	if err != nil {
		t.Fatalf("open store: %v", err)
	}
	t.Cleanup(func() { _ = store.Close() })
	Track(t, dir, store)
	svc := core.NewService(store, svcOpts)
	if err := svc.Open(t.Context()); err != nil {
		t.Fatalf("open service: %v", err)
	}
	return svc
}

// stores is the file store OpenService opened over each directory.
var stores sync.Map // dir → *mail.Store

// Track makes store the one Checkpoint finds for dir, until the test
// ends (a test that opens its store itself calls it).
func Track(t testing.TB, dir string, store *mail.Store) {
	stores.Store(dir, store)
	t.Cleanup(func() { stores.CompareAndDelete(dir, store) })
}

// Checkpoint writes everything the file store opened over dir holds in
// its write-ahead log into the team files (state.json, idempotency.log),
// for a test that reads those files.
func Checkpoint(t testing.TB, dir string) {
	t.Helper()
	s, ok := stores.Load(dir)
	if !ok {
		return
	}
	if err := s.(*mail.Store).Checkpoint(t.Context()); err != nil {
		t.Fatalf("checkpoint: %v", err)
	}
}

// MemberOf is member name of team as the team's view shows it (the
// admin's); any failure ends the test.
func MemberOf(t testing.TB, svc *core.Service, team, name string) core.MemberView {
	t.Helper()
	v, err := svc.Team(core.AsAdmin(t.Context()), team)
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range v.Members {
		if m.Name == name {
			return m
		}
	}
	t.Fatalf("no member %s", name)
	return core.MemberView{}
}
