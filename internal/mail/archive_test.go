package mail_test

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"mailroom/internal/core"
	"mailroom/internal/mail"
)

// archiveTeam opens a service over a file store in data with team "t"
// (lead, worker) and sends worker n letters, of which it reads read.
func archiveTeam(t *testing.T, data string, n, read int) (*core.Service, *mail.Store) {
	t.Helper()
	s, svc := openService(t, data)
	ctx := core.AsAdmin(context.Background())
	if _, _, err := svc.CreateTeam(ctx, core.TeamSpec{Name: "t", Members: []core.MemberSpec{{Name: "lead", Role: "lead"}, {Name: "worker", Role: "worker"}}}); err != nil {
		t.Fatal(err)
	}
	lead := core.AsMember(context.Background(), "t", "lead")
	for i := 1; i <= n; i++ {
		if _, err := svc.Send(lead, core.SendInput{Team: "t", To: "worker", Body: fmt.Sprintf("letter %d", i)}); err != nil {
			t.Fatal(err)
		}
	}
	if read > 0 {
		if _, err := svc.MarkRead(core.AsMember(context.Background(), "t", "worker"), "t", "worker", fmt.Sprintf("worker-%d", read)); err != nil {
			t.Fatal(err)
		}
	}
	return svc, s
}

func openService(t *testing.T, data string) (*mail.Store, *core.Service) {
	t.Helper()
	s, err := mail.Open(data)
	if err != nil {
		t.Fatal(err)
	}
	svc := core.NewService(s, core.Options{})
	if err := svc.Open(context.Background()); err != nil {
		t.Fatal(err)
	}
	return s, svc
}

func ids(items []core.Message) string {
	var out []string
	for _, m := range items {
		out = append(out, m.ID)
	}
	return strings.Join(out, " ")
}

func wantArchive(t *testing.T, svc *core.Service, inbox, archive string) {
	t.Helper()
	ctx := core.AsAdmin(context.Background())
	items, err := svc.Inbox(ctx, "t", "worker")
	if err != nil {
		t.Fatal(err)
	}
	if got := ids(items); got != inbox {
		t.Errorf("inbox = %q, want %q", got, inbox)
	}
	arch, err := svc.ListArchive(ctx, "t", "worker", "", core.MaxArchivePage)
	if err != nil {
		t.Fatal(err)
	}
	if got := ids(arch); got != archive {
		t.Errorf("archive = %q, want %q", got, archive)
	}
}

// TestArchiveMovesLines: the archived lines leave the inbox file for the
// archive file byte for byte, survive a reopen, and the next letter
// takes the next id.
func TestArchiveMovesLines(t *testing.T) {
	data := t.TempDir()
	svc, s := archiveTeam(t, data, 5, 3)
	inboxFile := filepath.Join(data, "teams", "t", "inboxes", "worker.jsonl")
	before := readFile(t, inboxFile)
	res, err := svc.ArchiveInbox(core.AsMember(context.Background(), "t", "worker"), "t", "worker", "worker-3")
	if err != nil {
		t.Fatal(err)
	}
	if res != (core.ArchiveResult{Archived: 3, InboxLength: 2}) {
		t.Fatalf("archive = %+v, want 3 archived, 2 left", res)
	}
	lines := bytes.SplitAfter(before, []byte("\n"))
	wantBytes(t, "inbox after archive", readFile(t, inboxFile), bytes.Join(lines[3:], nil))
	archFile := filepath.Join(filepath.Dir(filepath.Dir(inboxFile)), "archive", "worker.jsonl")
	wantBytes(t, "archive file", readFile(t, archFile), bytes.Join(lines[:3], nil))
	wantArchive(t, svc, "worker-4 worker-5", "worker-1 worker-2 worker-3")
	if _, err := svc.Send(core.AsMember(context.Background(), "t", "lead"), core.SendInput{Team: "t", To: "worker", Body: "six"}); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	_, svc = openService(t, data)
	wantArchive(t, svc, "worker-4 worker-5 worker-6", "worker-1 worker-2 worker-3")
	rs, err := svc.ReadState(core.AsAdmin(context.Background()), "t", "worker")
	if err != nil {
		t.Fatal(err)
	}
	if rs.ReadThrough == nil || *rs.ReadThrough != "worker-3" || rs.Unread != 3 {
		t.Fatalf("read state = %+v, want read through worker-3 (archived) and 3 unread", rs)
	}
}

