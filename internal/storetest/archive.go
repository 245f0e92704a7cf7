package storetest

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"

	"mailroom/internal/core"
)

// RunArchive runs the archive's part of the contract (docs/api.md, "Mail
// that stays useful"): a store commits a change-set's Archived with the
// member's new mark and cursor, all or nothing; its inbox then holds only
// the letters not archived, counted and sized without them, and its
// archive (Snapshot.LoadArchive) the others, in number order, kept across
// a reopen. Run calls it; reopen, when not nil, closes a store and opens
// it again on the same data.
func RunArchive(t *testing.T, newStore func(t *testing.T) core.Store, reopen func(t *testing.T, s core.Store) core.Store) {
	t.Run("ArchiveRawUnits", func(t *testing.T) { testArchiveRaw(t, newStore(t), reopen) })
	t.Run("ArchiveThroughTheRule", func(t *testing.T) { testArchiveRule(t, newStore(t), reopen) })
	t.Run("ArchiveKeepsProtocolLetters", func(t *testing.T) { testArchiveProtocol(t, newStore(t)) })
	t.Run("ArchiveFreesAFullInbox", func(t *testing.T) { testArchiveFull(t, newStore(t)) })
	t.Run("ArchiveRacesSends", func(t *testing.T) { testArchiveRace(t, newStore(t)) })
}

// archiveOf is member's archive as a view sees it.
func archiveOf(t *testing.T, s core.Store, team, member string) []core.Message {
	t.Helper()
	var out []core.Message
	if err := core.View(t.Context(), s, team, func(tx core.TeamTx) error {
		items, err := tx.LoadArchive(member)
		out = append([]core.Message{}, items...)
		return err
	}); err != nil {
		t.Fatalf("LoadArchive(%s): %v", member, err)
	}
	return out
}

// ids are the letters' ids, joined by spaces.
func ids(items []core.Message) string {
	var b strings.Builder
	for i, m := range items {
		if i > 0 {
			b.WriteByte(' ')
		}
		b.WriteString(m.ID)
	}
	return b.String()
}

// wantLetters fails unless member's inbox and archive hold the letters
// numbered inbox and archived, the inbox's bytes are its letters' lines
// and the store's count and size of it (Unit.InboxSize) agree.
func wantLetters(t *testing.T, s core.Store, team, member string, inbox, archived []int) {
	t.Helper()
	want := func(nums []int) string {
		var b strings.Builder
		for i, n := range nums {
			if i > 0 {
				b.WriteByte(' ')
			}
			fmt.Fprintf(&b, "%s-%d", member, n)
		}
		return b.String()
	}
	var items, arch []core.Message
	var data []byte
	var n, size int
	err := core.View(t.Context(), s, team, func(tx core.TeamTx) error {
		var err error
		if items, err = tx.LoadInbox(member); err != nil {
			return err
		}
		if arch, err = tx.LoadArchive(member); err != nil {
			return err
		}
		data, err = tx.InboxBytes(member)
		return err
	})
	if err != nil {
		t.Fatalf("view of %s: %v", member, err)
	}
	u, err := s.Begin(t.Context(), team, false)
	if err != nil {
		t.Fatal(err)
	}
	n, size, err = u.InboxSize(member)
	_ = u.Close()
	if err != nil {
		t.Fatalf("InboxSize(%s): %v", member, err)
	}
	if got := ids(items); got != want(inbox) {
		t.Fatalf("inbox of %s = [%s], want [%s]", member, got, want(inbox))
	}
	if got := ids(arch); got != want(archived) {
		t.Fatalf("archive of %s = [%s], want [%s]", member, got, want(archived))
	}
	var lines []byte
	for _, m := range items {
		lines = append(lines, core.EncodeInboxLine(m)...)
	}
	if string(data) != string(lines) {
		t.Fatalf("InboxBytes(%s) = %q, want its letters' lines %q", member, data, lines)
	}
	if n != len(inbox) || size != len(lines) {
		t.Fatalf("InboxSize(%s) = %d letters, %d bytes; want %d, %d (archived letters are not in the inbox)", member, n, size, len(inbox), len(lines))
	}
}

