package main

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"syscall"
	"time"
	"unsafe"

	"mailroom/internal/core"
	"mailroom/internal/mail"
)

// rawLine is the size of a typical inbox line (an envelope with a body of
// about 80 characters), so the raw bound writes what a send writes.
const rawLine = 150

// rawFiles is the parallel file count of the raw aggregate figure.
const rawFiles = 64

// rawFigure is the disk's own bound: appends made durable with fdatasync,
// with the file kept open, which is the least any durable append costs.
type rawFigure struct {
	single     latencies // one file, one append at a time
	singleRate float64   // appends per second, one file
	// ready is the same line written at its offset into a file already
	// filled with zeros and fsynced, then fdatasynced: what the
	// write-ahead log does with its records (no size to flush).
	ready    latencies
	parallel float64 // appends per second, 64 files at once
	// store is the file store's append of one letter, as core makes it
	// (LoadInbox, then AppendInbox): the disk recipe without HTTP or core.
	store         latencies
	storeParallel float64
	// recipe is the store's append recipe done by hand on 64 files in
	// parallel, with the file kept open (lstat, write, futimens, fsync,
	// fstat): what the file system charges for the recipe, without the
	// store's code. recipeOpen is the same with the file opened and closed
	// for every append (open, fstat, …, close), as the store appends to a
	// file it does not keep open.
	recipe, recipeOpen float64
}

func line(n int) []byte {
	b := bytes.Repeat([]byte("x"), rawLine)
	copy(b, fmt.Sprintf("{\"id\": \"raw-%d\", ", n))
	b[len(b)-1] = '\n'
	return b
}

// appendSync appends one line and waits for it to be durable.
func appendSync(f *os.File, b []byte) error {
	if _, err := f.Write(b); err != nil {
		return err
	}
	return syscall.Fdatasync(int(f.Fd()))
}

func measureRaw(ctx context.Context, dir string, cfg config) (rawFigure, error) {
	var out rawFigure
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return out, err
	}
	f, err := os.OpenFile(filepath.Join(dir, "single.jsonl"), os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o600)
	if err != nil {
		return out, err
	}
	defer f.Close()
	for i := range 20 { // warm-up: allocate the first blocks
		if err := appendSync(f, line(i)); err != nil {
			return out, err
		}
	}
	start := time.Now()
	for i := range cfg.rawCount {
		if ctx.Err() != nil {
			return out, ctx.Err()
		}
		t := time.Now()
		if err := appendSync(f, line(i)); err != nil {
			return out, err
		}
		out.single = append(out.single, time.Since(t))
	}
	out.singleRate = float64(cfg.rawCount) / time.Since(start).Seconds()
	if out.ready, err = readyWrites(ctx, filepath.Join(dir, "ready.log"), cfg.rawCount); err != nil {
		return out, err
	}

	out.parallel, err = parallelAppends(ctx, dir, "par", cfg.rawWindow, func(f *os.File, _ string, b []byte) error { return appendSync(f, b) })
	if err != nil {
		return out, err
	}
	out.recipe, err = parallelAppends(ctx, dir, "recipe", cfg.rawWindow, recipeAppend)
	if err != nil {
		return out, err
	}
	out.recipeOpen, err = parallelAppends(ctx, dir, "recipe-open", cfg.rawWindow, recipeOpenAppend)
	if err != nil {
		return out, err
	}
	out.store, out.storeParallel, err = measureStore(ctx, filepath.Join(dir, "store"), cfg.rawCount, cfg.rawWindow)
	return out, err
}

// readyWrites times n lines written one after the other into a file
// filled with zeros and fsynced beforehand, each fdatasynced.
func readyWrites(ctx context.Context, path string, n int) (latencies, error) {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o600)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	if _, err := f.Write(make([]byte, (n+1)*rawLine)); err != nil {
		return nil, err
	}
	if err := f.Sync(); err != nil {
		return nil, err
	}
	var lat latencies
	for i := range n {
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		t := time.Now()
		if _, err := f.WriteAt(line(i), int64(i*rawLine)); err != nil {
			return nil, err
		}
		if err := syscall.Fdatasync(int(f.Fd())); err != nil {
			return nil, err
		}
		lat = append(lat, time.Since(t))
	}
	return lat, nil
}

