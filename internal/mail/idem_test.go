package mail_test

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"testing"
	"time"

	"mailroom/internal/core"
	"mailroom/internal/mail"
)

func idemRecord(i int) core.IdempotencyRecord {
	return core.IdempotencyRecord{
		Member: "reviewer", Key: fmt.Sprintf("k%d", i), Fingerprint: "fp",
		Result: []byte(fmt.Sprintf(`{"id":"reader-%d","status":"queued"}`, i)),
		At:     time.Date(2026, 3, 1, 9, 0, i, 0, time.UTC),
		Letter: &core.Message{ID: fmt.Sprintf("reader-%d", i), Sender: "reviewer", Recipient: "reader", Body: "hello"},
	}
}

func idemPath(data, team string) string {
	return filepath.Join(data, "teams", team, "idempotency.log")
}

// TestIdempotencyLogRoundTrip: appended records come back in order, one
// line each, in a file of mode 0600 inside the team's directory; a team
// without a log has none.
func TestIdempotencyLogRoundTrip(t *testing.T) {
	s, data := openStore(t)
	createTeam(t, s, "demo")
	if got, err := s.LoadIdempotency(ctx, "demo"); err != nil || len(got) != 0 {
		t.Fatalf("LoadIdempotency of a team without a log = %v, %v; want none", got, err)
	}
	want := []core.IdempotencyRecord{idemRecord(1), idemRecord(2)}
	cancel := idemRecord(3)
	cancel.Cancelled, cancel.Result = true, nil
	want = append(want, cancel)
	for _, r := range want {
		if err := s.AppendIdempotency(ctx, "demo", r); err != nil {
			t.Fatal(err)
		}
	}
	got, err := s.LoadIdempotency(ctx, "demo")
	if err != nil || !reflect.DeepEqual(got, want) {
		t.Fatalf("LoadIdempotency = %+v, %v\nwant %+v", got, err, want)
	}
	fi, err := os.Stat(idemPath(data, "demo"))
	if err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("log mode = %v, %v; want 0600", fi, err)
	}
	b, _ := os.ReadFile(idemPath(data, "demo"))
	if n := bytes.Count(b, []byte{'\n'}); n != 3 || b[len(b)-1] != '\n' {
		t.Fatalf("log has %d lines, want 3 complete lines: %q", n, b)
	}
}

// TestIdempotencyLogTornTailRepaired: bytes after the last newline (an
// append cut short) are cut off at load, also when they are all the file
// holds, and the records before them are returned.
func TestIdempotencyLogTornTailRepaired(t *testing.T) {
	for _, keep := range []int{0, 1, 2} {
		t.Run(fmt.Sprintf("%d whole lines", keep), func(t *testing.T) {
			s, data := openStore(t)
			createTeam(t, s, "demo")
			var want []core.IdempotencyRecord
			for i := range keep {
				want = append(want, idemRecord(i))
				if err := s.AppendIdempotency(ctx, "demo", idemRecord(i)); err != nil {
					t.Fatal(err)
				}
			}
			path := idemPath(data, "demo")
			whole, _ := os.ReadFile(path)
			if err := os.WriteFile(path, append(bytes.Clone(whole), `{"member":"reviewer","ke`...), 0o600); err != nil {
				t.Fatal(err)
			}
			got, err := s.LoadIdempotency(ctx, "demo")
			if err != nil || !reflect.DeepEqual(got, want) {
				t.Fatalf("LoadIdempotency = %+v, %v; want %+v", got, err, want)
			}
			if after, _ := os.ReadFile(path); !bytes.Equal(after, whole) {
				t.Fatalf("log after the repair = %q, want %q", after, whole)
			}
			if err := s.AppendIdempotency(ctx, "demo", idemRecord(9)); err != nil {
				t.Fatal(err)
			}
			if got, err := s.LoadIdempotency(ctx, "demo"); err != nil || len(got) != keep+1 {
				t.Fatalf("after one more append: %d records, %v; want %d", len(got), err, keep+1)
			}
		})
	}
}