// TestArchiveFinishedAtStart: a crash after state.json took the mark but
// before the letters moved (or halfway: some already in the archive)
// is finished at the next start, no letter lost or twice.
func TestArchiveFinishedAtStart(t *testing.T) {
	for _, half := range []bool{false, true} {
		t.Run(fmt.Sprintf("half=%v", half), func(t *testing.T) {
			data := t.TempDir()
			svc, s := archiveTeam(t, data, 4, 4)
			inboxFile := filepath.Join(data, "teams", "t", "inboxes", "worker.jsonl")
			before := readFile(t, inboxFile)
			if _, err := svc.ArchiveInbox(core.AsMember(context.Background(), "t", "worker"), "t", "worker", "worker-2"); err != nil {
				t.Fatal(err)
			}
			if err := s.Close(); err != nil {
				t.Fatal(err)
			}
			// Put the files back as a crash would have left them.
			writeFile(t, inboxFile, before)
			archFile := filepath.Join(filepath.Dir(filepath.Dir(inboxFile)), "archive", "worker.jsonl")
			lines := bytes.SplitAfter(before, []byte("\n"))
			if half {
				writeFile(t, archFile, append(slices.Clone(lines[0]), lines[1][:5]...)) // one moved, one torn
			} else if err := os.Remove(archFile); err != nil {
				t.Fatal(err)
			}
			_, svc = openService(t, data)
			wantArchive(t, svc, "worker-3 worker-4", "worker-1 worker-2")
			wantBytes(t, "archive file", readFile(t, archFile), bytes.Join(lines[:2], nil))
		})
	}
}

// TestArchiveKeepsNeededProtocolLetters: a pending request's letter stays
// in the target's inbox when the letters around it move, and is archived
// once answered; ids and positions still agree after it.
func TestArchiveKeepsNeededProtocolLetters(t *testing.T) {
	data := t.TempDir()
	s, svc := openService(t, data)
	admin := core.AsAdmin(context.Background())
	if _, _, err := svc.CreateTeam(admin, core.TeamSpec{Name: "t", Members: []core.MemberSpec{{Name: "lead", Role: "lead"}, {Name: "worker", Role: "worker"}}}); err != nil {
		t.Fatal(err)
	}
	lead := core.AsMember(context.Background(), "t", "lead")
	worker := core.AsMember(context.Background(), "t", "worker")
	send := func(body string) {
		t.Helper()
		if _, err := svc.Send(lead, core.SendInput{Team: "t", To: "worker", Body: body}); err != nil {
			t.Fatal(err)
		}
	}
	send("one")
	req, err := svc.OpenRequest(lead, core.OpenInput{Team: "t", Target: "worker", Kind: core.KindShutdown, Payload: "please stop"})
	if err != nil {
		t.Fatal(err)
	}
	send("three")
	if _, err := svc.MarkRead(worker, "t", "worker", "worker-3"); err != nil {
		t.Fatal(err)
	}
	res, err := svc.ArchiveInbox(worker, "t", "worker", "worker-3")
	if err != nil {
		t.Fatal(err)
	}
	if res.Archived != 2 || res.InboxLength != 1 {
		t.Fatalf("archive = %+v, want 2 moved and the request kept", res)
	}
	wantArchive(t, svc, "worker-2", "worker-1 worker-3")
	send("four")
	wantArchive(t, svc, "worker-2 worker-4", "worker-1 worker-3")
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s, svc = openService(t, data)
	defer s.Close()
	wantArchive(t, svc, "worker-2 worker-4", "worker-1 worker-3")
	if _, err := svc.Reply(worker, core.ReplyInput{Team: "t", RequestID: req.RequestID, Approve: false, Feedback: "not yet"}); err != nil {
		t.Fatal(err)
	}
	if _, err := svc.MarkRead(worker, "t", "worker", "worker-4"); err != nil {
		t.Fatal(err)
	}
	if _, err := svc.ArchiveInbox(worker, "t", "worker", "worker-4"); err != nil {
		t.Fatal(err)
	}
	wantArchive(t, svc, "", "worker-1 worker-2 worker-3 worker-4")
}

