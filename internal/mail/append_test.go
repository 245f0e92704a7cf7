package mail_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"mailroom/internal/core"
	"mailroom/internal/mail"
)

// letter is letter i of reader's inbox.
func letter(i int, sender, body string) core.Message {
	return core.Message{ID: fmt.Sprintf("reader-%d", i), Sender: sender, Recipient: "reader", Body: body}
}

func line(m core.Message) []byte { return core.EncodeInboxLine(m) }

// TestLargeInboxAppendReadsNothing: a send into an inbox of 10,000 letters
// appends one line, and once the store has written the file it neither
// reads it for the next load nor for the next append.
func TestLargeInboxAppendReadsNothing(t *testing.T) {
	ffs := newFaultFS()
	s, data := openStore(t, mail.WithFS(ffs))
	createTeam(t, s, "big")
	limits := core.DefaultLimits()
	limits.InboxMessages = 20000
	limits.InboxBytes = 10 << 20
	r := rules("reader", limits)
	want := fillInbox(t, data, "big", 10000)
	path := inboxPath(data, "big", "reader")

	// A file the store did not write is read and validated in full.
	prev, err := s.LoadInbox(ctx, "big", r)
	if err != nil || len(prev) != 10000 {
		t.Fatalf("LoadInbox = %d letters, %v", len(prev), err)
	}
	first := letter(10001, "reviewer", "the ten thousand and first")
	if err := s.AppendInbox(ctx, "big", r, prev, first); err != nil {
		t.Fatal(err)
	}
	want = append(want, line(first)...)
	wantBytes(t, "after the first append", readFile(t, path), want)

	reads := ffs.readOpens()
	for i := 10002; i <= 10004; i++ {
		prev, err := s.LoadInbox(ctx, "big", r)
		if err != nil || len(prev) != i-1 {
			t.Fatalf("LoadInbox before %d = %d letters, %v", i, len(prev), err)
		}
		msg := letter(i, "lead", fmt.Sprintf("letter %d", i))
		if err := s.AppendInbox(ctx, "big", r, prev, msg); err != nil {
			t.Fatal(err)
		}
		want = append(want, line(msg)...)
	}
	got, err := s.LoadInbox(ctx, "big", r)
	if err != nil || len(got) != 10004 || got[10003].Body != "letter 10004" {
		t.Fatalf("LoadInbox = %d letters, %v", len(got), err)
	}
	if n := ffs.readOpens() - reads; n != 0 {
		t.Fatalf("the inbox was opened for reading %d times after the store wrote it", n)
	}
	wantBytes(t, "after four appends", readFile(t, path), want)

	// A fresh store (a restart) reads the same letters from the file.
	s2, err := mail.Open(data)
	if err != nil {
		t.Fatal(err)
	}
	again, err := s2.LoadInbox(ctx, "big", r)
	if err != nil || !reflect.DeepEqual(again, got) {
		t.Fatalf("after a restart: %d letters, %v", len(again), err)
	}
}

// TestLoadInboxResultIsIsolated: a caller appending to or reusing what
// LoadInbox returned cannot change what the store holds.
func TestLoadInboxResultIsIsolated(t *testing.T) {
	s, _ := openStore(t)
	createTeam(t, s, "team")
	r := rules("reader", core.DefaultLimits())
	send(t, s, "team", r, letter(1, "lead", "one"))
	send(t, s, "team", r, letter(2, "lead", "two"))
	prev, err := s.LoadInbox(ctx, "team", r)
	if err != nil {
		t.Fatal(err)
	}
	if len(prev) != cap(prev) {
		t.Fatalf("len %d, cap %d: an append by the caller would write into the store's array", len(prev), cap(prev))
	}
	_ = append(prev, letter(3, "lead", "the caller's own"))
	if err := s.AppendInbox(ctx, "team", r, prev, letter(3, "reviewer", "three")); err != nil {
		t.Fatal(err)
	}
	got, err := s.LoadInbox(ctx, "team", r)
	if err != nil || len(got) != 3 || got[2].Body != "three" || len(prev) != 2 {
		t.Fatalf("LoadInbox = %+v, %v; prev = %+v", got, err, prev)
	}
	// A prev that is a copy, not the slice LoadInbox returned, is compared
	// letter by letter.
	copied := append([]core.Message(nil), got...)
	if err := s.AppendInbox(ctx, "team", r, copied, letter(4, "lead", "four")); err != nil {
		t.Fatal(err)
	}
	copied[0].Body = "forged"
	err = s.AppendInbox(ctx, "team", r, copied, letter(4, "lead", "four again"))
	wantCorrupt(t, "AppendInbox after a different prev", err, mail.ErrInboxChanged)
}

