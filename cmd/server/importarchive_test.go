package main

import (
	"bytes"
	"context"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"mailroom/internal/core"
	"mailroom/internal/mail"
	"mailroom/internal/pgstore"
	"mailroom/internal/pgtest"
	"mailroom/internal/storetest"
)

// TestImportCarriesArchives: a file store whose member archived letters
// (one kept behind, a protocol request not yet answered) is imported; on
// PostgreSQL the inbox, the archive (its file's lines, byte for byte), the
// cursor and the next id are the file store's.
func TestImportCarriesArchives(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	fs, err := mail.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	if err := fs.CreateTeam(ctx, storetest.Team("demo", "reader")); err != nil {
		t.Fatal(err)
	}
	svc := core.NewService(fs, core.Options{})
	if err := svc.Open(ctx); err != nil {
		t.Fatal(err)
	}
	reader := core.AsMember(ctx, "demo", "reader")
	lead := core.AsMember(ctx, "demo", core.LeadName)
	if _, err := svc.OpenRequest(reader, core.OpenInput{Team: "demo", Target: core.LeadName, Kind: core.KindPlan, Payload: "plan"}); err != nil {
		t.Fatal(err)
	}
	for _, body := range []string{"one", "two \u2028 ünïcode", "three"} {
		if _, err := svc.Send(reader, core.SendInput{Team: "demo", To: core.LeadName, Body: body}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := svc.MarkRead(lead, "demo", core.LeadName, "lead-3"); err != nil {
		t.Fatal(err)
	}
	// lead-1, the request, stays; lead-2 and lead-3 leave.
	if r, err := svc.ArchiveInbox(lead, "demo", core.LeadName, "lead-3"); err != nil || r.Archived != 2 {
		t.Fatalf("archive = %+v, %v; want 2 moved", r, err)
	}
	wantInbox, err := svc.InboxBytes(lead, "demo", core.LeadName)
	if err != nil {
		t.Fatal(err)
	}
	wantRead, err := svc.ReadState(lead, "demo", core.LeadName)
	if err != nil {
		t.Fatal(err)
	}
	if err := fs.Close(); err != nil {
		t.Fatal(err)
	}
	archiveFile, err := os.ReadFile(filepath.Join(dir, "teams", "demo", "archive", "lead.jsonl"))
	if err != nil {
		t.Fatalf("the file store's archive: %v", err)
	}

	release, err := mail.LockDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	teams, runs, err := readFileStore(ctx, dir, slog.New(slog.NewTextHandler(io.Discard, nil)))
	_ = release()
	if err != nil {
		t.Fatal(err)
	}
	pg, err := pgstore.Open(ctx, pgtest.New(t), pgstore.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer pg.Close()
	if err := pg.Import(ctx, teams, runs); err != nil {
		t.Fatal(err)
	}
	psvc := core.NewService(pg, core.Options{})
	if err := psvc.Open(ctx); err != nil {
		t.Fatal(err)
	}
	if got, err := psvc.InboxBytes(lead, "demo", core.LeadName); err != nil || !bytes.Equal(got, wantInbox) {
		t.Fatalf("inbox on PostgreSQL = %q, %v; want %q", got, err, wantInbox)
	}
	var lines [][]byte
	if err := core.View(ctx, pg, "demo", func(tx core.TeamTx) error {
		arch, err := tx.LoadArchive(core.LeadName)
		for _, m := range arch {
			lines = append(lines, core.EncodeInboxLine(m))
		}
		return err
	}); err != nil {
		t.Fatal(err)
	}
	fileLines := bytes.SplitAfter(archiveFile, []byte("\n"))
	fileLines = fileLines[:len(fileLines)-1]
	slices.SortFunc(fileLines, bytes.Compare)
	slices.SortFunc(lines, bytes.Compare)
	if !slices.EqualFunc(lines, fileLines, bytes.Equal) || len(lines) != 2 {
		t.Fatalf("archive on PostgreSQL = %q, want the file's lines %q", lines, fileLines)
	}
	if got, err := psvc.ReadState(lead, "demo", core.LeadName); err != nil || *got.ReadThrough != *wantRead.ReadThrough || got.Unread != wantRead.Unread {
		t.Fatalf("read state on PostgreSQL = %+v, %v; want %+v", got, err, wantRead)
	}
	if r, err := psvc.Send(reader, core.SendInput{Team: "demo", To: core.LeadName, Body: "four"}); err != nil || r.ID != "lead-5" {
		t.Fatalf("send on PostgreSQL = %+v, %v; want lead-5", r, err)
	}
}
