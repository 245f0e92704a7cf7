package mail_test

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"testing"
	"time"

	"mailroom/internal/core"
	"mailroom/internal/mail"
)

var ctx = context.Background()

// openStore opens a store over a fresh data directory.
func openStore(t *testing.T, opts ...mail.Option) (*mail.Store, string) {
	t.Helper()
	data := t.TempDir()
	s, err := mail.Open(data, opts...)
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	t.Cleanup(func() { _ = s.Close() })
	return s, data
}

// teamState is a minimal state with the given members, all idle.
func teamState(name string, members ...string) *core.TeamState {
	st := &core.TeamState{
		Name:      name,
		CreatedAt: time.Date(2026, 11, 29, 10, 0, 0, 0, time.UTC),
		Limits:    core.DefaultLimits(),
		Requests:  []core.Request{},
	}
	for _, m := range members {
		st.Members = append(st.Members, core.MemberState{Name: m, Status: core.StatusIdle, History: []core.Entry{}})
	}
	return st
}

// createTeam creates team with members lead, reader and reviewer.
func createTeam(t *testing.T, s *mail.Store, team string) *core.TeamState {
	t.Helper()
	st := teamState(team, "lead", "reader", "reviewer")
	if err := s.CreateTeam(ctx, st); err != nil {
		t.Fatalf("CreateTeam(%s): %v", team, err)
	}
	return st
}

// rules are the inbox rules of recipient with the given registered members.
func rules(recipient string, limits core.Limits, members ...string) core.InboxRules {
	if len(members) == 0 {
		members = []string{"lead", "reader", "reviewer"}
	}
	return core.InboxRules{
		Recipient: recipient,
		Limits:    limits,
		IsMember:  func(name string) bool { return slices.Contains(members, name) },
	}
}

func inboxPath(data, team, member string) string {
	return filepath.Join(data, "teams", team, "inboxes", member+".jsonl")
}

// send loads the inbox and appends msg, as core does under the team lock.
func send(t *testing.T, s *mail.Store, team string, r core.InboxRules, msg core.Message) {
	t.Helper()
	prev, err := s.LoadInbox(ctx, team, r)
	if err != nil {
		t.Fatalf("LoadInbox before %s: %v", msg.ID, err)
	}
	if err := s.AppendInbox(ctx, team, r, prev, msg); err != nil {
		t.Fatalf("AppendInbox(%s): %v", msg.ID, err)
	}
}

func readFile(t *testing.T, path string) []byte {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func writeFile(t *testing.T, path string, data []byte) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, data, 0o600); err != nil {
		t.Fatal(err)
	}
}

// dirNames lists the names in dir, sorted.
func dirNames(t *testing.T, dir string) []string {
	t.Helper()
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	names := []string{}
	for _, e := range entries {
		names = append(names, e.Name())
	}
	sort.Strings(names)
	return names
}

// wantCorrupt checks that err is inbox_corrupt caused by cause.
func wantCorrupt(t *testing.T, what string, err error, cause error) {
	t.Helper()
	if code := core.ErrorCode(err); code != core.CodeInboxCorrupt {
		t.Fatalf("%s: code %q (err %v), want %q", what, code, err, core.CodeInboxCorrupt)
	}
	if !errors.Is(err, cause) {
		t.Fatalf("%s: err %v, want cause %v", what, err, cause)
	}
}

func wantBytes(t *testing.T, what string, got, want []byte) {
	t.Helper()
	if !bytes.Equal(got, want) {
		t.Fatalf("%s:\n got %q\nwant %q", what, got, want)
	}
}