// TestLoadInboxRevalidatesForOtherRules: letters the store holds were
// validated under some rules; under others (a sender no longer a member,
// other limits) the file is validated again.
func TestLoadInboxRevalidatesForOtherRules(t *testing.T) {
	s, _ := openStore(t)
	createTeam(t, s, "team")
	r := rules("reader", core.DefaultLimits())
	send(t, s, "team", r, letter(1, "lead", "one"))
	send(t, s, "team", r, letter(2, "reviewer", "two"))

	_, err := s.LoadInbox(ctx, "team", rules("reader", core.DefaultLimits(), "lead", "reader"))
	wantCorrupt(t, "without reviewer", err, core.ErrInboxSender)
	tight := core.DefaultLimits()
	tight.InboxMessages = 1
	_, err = s.LoadInbox(ctx, "team", rules("reader", tight))
	wantCorrupt(t, "with a limit of one letter", err, core.ErrInboxCount)
	if got, err := s.LoadInbox(ctx, "team", r); err != nil || len(got) != 2 {
		t.Fatalf("under the first rules again: %+v, %v", got, err)
	}
}

// TestAppendFailureRollsBack: a write, time stamp or fsync that fails
// during an append (or the close, for a file not kept open) leaves the
// file at exactly its old bytes; the store forgets what it knew, so the
// next load reads the file again, and the next append works.
func TestAppendFailureRollsBack(t *testing.T) {
	type tc struct {
		op    string
		files int // WithOpenFiles
	}
	var cases []tc
	for _, op := range keptOps {
		cases = append(cases, tc{op, 128})
	}
	for _, op := range appendOps[1:] {
		cases = append(cases, tc{op, 0})
	}
	for _, c := range cases {
		op := c.op
		t.Run(fmt.Sprintf("%s/%d open files", op, c.files), func(t *testing.T) {
			ffs := newFaultFS()
			s, data := openStore(t, mail.WithFS(ffs), mail.WithOpenFiles(c.files))
			createTeam(t, s, "team")
			r := rules("reader", core.DefaultLimits())
			path := inboxPath(data, "team", "reader")
			send(t, s, "team", r, letter(1, "lead", "one"))
			send(t, s, "team", r, letter(2, "reviewer", "二"))
			old := readFile(t, path)
			prev, err := s.LoadInbox(ctx, "team", r)
			if err != nil {
				t.Fatal(err)
			}

			ffs.arm(op)
			err = s.AppendInbox(ctx, "team", r, prev, letter(3, "lead", strings.Repeat("lost ", 20)))
			ffs.arm()
			if !errors.Is(err, errInjected) || ffs.hits() == 0 {
				t.Fatalf("AppendInbox = %v after %d faults, want the injected failure", err, ffs.hits())
			}
			wantBytes(t, "after the failed append", readFile(t, path), old)

			reads := ffs.readOpens()
			got, err := s.LoadInbox(ctx, "team", r)
			if err != nil || !reflect.DeepEqual(got, prev) {
				t.Fatalf("LoadInbox = %+v, %v", got, err)
			}
			if ffs.readOpens() == reads {
				t.Fatal("the store did not read the inbox again after a failed append")
			}
			send(t, s, "team", r, letter(3, "lead", "three"))
			wantBytes(t, "after the next append", readFile(t, path), append(old, line(letter(3, "lead", "three"))...))
		})
	}
}