// TestIdempotencyLogDamageReported: a complete line that is not a record,
// or a symbolic link in the log's place, is an error and the file is left
// as it is.
func TestIdempotencyLogDamageReported(t *testing.T) {
	s, data := openStore(t)
	createTeam(t, s, "demo")
	path := idemPath(data, "demo")
	bad := []byte("{\"member\":\"reviewer\"}\n")
	if err := os.WriteFile(path, bad, 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := s.LoadIdempotency(ctx, "demo"); err == nil {
		t.Fatal("LoadIdempotency accepted a line without a key")
	}
	if after, _ := os.ReadFile(path); !bytes.Equal(after, bad) {
		t.Fatalf("damaged log was changed to %q", after)
	}
	target := filepath.Join(t.TempDir(), "elsewhere")
	if err := os.WriteFile(target, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Remove(path); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(target, path); err != nil {
		t.Fatal(err)
	}
	if _, err := s.LoadIdempotency(ctx, "demo"); err == nil {
		t.Fatal("LoadIdempotency followed a symbolic link")
	}
	if err := s.AppendIdempotency(ctx, "demo", idemRecord(1)); err == nil {
		t.Fatal("AppendIdempotency wrote through a symbolic link")
	}
	if b, _ := os.ReadFile(target); len(b) != 0 {
		t.Fatalf("the link's target was written: %q", b)
	}
}

// TestIdempotencyLogFailedAppend: an append that fails at any step leaves
// the log byte-for-byte as it was, through a kept file or a fresh one.
func TestIdempotencyLogFailedAppend(t *testing.T) {
	for _, c := range []struct {
		op   string
		kept int
	}{{"open", 0}, {"write", 0}, {"sync", 0}, {"write", 128}, {"sync", 128}} {
		op := c.op
		t.Run(fmt.Sprintf("%s, %d kept files", op, c.kept), func(t *testing.T) {
			ffs := newFaultFS()
			s, data := openStore(t, mail.WithFS(ffs), mail.WithOpenFiles(c.kept))
			createTeam(t, s, "demo")
			if err := s.AppendIdempotency(ctx, "demo", idemRecord(1)); err != nil {
				t.Fatal(err)
			}
			before, _ := os.ReadFile(idemPath(data, "demo"))
			ffs.arm(op)
			err := s.AppendIdempotency(ctx, "demo", idemRecord(2))
			ffs.arm()
			if err == nil || ffs.hits() == 0 {
				t.Fatalf("append with %s failing = %v (%d failures); want an error", op, err, ffs.hits())
			}
			if after, _ := os.ReadFile(idemPath(data, "demo")); !bytes.Equal(after, before) {
				t.Fatalf("log after a failed append = %q, want %q", after, before)
			}
		})
	}
}

// TestIdempotencyLogRewrite: a rewrite replaces the log with exactly the
// records given; a failed one keeps the old log.
func TestIdempotencyLogRewrite(t *testing.T) {
	ffs := newFaultFS()
	s, data := openStore(t, mail.WithFS(ffs))
	createTeam(t, s, "demo")
	for i := range 5 {
		if err := s.AppendIdempotency(ctx, "demo", idemRecord(i)); err != nil {
			t.Fatal(err)
		}
	}
	before, _ := os.ReadFile(idemPath(data, "demo"))
	ffs.arm("rename")
	if err := s.RewriteIdempotency(ctx, "demo", nil); err == nil {
		t.Fatal("rewrite with rename failing succeeded")
	}
	ffs.arm()
	if after, _ := os.ReadFile(idemPath(data, "demo")); !bytes.Equal(after, before) {
		t.Fatalf("log after a failed rewrite = %q, want %q", after, before)
	}
	want := []core.IdempotencyRecord{idemRecord(3), idemRecord(4)}
	if err := s.RewriteIdempotency(ctx, "demo", want); err != nil {
		t.Fatal(err)
	}
	if got, err := s.LoadIdempotency(ctx, "demo"); err != nil || !reflect.DeepEqual(got, want) {
		t.Fatalf("after the rewrite: %+v, %v; want %+v", got, err, want)
	}
}

// TestIdempotencyLogGoesWithTeam: deleting a team removes its log, and a
// new team of the same name starts without one: the file kept open for
// the old log is not written to.
func TestIdempotencyLogGoesWithTeam(t *testing.T) {
	s, data := openStore(t)
	createTeam(t, s, "demo")
	if err := s.AppendIdempotency(ctx, "demo", idemRecord(1)); err != nil {
		t.Fatal(err)
	}
	if err := s.DeleteTeam(ctx, "demo"); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Lstat(idemPath(data, "demo")); !os.IsNotExist(err) {
		t.Fatalf("log after DeleteTeam: %v, want it gone", err)
	}
	createTeam(t, s, "demo")
	if got, err := s.LoadIdempotency(ctx, "demo"); err != nil || len(got) != 0 {
		t.Fatalf("new team's records = %+v, %v; want none", got, err)
	}
	if err := s.AppendIdempotency(ctx, "demo", idemRecord(2)); err != nil {
		t.Fatal(err)
	}
	if got, err := s.LoadIdempotency(ctx, "demo"); err != nil || len(got) != 1 || got[0].Key != "k2" {
		t.Fatalf("new team's records = %+v, %v; want only k2", got, err)
	}
}

// TestIdempotencyLogKeptFileFollowsRewrite: after a rewrite (a new inode
// at the path) the next append goes to the new log, not through the file
// kept open for the old one.
func TestIdempotencyLogKeptFileFollowsRewrite(t *testing.T) {
	s, _ := openStore(t)
	createTeam(t, s, "demo")
	for i := range 3 {
		if err := s.AppendIdempotency(ctx, "demo", idemRecord(i)); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.RewriteIdempotency(ctx, "demo", []core.IdempotencyRecord{idemRecord(2)}); err != nil {
		t.Fatal(err)
	}
	if err := s.AppendIdempotency(ctx, "demo", idemRecord(3)); err != nil {
		t.Fatal(err)
	}
	want := []core.IdempotencyRecord{idemRecord(2), idemRecord(3)}
	if got, err := s.LoadIdempotency(ctx, "demo"); err != nil || !reflect.DeepEqual(got, want) {
		t.Fatalf("records = %+v, %v; want %+v", got, err, want)
	}
}
