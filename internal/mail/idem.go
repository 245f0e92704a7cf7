package mail

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"syscall"

	"mailroom/internal/core"
)

// idemFile is a team's idempotency log: one core.IdempotencyRecord as JSON
// per line, in the order written. It lives in the team's directory, so it
// goes wherever the team goes. Its name does not end in ".jsonl", so that
// nothing that looks for inboxes ever takes it for one.
const idemFile = "idempotency.log"

// LoadIdempotency returns every line of the team's idempotency log, oldest
// first; a missing log is empty.
//
// A last line without its final newline is an append interrupted before
// its fsync returned, so nothing it carried was acknowledged: it is cut
// off (the log's first line is appended too, so the cut may leave the file
// empty), and the repair is logged at WARN. Any other damage (a line that
// does not parse, a symbolic link, not a regular file) is an error and the
// file is left as it is: dropping a record could repeat a write that
// already happened.
func (s *Store) LoadIdempotency(_ context.Context, team string) ([]core.IdempotencyRecord, error) {
	if !core.ValidName(team) {
		return nil, fmt.Errorf("mail: invalid team name %q", team)
	}
	path := filepath.Join(s.teamDir(team), idemFile)
	data, fi, err := s.readRegular(path, -1)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return nil, nil
	case err != nil:
		return nil, fmt.Errorf("mail: read idempotency log: %w", err)
	}
	if n := len(data); n > 0 && data[n-1] != '\n' {
		keep := bytes.LastIndexByte(data, '\n') + 1
		if err := s.truncatePath(path, sigOf(fi), int64(keep)); err != nil {
			return nil, fmt.Errorf("mail: remove the torn last line of the idempotency log: %w", err)
		}
		s.log.Warn("removed the torn last line of an idempotency log; that write was interrupted and never acknowledged",
			"team", team, "bytes_removed", n-keep, "bytes_kept", keep)
		data = data[:keep]
	}
	return decodeIdempotency(data)
}

// decodeIdempotency parses the lines of an idempotency log whose torn last
// line is already gone: one record per line, each with its member and
// key; any other line is an error.
func decodeIdempotency(data []byte) ([]core.IdempotencyRecord, error) {
	var out []core.IdempotencyRecord
	for i, line := range bytes.SplitAfter(data, []byte{'\n'}) {
		if len(line) == 0 {
			break // after the last newline
		}
		var r core.IdempotencyRecord
		if err := json.Unmarshal(line, &r); err != nil || r.Member == "" || r.Key == "" {
			return nil, fmt.Errorf("mail: idempotency log line %d does not hold a record", i+1)
		}
		out = append(out, r)
	}
	return out, nil
}

