package mail_test

import (
	"bytes"
	"fmt"
	"os"
	"sync"
	"testing"

	"mailroom/internal/core"
	"mailroom/internal/mail"
)

// TestKeptFileAppendOpensNothing: once the store has appended to an inbox,
// the next appends go through the file it kept open: nothing is opened,
// for writing or for reading.
func TestKeptFileAppendOpensNothing(t *testing.T) {
	ffs := newFaultFS()
	s, data := openStore(t, mail.WithFS(ffs))
	createTeam(t, s, "team")
	r := rules("reader", core.DefaultLimits())
	send(t, s, "team", r, letter(1, "lead", "one"))     // created whole
	send(t, s, "team", r, letter(2, "reviewer", "two")) // opened and kept
	want := append(line(letter(1, "lead", "one")), line(letter(2, "reviewer", "two"))...)
	writes, reads := ffs.writeOpens(), ffs.readOpens()
	for i := 3; i <= 6; i++ {
		m := letter(i, "lead", fmt.Sprintf("letter %d", i))
		send(t, s, "team", r, m)
		want = append(want, line(m)...)
	}
	if n, m := ffs.writeOpens()-writes, ffs.readOpens()-reads; n != 0 || m != 0 {
		t.Fatalf("four appends opened %d files for writing and %d for reading, want none", n, m)
	}
	wantBytes(t, "after six letters", readFile(t, inboxPath(data, "team", "reader")), want)
}

// TestEvictedFileReopens: with room for one open file, appends alternating
// between two inboxes each push the other's file out and open their own
// again; the bytes are the same as with every file kept.
func TestEvictedFileReopens(t *testing.T) {
	ffs := newFaultFS()
	s, data := openStore(t, mail.WithFS(ffs), mail.WithOpenFiles(1))
	createTeam(t, s, "team")
	members := []string{"reader", "reviewer"}
	want := map[string][]byte{}
	for i := 1; i <= 4; i++ {
		for _, m := range members {
			msg := core.Message{ID: fmt.Sprintf("%s-%d", m, i), Sender: "lead", Recipient: m, Body: fmt.Sprintf("letter %d", i)}
			before := ffs.writeOpens()
			send(t, s, "team", rules(m, core.DefaultLimits()), msg)
			want[m] = append(want[m], line(msg)...)
			// The first letter is a rename (no open); every later one
			// opens the file the other inbox pushed out.
			if opened := ffs.writeOpens() - before; i > 1 && opened != 1 {
				t.Fatalf("%s letter %d: %d opens for writing, want 1", m, i, opened)
			}
		}
	}
	for _, m := range members {
		wantBytes(t, m, readFile(t, inboxPath(data, "team", m)), want[m])
	}
}

// TestChangeWhileFileKept: the store keeps an inbox file open between
// appends, and someone else changes the inbox between LoadInbox and
// AppendInbox, with no load in between to notice. The descriptor still
// points at the old inode after a rename, so the append must compare the
// path with it: every change is found, a refused append writes neither the
// file at the path nor the old inode, and a file with the same letters
// takes the letter at the path.
func TestChangeWhileFileKept(t *testing.T) {
	tests := []struct {
		name   string
		change func(t *testing.T, path string, b []byte)
		ok     bool // the letters are unchanged and the append goes on
		// inPlace: the change is to the inode the store holds open.
		inPlace bool
	}{
		{"renamed over, other letters", func(t *testing.T, path string, b []byte) {
			writeFile(t, path+".new", bytes.Replace(b, []byte(`"two"`), []byte(`"TWO"`), 1))
			rename(t, path+".new", path)
		}, false, false},
		{"renamed over, same bytes", func(t *testing.T, path string, b []byte) {
			writeFile(t, path+".new", b)
			rename(t, path+".new", path)
		}, true, false},
		{"truncated", func(t *testing.T, path string, b []byte) {
			if err := os.Truncate(path, int64(bytes.IndexByte(b, '\n')+1)); err != nil {
				t.Fatal(err)
			}
		}, false, true},
		{"truncated to nothing", func(t *testing.T, path string, b []byte) {
			if err := os.Truncate(path, 0); err != nil {
				t.Fatal(err)
			}
		}, false, true},
		{"rewritten in place, same size", func(t *testing.T, path string, b []byte) {
			writeFile(t, path, bytes.Replace(b, []byte(`"two"`), []byte(`"TWO"`), 1))
		}, false, true},
		{"removed", func(t *testing.T, path string, b []byte) {
			if err := os.Remove(path); err != nil {
				t.Fatal(err)
			}
		}, false, false},
		{"replaced by a symlink to a copy", func(t *testing.T, path string, b []byte) {
			writeFile(t, path+".copy", b)
			if err := os.Remove(path); err != nil {
				t.Fatal(err)
			}
			if err := os.Symlink(path+".copy", path); err != nil {
				t.Fatal(err)
			}
		}, false, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s, data := openStore(t)
			createTeam(t, s, "team")
			r := rules("reader", core.DefaultLimits())
			path := inboxPath(data, "team", "reader")
			send(t, s, "team", r, letter(1, "reviewer", "one"))
			send(t, s, "team", r, letter(2, "lead", "two")) // the file is kept open now
			prev, err := s.LoadInbox(ctx, "team", r)
			if err != nil {
				t.Fatal(err)
			}
			old := readFile(t, path)
			// A second name for the inode the store holds open, to see
			// whether anything was written through the descriptor.
			if err := os.Link(path, path+".held"); err != nil {
				t.Fatal(err)
			}
			tt.change(t, path, old)
			after, _ := os.ReadFile(path)

			next := letter(3, "reviewer", "three")
			err = s.AppendInbox(ctx, "team", r, prev, next)
			if tt.ok {
				if err != nil {
					t.Fatalf("AppendInbox: %v", err)
				}
				wantBytes(t, "the file at the path", readFile(t, path), append(after, line(next)...))
				wantBytes(t, "the old inode", readFile(t, path+".held"), old)
				return
			}
			if core.ErrorCode(err) != core.CodeInboxCorrupt {
				t.Fatalf("AppendInbox = %v, want inbox_corrupt", err)
			}
			now, _ := os.ReadFile(path)
			wantBytes(t, "the file at the path", now, after)
			if !tt.inPlace {
				wantBytes(t, "the old inode", readFile(t, path+".held"), old)
			}
		})
	}
}