// TestExternalChangeBetweenAppends: after the store has appended (so it
// holds the file's letters), any change made by someone else is seen by the
// next load and the next append; a damaged or different file is refused
// with inbox_corrupt and left exactly as the other writer made it, and a
// file whose letters are still the same is accepted after a full read.
func TestExternalChangeBetweenAppends(t *testing.T) {
	other := `{"id": "reader-2", "sender": "lead", "recipient": "reader", "body": "TWO"}` + "\n"
	tests := []struct {
		name   string
		change func(t *testing.T, path string)
		cause  error // nil: the letters are unchanged and the append goes on
	}{
		{"one byte appended", func(t *testing.T, path string) {
			f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND, 0)
			if err != nil {
				t.Fatal(err)
			}
			defer f.Close()
			if _, err := f.WriteString("x"); err != nil {
				t.Fatal(err)
			}
		}, core.ErrInboxJSON},
		{"same size rewritten in place", func(t *testing.T, path string) {
			b := readFile(t, path)
			b = bytes.Replace(b, []byte(`"two"`), []byte(`"TWO"`), 1)
			writeFile(t, path, b)
		}, mail.ErrInboxChanged},
		{"same size renamed into place", func(t *testing.T, path string) {
			b := readFile(t, path)
			i := bytes.Index(b, []byte(`{"id": "reader-2"`))
			writeFile(t, path+".new", append(b[:i:i], other...))
			if err := os.Rename(path+".new", path); err != nil {
				t.Fatal(err)
			}
		}, mail.ErrInboxChanged},
		{"last letter cut off", func(t *testing.T, path string) {
			b := readFile(t, path)
			if err := os.Truncate(path, int64(bytes.Index(b, []byte(`{"id": "reader-2"`)))); err != nil {
				t.Fatal(err)
			}
		}, mail.ErrInboxChanged},
		{"replaced by a symlink", func(t *testing.T, path string) {
			writeFile(t, path+".copy", readFile(t, path))
			if err := os.Remove(path); err != nil {
				t.Fatal(err)
			}
			if err := os.Symlink(path+".copy", path); err != nil {
				t.Fatal(err)
			}
		}, core.ErrInboxSymlink},
		{"removed", func(t *testing.T, path string) {
			if err := os.Remove(path); err != nil {
				t.Fatal(err)
			}
		}, mail.ErrInboxChanged},
		{"modification time touched", func(t *testing.T, path string) {
			past := time.Date(2020, 1, 2, 3, 4, 5, 0, time.UTC)
			if err := os.Chtimes(path, past, past); err != nil {
				t.Fatal(err)
			}
		}, nil},
		{"same bytes renamed into place", func(t *testing.T, path string) {
			writeFile(t, path+".new", readFile(t, path))
			if err := os.Rename(path+".new", path); err != nil {
				t.Fatal(err)
			}
		}, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ffs := newFaultFS()
			s, data := openStore(t, mail.WithFS(ffs))
			createTeam(t, s, "team")
			r := rules("reader", core.DefaultLimits())
			path := inboxPath(data, "team", "reader")
			send(t, s, "team", r, letter(1, "reviewer", "one"))
			send(t, s, "team", r, letter(2, "lead", "two"))
			prev, err := s.LoadInbox(ctx, "team", r)
			if err != nil {
				t.Fatal(err)
			}

			tt.change(t, path)
			before, _ := os.Lstat(path)
			var beforeBytes []byte
			if before != nil {
				beforeBytes, _ = os.ReadFile(path) // through a symlink: its target
			}
			next := letter(3, "reviewer", "three")
			loaded, loadErr := s.LoadInbox(ctx, "team", r)
			err = s.AppendInbox(ctx, "team", r, prev, next)

			if tt.cause == nil {
				if loadErr != nil || !reflect.DeepEqual(loaded, prev) {
					t.Fatalf("LoadInbox = %+v, %v; want the same letters", loaded, loadErr)
				}
				if err != nil {
					t.Fatalf("AppendInbox: %v", err)
				}
				wantBytes(t, "after the append", readFile(t, path), append(beforeBytes, line(next)...))
				return
			}
			wantCorrupt(t, "AppendInbox", err, tt.cause)
			if loadErr == nil && reflect.DeepEqual(loaded, prev) {
				t.Fatalf("LoadInbox returned the old letters of a changed file")
			}
			after, _ := os.Lstat(path)
			switch {
			case before == nil:
				if after != nil {
					t.Fatal("a removed inbox was recreated")
				}
			case after == nil || after.Mode() != before.Mode():
				t.Fatalf("the file was replaced: %v", after)
			default:
				afterBytes, _ := os.ReadFile(path)
				wantBytes(t, "after the refused append", afterBytes, beforeBytes)
			}
		})
	}
}

