package mail_test

import (
	"fmt"
	"log/slog"
	"math/rand/v2"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"testing"
	"time"

	"mailroom/internal/core"
	"mailroom/internal/mail"
)

// TestLoadTeamsReadsEachInboxOnce: start-up reads an inbox once: the
// torn-line check validates what it read, and the LoadInbox that follows
// (core's validation) finds it without reading the file again. A repaired
// file and a file that fails validation are read again, and the second
// still fails.
func TestLoadTeamsReadsEachInboxOnce(t *testing.T) {
	s, data := openStore(t)
	createTeam(t, s, "team")
	send(t, s, "team", rules("reader", core.DefaultLimits()), letter(1, "lead", "one"))
	send(t, s, "team", rules("reader", core.DefaultLimits()), letter(2, "reviewer", "two"))
	rv := rules("reviewer", core.DefaultLimits())
	send(t, s, "team", rv, core.Message{ID: "reviewer-1", Sender: "lead", Recipient: "reviewer", Body: "hi"})
	torn := inboxPath(data, "team", "reviewer")
	f, err := os.OpenFile(torn, os.O_WRONLY|os.O_APPEND, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.WriteString(`{"id": "reviewer-2", "sen`); err != nil {
		t.Fatal(err)
	}
	f.Close()
	createTeam(t, s, "other")
	writeFile(t, inboxPath(data, "other", "reader"), line(letter(1, "ghost", "not a member")))

	ffs := newFaultFS()
	s2, err := mail.Open(data, mail.WithFS(ffs), mail.WithLogger(slog.New(slog.DiscardHandler)))
	if err != nil {
		t.Fatal(err)
	}
	// Every file was written a moment ago; a clock a minute ahead makes
	// them as settled as the files of a real restart.
	mail.SetClock(s2, func() time.Time { return time.Now().Add(time.Minute) })
	teams, err := s2.LoadTeams(ctx)
	if err != nil || len(teams) != 2 || teams[0].Err != nil || teams[1].Err != nil {
		t.Fatalf("LoadTeams = %+v, %v", teams, err)
	}
	// Two state files, team's reader and reviewer, other's reader.
	if n := ffs.readOpens(); n != 5 {
		t.Fatalf("LoadTeams opened %d files for reading, want 5", n)
	}
	tests := []struct {
		team, member string
		reads        int // files opened for reading by LoadInbox
		letters      int
		cause        error
	}{
		{"team", "reader", 0, 2, nil},
		{"team", "lead", 0, 0, nil},     // no file
		{"team", "reviewer", 1, 1, nil}, // repaired
		{"other", "reader", 1, 0, core.ErrInboxSender},
	}
	for _, tt := range tests {
		before := ffs.readOpens()
		got, err := s2.LoadInbox(ctx, tt.team, rules(tt.member, core.DefaultLimits()))
		if n := ffs.readOpens() - before; n != tt.reads {
			t.Errorf("%s/%s: LoadInbox opened %d files for reading, want %d", tt.team, tt.member, n, tt.reads)
		}
		if tt.cause != nil {
			wantCorrupt(t, tt.team+"/"+tt.member, err, tt.cause)
			continue
		}
		if err != nil || len(got) != tt.letters {
			t.Errorf("%s/%s: LoadInbox = %d letters, %v; want %d", tt.team, tt.member, len(got), err, tt.letters)
		}
	}
	// The letters kept from start-up are a base for appends like any.
	send(t, s2, "team", rules("reader", core.DefaultLimits()), letter(3, "lead", "three"))
	want := append(append(line(letter(1, "lead", "one")), line(letter(2, "reviewer", "two"))...), line(letter(3, "lead", "three"))...)
	wantBytes(t, "after a send", readFile(t, inboxPath(data, "team", "reader")), want)
}

// TestLoadTeamsManyInOrder: teams are loaded in parallel, and the result
// is the same as one at a time would give: every team, sorted by name,
// damaged ones with their error, unfinished creations removed.
func TestLoadTeamsManyInOrder(t *testing.T) {
	s, data := openStore(t)
	var want []string
	damaged := map[string]bool{}
	for _, i := range rand.Perm(60) {
		name := fmt.Sprintf("team-%02d", i)
		switch i % 10 {
		case 3:
			if err := os.MkdirAll(filepath.Join(data, "teams", name, "inboxes"), 0o700); err != nil {
				t.Fatal(err)
			}
			continue // unfinished: removed
		case 7:
			createTeam(t, s, name)
			writeFile(t, filepath.Join(data, "teams", name, "state.json"), []byte("{"))
			damaged[name] = true
		default:
			createTeam(t, s, name)
			send(t, s, name, rules("reader", core.DefaultLimits()), letter(1, "lead", name))
		}
		want = append(want, name)
	}
	slices.Sort(want)

	s2, err := mail.Open(data)
	if err != nil {
		t.Fatal(err)
	}
	teams, err := s2.LoadTeams(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, lt := range teams {
		names = append(names, lt.Name)
		if (lt.Err != nil) != damaged[lt.Name] || (lt.State == nil) != damaged[lt.Name] {
			t.Errorf("%s: Err %v, State %v", lt.Name, lt.Err, lt.State != nil)
		}
	}
	if !reflect.DeepEqual(names, want) {
		t.Fatalf("LoadTeams names\n %q\nwant\n %q", names, want)
	}
	entries := dirNames(t, filepath.Join(data, "teams"))
	if !reflect.DeepEqual(entries, want) {
		t.Fatalf("teams directory holds %q after start-up, want %q", entries, want)
	}
}
