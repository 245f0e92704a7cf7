package mail_test

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"strings"
	"sync"
	"testing"

	"mailroom/internal/core"
	"mailroom/internal/mail"
)

type vectorFile struct {
	MailboxLines []struct {
		Body string `json:"body"`
		Line string `json:"line"`
	} `json:"mailbox_lines"`
	ProtocolLetters []struct {
		Body string `json:"body"`
		Line string `json:"line"`
	} `json:"protocol_letters"`
}

func loadVectors(t *testing.T) vectorFile {
	t.Helper()
	var v vectorFile
	if err := json.Unmarshal(readFile(t, filepath.Join("testdata", "encoding.json")), &v); err != nil {
		t.Fatal(err)
	}
	if len(v.MailboxLines) == 0 || len(v.ProtocolLetters) == 0 {
		t.Fatal("testdata/encoding.json has no vectors")
	}
	return v
}

// TestAppendMatchesVectors appends every mailbox vector in order to one
// inbox; after each append the file must be exactly the vector lines so
// far, and it must load back as the letters appended. Only the first
// letter may create the file; the others are appended (creating a
// temporary file fails for them).
func TestAppendMatchesVectors(t *testing.T) {
	v := loadVectors(t)
	ffs := newFaultFS()
	s, data := openStore(t, mail.WithFS(ffs))
	createTeam(t, s, "vectors")
	limits := core.DefaultLimits()
	limits.InboxMessages = len(v.MailboxLines)
	r := rules("reader", limits)

	var want strings.Builder
	var sent []core.Message
	for i, vec := range v.MailboxLines {
		msg := core.Message{ID: fmt.Sprintf("reader-%d", i+1), Sender: "reviewer", Recipient: "reader", Body: vec.Body}
		if i == 1 {
			ffs.arm("createtemp")
			defer ffs.arm()
		}
		send(t, s, "vectors", r, msg)
		sent = append(sent, msg)
		want.WriteString(vec.Line)
		wantBytes(t, msg.ID, readFile(t, inboxPath(data, "vectors", "reader")), []byte(want.String()))
	}
	got, err := s.LoadInbox(ctx, "vectors", r)
	if err != nil {
		t.Fatalf("LoadInbox: %v", err)
	}
	if !reflect.DeepEqual(got, sent) {
		t.Fatalf("LoadInbox = %+v, want %+v", got, sent)
	}
}

// TestAppendProtocolLetterVectors stores each protocol letter vector as
// the first letter of lead's inbox in its own team.
func TestAppendProtocolLetterVectors(t *testing.T) {
	v := loadVectors(t)
	s, data := openStore(t)
	for i, vec := range v.ProtocolLetters {
		team := fmt.Sprintf("protocol-%d", i+1)
		createTeam(t, s, team)
		r := rules("lead", core.DefaultLimits())
		send(t, s, team, r, core.Message{ID: "lead-1", Sender: "reader", Recipient: "lead", Body: vec.Body})
		wantBytes(t, team, readFile(t, inboxPath(data, team, "lead")), []byte(vec.Line))
		got, err := s.LoadInbox(ctx, team, r)
		if err != nil || len(got) != 1 || got[0].Body != vec.Body {
			t.Fatalf("%s: LoadInbox = %+v, %v", team, got, err)
		}
	}
}

type goldenInput struct {
	Recipient string   `json:"recipient"`
	Members   []string `json:"members"`
	Letters   []struct {
		Sender string `json:"sender"`
		Body   string `json:"body"`
	} `json:"letters"`
}

func loadGoldenInput(t *testing.T) goldenInput {
	t.Helper()
	var in goldenInput
	if err := json.Unmarshal(readFile(t, filepath.Join("testdata", "golden_messages.json")), &in); err != nil {
		t.Fatal(err)
	}
	return in
}

// TestGoldenInbox builds a mailbox from testdata/golden_messages.json by
// successive appends. testdata/golden_inbox.jsonl holds the bytes the
// lesson's own save_inbox writes for the same letters.
func TestGoldenInbox(t *testing.T) {
	in := loadGoldenInput(t)
	s, data := openStore(t)
	createTeam(t, s, "golden")
	r := rules(in.Recipient, core.DefaultLimits(), in.Members...)
	for i, l := range in.Letters {
		send(t, s, "golden", r, core.Message{
			ID: fmt.Sprintf("%s-%d", in.Recipient, i+1), Sender: l.Sender, Recipient: in.Recipient, Body: l.Body,
		})
	}
	wantBytes(t, "golden inbox", readFile(t, inboxPath(data, "golden", in.Recipient)),
		readFile(t, filepath.Join("testdata", "golden_inbox.jsonl")))
}