// TestAppendOverByteLimit: the byte limit is checked before the disk is
// touched, is inclusive, and answers inbox_full.
func TestAppendOverByteLimit(t *testing.T) {
	ffs := newFaultFS()
	s, data := openStore(t, mail.WithFS(ffs))
	createTeam(t, s, "team")
	path := inboxPath(data, "team", "reader")
	one, two := letter(1, "lead", "one"), letter(2, "reviewer", "two")
	limits := core.DefaultLimits()
	limits.InboxBytes = len(line(one)) + len(line(two)) - 1
	r := rules("reader", limits)
	send(t, s, "team", r, one)
	prev, err := s.LoadInbox(ctx, "team", r)
	if err != nil {
		t.Fatal(err)
	}

	// Every way of writing fails while armed, and none may be reached.
	ffs.arm("open", "createtemp")
	err = s.AppendInbox(ctx, "team", r, prev, two)
	ffs.arm()
	if code := core.ErrorCode(err); code != core.CodeInboxFull || !errors.Is(err, core.ErrInboxTooLarge) {
		t.Fatalf("AppendInbox = %v (code %q), want inbox_full for the byte limit", err, code)
	}
	if msg := core.ErrorMessage(err); !strings.Contains(msg, "byte limit") {
		t.Fatalf("message %q", msg)
	}
	if ffs.hits() != 0 {
		t.Fatal("the disk was touched")
	}
	wantBytes(t, "after the refused append", readFile(t, path), line(one))

	limits.InboxBytes++
	send(t, s, "team", rules("reader", limits), two)
	if got := readFile(t, path); len(got) != limits.InboxBytes {
		t.Fatalf("file of %d bytes, want exactly the limit %d", len(got), limits.InboxBytes)
	}
}

// logBuffer is a JSON logger writing into a buffer, for checking what the
// store logged.
func logBuffer() (*slog.Logger, *bytes.Buffer) {
	var buf bytes.Buffer
	return slog.New(slog.NewJSONHandler(&buf, nil)), &buf
}

// logRecords decodes the JSON log lines in buf.
func logRecords(t *testing.T, buf *bytes.Buffer) []map[string]any {
	t.Helper()
	var out []map[string]any
	for l := range strings.Lines(buf.String()) {
		var rec map[string]any
		if err := json.Unmarshal([]byte(l), &rec); err != nil {
			t.Fatalf("log line %q: %v", l, err)
		}
		out = append(out, rec)
	}
	return out
}

// TestTornLastLineRepairedAtStart: a crash during an append can leave a
// last line without its newline. Start-up (LoadTeams) cuts exactly that
// line, keeps every acknowledged letter and logs the repair.
func TestTornLastLineRepairedAtStart(t *testing.T) {
	s, data := openStore(t)
	createTeam(t, s, "team")
	r := rules("reader", core.DefaultLimits())
	send(t, s, "team", r, letter(1, "lead", "one"))
	send(t, s, "team", r, letter(2, "reviewer", "two"))
	path := inboxPath(data, "team", "reader")
	acknowledged := readFile(t, path)
	torn := line(letter(3, "lead", "three"))
	torn = torn[:len(torn)-1] // everything but the newline
	for _, tail := range [][]byte{torn, torn[:7], {0, 0, 0}} {
		writeFile(t, path, append(bytes.Clone(acknowledged), tail...))

		log, buf := logBuffer()
		s2, err := mail.Open(data, mail.WithLogger(log))
		if err != nil {
			t.Fatal(err)
		}
		teams, err := s2.LoadTeams(ctx)
		if err != nil || len(teams) != 1 || teams[0].Err != nil {
			t.Fatalf("LoadTeams = %+v, %v", teams, err)
		}
		wantBytes(t, "after the repair", readFile(t, path), acknowledged)
		recs := logRecords(t, buf)
		if len(recs) != 1 {
			t.Fatalf("logged %d records, want 1: %s", len(recs), buf)
		}
		rec := recs[0]
		if rec["level"] != "WARN" || rec["team"] != "team" || rec["member"] != "reader" ||
			rec["bytes_removed"] != float64(len(tail)) || rec["bytes_kept"] != float64(len(acknowledged)) {
			t.Fatalf("log record %v", rec)
		}
		if got, err := s2.LoadInbox(ctx, "team", r); err != nil || len(got) != 2 {
			t.Fatalf("LoadInbox after the repair = %+v, %v", got, err)
		}
		send(t, s2, "team", r, letter(3, "lead", "three"))
		wantBytes(t, "after the next send", readFile(t, path), append(bytes.Clone(acknowledged), line(letter(3, "lead", "three"))...))
		writeFile(t, path, acknowledged)
	}
}

