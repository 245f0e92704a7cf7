package core_test

import (
	"strings"
	"testing"

	"mailroom/internal/core"
)

// archiveAs archives member's inbox through id as actor ("" = admin).
func (f *fixture) archiveAs(actor, member, through string) (core.ArchiveResult, error) {
	ctx := f.t.Context()
	if actor != "" {
		ctx = core.AsMember(ctx, f.team, actor)
	}
	return f.svc.ArchiveInbox(ctx, f.team, member, through)
}

func (f *fixture) markRead(member, through string) core.ReadState {
	f.t.Helper()
	rs, err := f.svc.MarkRead(core.AsMember(f.t.Context(), f.team, member), f.team, member, through)
	if err != nil {
		f.t.Fatal(err)
	}
	return rs
}

func (f *fixture) inboxIDs(svc *core.Service, member string) string {
	f.t.Helper()
	items, err := svc.Inbox(f.t.Context(), f.team, member)
	return f.idsOf(items, err)
}

func (f *fixture) archiveIDs(svc *core.Service, member string) string {
	f.t.Helper()
	items, err := svc.ListArchive(f.t.Context(), f.team, member, "", core.MaxArchivePage)
	return f.idsOf(items, err)
}

// idsOf is the letters' ids, space-separated.
func (f *fixture) idsOf(items []core.Message, err error) string {
	f.t.Helper()
	if err != nil {
		f.t.Fatal(err)
	}
	var out []string
	for _, m := range items {
		out = append(out, m.ID)
	}
	return strings.Join(out, " ")
}

// TestArchiveRefusals: who may archive, and what through may name; a
// refusal changes nothing.
func TestArchiveRefusals(t *testing.T) {
	f := newFixture(t, nil)
	for range 3 {
		f.send("lead", "reader", "work")
	}
	_, err := f.archiveAs("reader", "reader", "reader-1")
	wantCode(t, err, core.CodeNotRead) // nothing read yet
	f.markRead("reader", "reader-2")
	for _, tc := range []struct {
		actor, member, through string
		code                   core.Code
	}{
		{"reader", "reader", "reader-3", core.CodeNotRead},
		{"reviewer", "reader", "reader-1", core.CodeForbidden},
		{"reader", "reader", "reader-01", core.CodeValidation},
		{"reader", "reader", "lead-1", core.CodeValidation},
		{"reader", "reader", "reader-4", core.CodeValidation},
		{"reader", "reader", "", core.CodeValidation},
	} {
		_, err := f.archiveAs(tc.actor, tc.member, tc.through)
		wantCode(t, err, tc.code)
	}
	if got := f.inboxIDs(f.svc, "reader"); got != "reader-1 reader-2 reader-3" {
		t.Fatalf("inbox after refusals = %q, want all three", got)
	}
	// The admin may; the cursor moves back with the letters.
	res, err := f.archiveAs("", "reader", "reader-2")
	if err != nil || res != (core.ArchiveResult{Archived: 2, InboxLength: 1}) {
		t.Fatalf("admin's archive = %+v, %v; want 2 moved, 1 left", res, err)
	}
	m := f.member("reader")
	if m.InboxLength != 1 || m.Archived != 2 || m.ReadThrough == nil || *m.ReadThrough != "reader-2" || m.Unread != 1 {
		t.Fatalf("member = inbox %d, archived %d, read through %v, unread %d; want 1, 2, reader-2, 1", m.InboxLength, m.Archived, m.ReadThrough, m.Unread)
	}
	// Again: nothing left to move.
	if res, err := f.archiveAs("reader", "reader", "reader-2"); err != nil || res.Archived != 0 {
		t.Fatalf("second archive = %+v, %v; want 0 moved", res, err)
	}
}

