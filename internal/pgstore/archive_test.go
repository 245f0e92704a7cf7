package pgstore_test

import (
	"bytes"
	"context"
	"fmt"
	"strings"
	"testing"

	"mailroom/internal/core"
	"mailroom/internal/pgstore"
	"mailroom/internal/pgtest"
	"mailroom/internal/storetest"
)

// services opens n replicas on the database at url, each a store and
// core's rule over it.
func services(t *testing.T, url string, n int) []*core.Service {
	t.Helper()
	var out []*core.Service
	for range n {
		svc := core.NewService(open(t, url), core.Options{})
		if err := svc.Open(t.Context()); err != nil {
			t.Fatal(err)
		}
		out = append(out, svc)
	}
	return out
}

func sendVia(ctx context.Context, svc *core.Service, to, body string) (string, error) {
	r, err := svc.Send(core.AsMember(ctx, "demo", core.LeadName), core.SendInput{Team: "demo", To: to, Body: body})
	return r.ID, err
}

// TestArchiveAcrossReplicas: what one replica archives the other sees at
// once: the inbox without the letters, the archive, the cursor, the next
// id; and a replica that remembers the inbox full (cache.go) accepts a
// letter once the other has archived, rather than refuse on what it
// remembered.
func TestArchiveAcrossReplicas(t *testing.T) {
	ctx := t.Context()
	url := pgtest.New(t)
	svcs := services(t, url, 2)
	a, b := svcs[0], svcs[1]
	st := storetest.Team("demo", "reader")
	st.Limits.InboxMessages = 3
	pg := open(t, url)
	if err := pg.CreateTeam(ctx, st); err != nil {
		t.Fatal(err)
	}
	for i := range 3 {
		if _, err := sendVia(ctx, b, "reader", fmt.Sprintf("letter %d", i+1)); err != nil {
			t.Fatal(err)
		}
	}
	// B remembers the inbox full, and refuses.
	if _, err := sendVia(ctx, b, "reader", "four"); core.ErrorCode(err) != core.CodeInboxFull {
		t.Fatalf("send to a full inbox = %v, want inbox_full", err)
	}
	reader := core.AsMember(ctx, "demo", "reader")
	if _, err := a.MarkRead(reader, "demo", "reader", "reader-2"); err != nil {
		t.Fatal(err)
	}
	if r, err := a.ArchiveInbox(reader, "demo", "reader", "reader-2"); err != nil || r.Archived != 2 || r.InboxLength != 1 {
		t.Fatalf("archive on A = %+v, %v; want 2 archived, 1 left", r, err)
	}
	items, err := b.Inbox(reader, "demo", "reader")
	if err != nil || len(items) != 1 || items[0].ID != "reader-3" {
		t.Fatalf("inbox on B = %+v, %v; want [reader-3]", items, err)
	}
	arch, err := b.ListArchive(reader, "demo", "reader", "", 10)
	if err != nil || len(arch) != 2 || arch[0].ID != "reader-1" || arch[1].ID != "reader-2" {
		t.Fatalf("archive on B = %+v, %v; want [reader-1 reader-2]", arch, err)
	}
	if rs, err := b.ReadState(reader, "demo", "reader"); err != nil || rs.ReadThrough == nil || *rs.ReadThrough != "reader-2" || rs.Unread != 1 {
		t.Fatalf("read state on B = %+v, %v; want read through reader-2, 1 unread", rs, err)
	}
	for i, want := range []string{"reader-4", "reader-5"} {
		if id, err := sendVia(ctx, b, "reader", fmt.Sprintf("after %d", i)); err != nil || id != want {
			t.Fatalf("send on B after A's archive = %q, %v; want %s", id, err, want)
		}
	}
	if _, err := sendVia(ctx, a, "reader", "full again"); core.ErrorCode(err) != core.CodeInboxFull {
		t.Fatalf("send on A to the inbox full again = %v, want inbox_full", err)
	}
	// The stored counts are the inbox's only.
	var letters, size, rows, lineBytes int
	if err := pg.Pool().QueryRow(ctx, `SELECT letters, inbox_bytes,
			(SELECT count(*) FROM letters WHERE team = 'demo' AND member = 'reader' AND NOT archived),
			(SELECT sum(octet_length(line)) FROM letters WHERE team = 'demo' AND member = 'reader' AND NOT archived)
		FROM members WHERE team = 'demo' AND name = 'reader'`).Scan(&letters, &size, &rows, &lineBytes); err != nil {
		t.Fatal(err)
	}
	if letters != 3 || rows != 3 || size != lineBytes {
		t.Fatalf("stored counts %d letters, %d bytes; inbox rows %d of %d bytes; want 3 letters and equal bytes", letters, size, rows, lineBytes)
	}
}

