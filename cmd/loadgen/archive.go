package main

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"path/filepath"
	"sync"
	"time"

	"mailroom/internal/core"
	"mailroom/internal/pgstore"
	"mailroom/internal/pgtest"
)

// runArchive is `loadgen archive [-data DIR] [-keep] [-letters N]
// [-store file|postgres|both]`: the archive (phase r). On each store, one
// member is sent N letters over HTTP (32 clients) against the in-process
// server, reads them all, and archives them in one call: the call's time,
// the inbox's length and size before and after (the lesson's bytes, and
// on the file store the inbox and archive files on disk), a read of the
// inbox and a send before and after, and a page of the archive.
func runArchive(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	c := newSubcommand("archive", "unused", stderr)
	letters := c.fs.Int("letters", 10000, "letters sent, read and archived")
	which := c.fs.String("store", "both", "file, postgres or both")
	if err := c.fs.Parse(args); err != nil {
		return err
	}
	if *letters < 10 {
		return fmt.Errorf("-letters at least 10")
	}
	work, r, done, err := c.begin(stdout)
	if err != nil {
		return err
	}
	defer done()
	if *which == "file" || *which == "both" {
		dir := filepath.Join(work, "file")
		p, err := startInProcess(ctx, dir, 32)
		if err != nil {
			return err
		}
		err = measureArchive(ctx, r, "file store", p, *letters, filepath.Join(dir, "teams", "arch"))
		p.close()
		if err != nil {
			return fmt.Errorf("file store: %w", err)
		}
	}
	if *which == "postgres" || *which == "both" {
		cl, err := pgtest.Start()
		if err != nil {
			return fmt.Errorf("start a private PostgreSQL cluster: %w", err)
		}
		defer cl.Close()
		if err := cl.Exec(ctx, "postgres", "CREATE DATABASE loadgen"); err != nil {
			return err
		}
		s, err := pgstore.Open(ctx, cl.URL("loadgen"), pgstore.Options{Logger: slog.New(slog.DiscardHandler), MaxConns: 32})
		if err != nil {
			return err
		}
		p, err := serveInProcess(ctx, s, 32)
		if err != nil {
			return err
		}
		err = measureArchive(ctx, r, "PostgreSQL (private cluster, fsync on)", p, *letters, "")
		p.close()
		if err != nil {
			return fmt.Errorf("postgres: %w", err)
		}
	}
	r.printf("load average at end: %s\n", loadAvg())
	return nil
}

// archiveInbox is what an inbox looks like at one moment of phase r.
type archiveInbox struct {
	length, archived int
	bytes            int64 // the lesson's bytes of the inbox's letters
	read, send       time.Duration
}