func rename(t *testing.T, from, to string) {
	t.Helper()
	if err := os.Rename(from, to); err != nil {
		t.Fatal(err)
	}
}

// TestStoreClose: Close releases the kept files; the store goes on
// working, opening and closing the file on every append.
func TestStoreClose(t *testing.T) {
	ffs := newFaultFS()
	s, _ := openStore(t, mail.WithFS(ffs))
	createTeam(t, s, "team")
	r := rules("reader", core.DefaultLimits())
	send(t, s, "team", r, letter(1, "lead", "one"))
	send(t, s, "team", r, letter(2, "lead", "two"))
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	for i := 3; i <= 4; i++ {
		before := ffs.writeOpens()
		send(t, s, "team", r, letter(i, "lead", "more"))
		if ffs.writeOpens()-before != 1 {
			t.Fatalf("letter %d after Close: %d opens, want 1", i, ffs.writeOpens()-before)
		}
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if got, err := s.LoadInbox(ctx, "team", r); err != nil || len(got) != 4 {
		t.Fatalf("LoadInbox = %d letters, %v", len(got), err)
	}
}

// TestKeptFilesUnderConcurrency: many teams appending at once through a
// set of open files smaller than their number, so files are pushed out
// while others are in use. Every letter lands once, in order.
func TestKeptFilesUnderConcurrency(t *testing.T) {
	s, data := openStore(t, mail.WithOpenFiles(3))
	var teams []string
	for i := range 8 {
		teams = append(teams, fmt.Sprintf("team-%d", i))
		createTeam(t, s, teams[i])
	}
	const letters = 20
	r := rules("lead", core.DefaultLimits())
	r.Limits.InboxMessages = letters
	errs := make(chan error, len(teams))
	var wg sync.WaitGroup
	for _, team := range teams {
		wg.Go(func() {
			for i := 1; i <= letters; i++ {
				prev, err := s.LoadInbox(ctx, team, r)
				if err == nil {
					err = s.AppendInbox(ctx, team, r, prev, core.Message{ID: fmt.Sprintf("lead-%d", i), Sender: "reader", Recipient: "lead", Body: team})
				}
				if err != nil {
					errs <- fmt.Errorf("%s letter %d: %w", team, i, err)
					return
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	for _, team := range teams {
		var want []byte
		for i := 1; i <= letters; i++ {
			want = append(want, line(core.Message{ID: fmt.Sprintf("lead-%d", i), Sender: "reader", Recipient: "lead", Body: team})...)
		}
		wantBytes(t, team, readFile(t, inboxPath(data, team, "lead")), want)
		fresh, err := mail.Open(data)
		if err != nil {
			t.Fatal(err)
		}
		got, err := fresh.LoadInbox(ctx, team, r)
		if err != nil || len(got) != letters {
			t.Fatalf("%s after a restart: %d letters, %v", team, len(got), err)
		}
	}
}
