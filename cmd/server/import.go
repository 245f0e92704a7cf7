package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"time"

	"mailroom/internal/core"
	"mailroom/internal/mail"
	"mailroom/internal/pgstore"
)

// runImport is `mailroom import --data DIR --database-url URL`: it copies a
// file-store data directory (teams, inboxes byte for byte, requests,
// permissions, token hashes, idempotency records, turn documents, runs)
// into an empty PostgreSQL database, in one transaction. It refuses a
// database that already holds teams. The data directory is locked while it
// is read, so no server may be running on it.
func runImport(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("mailroom import", flag.ContinueOnError)
	fs.SetOutput(stderr)
	dataDir := fs.String("data", envOr(getenv, "MAILROOM_DATA", defaultDataDir), "file-store data `directory` to copy (env MAILROOM_DATA)")
	dbURL := fs.String("database-url", getenv("MAILROOM_DATABASE_URL"), "PostgreSQL `URL` of an empty database (env MAILROOM_DATABASE_URL)")
	wsTo := fs.String("workspaces-to", "", "workspaces root `directory` of the PostgreSQL server (its MAILROOM_WORKSPACES, or <its data>/workspaces); needed when the data directory has workspaces")
	fs.Usage = func() {
		fmt.Fprintf(fs.Output(), "Usage: mailroom import --data DIR --database-url URL [--workspaces-to DIR]\n\nCopies a file-store data directory into an empty PostgreSQL database,\nand the teams' workspaces into the PostgreSQL server's workspaces root.\n\nFlags:\n")
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return err
		}
		return usageErrorf("%v", err)
	}
	if fs.NArg() > 0 {
		return usageErrorf("unexpected argument %q", fs.Arg(0))
	}
	if *dbURL == "" {
		return usageErrorf("import needs --database-url (or MAILROOM_DATABASE_URL)")
	}
	dir, err := filepath.Abs(*dataDir)
	if err != nil {
		return err
	}
	if fi, err := os.Stat(filepath.Join(dir, "teams")); err != nil || !fi.IsDir() {
		return fmt.Errorf("%s is not a Mailroom data directory (it has no teams directory)", dir)
	}
	log := slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	release, err := mail.LockDir(dir)
	if err != nil {
		return fmt.Errorf("refusing to import: %w", err)
	}
	defer release() //nolint:errcheck // reading only

	teams, runs, err := readFileStore(ctx, dir, log)
	if err != nil {
		return err
	}
	// The workspaces are staged beside their destination before the
	// database is written, and put in place only once it is: a failed
	// import leaves neither teams nor workspaces behind.
	names := make([]string, 0, len(teams))
	for _, t := range teams {
		names = append(names, t.State.Name)
	}
	staged, err := stageWorkspaces(filepath.Join(dir, "workspaces"), *wsTo, names)
	if err != nil {
		return err
	}
	defer staged.discard()
	pg, err := pgstore.Open(ctx, *dbURL, pgstore.Options{Logger: log})
	if err != nil {
		return err
	}
	defer pg.Close()
	if err := pg.Import(ctx, teams, runs); err != nil {
		if errors.Is(err, pgstore.ErrNotEmpty) {
			return fmt.Errorf("refusing to import into %s: %w", pg.Where(), err)
		}
		return fmt.Errorf("import into %s (nothing was stored): %w", pg.Where(), err)
	}
	moved, err := staged.commit()
	if err != nil {
		return fmt.Errorf("the teams are imported, but putting their workspaces into %s failed (copy them from %s by hand): %w", *wsTo, filepath.Join(dir, "workspaces"), err)
	}
	letters := 0
	for _, t := range teams {
		for _, b := range t.Inboxes {
			letters += bytes.Count(b, []byte("\n"))
		}
		for _, b := range t.Archives {
			letters += bytes.Count(b, []byte("\n"))
		}
	}
	fmt.Fprintf(stdout, "imported %d teams, %d letters and %d runs from %s into %s\n", len(teams), letters, len(runs), dir, pg.Where())
	if moved > 0 {
		fmt.Fprintf(stdout, "copied %d workspaces into %s\n", moved, *wsTo)
	}
	return nil
}