// walArchive sends reader 6 letters (keyed k1..k6), reads 4, archives
// through reader-3, and sends 2 more: the history the crash tests replay.
func walArchive(t *testing.T, svc *core.Service) {
	t.Helper()
	walTeam(t, svc, "demo")
	for i := 1; i <= 6; i++ {
		if _, err := walSend(svc, "demo", "reviewer", "reader", fmt.Sprintf("letter %d", i), fmt.Sprintf("k%d", i)); err != nil {
			t.Fatal(err)
		}
	}
	reader := core.AsMember(ctx, "demo", "reader")
	if _, err := svc.MarkRead(reader, "demo", "reader", "reader-4"); err != nil {
		t.Fatal(err)
	}
	if res, err := svc.ArchiveInbox(reader, "demo", "reader", "reader-3"); err != nil || res.Archived != 3 {
		t.Fatalf("archive = %+v, %v; want 3 moved", res, err)
	}
	for i := 7; i <= 8; i++ {
		if _, err := walSend(svc, "demo", "reviewer", "reader", fmt.Sprintf("letter %d", i), fmt.Sprintf("k%d", i)); err != nil {
			t.Fatal(err)
		}
	}
}

// wantWalArchive checks reader's inbox, archive, cursor and a keyed retry
// after a restart.
func wantWalArchive(t *testing.T, svc *core.Service) {
	t.Helper()
	admin := core.AsAdmin(ctx)
	items, err := svc.Inbox(admin, "demo", "reader")
	if err != nil {
		t.Fatal(err)
	}
	if got, want := ids(items), "reader-4 reader-5 reader-6 reader-7 reader-8"; got != want {
		t.Fatalf("inbox = %q, want %q", got, want)
	}
	arch, err := svc.ListArchive(admin, "demo", "reader", "", 10)
	if err != nil || ids(arch) != "reader-1 reader-2 reader-3" {
		t.Fatalf("archive = %q, %v; want reader-1..3", ids(arch), err)
	}
	rs, err := svc.ReadState(admin, "demo", "reader")
	if err != nil || rs.ReadThrough == nil || *rs.ReadThrough != "reader-4" || rs.Unread != 4 {
		t.Fatalf("read state = %+v, %v; want through reader-4, 4 unread", rs, err)
	}
	for _, k := range []int{2, 8} {
		got, err := walSend(svc, "demo", "reviewer", "reader", fmt.Sprintf("letter %d", k), fmt.Sprintf("k%d", k))
		if err != nil || got.ID != fmt.Sprintf("reader-%d", k) {
			t.Fatalf("retry of k%d = %+v, %v; want reader-%d remembered", k, got, err, k)
		}
	}
}

// TestArchiveKilledAndReplayed: killed after an archive and later sends
// (the log not yet checkpointed), twice, a restart replays the log over
// files already moved and neither loses nor repeats a letter.
func TestArchiveKilledAndReplayed(t *testing.T) {
	data := t.TempDir()
	svc, _ := walService(t, data, newWalFS())
	walArchive(t, svc)
	for range 2 {
		svc, _ = walService(t, data, newWalFS()) // the previous one is abandoned, as if killed
		wantWalArchive(t, svc)
	}
}

// TestArchivePowerCut: a power cut after an archive and later sends keeps
// what was acknowledged: the archive, the letters after it, the cursor.
func TestArchivePowerCut(t *testing.T) {
	wfs := newWalFS()
	data := t.TempDir()
	svc, _ := walService(t, data, wfs)
	walArchive(t, svc)
	wfs.powerCut(t)
	svc2, s2 := walService(t, data, mail.OS())
	t.Cleanup(func() { _ = s2.Close() })
	wantWalArchive(t, svc2)
}