// appendNext appends the next letter of member's inbox in one raw unit,
// numbered after the archived ones, and returns its id.
func appendNext(t *testing.T, s core.Store, team, member, body string) string {
	t.Helper()
	var id string
	if err := core.Update(t.Context(), s, team, func(tx core.TeamTx) error {
		items, err := tx.LoadInbox(member)
		if err != nil {
			return err
		}
		id = fmt.Sprintf("%s-%d", member, tx.State().Member(member).Archive.Next(len(items)))
		return tx.AppendLetter(core.Message{ID: id, Sender: core.LeadName, Recipient: member, Body: body})
	}); err != nil {
		t.Fatalf("append %s: %v", body, err)
	}
	return id
}

// archiveRaw archives member's letters numbered moved under mark, and
// moves its cursor to cur, in one raw unit of work; fail, when not nil,
// is returned by the unit instead of committing.
func archiveRaw(s core.Store, team, member string, mark *core.ArchiveMark, moved []int, cur int, fail error) error {
	return core.Update(context.Background(), s, team, func(tx core.TeamTx) error {
		if err := tx.ArchiveLetters(member, mark, moved); err != nil {
			return err
		}
		if err := tx.SetReadThrough(member, cur); err != nil {
			return err
		}
		return fail
	})
}

// testArchiveRaw: units that archive through TeamTx.ArchiveLetters, as
// the rule does: a failed one leaves everything; a committed one moves
// the letters, the mark and the cursor together; ids go on after the
// archived letters; a letter kept before the mark stays in the inbox
// until a later archive takes it; all of it after a reopen.
func testArchiveRaw(t *testing.T, s core.Store, reopen func(t *testing.T, s core.Store) core.Store) {
	create(t, s, Team("alpha", "reader"))
	for i := range 5 {
		appendNext(t, s, "alpha", "reader", fmt.Sprintf("letter %d", i+1))
	}
	if err := core.Update(t.Context(), s, "alpha", func(tx core.TeamTx) error { return tx.SetReadThrough("reader", 4) }); err != nil {
		t.Fatal(err)
	}
	boom := errors.New("boom")
	if err := archiveRaw(s, "alpha", "reader", &core.ArchiveMark{Through: 3, Kept: []int{2}}, []int{1, 3}, 2, boom); !errors.Is(err, boom) {
		t.Fatalf("failing unit = %v, want its error", err)
	}
	wantLetters(t, s, "alpha", "reader", []int{1, 2, 3, 4, 5}, nil)
	if got := readThrough(t, s, "alpha", "reader"); got != 4 {
		t.Fatalf("cursor after a failed archive = %d, want 4", got)
	}
	// Letters 1 and 3 leave; 2 is kept (as a protocol letter still needed
	// would be).
	if err := archiveRaw(s, "alpha", "reader", &core.ArchiveMark{Through: 3, Kept: []int{2}}, []int{1, 3}, 2, nil); err != nil {
		t.Fatal(err)
	}
	wantLetters(t, s, "alpha", "reader", []int{2, 4, 5}, []int{1, 3})
	if got := readThrough(t, s, "alpha", "reader"); got != 2 {
		t.Fatalf("cursor after archiving 2 of 4 read = %d, want 2", got)
	}
	if mark := state(t, s, "alpha").Member("reader").Archive; mark == nil || mark.Through != 3 || !slices.Equal(mark.Kept, []int{2}) {
		t.Fatalf("mark = %+v, want through 3, kept [2]", mark)
	}
	if id := appendNext(t, s, "alpha", "reader", "after"); id != "reader-6" {
		t.Fatalf("next letter = %s, want reader-6 (ids never reused)", id)
	}
	// The kept letter leaves with the next archive.
	if err := archiveRaw(s, "alpha", "reader", &core.ArchiveMark{Through: 4}, []int{2, 4}, 0, nil); err != nil {
		t.Fatal(err)
	}
	wantLetters(t, s, "alpha", "reader", []int{5, 6}, []int{1, 2, 3, 4})
	wantLetters(t, s, "alpha", "lead", nil, nil)
	if reopen != nil {
		s = reopen(t, s)
		wantLetters(t, s, "alpha", "reader", []int{5, 6}, []int{1, 2, 3, 4})
		if got := readThrough(t, s, "alpha", "reader"); got != 0 {
			t.Fatalf("cursor after a reopen = %d, want 0", got)
		}
		if id := appendNext(t, s, "alpha", "reader", "after a reopen"); id != "reader-7" {
			t.Fatalf("next letter after a reopen = %s, want reader-7", id)
		}
	}
}

// service is core's rule over s.
func service(t *testing.T, s core.Store) *core.Service {
	t.Helper()
	svc := core.NewService(s, core.Options{})
	if err := svc.Open(t.Context()); err != nil {
		t.Fatal(err)
	}
	return svc
}