// TestPythonReadsInbox runs testdata/check_inbox.py, which reads a file the
// way the lessons' loader does (str.splitlines, json.loads, exact keys), on
// an inbox the store wrote. The bodies with U+2028, U+2029 and U+0085 are
// the point: written raw they would split the line for that loader.
func TestPythonReadsInbox(t *testing.T) {
	python, err := exec.LookPath("python3")
	if err != nil {
		// python3 is a requirement of the project (the team-protocols
		// scenario runs it), so its absence is a failure, not a skip.
		t.Fatal("python3 not found on PATH; install it (Debian: apt-get install python3)")
	}
	in := loadGoldenInput(t)
	s, data := openStore(t)
	createTeam(t, s, "python")
	r := rules(in.Recipient, core.DefaultLimits(), in.Members...)
	bodies := []string{"line\u2028separator", "paragraph\u2029separator", "next\u0085line"}
	for _, l := range in.Letters {
		bodies = append(bodies, l.Body)
	}
	bodies = bodies[:core.DefaultLimits().InboxMessages]
	var sent []core.Message
	for i, b := range bodies {
		msg := core.Message{ID: fmt.Sprintf("reader-%d", i+1), Sender: "reviewer", Recipient: "reader", Body: b}
		send(t, s, "python", r, msg)
		sent = append(sent, msg)
	}
	cmd := exec.Command(python, filepath.Join("testdata", "check_inbox.py"),
		inboxPath(data, "python", "reader"), "reader", "8", strings.Join(in.Members, ","))
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("check_inbox.py refused the file: %v\n%s", err, out)
	}
	var got []core.Message
	if err := json.Unmarshal(out, &got); err != nil {
		t.Fatalf("check_inbox.py output: %v\n%s", err, out)
	}
	if !reflect.DeepEqual(got, sent) {
		t.Fatalf("Python read %+v, want %+v", got, sent)
	}
}

const validLine = `{"id": "reader-1", "sender": "reviewer", "recipient": "reader", "body": "hi"}` + "\n"

func TestLoadInboxEmpty(t *testing.T) {
	tests := []struct {
		name  string
		setup func(t *testing.T, data string)
	}{
		{"missing file", func(t *testing.T, data string) {}},
		{"missing inboxes directory", func(t *testing.T, data string) {
			if err := os.Remove(filepath.Dir(inboxPath(data, "team", "reader"))); err != nil {
				t.Fatal(err)
			}
		}},
		{"empty file", func(t *testing.T, data string) {
			writeFile(t, inboxPath(data, "team", "reader"), nil)
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s, data := openStore(t)
			createTeam(t, s, "team")
			tt.setup(t, data)
			got, err := s.LoadInbox(ctx, "team", rules("reader", core.DefaultLimits()))
			if err != nil || got == nil || len(got) != 0 {
				t.Fatalf("LoadInbox = %#v, %v; want an empty non-nil slice", got, err)
			}
		})
	}
}

// TestLoadInboxAcceptsRawLineSeparator: a file written by the lesson with a
// raw U+2028 in a body is one line, because reading splits on "\n" only.
func TestLoadInboxAcceptsRawLineSeparator(t *testing.T) {
	s, data := openStore(t)
	createTeam(t, s, "team")
	line := "{\"id\": \"reader-1\", \"sender\": \"lead\", \"recipient\": \"reader\", \"body\": \"a\u2028b\"}\n"
	writeFile(t, inboxPath(data, "team", "reader"), []byte(line))
	got, err := s.LoadInbox(ctx, "team", rules("reader", core.DefaultLimits()))
	if err != nil || len(got) != 1 || got[0].Body != "a\u2028b" {
		t.Fatalf("LoadInbox = %+v, %v", got, err)
	}
}