// TestArchivedLettersStayUseful: ids are never reused, and an archived
// letter is still in receipts, acknowledgements, threads and replies;
// marking it read changes nothing.
func TestArchivedLettersStayUseful(t *testing.T) {
	f := newFixture(t, nil)
	lead := core.AsMember(t.Context(), f.team, "lead")
	if _, err := f.sendAs("lead", core.SendInput{To: "reader", Body: "do it", AckRequired: true}); err != nil {
		t.Fatal(err)
	}
	f.send("lead", "reader", "second")
	f.markRead("reader", "reader-2")
	if _, err := f.archiveAs("reader", "reader", "reader-2"); err != nil {
		t.Fatal(err)
	}
	if got := f.send("lead", "reader", "third"); got.ID != "reader-3" {
		t.Fatalf("next letter = %s, want reader-3", got.ID)
	}
	reply, err := f.sendAs("reader", core.SendInput{To: "lead", Body: "done", InReplyTo: "reader-1"})
	if err != nil {
		t.Fatalf("reply to an archived letter: %v", err)
	}
	rec, err := f.svc.AckLetter(core.AsMember(t.Context(), f.team, "reader"), core.AckInput{Team: f.team, Member: "reader", ID: "reader-1", Outcome: core.AckDone})
	if err != nil || !rec.Read || rec.Ack == nil || rec.Ack.Outcome != core.AckDone {
		t.Fatalf("ack of an archived letter = %+v, %v; want read and done", rec, err)
	}
	rs, err := f.svc.Receipts(lead, f.team, []string{"reader-1", "reader-3"})
	if err != nil || len(rs) != 2 || !rs[0].Read || rs[0].Ack == nil || rs[1].Read {
		t.Fatalf("receipts = %+v, %v; want reader-1 read and acked, reader-3 unread", rs, err)
	}
	thread, err := f.svc.Thread(lead, f.team, "reader-1")
	if err != nil || len(thread) != 2 || thread[0].ID != "reader-1" || thread[1].ID != reply.ID || thread[1].Seq != 4 {
		t.Fatalf("thread = %+v, %v; want reader-1 then the reply with seq 4", thread, err)
	}
	before := f.member("reader")
	rs2 := f.markRead("reader", "reader-1")
	if rs2.ReadThrough == nil || *rs2.ReadThrough != "reader-2" || rs2.Unread != 1 {
		t.Fatalf("mark read of an archived letter = %+v, want the cursor as it was (reader-2, 1 unread)", rs2)
	}
	if after := f.member("reader"); *after.ReadThrough != *before.ReadThrough {
		t.Fatalf("cursor moved: %v → %v", *before.ReadThrough, *after.ReadThrough)
	}
	for name, svc := range map[string]*core.Service{"running": f.svc, "reopened": f.reopen()} {
		if got := f.inboxIDs(svc, "reader"); got != "reader-3" {
			t.Errorf("%s: inbox = %q, want reader-3", name, got)
		}
		if got := f.archiveIDs(svc, "reader"); got != "reader-1 reader-2" {
			t.Errorf("%s: archive = %q, want reader-1 reader-2", name, got)
		}
	}
	// Reads after an archived letter: the inbox's letters after it.
	for _, after := range []string{"reader-1", "reader-2"} {
		got, err := f.svc.LettersAfter(t.Context(), f.team, "reader", after)
		if err != nil || len(got) != 1 || got[0].ID != "reader-3" {
			t.Fatalf("letters after %s = %+v, %v; want reader-3", after, got, err)
		}
	}
	_, err = f.svc.LettersAfter(t.Context(), f.team, "reader", "reader-4")
	wantCode(t, err, core.CodeValidation)
	// Paging: after and limit.
	page, err := f.svc.ListArchive(t.Context(), f.team, "reader", "reader-1", 1)
	if err != nil || len(page) != 1 || page[0].ID != "reader-2" {
		t.Fatalf("archive after reader-1, limit 1 = %+v, %v; want reader-2", page, err)
	}
	_, err = f.svc.ListArchive(t.Context(), f.team, "reader", "", 0)
	wantCode(t, err, core.CodeValidation)
	_, err = f.svc.ListArchive(core.AsMember(t.Context(), f.team, "reviewer"), f.team, "reader", "", 10)
	wantCode(t, err, core.CodeForbidden)
}