// sendAs sends a letter from one member to another through the rule.
func sendAs(t *testing.T, svc *core.Service, team, from, to, body string) (string, error) {
	t.Helper()
	r, err := svc.Send(core.AsMember(t.Context(), team, from), core.SendInput{Team: team, To: to, Body: body})
	return r.ID, err
}

func mustSend(t *testing.T, svc *core.Service, team, from, to, body string) string {
	t.Helper()
	id, err := sendAs(t, svc, team, from, to, body)
	if err != nil {
		t.Fatalf("send %q to %s: %v", body, to, err)
	}
	return id
}

func markRead(t *testing.T, svc *core.Service, team, member, through string) core.ReadState {
	t.Helper()
	rs, err := svc.MarkRead(core.AsMember(t.Context(), team, member), team, member, through)
	if err != nil {
		t.Fatalf("mark %s read through %s: %v", member, through, err)
	}
	return rs
}

func archiveThrough(t *testing.T, svc *core.Service, team, member, through string) (core.ArchiveResult, error) {
	t.Helper()
	return svc.ArchiveInbox(core.AsMember(t.Context(), team, member), team, member, through)
}

func mustArchive(t *testing.T, svc *core.Service, team, member, through string, moved, left int) {
	t.Helper()
	r, err := archiveThrough(t, svc, team, member, through)
	if err != nil || r.Archived != moved || r.InboxLength != left {
		t.Fatalf("archive %s through %s = %+v, %v; want %d archived, %d left", member, through, r, err, moved, left)
	}
}

// readStateOf is member's cursor and unread count as the rule reads it.
func readStateOf(t *testing.T, svc *core.Service, team, member string) string {
	t.Helper()
	rs, err := svc.ReadState(core.AsMember(t.Context(), team, member), team, member)
	if err != nil {
		t.Fatal(err)
	}
	through := "none"
	if rs.ReadThrough != nil {
		through = *rs.ReadThrough
	}
	return fmt.Sprintf("read through %s, %d unread", through, rs.Unread)
}