// TestOtherDamageNotRepairedAtStart: only a torn last line after a
// complete one is repaired. Anything else is left exactly as it is, for
// core to report.
func TestOtherDamageNotRepairedAtStart(t *testing.T) {
	one, two := line(letter(1, "lead", "one")), line(letter(2, "reviewer", "two"))
	tests := []struct {
		name   string
		member string
		setup  func(t *testing.T, data, path string) []byte // returns the bytes to keep
		valid  bool                                         // the file is a valid inbox
	}{
		{"torn line in the middle", "reader", func(t *testing.T, data, path string) []byte {
			b := append(append(bytes.Clone(one[:20]), '\n'), two...)
			writeFile(t, path, b)
			return b
		}, false},
		{"one letter without its newline", "reader", func(t *testing.T, data, path string) []byte {
			b := one[:len(one)-1]
			writeFile(t, path, b)
			return b
		}, true},
		{"no newline at all", "reader", func(t *testing.T, data, path string) []byte {
			b := one[:20]
			writeFile(t, path, b)
			return b
		}, false},
		{"over the byte limit", "reader", func(t *testing.T, data, path string) []byte {
			b := append(bytes.Clone(one), strings.Repeat("x", core.DefaultLimits().InboxBytes)...)
			writeFile(t, path, b)
			return b
		}, false},
		{"blank last line", "reader", func(t *testing.T, data, path string) []byte {
			b := append(bytes.Clone(one), '\n')
			writeFile(t, path, b)
			return b
		}, false},
		{"symlink to a torn file", "reader", func(t *testing.T, data, path string) []byte {
			target := filepath.Join(t.TempDir(), "target.jsonl")
			b := append(bytes.Clone(one), two[:10]...)
			writeFile(t, target, b)
			if err := os.Symlink(target, path); err != nil {
				t.Fatal(err)
			}
			return b
		}, false},
		{"not a member's file", "ghost", func(t *testing.T, data, path string) []byte {
			b := append(bytes.Clone(one), two[:10]...)
			writeFile(t, path, b)
			return b
		}, false},
		{"team state damaged", "reader", func(t *testing.T, data, path string) []byte {
			writeFile(t, filepath.Join(data, "teams", "team", "state.json"), []byte("{"))
			b := append(bytes.Clone(one), two[:10]...)
			writeFile(t, path, b)
			return b
		}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s, data := openStore(t)
			createTeam(t, s, "team")
			path := inboxPath(data, "team", tt.member)
			want := tt.setup(t, data, path)

			log, buf := logBuffer()
			s2, err := mail.Open(data, mail.WithLogger(log))
			if err != nil {
				t.Fatal(err)
			}
			if _, err := s2.LoadTeams(ctx); err != nil {
				t.Fatal(err)
			}
			got, err := os.ReadFile(path) // through a symlink: its target
			if err != nil {
				t.Fatal(err)
			}
			wantBytes(t, "after LoadTeams", got, want)
			if buf.Len() != 0 {
				t.Fatalf("logged a repair: %s", buf)
			}
			if tt.member == "reader" {
				_, err := s2.LoadInbox(ctx, "team", rules("reader", core.DefaultLimits()))
				if tt.valid && err != nil {
					t.Fatalf("LoadInbox = %v", err)
				}
				if !tt.valid && core.ErrorCode(err) != core.CodeInboxCorrupt {
					t.Fatalf("LoadInbox = %v, want inbox_corrupt", err)
				}
			}
		})
	}
}