// parallelAppends runs op on rawFiles files at once for window and
// returns the aggregate rate. op gets the file (kept open) and its path.
func parallelAppends(ctx context.Context, dir, prefix string, window time.Duration, op func(f *os.File, path string, line []byte) error) (float64, error) {
	files := make([]*os.File, rawFiles)
	for i := range files {
		path := filepath.Join(dir, fmt.Sprintf("%s-%02d.jsonl", prefix, i))
		f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o600)
		if err != nil {
			return 0, err
		}
		defer f.Close()
		if err := appendSync(f, line(0)); err != nil {
			return 0, err
		}
		files[i] = f
	}
	done, elapsed, err := runWindow(ctx, rawFiles, window, func(i, n int) error {
		return op(files[i], files[i].Name(), line(n+1))
	})
	return float64(len(done)) / elapsed.Seconds(), err
}

// recipeAppend is the store's append recipe by hand, on a file kept open:
// lstat the path, write, futimens, fsync, fstat.
func recipeAppend(f *os.File, path string, b []byte) error {
	if _, err := os.Lstat(path); err != nil {
		return err
	}
	return writeStampSync(f, b)
}

// recipeOpenAppend is the recipe on a file not kept open: open O_APPEND,
// fstat, write, futimens, fsync, fstat, close.
func recipeOpenAppend(_ *os.File, path string, b []byte) error {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND|syscall.O_NOFOLLOW, 0)
	if err != nil {
		return err
	}
	defer f.Close()
	if _, err := f.Stat(); err != nil {
		return err
	}
	return writeStampSync(f, b)
}

// writeStampSync is the common part of both recipes: write, set the
// modification time through the descriptor, fsync, fstat.
func writeStampSync(f *os.File, b []byte) error {
	if _, err := f.Write(b); err != nil {
		return err
	}
	// futimens(fd, {UTIME_OMIT, now}): utimensat with a NULL path.
	ts := [2]syscall.Timespec{{Nsec: (1 << 30) - 2}, syscall.NsecToTimespec(time.Now().UnixNano())}
	if _, _, errno := syscall.Syscall6(syscall.SYS_UTIMENSAT, f.Fd(), 0, uintptr(unsafe.Pointer(&ts[0])), 0, 0, 0); errno != 0 {
		return errno
	}
	if err := f.Sync(); err != nil {
		return err
	}
	_, err := f.Stat()
	return err
}

// storeInbox is one team's inbox reached through the file store, as core
// reaches it: LoadInbox, then AppendInbox of the next letter.
type storeInbox struct {
	store *mail.Store
	team  string
	rules core.InboxRules
}

func newStoreInboxes(ctx context.Context, dir string, n, letters int) ([]storeInbox, error) {
	store, err := mail.Open(dir, mail.WithLogger(slog.New(slog.DiscardHandler)))
	if err != nil {
		return nil, err
	}
	limits := benchLimits(letters)
	isMember := func(name string) bool { return name == core.LeadName || name == "m1" }
	out := make([]storeInbox, n)
	for i := range out {
		name := fmt.Sprintf("raw-%02d", i)
		st := &core.TeamState{Name: name, Limits: limits, Members: []core.MemberState{{Name: core.LeadName}, {Name: "m1"}}}
		if err := store.CreateTeam(ctx, st); err != nil {
			return nil, err
		}
		out[i] = storeInbox{store: store, team: name, rules: core.InboxRules{Recipient: core.LeadName, Limits: limits, IsMember: isMember}}
		// The first letter is written whole (create and rename); every
		// later one is appended, which is what is measured.
		if err := out[i].append(ctx); err != nil {
			return nil, err
		}
	}
	return out, nil
}

func (s storeInbox) append(ctx context.Context) error {
	prev, err := s.store.LoadInbox(ctx, s.team, s.rules)
	if err != nil {
		return err
	}
	msg := core.Message{ID: fmt.Sprintf("lead-%d", len(prev)+1), Sender: "m1", Recipient: core.LeadName, Body: sendBody}
	return s.store.AppendInbox(ctx, s.team, s.rules, prev, msg)
}

// measureStore times the file store's append alone: n letters into one
// inbox, then 64 inboxes appended to in parallel for window.
func measureStore(ctx context.Context, dir string, n int, window time.Duration) (latencies, float64, error) {
	inboxes, err := newStoreInboxes(ctx, dir, rawFiles, n+1<<20)
	if err != nil {
		return nil, 0, err
	}
	defer inboxes[0].store.Close()
	var single latencies
	for i := range n + 20 {
		t := time.Now()
		if err := inboxes[0].append(ctx); err != nil {
			return nil, 0, err
		}
		if i >= 20 { // warm-up
			single = append(single, time.Since(t))
		}
	}
	done, elapsed, err := runWindow(ctx, len(inboxes), window, func(i, _ int) error {
		return inboxes[i].append(ctx)
	})
	return single, float64(len(done)) / elapsed.Seconds(), err
}