// testArchiveRule: core.Service's archive on the store: not_read after
// the cursor, the inbox, its bytes and count without the archived
// letters, the archive listed in order and by page, the cursor moved back,
// ids never reused, receipts of archived letters, the member's count; a
// new service (and a reopened store) sees the same.
func testArchiveRule(t *testing.T, s core.Store, reopen func(t *testing.T, s core.Store) core.Store) {
	create(t, s, Team("alpha", "reader"))
	svc := service(t, s)
	for i := range 5 {
		if id := mustSend(t, svc, "alpha", core.LeadName, "reader", fmt.Sprintf("letter %d", i+1)); id != fmt.Sprintf("reader-%d", i+1) {
			t.Fatalf("letter %d is %s", i+1, id)
		}
	}
	if _, err := archiveThrough(t, svc, "alpha", "reader", "reader-1"); core.ErrorCode(err) != core.CodeNotRead {
		t.Fatalf("archive before any read = %v, want not_read", err)
	}
	markRead(t, svc, "alpha", "reader", "reader-3")
	if _, err := archiveThrough(t, svc, "alpha", "reader", "reader-4"); core.ErrorCode(err) != core.CodeNotRead {
		t.Fatalf("archive after the cursor = %v, want not_read", err)
	}
	if _, err := archiveThrough(t, svc, "alpha", "reader", "reader-9"); core.ErrorCode(err) != core.CodeValidation {
		t.Fatalf("archive through a letter never sent = %v, want validation_failed", err)
	}
	wantLetters(t, s, "alpha", "reader", []int{1, 2, 3, 4, 5}, nil)
	mustArchive(t, svc, "alpha", "reader", "reader-2", 2, 3)
	wantLetters(t, s, "alpha", "reader", []int{3, 4, 5}, []int{1, 2})
	if got, want := readStateOf(t, svc, "alpha", "reader"), "read through reader-3, 2 unread"; got != want {
		t.Fatalf("after archiving 2 of 3 read: %s, want %s", got, want)
	}
	// Archived already: nothing moves.
	mustArchive(t, svc, "alpha", "reader", "reader-1", 0, 3)
	mustArchive(t, svc, "alpha", "reader", "reader-3", 1, 2)
	// The cursor names the last letter read, archived or not.
	if got, want := readStateOf(t, svc, "alpha", "reader"), "read through reader-3, 2 unread"; got != want {
		t.Fatalf("after archiving every letter read: %s, want %s", got, want)
	}
	if id := mustSend(t, svc, "alpha", core.LeadName, "reader", "six"); id != "reader-6" {
		t.Fatalf("letter after the archive = %s, want reader-6 (ids never reused)", id)
	}
	rs := markRead(t, svc, "alpha", "reader", "reader-5")
	if rs.ReadThrough == nil || *rs.ReadThrough != "reader-5" || rs.Unread != 1 {
		t.Fatalf("mark read through reader-5 = %+v, want reader-5 and 1 unread", rs)
	}
	// Marking an archived letter read leaves the cursor.
	if rs := markRead(t, svc, "alpha", "reader", "reader-2"); rs.ReadThrough == nil || *rs.ReadThrough != "reader-5" {
		t.Fatalf("mark read through an archived letter = %+v, want the cursor at reader-5", rs)
	}
	admin := core.AsAdmin(t.Context())
	page, err := svc.ListArchive(admin, "alpha", "reader", "", core.MaxArchivePage)
	if err != nil || ids(page) != "reader-1 reader-2 reader-3" {
		t.Fatalf("archive = [%s], %v; want [reader-1 reader-2 reader-3]", ids(page), err)
	}
	if page[1].Body != "letter 2" || page[1].Sender != core.LeadName {
		t.Fatalf("archived letter = %+v, want lead's \"letter 2\"", page[1])
	}
	if page, err := svc.ListArchive(admin, "alpha", "reader", "reader-1", 1); err != nil || ids(page) != "reader-2" {
		t.Fatalf("archive after reader-1, 1 letter = [%s], %v; want [reader-2]", ids(page), err)
	}
	receipts, err := svc.Receipts(core.AsMember(t.Context(), "alpha", core.LeadName), "alpha", []string{"reader-1", "reader-6"})
	if err != nil || len(receipts) != 2 || !receipts[0].Read || receipts[1].Read {
		t.Fatalf("receipts of an archived and an unread letter = %+v, %v; want read, unread", receipts, err)
	}
	wantView := func(svc *core.Service) {
		t.Helper()
		v, err := svc.Team(admin, "alpha")
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range v.Members {
			if m.Name == "reader" && (m.Archived != 3 || m.InboxLength != 3) {
				t.Fatalf("reader's view: %d archived, inbox of %d; want 3 and 3", m.Archived, m.InboxLength)
			}
		}
		if got, want := readStateOf(t, svc, "alpha", "reader"), "read through reader-5, 1 unread"; got != want {
			t.Fatalf("read state: %s, want %s", got, want)
		}
	}
	wantView(svc)
	wantLetters(t, s, "alpha", "reader", []int{4, 5, 6}, []int{1, 2, 3})
	// Another service on the same store reads it all from the store.
	wantView(service(t, s))
	if reopen != nil {
		s = reopen(t, s)
		svc = service(t, s)
		wantView(svc)
		if page, err := svc.ListArchive(admin, "alpha", "reader", "reader-1", 1); err != nil || ids(page) != "reader-2" {
			t.Fatalf("after a reopen, archive after reader-1, 1 letter = [%s], %v; want [reader-2]", ids(page), err)
		}
		wantLetters(t, s, "alpha", "reader", []int{4, 5, 6}, []int{1, 2, 3})
		mustArchive(t, svc, "alpha", "reader", "reader-5", 2, 1)
		if id := mustSend(t, svc, "alpha", core.LeadName, "reader", "seven"); id != "reader-7" {
			t.Fatalf("letter after a reopen = %s, want reader-7", id)
		}
		wantLetters(t, s, "alpha", "reader", []int{6, 7}, []int{1, 2, 3, 4, 5})
	}
}

