package core_test

import (
	"testing"

	"mailroom/internal/core"
	"mailroom/internal/mail"
	"mailroom/internal/storetest"
	"mailroom/internal/testkit"
)

func TestParseLetterID(t *testing.T) {
	for _, tt := range []struct {
		id     string
		member string
		n      int
		ok     bool
	}{
		{"reader-1", "reader", 1, true},
		{"reader-12", "reader", 12, true},
		{"code-reviewer-2-7", "code-reviewer-2", 7, true},
		{"reader-999999999999999999", "reader", 999999999999999999, true},
		{"reader-+1", "", 0, false},
		{"reader-01", "", 0, false},
		{"reader-0", "", 0, false},
		{"reader- 1", "", 0, false},
		{"reader-1 ", "", 0, false},
		{"reader-1_000", "", 0, false},
		{"reader-0x1", "", 0, false},
		{"reader-１", "", 0, false},
		{"reader-1000000000000000000", "", 0, false},
		{"reader-", "", 0, false},
		{"-1", "", 0, false},
		{"Reader-1", "", 0, false},
		{"reader", "", 0, false},
		{"", "", 0, false},
	} {
		member, n, ok := core.ParseLetterID(tt.id)
		if member != tt.member || n != tt.n || ok != tt.ok {
			t.Errorf("ParseLetterID(%q) = %q, %d, %v; want %q, %d, %v", tt.id, member, n, ok, tt.member, tt.n, tt.ok)
		}
	}
}

// TestLetterIDsCanonical: a letter id read by mark-read, receipts or a
// read's after is the one way Mailroom writes it; any other spelling of
// an existing letter is validation_failed, never that letter.
func TestLetterIDsCanonical(t *testing.T) {
	f := newFixture(t, nil)
	f.send("lead", "reader", "one")
	f.send("lead", "reader", "two")
	reader := core.AsMember(t.Context(), f.team, "reader")
	lead := core.AsMember(t.Context(), f.team, "lead")
	for _, id := range []string{"reader-+1", "reader-01", "reader- 1", "reader-1 ", "reader-0x1"} {
		_, err := f.svc.MarkRead(reader, f.team, "reader", id)
		wantCode(t, err, core.CodeValidation)
		_, err = f.svc.Receipts(lead, f.team, []string{"reader-1", id})
		wantCode(t, err, core.CodeValidation)
		_, err = f.svc.LettersAfter(reader, f.team, "reader", id)
		wantCode(t, err, core.CodeValidation)
	}
	if through, unread := f.cursorOf("reader"); through != "" || unread != 2 {
		t.Fatalf("after refused marks: read_through %q, unread %d; want none, 2", through, unread)
	}
	// The canonical ids still work; a well-formed id of no letter is
	// not_found for receipts.
	if rs, err := f.svc.MarkRead(reader, f.team, "reader", "reader-1"); err != nil || rs.ReadThrough == nil || *rs.ReadThrough != "reader-1" {
		t.Fatalf("MarkRead(reader-1) = %+v, %v", rs, err)
	}
	if rs, err := f.svc.Receipts(lead, f.team, []string{"reader-1", "reader-2"}); err != nil || len(rs) != 2 || !rs[0].Read || rs[1].Read {
		t.Fatalf("Receipts = %+v, %v; want reader-1 read, reader-2 not", rs, err)
	}
	_, err := f.svc.Receipts(lead, f.team, []string{"reader-3"})
	wantCode(t, err, core.CodeNotFound)
	if msgs, err := f.svc.LettersAfter(reader, f.team, "reader", "reader-1"); err != nil || len(msgs) != 1 || msgs[0].ID != "reader-2" {
		t.Fatalf("WaitInbox(after reader-1) = %+v, %v; want reader-2", msgs, err)
	}
	if core.TaskNumber("task-+1") != 0 || core.TaskNumber("task-01") != 0 || core.TaskNumber("task-1") != 1 {
		t.Fatalf("TaskNumber takes task-+1 or task-01 as a task id")
	}
}

// TestAdminIsNoMemberName: no team is created with a member named admin,
// the name the admin token goes by; a team that already has one (stored
// before the rule, or imported) keeps working.
func TestAdminIsNoMemberName(t *testing.T) {
	dir := t.TempDir()
	svc := testkit.OpenService(t, dir)
	_, _, err := svc.CreateTeam(t.Context(), core.TeamSpec{Name: "fresh", Members: []core.MemberSpec{{Name: "admin", Role: "r"}}})
	wantCode(t, err, core.CodeValidation)
	if _, err := svc.Team(t.Context(), "fresh"); core.ErrorCode(err) != core.CodeNotFound {
		t.Fatalf("the refused team exists: %v", err)
	}

	svc = storedWithAdmin(t, "old")
	admin := core.AsMember(t.Context(), "old", "admin")
	if _, err := svc.Send(core.AsMember(t.Context(), "old", "lead"), core.SendInput{Team: "old", To: "admin", Body: "hello"}); err != nil {
		t.Fatalf("send to the member named admin: %v", err)
	}
	if r, err := svc.Send(admin, core.SendInput{Team: "old", To: "lead", Body: "back"}); err != nil || r.ID != "lead-1" {
		t.Fatalf("send from the member named admin = %+v, %v", r, err)
	}
	msgs, err := svc.LettersAfter(admin, "old", "admin", "")
	if err != nil || len(msgs) != 1 || msgs[0].Body != "hello" {
		t.Fatalf("admin's inbox = %+v, %v", msgs, err)
	}
	if _, err := svc.MarkRead(admin, "old", "admin", "admin-1"); err != nil {
		t.Fatalf("MarkRead(admin-1): %v", err)
	}
}

// storedWithAdmin returns a service over a data directory holding team,
// stored with lead and a member named admin as before the name was
// refused (or imported so).
func storedWithAdmin(t *testing.T, team string) *core.Service {
	t.Helper()
	dir := t.TempDir()
	store, err := mail.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	if err := store.CreateTeam(t.Context(), storetest.Team(team, "admin")); err != nil {
		t.Fatal(err)
	}
	store.Close()
	return testkit.OpenService(t, dir)
}