// TestCorruptInbox checks every kind of damaged inbox: loading fails with
// inbox_corrupt and the right cause, an append is refused, and the file is
// left byte-for-byte as it was.
func TestCorruptInbox(t *testing.T) {
	line := func(id, sender, recipient, body string) string {
		return fmt.Sprintf(`{"id": %q, "sender": %q, "recipient": %q, "body": %q}`+"\n", id, sender, recipient, body)
	}
	nine := ""
	for i := 1; i <= 9; i++ {
		nine += line(fmt.Sprintf("reader-%d", i), "lead", "reader", "x")
	}
	tests := []struct {
		name    string
		content string
		cause   error
	}{
		{"trailing blank line", validLine + "\n", core.ErrInboxJSON},
		{"leading blank line", "\n" + validLine, core.ErrInboxJSON},
		{"not json", "not-json\n", core.ErrInboxJSON},
		{"truncated line", validLine[:30], core.ErrInboxJSON},
		{"invalid utf-8", "{\"id\": \"reader-1\", \"sender\": \"lead\", \"recipient\": \"reader\", \"body\": \"\xff\"}\n", core.ErrInboxEncoding},
		{"nine letters", nine, core.ErrInboxCount},
		{"extra key", `{"id": "reader-1", "sender": "lead", "recipient": "reader", "body": "x", "extra": 1}` + "\n", core.ErrInboxFields},
		{"missing key", `{"id": "reader-1", "sender": "lead", "recipient": "reader"}` + "\n", core.ErrInboxFields},
		{"array", "[1, 2]\n", core.ErrInboxFields},
		{"wrong id", line("reader-2", "lead", "reader", "x"), core.ErrInboxSequence},
		{"id of another member", line("lead-1", "lead", "reader", "x"), core.ErrInboxSequence},
		{"wrong recipient", line("reader-1", "lead", "lead", "x"), core.ErrInboxSequence},
		{"unregistered sender", line("reader-1", "ghost", "reader", "x"), core.ErrInboxSender},
		{"empty body", line("reader-1", "lead", "reader", ""), core.ErrInboxBody},
		{"body too long", line("reader-1", "lead", "reader", strings.Repeat("长", 601)), core.ErrInboxBody},
		{"too large", strings.Repeat("x", core.DefaultLimits().InboxBytes+1), core.ErrInboxTooLarge},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s, data := openStore(t)
			createTeam(t, s, "team")
			path := inboxPath(data, "team", "reader")
			writeFile(t, path, []byte(tt.content))
			r := rules("reader", core.DefaultLimits())

			_, err := s.LoadInbox(ctx, "team", r)
			wantCorrupt(t, "LoadInbox", err, tt.cause)
			msg := core.Message{ID: "reader-1", Sender: "lead", Recipient: "reader", Body: "new"}
			err = s.AppendInbox(ctx, "team", r, []core.Message{}, msg)
			wantCorrupt(t, "AppendInbox", err, tt.cause)
			wantBytes(t, "file after refused append", readFile(t, path), []byte(tt.content))
			if names := dirNames(t, filepath.Dir(path)); !reflect.DeepEqual(names, []string{"reader.jsonl"}) {
				t.Fatalf("inboxes directory holds %q", names)
			}
		})
	}
}

// TestInboxExactlyAtByteLimit: the byte limit is inclusive.
func TestInboxExactlyAtByteLimit(t *testing.T) {
	s, data := openStore(t)
	createTeam(t, s, "team")
	limits := core.DefaultLimits()
	limits.InboxBytes = len(validLine)
	writeFile(t, inboxPath(data, "team", "reader"), []byte(validLine))
	if got, err := s.LoadInbox(ctx, "team", rules("reader", limits)); err != nil || len(got) != 1 {
		t.Fatalf("LoadInbox at the limit = %+v, %v", got, err)
	}
	limits.InboxBytes--
	_, err := s.LoadInbox(ctx, "team", rules("reader", limits))
	wantCorrupt(t, "one byte over", err, core.ErrInboxTooLarge)
}