// AppendIdempotency adds r as one line at the end of the team's log and
// fsyncs it; the log is created (and its directory fsynced) by the first
// append. On any failure after the open the file is cut back to its old
// length, so the log is what it was.
//
// The file is kept open between appends among the store's idle files (see
// WithOpenFiles), as inbox files are: an open and a close are a tenth of
// an append. A descriptor stays on its inode whatever happens to the path,
// so a kept one is used only while the path's lstat shows that inode;
// after the team was deleted, or the log rewritten, the path is opened
// again.
func (s *Store) AppendIdempotency(_ context.Context, team string, r core.IdempotencyRecord) error {
	if !core.ValidName(team) {
		return fmt.Errorf("mail: invalid team name %q", team)
	}
	line, err := json.Marshal(r)
	if err != nil {
		return fmt.Errorf("mail: encode idempotency record: %w", err)
	}
	line = append(line, '\n')
	dir := s.teamDir(team)
	path := filepath.Join(dir, idemFile)
	key := idemKey(team)
	var size int64
	h := s.files.take(key)
	if h != nil {
		fi, err := s.fs.Lstat(path)
		if err != nil || !fi.Mode().IsRegular() || sigOf(fi).dev != h.dev || sigOf(fi).ino != h.ino {
			_ = h.f.Close() // every append through it was fsynced
			h = nil
		} else {
			size = fi.Size()
		}
	}
	created := false
	if h == nil {
		const flags = os.O_WRONLY | os.O_APPEND | syscall.O_NOFOLLOW | syscall.O_NONBLOCK
		f, err := s.fs.OpenFile(path, flags, 0)
		if errors.Is(err, fs.ErrNotExist) {
			f, err = s.fs.OpenFile(path, flags|os.O_CREATE|os.O_EXCL, fileMode)
			created = err == nil
		}
		if err != nil {
			return fmt.Errorf("mail: open idempotency log: %w", err)
		}
		fi, err := f.Stat()
		if err != nil {
			f.Close()
			return fmt.Errorf("mail: stat idempotency log: %w", err)
		}
		if !fi.Mode().IsRegular() {
			f.Close()
			return fmt.Errorf("mail: idempotency log: %w", errNotRegular)
		}
		sig := sigOf(fi)
		h, size = &heldFile{key: key, f: f, dev: sig.dev, ino: sig.ino}, fi.Size()
	}
	fail := func(err error) error {
		// Best effort: an undone append must not leave half a line for
		// the next one to follow.
		_ = truncateFile(h.f, size)
		h.f.Close()
		if created {
			_ = s.fs.Remove(path)
		}
		return err
	}
	if created {
		if err := h.f.Chmod(fileMode); err != nil {
			return fail(fmt.Errorf("mail: chmod idempotency log: %w", err))
		}
	}
	if _, err := h.f.Write(line); err != nil {
		return fail(fmt.Errorf("mail: append to idempotency log: %w", err))
	}
	if err := h.f.Sync(); err != nil {
		return fail(fmt.Errorf("mail: sync idempotency log: %w", err))
	}
	if created {
		// The new file's entry lives in the team directory.
		if err := s.fs.SyncDir(dir); err != nil {
			return fail(fmt.Errorf("mail: sync team directory: %w", err))
		}
	}
	// The line is durable once fsynced; closing (now, or when the file is
	// pushed out) loses nothing, so a failed close is only logged.
	if kept, err := s.files.put(h); !kept {
		err = h.f.Close()
		if err != nil {
			s.log.Warn("closing the idempotency log after an append failed", "team", team, "err", err)
		}
	} else if err != nil {
		s.log.Warn("closing an idle file failed", "err", err)
	}
	return nil
}

// idemKey is the key of a team's idempotency log among the store's open
// files: it shares the team's prefix, so whatever drops the team's files
// drops it too, and no member name (which starts with a letter) can take
// it.
func idemKey(team string) string { return cacheKey(team, ".idempotency") }

// RewriteIdempotency replaces the team's log with exactly records, by the
// recipe of replaceFile (temporary file, fsync, rename, directory fsync):
// a crash leaves the whole old log or the whole new one. Core compacts
// with it when the log holds more dead lines than live ones.
func (s *Store) RewriteIdempotency(_ context.Context, team string, records []core.IdempotencyRecord) error {
	if !core.ValidName(team) {
		return fmt.Errorf("mail: invalid team name %q", team)
	}
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf) // one line per record, each ending in \n
	for _, r := range records {
		if err := enc.Encode(r); err != nil {
			return fmt.Errorf("mail: encode idempotency record: %w", err)
		}
	}
	// The kept file would point at the replaced inode; an append would
	// notice and reopen, but there is no reason to hold it meanwhile.
	s.files.drop(idemKey(team))
	dir := s.teamDir(team)
	old, _, rerr := s.readRegular(filepath.Join(dir, idemFile), -1)
	if rerr != nil && !errors.Is(rerr, fs.ErrNotExist) {
		return fmt.Errorf("mail: read idempotency log: %w", rerr)
	}
	_, err := s.replaceFile(dir, idemFile, buf.Bytes(), previous{data: old, exists: rerr == nil})
	return err
}