// readFileStore reads every team and run of the file store at dir through
// the store itself (which completes or drops interrupted writes first), and
// the inbox files' exact bytes as the store validated them.
func readFileStore(ctx context.Context, dir string, log *slog.Logger) ([]pgstore.ImportedTeam, []core.RunDoc, error) {
	fstore, err := mail.Open(dir, mail.WithLogger(log))
	if err != nil {
		return nil, nil, fmt.Errorf("open data directory %s: %w", dir, err)
	}
	defer fstore.Close()
	var store core.Store = fstore
	list, err := store.ListTeams(ctx)
	if err != nil {
		return nil, nil, err
	}
	var teams []pgstore.ImportedTeam
	for _, ts := range list {
		t := pgstore.ImportedTeam{Inboxes: map[string][]byte{}, Archives: map[string][]byte{}}
		err := core.View(ctx, store, ts.Name, func(tx core.TeamTx) error {
			if err := tx.Damaged(); err != nil {
				return fmt.Errorf("its stored data is damaged: %w", err)
			}
			t.State = tx.State().Clone()
			for _, m := range t.State.Members {
				b, err := tx.InboxBytes(m.Name)
				if err != nil {
					return fmt.Errorf("inbox of %s: %w", m.Name, err)
				}
				t.Inboxes[m.Name] = b
				if m.Archive.Count() > 0 {
					if t.Archives[m.Name], err = archiveBytes(fstore, tx, ts.Name, m.Name); err != nil {
						return fmt.Errorf("archive of %s: %w", m.Name, err)
					}
				}
				n, err := tx.ReadThrough(m.Name)
				if err != nil {
					return fmt.Errorf("read cursor of %s: %w", m.Name, err)
				}
				if n > 0 {
					if t.ReadThrough == nil {
						t.ReadThrough = map[string]int{}
					}
					t.ReadThrough[m.Name] = n
				}
			}
			var err error
			if t.Turns, err = tx.Turns(); err != nil {
				return err
			}
			tasks, err := tx.Tasks()
			t.Tasks = append([]core.Task(nil), tasks...)
			return err
		})
		if err != nil {
			return nil, nil, fmt.Errorf("team %s: %w", ts.Name, err)
		}
		// The file store, started, has moved the records an older state
		// file kept into the team's idempotency log.
		idem, err := readIdempotency(ctx, fstore, dir, ts.Name)
		if err != nil {
			return nil, nil, fmt.Errorf("team %s: idempotency records: %w", ts.Name, err)
		}
		t.Idempotency = pgstore.LiveIdempotency(idem, time.Now())
		teams = append(teams, t)
	}
	ids, err := store.ListRuns(ctx)
	if err != nil {
		return nil, nil, err
	}
	var runs []core.RunDoc
	for _, id := range ids {
		r, err := store.GetRun(ctx, id)
		if err != nil {
			return nil, nil, fmt.Errorf("run %s: %w", id, err)
		}
		runs = append(runs, r)
	}
	return teams, runs, nil
}

// archiveBytes returns member's archive in the file store's bytes: its
// file as the store validated it, when the store offers it, else each
// archived letter's line as Mailroom encodes it.
func archiveBytes(fstore any, tx core.TeamTx, team, member string) ([]byte, error) {
	if a, ok := fstore.(interface {
		ArchiveBytes(team, member string) ([]byte, error)
	}); ok {
		return a.ArchiveBytes(team, member)
	}
	letters, err := tx.LoadArchive(member)
	if err != nil {
		return nil, err
	}
	var out []byte
	for _, l := range letters {
		out = append(out, core.EncodeInboxLine(l)...)
	}
	return out, nil
}

// readIdempotency returns a team's idempotency log, oldest first: through
// the file store when it offers it, else from the log file.
func readIdempotency(ctx context.Context, fstore any, dir, team string) ([]core.IdempotencyRecord, error) {
	if l, ok := fstore.(interface {
		LoadIdempotency(context.Context, string) ([]core.IdempotencyRecord, error)
	}); ok {
		return l.LoadIdempotency(ctx, team)
	}
	f, err := os.Open(filepath.Join(dir, "teams", team, "idempotency.log"))
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var out []core.IdempotencyRecord
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 0, 64<<10), 4<<20)
	for sc.Scan() {
		var r core.IdempotencyRecord
		if json.Unmarshal(sc.Bytes(), &r) == nil {
			out = append(out, r)
		}
	}
	return out, sc.Err()
}