// TestForeignBytesRewrittenOnce: a valid inbox someone else wrote in bytes
// other than the lesson's is rewritten whole, in the lesson's bytes, by the
// next send (as the lesson's save_inbox would); the send after that
// appends.
func TestForeignBytesRewrittenOnce(t *testing.T) {
	tests := []struct {
		name, content string
		first         core.Message
	}{
		{"compact spacing", `{"id":"reader-1","sender":"lead","recipient":"reader","body":"one"}` + "\n", letter(1, "lead", "one")},
		{"keys in another order", `{"body": "one", "id": "reader-1", "recipient": "reader", "sender": "lead"}` + "\n", letter(1, "lead", "one")},
		{"raw line separator", "{\"id\": \"reader-1\", \"sender\": \"lead\", \"recipient\": \"reader\", \"body\": \"a\u2028b\"}\n", letter(1, "lead", "a\u2028b")},
		{"no final newline", `{"id": "reader-1", "sender": "lead", "recipient": "reader", "body": "one"}`, letter(1, "lead", "one")},
		{"escaped ASCII", `{"id": "reader-1", "sender": "lead", "recipient": "reader", "body": "\u006fne"}` + "\n", letter(1, "lead", "one")},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ffs := newFaultFS()
			s, data := openStore(t, mail.WithFS(ffs))
			createTeam(t, s, "team")
			r := rules("reader", core.DefaultLimits())
			path := inboxPath(data, "team", "reader")
			writeFile(t, path, []byte(tt.content))
			got, err := s.LoadInbox(ctx, "team", r)
			if err != nil || !reflect.DeepEqual(got, []core.Message{tt.first}) {
				t.Fatalf("LoadInbox = %+v, %v", got, err)
			}
			two, three := letter(2, "reviewer", "two"), letter(3, "lead", "three")
			send(t, s, "team", r, two)
			want := append(append(line(tt.first), line(two)...), line(three)...)
			wantBytes(t, "after the next send", readFile(t, path), want[:len(want)-len(line(three))])

			// Now the file is the store's own: the next send appends, so a
			// broken temporary-file path does not matter.
			ffs.arm("createtemp")
			send(t, s, "team", r, three)
			ffs.arm()
			wantBytes(t, "after the send after", readFile(t, path), want)
		})
	}
}

// TestInboxGrowsWhileRead: letters read from a file that another writer
// extended between the store's fstat and its read are not trusted as the
// file's content for an append: the append is refused and the file left
// as it is (rewriting it from what was read could drop a letter).
func TestInboxGrowsWhileRead(t *testing.T) {
	ffs := newFaultFS()
	s, data := openStore(t, mail.WithFS(ffs))
	createTeam(t, s, "team")
	r := rules("reader", core.DefaultLimits())
	path := inboxPath(data, "team", "reader")
	send(t, s, "team", r, letter(1, "lead", "one"))
	send(t, s, "team", r, letter(2, "reviewer", "two"))
	three := letter(3, "lead", "three")
	// Make the store read the file again, and let a third letter arrive
	// from outside while it does.
	past := time.Date(2020, 1, 2, 3, 4, 5, 0, time.UTC)
	if err := os.Chtimes(path, past, past); err != nil {
		t.Fatal(err)
	}
	ffs.duringRead = func() {
		f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND, 0)
		if err != nil {
			t.Error(err)
			return
		}
		defer f.Close()
		if _, err := f.Write(line(three)); err != nil {
			t.Error(err)
		}
	}
	before := append(append(line(letter(1, "lead", "one")), line(letter(2, "reviewer", "two"))...), line(three)...)
	prev := []core.Message{letter(1, "lead", "one"), letter(2, "reviewer", "two"), three}
	err := s.AppendInbox(ctx, "team", r, prev, letter(4, "reviewer", "four"))
	wantCorrupt(t, "AppendInbox", err, mail.ErrInboxChanged)
	wantBytes(t, "after the refused append", readFile(t, path), before)

	// Read again in peace, the file is valid and takes the next letter.
	send(t, s, "team", r, letter(4, "reviewer", "four"))
	wantBytes(t, "after the next append", readFile(t, path), append(before, line(letter(4, "reviewer", "four"))...))
}