// TestAutoArchive: with limits.auto_archive a send that finds its
// recipient's inbox full first archives what the recipient has read;
// without it, or with nothing read, the inbox is full and the refusal
// names the ways out.
func TestAutoArchive(t *testing.T) {
	limits := core.DefaultLimits()
	limits.InboxMessages = 3
	f := newFixture(t, &limits)
	for range 3 {
		f.send("lead", "reader", "work")
	}
	_, err := f.sendAs("lead", core.SendInput{To: "reader", Body: "one more"})
	wantCode(t, err, core.CodeInboxFull)
	for _, want := range []string{"limits.inbox_messages (3)", "archive", "auto_archive", "PATCH"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("inbox_full says %q; want it to name %q", err, want)
		}
	}
	on := true
	if _, err := f.svc.UpdateLimits(t.Context(), f.team, core.LimitsUpdate{AutoArchive: &on}); err != nil {
		t.Fatal(err)
	}
	// Nothing read: nothing to archive, still full.
	_, err = f.sendAs("lead", core.SendInput{To: "reader", Body: "one more"})
	wantCode(t, err, core.CodeInboxFull)
	f.markRead("reader", "reader-2")
	got, err := f.sendAs("lead", core.SendInput{To: "reader", Body: "one more"})
	if err != nil || got.ID != "reader-4" {
		t.Fatalf("send with auto_archive = %+v, %v; want reader-4", got, err)
	}
	if inbox, archive := f.inboxIDs(f.svc, "reader"), f.archiveIDs(f.svc, "reader"); inbox != "reader-3 reader-4" || archive != "reader-1 reader-2" {
		t.Fatalf("after auto-archive: inbox %q, archive %q; want reader-3 reader-4 and reader-1 reader-2", inbox, archive)
	}
	if m := f.member("reader"); m.Archived != 2 || m.Unread != 2 || m.ReadThrough == nil || *m.ReadThrough != "reader-2" {
		t.Fatalf("member = archived %d, unread %d, read through %v; want 2, 2, reader-2", m.Archived, m.Unread, m.ReadThrough)
	}
}

// TestArchiveMarkMapsPositions: an ArchiveMark maps inbox positions to
// letter numbers and back, kept letters first.
func TestArchiveMarkMapsPositions(t *testing.T) {
	var none *core.ArchiveMark
	if none.Number(3) != 3 || none.Position(3) != 3 || none.Archived(1) || none.Next(4) != 5 {
		t.Fatal("a nil mark must number positions from 1")
	}
	m := &core.ArchiveMark{Through: 6, Kept: []int{2, 5}}
	for pos, n := range map[int]int{1: 2, 2: 5, 3: 7, 4: 8} {
		if got := m.Number(pos); got != n {
			t.Errorf("Number(%d) = %d, want %d", pos, got, n)
		}
		if got := m.Position(n); got != pos {
			t.Errorf("Position(%d) = %d, want %d", n, got, pos)
		}
	}
	for n, want := range map[int]bool{1: true, 2: false, 3: true, 5: false, 6: true, 7: false} {
		if got := m.Archived(n); got != want {
			t.Errorf("Archived(%d) = %v, want %v", n, got, want)
		}
	}
	if m.Count() != 4 || m.Next(2) != 7 || m.Sent(4) != 8 {
		t.Fatalf("Count %d, Next(2) %d, Sent(4) %d; want 4, 7, 8", m.Count(), m.Next(2), m.Sent(4))
	}
	for pos, want := range map[int]int{0: 6, 1: 6, 2: 6, 3: 7} {
		if got := m.LastRead(pos); got != want {
			t.Errorf("LastRead(%d) = %d, want %d", pos, got, want)
		}
	}
	if got := (&core.ArchiveMark{Through: 3, Kept: []int{2, 3}}).LastRead(0); got != 1 {
		t.Errorf("LastRead with the last numbers kept = %d, want 1", got)
	}
}