func TestInboxSymlinkRefused(t *testing.T) {
	tests := []struct {
		name   string
		target func(t *testing.T, dir string) string
	}{
		{"to a valid inbox", func(t *testing.T, dir string) string {
			p := filepath.Join(dir, "elsewhere.jsonl")
			writeFile(t, p, []byte(validLine))
			return p
		}},
		{"dangling", func(t *testing.T, dir string) string { return filepath.Join(dir, "missing.jsonl") }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s, data := openStore(t)
			createTeam(t, s, "team")
			target := tt.target(t, t.TempDir())
			path := inboxPath(data, "team", "reader")
			if err := os.Symlink(target, path); err != nil {
				t.Fatal(err)
			}
			r := rules("reader", core.DefaultLimits())
			_, err := s.LoadInbox(ctx, "team", r)
			wantCorrupt(t, "LoadInbox", err, core.ErrInboxSymlink)
			msg := core.Message{ID: "reader-1", Sender: "lead", Recipient: "reader", Body: "new"}
			wantCorrupt(t, "AppendInbox", s.AppendInbox(ctx, "team", r, []core.Message{}, msg), core.ErrInboxSymlink)

			if got, err := os.Readlink(path); err != nil || got != target {
				t.Fatalf("link now %q, %v", got, err)
			}
			if b, err := os.ReadFile(target); err == nil && string(b) != validLine {
				t.Fatalf("link target overwritten: %q", b)
			} else if err != nil && !os.IsNotExist(err) {
				t.Fatal(err)
			}
		})
	}
}

func TestInboxSymlinkedDirectoryRefused(t *testing.T) {
	s, data := openStore(t)
	createTeam(t, s, "team")
	dir := filepath.Dir(inboxPath(data, "team", "reader"))
	if err := os.Remove(dir); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(t.TempDir(), dir); err != nil {
		t.Fatal(err)
	}
	r := rules("reader", core.DefaultLimits())
	_, err := s.LoadInbox(ctx, "team", r)
	wantCorrupt(t, "LoadInbox", err, core.ErrInboxSymlink)
	msg := core.Message{ID: "reader-1", Sender: "lead", Recipient: "reader", Body: "new"}
	wantCorrupt(t, "AppendInbox", s.AppendInbox(ctx, "team", r, []core.Message{}, msg), core.ErrInboxSymlink)
}

func TestInboxNotRegularFile(t *testing.T) {
	s, data := openStore(t)
	createTeam(t, s, "team")
	if err := os.Mkdir(inboxPath(data, "team", "reader"), 0o700); err != nil {
		t.Fatal(err)
	}
	_, err := s.LoadInbox(ctx, "team", rules("reader", core.DefaultLimits()))
	wantCorrupt(t, "LoadInbox", err, mail.ErrInboxNotRegular)
}

func TestInboxInvalidNames(t *testing.T) {
	s, _ := openStore(t)
	createTeam(t, s, "team")
	for _, tc := range []struct{ team, member string }{{"team", "../x"}, {"../team", "reader"}, {"team", "Reader"}, {"team", ""}} {
		_, err := s.LoadInbox(ctx, tc.team, rules(tc.member, core.DefaultLimits()))
		if err == nil {
			t.Errorf("LoadInbox(%q, %q) succeeded", tc.team, tc.member)
		}
		msg := core.Message{ID: tc.member + "-1", Sender: "lead", Recipient: tc.member, Body: "x"}
		if err := s.AppendInbox(ctx, tc.team, rules(tc.member, core.DefaultLimits()), nil, msg); err == nil {
			t.Errorf("AppendInbox(%q, %q) succeeded", tc.team, tc.member)
		}
	}
}