// testArchiveProtocol: a plan request its target has yet to answer
// stays in the target's inbox, and the response in its sender's until it
// is matched; once answered and matched, a later archive takes them.
func testArchiveProtocol(t *testing.T, s core.Store) {
	create(t, s, Team("alpha", "reader"))
	svc := service(t, s)
	reader := core.AsMember(t.Context(), "alpha", "reader")
	lead := core.AsMember(t.Context(), "alpha", core.LeadName)
	req, err := svc.OpenRequest(reader, core.OpenInput{Team: "alpha", Target: core.LeadName, Kind: core.KindPlan, Payload: "the plan"})
	if err != nil {
		t.Fatal(err)
	}
	mustSend(t, svc, "alpha", "reader", core.LeadName, "plain")
	mustSend(t, svc, "alpha", core.LeadName, "reader", "hello")
	markRead(t, svc, "alpha", core.LeadName, "lead-2")
	mustArchive(t, svc, "alpha", core.LeadName, "lead-2", 1, 1)
	wantLetters(t, s, "alpha", core.LeadName, []int{1}, []int{2})
	if got, want := readStateOf(t, svc, "alpha", core.LeadName), "read through lead-2, 0 unread"; got != want {
		t.Fatalf("lead: %s, want %s", got, want)
	}
	if _, err := svc.Reply(lead, core.ReplyInput{Team: "alpha", RequestID: req.RequestID, Approve: true}); err != nil {
		t.Fatal(err)
	}
	// Answered, the request's letter may go.
	mustArchive(t, svc, "alpha", core.LeadName, "lead-1", 1, 0)
	wantLetters(t, s, "alpha", core.LeadName, nil, []int{1, 2})
	// reader-2 is the response, needed until reader matches it.
	markRead(t, svc, "alpha", "reader", "reader-2")
	mustArchive(t, svc, "alpha", "reader", "reader-2", 1, 1)
	wantLetters(t, s, "alpha", "reader", []int{2}, []int{1})
	if id := mustSend(t, svc, "alpha", core.LeadName, "reader", "after"); id != "reader-3" {
		t.Fatalf("letter after a kept one = %s, want reader-3", id)
	}
	mustArchive(t, svc, "alpha", "reader", "reader-2", 0, 2)
	if _, err := svc.Consume(reader, "alpha"); err != nil {
		t.Fatal(err)
	}
	if r, err := svc.Request(lead, "alpha", req.RequestID); err != nil || r.Status == core.RequestPending {
		t.Fatalf("request after its response was matched: %+v, %v; want it over", r, err)
	}
	mustArchive(t, svc, "alpha", "reader", "reader-2", 1, 1)
	wantLetters(t, s, "alpha", "reader", []int{3}, []int{1, 2})
	if got, want := readStateOf(t, svc, "alpha", "reader"), "read through reader-2, 1 unread"; got != want {
		t.Fatalf("reader: %s, want %s", got, want)
	}
}

// testArchiveFull: a full inbox (by letters, by bytes) refuses, accepts
// again once its recipient archived, and with limits.auto_archive
// archives what its recipient read by itself; never a letter unread.
func testArchiveFull(t *testing.T, s core.Store) {
	st := Team("alpha", "reader", "bytes")
	st.Limits.InboxMessages = 2
	create(t, s, st)
	svc := service(t, s)
	mustSend(t, svc, "alpha", core.LeadName, "reader", "one")
	mustSend(t, svc, "alpha", core.LeadName, "reader", "two")
	if _, err := sendAs(t, svc, "alpha", core.LeadName, "reader", "three"); core.ErrorCode(err) != core.CodeInboxFull {
		t.Fatalf("send to a full inbox = %v, want inbox_full", err)
	}
	markRead(t, svc, "alpha", "reader", "reader-2")
	mustArchive(t, svc, "alpha", "reader", "reader-2", 2, 0)
	if id := mustSend(t, svc, "alpha", core.LeadName, "reader", "three"); id != "reader-3" {
		t.Fatalf("send after the archive = %s, want reader-3", id)
	}
	mustSend(t, svc, "alpha", core.LeadName, "reader", "four")

	// By bytes: two letters of about 130 bytes fill 300.
	on := true
	big, letters := 300, 1000
	admin := core.AsAdmin(t.Context())
	if _, err := svc.UpdateLimits(admin, "alpha", core.LimitsUpdate{InboxBytes: &big, InboxMessages: &letters}); err != nil {
		t.Fatal(err)
	}
	body := strings.Repeat("b", 60)
	mustSend(t, svc, "alpha", core.LeadName, "bytes", body)
	mustSend(t, svc, "alpha", core.LeadName, "bytes", body)
	if _, err := sendAs(t, svc, "alpha", core.LeadName, "bytes", body); core.ErrorCode(err) != core.CodeInboxFull {
		t.Fatalf("send past inbox_bytes = %v, want inbox_full", err)
	}
	markRead(t, svc, "alpha", "bytes", "bytes-1")
	mustArchive(t, svc, "alpha", "bytes", "bytes-1", 1, 1)
	if id := mustSend(t, svc, "alpha", core.LeadName, "bytes", body); id != "bytes-3" {
		t.Fatalf("send after archiving bytes = %s, want bytes-3", id)
	}
	wantLetters(t, s, "alpha", "bytes", []int{2, 3}, []int{1})

	// auto_archive: a send that finds the inbox full archives what the
	// recipient has read first.
	two := 2
	if _, err := svc.UpdateLimits(admin, "alpha", core.LimitsUpdate{InboxMessages: &two, InboxBytes: new(core.DefaultLimits().InboxBytes), AutoArchive: &on}); err != nil {
		t.Fatal(err)
	}
	if _, err := sendAs(t, svc, "alpha", core.LeadName, "reader", "five"); core.ErrorCode(err) != core.CodeInboxFull {
		t.Fatalf("auto_archive with nothing read = %v, want inbox_full", err)
	}
	wantLetters(t, s, "alpha", "reader", []int{3, 4}, []int{1, 2})
	markRead(t, svc, "alpha", "reader", "reader-3")
	if id := mustSend(t, svc, "alpha", core.LeadName, "reader", "five"); id != "reader-5" {
		t.Fatalf("send with auto_archive = %s, want reader-5", id)
	}
	wantLetters(t, s, "alpha", "reader", []int{4, 5}, []int{1, 2, 3})
	if got, want := readStateOf(t, svc, "alpha", "reader"), "read through reader-3, 2 unread"; got != want {
		t.Fatalf("after the auto-archive: %s, want %s", got, want)
	}
}