// TestRememberedLimitsRefuseNothing: a replica that remembers the inbox
// full refuses no letter the database has room for, whichever replica
// made the room: a raised limit too.
func TestRememberedLimitsRefuseNothing(t *testing.T) {
	ctx := t.Context()
	url := pgtest.New(t)
	svcs := services(t, url, 2)
	a, b := svcs[0], svcs[1]
	st := storetest.Team("demo", "reader")
	st.Limits.InboxMessages = 1
	if err := open(t, url).CreateTeam(ctx, st); err != nil {
		t.Fatal(err)
	}
	if _, err := sendVia(ctx, b, "reader", "one"); err != nil {
		t.Fatal(err)
	}
	if _, err := sendVia(ctx, b, "reader", "two"); core.ErrorCode(err) != core.CodeInboxFull {
		t.Fatalf("send to a full inbox = %v, want inbox_full", err)
	}
	two := 2
	if _, err := a.UpdateLimits(core.AsAdmin(ctx), "demo", core.LimitsUpdate{InboxMessages: &two}); err != nil {
		t.Fatal(err)
	}
	if id, err := sendVia(ctx, b, "reader", "two"); err != nil || id != "reader-2" {
		t.Fatalf("send on B after A raised the limit = %q, %v; want reader-2", id, err)
	}
}

// TestImportArchives: a file store's archive (lines in the order they
// were archived, a letter kept behind) is imported byte for byte beside
// the inbox, counted out of it, and read back as the file store reads it;
// an archive that lacks a letter its mark names is refused, and nothing
// is stored.
func TestImportArchives(t *testing.T) {
	ctx := t.Context()
	st := storetest.Team("demo", "reader")
	st.Member("reader").Archive = &core.ArchiveMark{Through: 4, Kept: []int{2}}
	letter := func(n int) core.Message {
		return core.Message{ID: fmt.Sprintf("reader-%d", n), Sender: core.LeadName, Recipient: "reader", Body: fmt.Sprintf("letter %d", n)}
	}
	// An imported lesson's spacing: kept as it is.
	odd := []byte(`{"id":"reader-3","sender":"lead","recipient":"reader","body":"letter 3"}` + "\n")
	inbox := append(core.EncodeInboxLine(letter(2)), core.EncodeInboxLine(letter(5))...)
	archive := append(append(append([]byte{}, core.EncodeInboxLine(letter(4))...), odd...), core.EncodeInboxLine(letter(1))...)
	team := pgstore.ImportedTeam{State: st, Inboxes: map[string][]byte{"reader": inbox}, Archives: map[string][]byte{"reader": archive},
		ReadThrough: map[string]int{"reader": 1}}

	url := pgtest.New(t)
	pg := open(t, url)
	short := team
	short.State = st.Clone()
	short.Archives = map[string][]byte{"reader": archive[:bytes.LastIndex(archive[:len(archive)-1], []byte("\n"))+1]}
	if err := pg.Import(ctx, []pgstore.ImportedTeam{short}, nil); err == nil || !strings.Contains(err.Error(), "archive of reader") {
		t.Fatalf("import of an archive without reader-1 = %v, want it refused", err)
	}
	if n, err := pg.CountTeams(ctx); err != nil || n != 0 {
		t.Fatalf("after a refused import: %d teams, %v; want none", n, err)
	}
	if err := pg.Import(ctx, []pgstore.ImportedTeam{team}, nil); err != nil {
		t.Fatal(err)
	}
	if err := core.View(ctx, pg, "demo", func(tx core.TeamTx) error {
		data, err := tx.InboxBytes("reader")
		if err != nil || !bytes.Equal(data, inbox) {
			t.Errorf("inbox = %q, %v; want %q", data, err, inbox)
		}
		arch, err := tx.LoadArchive("reader")
		if err != nil || len(arch) != 3 || arch[0] != letter(1) || arch[1] != letter(3) || arch[2] != letter(4) {
			t.Errorf("archive = %+v, %v; want letters 1, 3, 4", arch, err)
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	var letters, size, rows int
	var line []byte
	if err := pg.Pool().QueryRow(ctx, `SELECT letters, inbox_bytes, (SELECT count(*) FROM letters WHERE team = 'demo'),
			(SELECT line FROM letters WHERE team = 'demo' AND seq = 3)
		FROM members WHERE team = 'demo' AND name = 'reader'`).Scan(&letters, &size, &rows, &line); err != nil {
		t.Fatal(err)
	}
	if letters != 2 || size != len(inbox) || rows != 5 || !bytes.Equal(line, odd) {
		t.Fatalf("stored: %d letters of %d bytes in the inbox, %d rows, reader-3's line %q; want 2, %d, 5, %q", letters, size, rows, line, len(inbox), odd)
	}
	svc := services(t, url, 1)[0]
	if id, err := sendVia(ctx, svc, "reader", "six"); err != nil || id != "reader-6" {
		t.Fatalf("send after the import = %q, %v; want reader-6", id, err)
	}
	// The cursor is at reader-2, kept; the last letter read is reader-4,
	// archived.
	if rs, err := svc.ReadState(core.AsAdmin(ctx), "demo", "reader"); err != nil || rs.ReadThrough == nil || *rs.ReadThrough != "reader-4" || rs.Unread != 2 {
		t.Fatalf("read state after the import = %+v, %v; want through reader-4, 2 unread", rs, err)
	}
}