// TestInboxChangedOnDisk: whatever happens to the file between the load
// and the append under the team lock, the append is refused and the file
// is left as the other writer made it.
func TestInboxChangedOnDisk(t *testing.T) {
	second := `{"id": "reader-2", "sender": "lead", "recipient": "reader", "body": "sneaked in"}` + "\n"
	tests := []struct {
		name   string
		change func(t *testing.T, path string)
		cause  error
	}{
		{"another letter appended", func(t *testing.T, path string) {
			writeFile(t, path, []byte(validLine+second))
		}, mail.ErrInboxChanged},
		{"body rewritten", func(t *testing.T, path string) {
			writeFile(t, path, []byte(strings.Replace(validLine, `"hi"`, `"ho"`, 1)))
		}, mail.ErrInboxChanged},
		{"file removed", func(t *testing.T, path string) {
			if err := os.Remove(path); err != nil {
				t.Fatal(err)
			}
		}, mail.ErrInboxChanged},
		{"blank line added", func(t *testing.T, path string) {
			writeFile(t, path, []byte(validLine+"\n"))
		}, core.ErrInboxJSON},
		{"replaced by a symlink", func(t *testing.T, path string) {
			copyPath := path + ".copy"
			writeFile(t, copyPath, []byte(validLine))
			if err := os.Remove(path); err != nil {
				t.Fatal(err)
			}
			if err := os.Symlink(copyPath, path); err != nil {
				t.Fatal(err)
			}
		}, core.ErrInboxSymlink},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s, data := openStore(t)
			createTeam(t, s, "team")
			path := inboxPath(data, "team", "reader")
			r := rules("reader", core.DefaultLimits())
			send(t, s, "team", r, core.Message{ID: "reader-1", Sender: "reviewer", Recipient: "reader", Body: "hi"})
			wantBytes(t, "first letter", readFile(t, path), []byte(validLine))
			prev, err := s.LoadInbox(ctx, "team", r)
			if err != nil {
				t.Fatal(err)
			}

			tt.change(t, path)
			before, _ := os.Lstat(path)
			var beforeBytes []byte
			if before != nil && before.Mode().IsRegular() {
				beforeBytes = readFile(t, path)
			}
			err = s.AppendInbox(ctx, "team", r, prev, core.Message{ID: "reader-2", Sender: "lead", Recipient: "reader", Body: "mine"})
			wantCorrupt(t, "AppendInbox", err, tt.cause)

			after, _ := os.Lstat(path)
			switch {
			case before == nil:
				if after != nil {
					t.Fatal("a removed inbox was recreated")
				}
			case before.Mode().IsRegular():
				wantBytes(t, "file after refused append", readFile(t, path), beforeBytes)
			default:
				if after == nil || after.Mode() != before.Mode() {
					t.Fatal("the symlink was replaced")
				}
			}
		})
	}
}

// TestAppendRefusesOverLimits: an append that would break the inbox's own
// limits writes nothing (core refuses these earlier; this is the backstop).
func TestAppendRefusesOverLimits(t *testing.T) {
	s, data := openStore(t)
	createTeam(t, s, "team")
	path := inboxPath(data, "team", "reader")
	limits := core.DefaultLimits()
	limits.InboxMessages = 1
	r := rules("reader", limits)
	send(t, s, "team", r, core.Message{ID: "reader-1", Sender: "reviewer", Recipient: "reader", Body: "hi"})
	prev, _ := s.LoadInbox(ctx, "team", r)
	if err := s.AppendInbox(ctx, "team", r, prev, core.Message{ID: "reader-2", Sender: "lead", Recipient: "reader", Body: "x"}); err == nil {
		t.Fatal("append over the message limit succeeded")
	}
	limits = core.DefaultLimits()
	limits.InboxBytes = len(validLine) + 10
	r = rules("reader", limits)
	if err := s.AppendInbox(ctx, "team", r, prev, core.Message{ID: "reader-2", Sender: "lead", Recipient: "reader", Body: "x"}); err == nil {
		t.Fatal("append over the byte limit succeeded")
	}
	wantBytes(t, "file after refused appends", readFile(t, path), []byte(validLine))
}

// TestConcurrentTeams appends to several teams at once; the store needs no
// lock of its own for different teams.
func TestConcurrentTeams(t *testing.T) {
	s, data := openStore(t)
	teams := []string{"alpha", "beta", "gamma", "delta"}
	for _, team := range teams {
		createTeam(t, s, team)
	}
	r := rules("lead", core.DefaultLimits())
	errs := make(chan error, len(teams))
	var wg sync.WaitGroup
	for _, team := range teams {
		wg.Go(func() {
			for i := 1; i <= r.Limits.InboxMessages; i++ {
				prev, err := s.LoadInbox(ctx, team, r)
				if err == nil {
					err = s.AppendInbox(ctx, team, r, prev, core.Message{
						ID: fmt.Sprintf("lead-%d", i), Sender: "reader", Recipient: "lead", Body: team,
					})
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
		got, err := s.LoadInbox(ctx, team, r)
		if err != nil || len(got) != r.Limits.InboxMessages {
			t.Fatalf("%s: %d letters, %v", team, len(got), err)
		}
		if names := dirNames(t, filepath.Dir(inboxPath(data, team, "lead"))); !reflect.DeepEqual(names, []string{"lead.jsonl"}) {
			t.Fatalf("%s inboxes hold %q", team, names)
		}
	}
}