// testArchiveRace: sends racing archives of the same inbox, through the
// rule, lose no letter and give no id twice: the inbox and the archive
// together hold every letter acknowledged, numbered without gaps.
func testArchiveRace(t *testing.T, s core.Store) {
	st := Team("alpha", "reader")
	st.Limits.InboxMessages = 1000
	st.Limits.InboxBytes = 1 << 20
	create(t, s, st)
	svc := service(t, s)
	const senders, each = 4, 10
	var wg sync.WaitGroup
	var mu sync.Mutex
	sent := map[string]bool{}
	errs := make(chan error, senders*each+1)
	done := make(chan struct{})
	for w := range senders {
		wg.Go(func() {
			for i := range each {
				id, err := sendAs(t, svc, "alpha", core.LeadName, "reader", fmt.Sprintf("w%d-%d", w, i))
				if err != nil {
					errs <- err
					continue
				}
				mu.Lock()
				if sent[id] {
					errs <- fmt.Errorf("id %s given twice", id)
				}
				sent[id] = true
				mu.Unlock()
			}
		})
	}
	var archiver sync.WaitGroup
	archiver.Go(func() {
		reader := core.AsMember(context.Background(), "alpha", "reader")
		for {
			select {
			case <-done:
				return
			default:
			}
			items, err := svc.Inbox(reader, "alpha", "reader")
			if err != nil {
				errs <- err
				return
			}
			if len(items) == 0 {
				continue
			}
			last := items[len(items)-1].ID
			if _, err := svc.MarkRead(reader, "alpha", "reader", last); err != nil {
				errs <- err
				return
			}
			if _, err := svc.ArchiveInbox(reader, "alpha", "reader", last); err != nil {
				errs <- err
				return
			}
		}
	})
	wg.Wait()
	close(done)
	archiver.Wait()
	close(errs)
	for err := range errs {
		t.Errorf("racing sends and archives: %v", err)
	}
	inbox := inbox(t, s, "alpha", "reader")
	arch := archiveOf(t, s, "alpha", "reader")
	all := append(arch, inbox...)
	slices.SortFunc(all, func(a, b core.Message) int { return seqOf(a.ID) - seqOf(b.ID) })
	if len(all) != senders*each || len(sent) != senders*each {
		t.Fatalf("%d letters stored (%d archived), %d acknowledged; want %d", len(all), len(arch), len(sent), senders*each)
	}
	for i, m := range all {
		if want := fmt.Sprintf("reader-%d", i+1); m.ID != want || !sent[m.ID] {
			t.Fatalf("letter %d is %s (acknowledged: %v), want %s", i+1, m.ID, sent[m.ID], want)
		}
	}
	if len(arch) == 0 {
		t.Log("no archive ran while the letters were sent")
	}
	wantLetters(t, s, "alpha", "reader", numbers(inbox), numbers(arch))
}

func seqOf(id string) int {
	_, n, _ := core.ParseLetterID(id)
	return n
}

func numbers(items []core.Message) []int {
	out := []int{}
	for _, m := range items {
		out = append(out, seqOf(m.ID))
	}
	return out
}