func measureArchive(ctx context.Context, r *report, name string, p *inproc, n int, teamDir string) error {
	tokens, err := p.postTeam(ctx, map[string]any{"name": "arch", "members": []map[string]string{{"name": "worker"}},
		"limits": map[string]int{"inbox_messages": n + 100, "inbox_bytes": 1 << 30}})
	if err != nil {
		return err
	}
	lead, worker := tokens["lead"], tokens["worker"]
	t := time.Now()
	var wg sync.WaitGroup
	errs := make(chan error, 32)
	next := make(chan struct{}, n)
	for range n {
		next <- struct{}{}
	}
	close(next)
	for range 32 {
		wg.Go(func() {
			for range next {
				if _, err := p.send(ctx, "arch", lead, "worker"); err != nil {
					errs <- err
					return
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	if err := <-errs; err != nil {
		return err
	}
	fill := time.Since(t)
	last := fmt.Sprintf("worker-%d", n)
	if err := p.call(ctx, http.MethodPost, "/teams/arch/members/worker/inbox/read", worker, map[string]string{"through": last}, nil, http.StatusOK); err != nil {
		return err
	}
	fileBefore := teamFiles(teamDir, "inboxes")
	before, err := inboxNow(ctx, p, lead, worker)
	if err != nil {
		return err
	}
	var res struct {
		Archived    int `json:"archived"`
		InboxLength int `json:"inbox_length"`
	}
	t = time.Now()
	if err := p.call(ctx, http.MethodPost, "/teams/arch/members/worker/inbox/archive", worker, map[string]string{"through": last}, &res, http.StatusOK); err != nil {
		return err
	}
	took := time.Since(t)
	if res.Archived != n || res.InboxLength != archiveSends {
		return fmt.Errorf("archive moved %d letters and left %d, want %d and %d (the sends of the first look)", res.Archived, res.InboxLength, n, archiveSends)
	}
	fileAfter, archiveFile := teamFiles(teamDir, "inboxes"), teamFiles(teamDir, "archive")
	after, err := inboxNow(ctx, p, lead, worker)
	if err != nil {
		return err
	}
	var page struct {
		Letters []struct {
			ID string `json:"id"`
		} `json:"letters"`
	}
	var pages latencies
	for range archiveSends {
		t = time.Now()
		if err := p.call(ctx, http.MethodGet, "/teams/arch/members/worker/archive?after=worker-5000&limit=100", worker, nil, &page, http.StatusOK); err != nil {
			return err
		}
		pages = append(pages, time.Since(t))
	}
	r.printf("r. archive, %s: %d letters sent (32 clients, %s), all read, archived in one call\n", name, n, fill.Round(time.Millisecond))
	r.printf("   archive call:                     %s (%d letters moved)\n", ms(took), res.Archived)
	r.printf("   inbox before:                     %d letters, %s in the lesson's bytes", before.length, mib(before.bytes))
	if teamDir != "" {
		r.printf(" (file %s)", mib(fileBefore))
	}
	r.printf("\n   inbox after (the later sends):    %d letters, %s", after.length, mib(after.bytes))
	if teamDir != "" {
		r.printf(" (file %s; archive file %s)", mib(fileAfter), mib(archiveFile))
	}
	r.printf("\n   read of the whole inbox:          %s before, %s after\n", ms(before.read), ms(after.read))
	r.printf("   a send, p50 of %d:                %s before, %s after\n", archiveSends, ms(before.send), ms(after.send))
	r.printf("   a page of 100 archived letters:   first %s (reads the archive), p50 of %d %s\n\n", ms(pages[0]), archiveSends, ms(pages.pct(0.5)))
	if len(page.Letters) != 100 || page.Letters[0].ID != "worker-5001" && n > 5100 {
		return fmt.Errorf("archive page = %d letters, want 100 from worker-5001", len(page.Letters))
	}
	return nil
}

// archiveSends are the sends timed before and after the archive.
const archiveSends = 21

// inboxNow reads worker's whole inbox (timed), has lead send it
// archiveSends letters (the p50 timed) and returns the figures from
// before them.
func inboxNow(ctx context.Context, p *inproc, lead, worker string) (archiveInbox, error) {
	var f archiveInbox
	var inbox struct {
		Letters []core.Message `json:"messages"`
	}
	t := time.Now()
	if err := p.call(ctx, http.MethodGet, "/teams/arch/members/worker/inbox", worker, nil, &inbox, http.StatusOK); err != nil {
		return f, err
	}
	f.read = time.Since(t)
	var team struct {
		Members []struct {
			Name        string `json:"name"`
			InboxLength int    `json:"inbox_length"`
			Archived    int    `json:"archived"`
		} `json:"members"`
	}
	if err := p.call(ctx, http.MethodGet, "/teams/arch", worker, nil, &team, http.StatusOK); err != nil {
		return f, err
	}
	for _, m := range team.Members {
		if m.Name == "worker" {
			f.length, f.archived = m.InboxLength, m.Archived
		}
	}
	for _, l := range inbox.Letters {
		f.bytes += int64(len(core.EncodeInboxLine(l)))
	}
	var sends latencies
	for range archiveSends {
		d, err := p.send(ctx, "arch", lead, "worker")
		if err != nil {
			return f, err
		}
		sends = append(sends, d)
	}
	f.send = sends.pct(0.5)
	return f, nil
}

// teamFiles is the size of the files in dir/sub, 0 for a team without
// files (PostgreSQL: dir is empty).
func teamFiles(dir, sub string) int64 {
	if dir == "" {
		return 0
	}
	return dirSize(filepath.Join(dir, sub))
}

// mib formats a byte count.
func mib(n int64) string {
	if n < 1<<20 {
		return fmt.Sprintf("%.1f KiB", float64(n)/1024)
	}
	return fmt.Sprintf("%.2f MiB", float64(n)/(1<<20))
}
