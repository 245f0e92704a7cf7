package mail

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"
	"unicode/utf8"

	"mailroom/internal/core"
)

// Causes of inbox_corrupt that only a file store can meet, in addition to
// the core.ErrInbox causes.
var (
	// ErrInboxNotRegular: the inbox path (or the inboxes directory) exists
	// but is not what the store writes there, e.g. a directory or a FIFO.
	ErrInboxNotRegular = errors.New("mailbox is not a regular file")
	// ErrInboxChanged: the file no longer holds the letters the caller
	// loaded under the team lock, so something outside the server wrote it.
	ErrInboxChanged = errors.New("mailbox changed on disk since it was read")
)

// LoadInbox reads and validates teams/<team>/inboxes/<recipient>.jsonl
// (docs/spec.md §4.2). A missing file is an empty inbox; a symbolic link (even a
// dangling one), anything but a regular file, a file over the byte limit
// or any content core.DecodeInbox rejects is inbox_corrupt, never empty.
//
// The file is checked on every call, but read only when it is not the
// version the store last read or wrote: its signature (device, inode,
// size, modification and change time, from lstat) must match, or it is
// read and validated in full. So loading an inbox costs the same whatever
// it holds, unless someone else changed it. The returned slice is shared
// with the store and must not be modified; appending to it is safe.
func (s *Store) LoadInbox(_ context.Context, team string, rules core.InboxRules) ([]core.Message, error) {
	st, err := s.inbox(team, rules)
	if err != nil {
		return nil, err
	}
	return st.letters(), nil
}

// InboxBytes returns the bytes of teams/<team>/inboxes/<recipient>.jsonl as
// LoadInbox validated them (no bytes for a missing file): the canonical
// lines of its letters, or the file's own bytes when someone else wrote it
// in other spacing. Its errors are LoadInbox's.
func (s *Store) InboxBytes(_ context.Context, team string, rules core.InboxRules) ([]byte, error) {
	st, err := s.inbox(team, rules)
	if err != nil {
		return nil, err
	}
	if st.raw != nil {
		return slices.Clone(st.raw), nil
	}
	return encodeLines(nil, st.msgs), nil
}

// encodeLines appends the lesson's line of each letter to buf.
func encodeLines(buf []byte, msgs []core.Message) []byte {
	for _, m := range msgs {
		buf = append(buf, core.EncodeInboxLine(m)...)
	}
	return buf
}

// AppendInbox stores msg as the next letter after prev, which must be what
// the file holds (core loaded it under the team lock). The file's bytes are
// exactly what the lesson's save_inbox writes for prev followed by msg
// (docs/spec.md §4.3, §13.1); only the way there differs, so that a send costs the
// same whatever the inbox holds:
//
//   - The file is checked first as LoadInbox checks it. A file replaced,
//     corrupted, turned into a symbolic link or given a blank line by
//     anyone else is answered with inbox_corrupt and left untouched.
//   - The message and byte limits are checked before the disk is touched;
//     going over either is inbox_full.
//   - The first letter creates the file whole, through a temporary file
//     that is fsynced and renamed into place, so a file of ours never
//     exists without a complete first line. An existing empty file is
//     replaced the same way, and so is a file someone else wrote in bytes
//     other than the lesson's (other spacing, a raw U+2028, no final
//     newline): it is rewritten whole in the lesson's bytes, once.
//   - Later letters are appended to the file, opened with O_APPEND and
//     O_NOFOLLOW, which must still be the file checked: the same inode and
//     signature. It gets the one new line, its modification time set to
//     the current time with full nanosecond precision, and is fsynced. The
//     fine-grained time is what lets the next call tell a later foreign
//     write of the same size from ours: the kernel stamps writes with a
//     clock of coarse ticks.
//   - The file stays open after a successful append, among a bounded set
//     of recently used inbox files (WithOpenFiles), so the next append to
//     it neither opens nor closes it. A descriptor follows its inode, not
//     its path, so a kept file is used only while the path's lstat shows
//     that inode with the expected signature; otherwise it is closed and
//     the path opened afresh (see appendLine).
//   - If any step after opening fails, the file is truncated back to its
//     previous length and fsynced, closed, and the error is returned. A
//     crash in the middle can leave only a partial last line without its
//     final newline, which no caller was told about; Open's LoadTeams
//     removes it.
//
// When prev is the very slice LoadInbox returned for the state the store
// still holds (core passes it back under the team lock), the file is not
// checked a second time as LoadInbox checks it: the identity check of the
// append itself (the path's lstat and the descriptor's inode, or the fstat
// of the freshly opened file, against the signature of that state) shows
// that nothing changed since. If it shows a change, the full check runs,
// with the same answers as before.
//
// This is the recipe for a letter written on its own, fsync included.
// The store's units of work write letters through the write-ahead log
// instead, which shares fsyncs among writers, and then append them here
// without an fsync of their own (applyLetter).
func (s *Store) AppendInbox(_ context.Context, team string, rules core.InboxRules, prev []core.Message, msg core.Message) error {
	if cur := s.current(team, rules, prev); cur != nil {
		err := s.appendTo(team, rules, cur, msg, nil, true, true)
		if !errors.Is(err, errStale) {
			return err
		}
	}
	cur, err := s.inbox(team, rules)
	if err != nil {
		return err
	}
	// A zero signature means the file changed while it was read: what was
	// read is no version of it to build on.
	if !sameLetters(prev, cur.msgs) || (cur.exists && cur.sig == fileSig{}) {
		return core.CorruptInbox(ErrInboxChanged)
	}
	return s.appendTo(team, rules, cur, msg, nil, false, true)
}

// errStale: in a quick append, the file is not the version the store
// holds. Nothing was written; the caller checks the file in full.
var errStale = errors.New("mail: inbox not the version the store holds")

// current returns the state the store holds for the inbox if prev is its
// very letters (the slice LoadInbox handed out, which a state never shares
// with another of the same length) and the next letter would be appended
// to an existing file in the store's own bytes; else nil.
func (s *Store) current(team string, rules core.InboxRules, prev []core.Message) *inboxState {
	if len(prev) == 0 || !core.ValidName(team) || !core.ValidName(rules.Recipient) {
		return nil
	}
	st := s.cached(cacheKey(team, rules.Recipient))
	if st == nil || len(st.msgs) != len(prev) || &st.msgs[0] != &prev[0] ||
		!st.exists || st.size == 0 || st.raw != nil || !st.fits(rules) {
		return nil
	}
	return st
}

// appendTo stores msg after the letters of cur, the state of the inbox
// the caller checked. With quick set, cur was not checked against the file
// in this call, and errStale means it no longer describes the file. With
// sync unset an appended line is not fsynced: the write-ahead log holds
// the letter, and the next checkpoint fsyncs the file. line is msg in the
// file's bytes when the caller has it (nil: encoded here).
func (s *Store) appendTo(team string, rules core.InboxRules, cur *inboxState, msg core.Message, line []byte, quick, sync bool) error {
	n := len(cur.msgs)
	if n+1 > rules.Limits.InboxMessages {
		return &core.Error{Code: core.CodeInboxFull, Message: "The recipient's inbox is full; old messages are not overwritten.", Err: core.ErrInboxCount}
	}
	if err := checkLetter(msg, n+1, rules); err != nil {
		return err
	}
	if line == nil {
		line = core.EncodeInboxLine(msg)
	}
	// whole, when set, is the file to write in one piece instead of
	// appending: for the first letter, and for a file someone else wrote
	// in other bytes, which is rewritten in the lesson's bytes, as the
	// lesson's save_inbox would.
	var whole []byte
	switch {
	case !cur.exists || cur.size == 0:
		whole = line
	case cur.raw != nil:
		whole = append(encodeAll(cur.msgs), line...)
	}
	size := cur.size + int64(len(line))
	if whole != nil {
		size = int64(len(whole))
	}
	// As in the lesson, an oversized inbox is refused before the disk is
	// touched.
	if size > int64(rules.Limits.InboxBytes) {
		return &core.Error{Code: core.CodeInboxFull, Message: "The recipient's inbox file would exceed its byte limit; nothing was written.", Err: core.ErrInboxTooLarge}
	}
	key := cacheKey(team, rules.Recipient)
	dir := filepath.Join(s.teamDir(team), inboxesDir)
	name := rules.Recipient + inboxExt
	var sig fileSig
	var err error
	if whole != nil {
		// A file kept open would be the inode the rename replaces.
		s.files.drop(key)
		sig, err = s.writeInbox(dir, name, whole, previous{data: cur.raw, exists: cur.exists})
	} else {
		sig, err = s.appendLine(key, filepath.Join(dir, name), cur.sig, cur.size, line, quick, sync)
	}
	if errors.Is(err, errStale) {
		return err
	}
	if err != nil {
		s.forget(key)
		return err
	}
	if sig == (fileSig{}) {
		// Written, but its signature is unknown: the next call reads it.
		s.forget(key)
		return nil
	}
	// cur.msgs may have spare capacity; every slice handed out is capped at
	// its length (letters), so writing past it is invisible to callers.
	s.remember(key, &inboxState{
		exists:  true,
		size:    sig.size,
		sig:     sig,
		msgs:    append(cur.msgs, msg),
		limits:  rules.Limits,
		archive: rules.Archive,
		senders: addSender(cur.senders, msg.Sender),
	})
	return nil
}

// sameLetters reports whether prev is what the store holds. Core passes
// back the very slice LoadInbox returned, so the usual answer costs one
// pointer compare; anything else is compared letter by letter.
func sameLetters(prev, cur []core.Message) bool {
	if len(prev) != len(cur) {
		return false
	}
	if len(prev) == 0 || &prev[0] == &cur[0] {
		return true
	}
	return slices.Equal(prev, cur)
}

// checkLetter makes sure msg is a letter LoadInbox would accept as letter
// number i, so the letters the store keeps are always what a full read of
// the file would give. Core builds letters this way; a failure is a bug.
func checkLetter(msg core.Message, i int, rules core.InboxRules) error {
	body := core.Length(msg.Body)
	if msg.ID != fmt.Sprintf("%s-%d", rules.Recipient, rules.Archive.Number(i)) || msg.Recipient != rules.Recipient ||
		!core.ValidName(msg.Sender) || rules.IsMember == nil || !rules.IsMember(msg.Sender) ||
		!utf8.ValidString(msg.Body) || body < 1 || body > rules.Limits.BodyChars {
		return fmt.Errorf("mail: letter %q is not a valid letter %d of %s's inbox", msg.ID, i, rules.Recipient)
	}
	return nil
}

// inbox returns the current state of an inbox: the one the store last
// read or wrote when the file's signature still matches, else a full read.
func (s *Store) inbox(team string, rules core.InboxRules) (*inboxState, error) {
	// The names become path components; core has validated them already,
	// but a path is never built from an unchecked name.
	if !core.ValidName(team) {
		return nil, fmt.Errorf("mail: invalid team name %q", team)
	}
	if !core.ValidName(rules.Recipient) {
		return nil, fmt.Errorf("mail: invalid member name %q", rules.Recipient)
	}
	key := cacheKey(team, rules.Recipient)
	dir := filepath.Join(s.teamDir(team), inboxesDir)
	path := filepath.Join(dir, rules.Recipient+inboxExt)
	// The usual case, one lstat: the path leads to the very version of
	// the file the store holds (same device, inode, size and times).
	// Whatever the directories on the way, that is the store's own inode,
	// so the directory check below, which guards the opening of a path,
	// has nothing to add.
	if st := s.cached(key); st != nil && st.exists && st.fits(rules) {
		if fi, err := s.fs.Lstat(path); err == nil && fi.Mode().IsRegular() && st.sig == sigOf(fi) {
			return st, nil
		}
	}
	// O_NOFOLLOW guards only the last component; a symbolic link in place
	// of the inboxes directory would let writes escape the data directory.
	fi, err := s.fs.Lstat(dir)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		s.forget(key)
		return &inboxState{}, nil
	case err != nil:
		return nil, fmt.Errorf("mail: inboxes directory: %w", err)
	case fi.Mode()&fs.ModeSymlink != 0:
		s.forget(key)
		return nil, core.CorruptInbox(core.ErrInboxSymlink)
	case !fi.IsDir():
		s.forget(key)
		return nil, core.CorruptInbox(ErrInboxNotRegular)
	}
	fi, err = s.fs.Lstat(path)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		s.forget(key)
		return &inboxState{}, nil
	case err != nil:
		return nil, fmt.Errorf("mail: inbox: %w", err)
	case fi.Mode()&fs.ModeSymlink != 0:
		s.forget(key)
		return nil, core.CorruptInbox(core.ErrInboxSymlink)
	case !fi.Mode().IsRegular():
		s.forget(key)
		return nil, core.CorruptInbox(ErrInboxNotRegular)
	}
	if st := s.cached(key); st != nil && st.sig == sigOf(fi) && st.fits(rules) {
		return st, nil
	}
	return s.readInbox(key, path, rules)
}

// readInbox reads and validates an inbox in full and, unless the file was
// changed too recently to trust its signature, remembers the result.
func (s *Store) readInbox(key, path string, rules core.InboxRules) (*inboxState, error) {
	s.forget(key)
	limit := rules.Limits.InboxBytes
	data, fi, err := s.readRegular(path, limit)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return &inboxState{}, nil
	case errors.Is(err, errSymlink):
		return nil, core.CorruptInbox(core.ErrInboxSymlink)
	case errors.Is(err, errNotRegular):
		return nil, core.CorruptInbox(ErrInboxNotRegular)
	case err != nil:
		return nil, fmt.Errorf("mail: read inbox: %w", err)
	}
	return s.decodeInbox(key, data, fi, rules)
}

// decodeInbox validates data, read from an inbox file of which fstat said
// fi before the read, and, unless the file was changed too recently to
// trust its signature, remembers the result.
func (s *Store) decodeInbox(key string, data []byte, fi fs.FileInfo, rules core.InboxRules) (*inboxState, error) {
	if len(data) > rules.Limits.InboxBytes {
		return nil, core.CorruptInbox(core.ErrInboxTooLarge)
	}
	msgs, err := core.DecodeInbox(data, rules)
	if err != nil {
		return nil, err
	}
	// The signature was taken before the read. If the file grew or shrank
	// meanwhile, it describes no version of what was read: an invalid one
	// makes the next append's identity check fail.
	sig := sigOf(fi)
	if sig.size != int64(len(data)) {
		sig = fileSig{}
	}
	st := &inboxState{exists: true, size: int64(len(data)), sig: sig, msgs: msgs, limits: rules.Limits, senders: senderSet(msgs), archive: rules.Archive}
	if !isCanonical(data, msgs) {
		st.raw = data
	}
	if sig != (fileSig{}) && !sig.racy(s.now()) {
		s.remember(key, st)
	}
	return st, nil
}

// writeInbox makes data the whole inbox file through replaceFile and
// returns the new file's signature. prev is what the file held (it is put
// back if the replace must be undone).
func (s *Store) writeInbox(dir, name string, data []byte, prev previous) (fileSig, error) {
	if err := s.ensureDir(dir); err != nil {
		return fileSig{}, fmt.Errorf("mail: create inboxes directory: %w", err)
	}
	written, err := s.replaceFile(dir, name, data, prev)
	if err != nil {
		return fileSig{}, err
	}
	// The rename changed the file's change time, so the signature is
	// taken from the path; it must still be the inode just written.
	fi, err := s.fs.Lstat(filepath.Join(dir, name))
	if err != nil {
		return fileSig{}, nil // written and durable; the next call reads it
	}
	sig, tmp := sigOf(fi), sigOf(written)
	if sig.dev != tmp.dev || sig.ino != tmp.ino || sig.size != int64(len(data)) {
		return fileSig{}, nil
	}
	return sig, nil
}

// appendLine appends line to the inbox at path, which must still be the
// file with signature want and size bytes long, and returns the new
// signature. On failure the file is truncated back to size, unless someone
// else wrote to it meanwhile (then it is not ours to cut).
//
// The file kept open for key since the last append is used if the path
// still leads to its inode with signature want (one lstat; the inode of a
// descriptor never changes). Otherwise, and for a file not kept, the path
// is opened and the open file's fstat must show want. With quick set, a
// file that is not want gives errStale, before anything is written.
func (s *Store) appendLine(key, path string, want fileSig, size int64, line []byte, quick, sync bool) (fileSig, error) {
	h := s.files.take(key)
	if h != nil && !h.at(s.fs, path, want) {
		_ = h.f.Close() // only ever written through by acknowledged, fsynced appends
		h = nil
	}
	if h == nil {
		var err error
		if h, err = s.openInbox(key, path, want, size); err != nil {
			if quick && !errors.Is(err, errOpen) {
				return fileSig{}, errStale
			}
			return fileSig{}, err
		}
	}
	sig, err := writeLine(h.f, size, line, sync)
	if err != nil {
		if !errors.Is(err, ErrInboxChanged) {
			err = errors.Join(err, truncateFile(h.f, size))
		}
		h.f.Close()
		return fileSig{}, err
	}
	kept := false
	if sig.ino != 0 { // an identity to check the next time (see sig_other.go)
		var cerr error
		kept, cerr = s.files.put(h)
		if cerr != nil {
			s.log.Warn("closing idle inbox files failed; their appends were fsynced before", "err", cerr)
		}
	}
	if !kept {
		if err := h.f.Close(); err != nil {
			err = fmt.Errorf("mail: close inbox %s: %w", path, err)
			return fileSig{}, errors.Join(err, s.truncatePath(path, sig, size))
		}
	}
	return sig, nil
}

// errOpen marks a failure to open or fstat an inbox that says nothing
// about its content (permissions, descriptors, I/O), as opposed to a file
// that is not the expected one.
var errOpen = errors.New("mail: open inbox")

// at reports whether path still leads to h's inode, with signature want.
func (h *heldFile) at(fsys FS, path string, want fileSig) bool {
	if h.dev != want.dev || h.ino != want.ino {
		return false
	}
	fi, err := fsys.Lstat(path)
	return err == nil && fi.Mode().IsRegular() && sigOf(fi) == want
}

// openInbox opens the inbox at path for appending and checks that the open
// file is the one with signature want, size bytes long.
func (s *Store) openInbox(key, path string, want fileSig, size int64) (*heldFile, error) {
	// O_NONBLOCK keeps a FIFO swapped in from blocking the open.
	f, err := s.fs.OpenFile(path, os.O_WRONLY|os.O_APPEND|syscall.O_NOFOLLOW|syscall.O_NONBLOCK, 0)
	switch {
	case errors.Is(err, syscall.ELOOP):
		return nil, core.CorruptInbox(core.ErrInboxSymlink)
	case errors.Is(err, fs.ErrNotExist):
		return nil, core.CorruptInbox(ErrInboxChanged)
	case errors.Is(err, syscall.ENXIO):
		return nil, core.CorruptInbox(ErrInboxNotRegular)
	case err != nil:
		return nil, fmt.Errorf("%w %s: %w", errOpen, path, err)
	}
	// Between the caller's lstat and the open the path may have been
	// given another file; fstat sees the one that was opened.
	fi, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, fmt.Errorf("%w: stat %s: %w", errOpen, path, err)
	}
	if sig := sigOf(fi); sig != want || want.size != size {
		f.Close()
		if !fi.Mode().IsRegular() {
			return nil, core.CorruptInbox(ErrInboxNotRegular)
		}
		return nil, core.CorruptInbox(ErrInboxChanged)
	}
	return &heldFile{key: key, f: f, dev: want.dev, ino: want.ino}, nil
}

// writeLine writes, time-stamps and fsyncs line at the end of f, which was
// size bytes long, and returns the file's new signature.
func writeLine(f File, size int64, line []byte, sync bool) (fileSig, error) {
	if _, err := f.Write(line); err != nil {
		return fileSig{}, fmt.Errorf("mail: append to inbox %s: %w", f.Name(), err)
	}
	if err := f.SetModTime(time.Now()); err != nil {
		return fileSig{}, fmt.Errorf("mail: set modification time of inbox %s: %w", f.Name(), err)
	}
	if sync {
		if err := f.Sync(); err != nil {
			return fileSig{}, fmt.Errorf("mail: sync inbox %s: %w", f.Name(), err)
		}
	}
	fi, err := f.Stat()
	if err != nil {
		return fileSig{}, fmt.Errorf("mail: stat inbox %s: %w", f.Name(), err)
	}
	sig := sigOf(fi)
	if sig.size != size+int64(len(line)) {
		// Someone else wrote to the file at the same time.
		return fileSig{}, core.CorruptInbox(ErrInboxChanged)
	}
	return sig, nil
}

// truncateFile cuts f back to size and makes that durable.
func truncateFile(f File, size int64) error {
	if err := f.Truncate(size); err != nil {
		return fmt.Errorf("mail: truncate %s back to %d bytes: %w", f.Name(), size, err)
	}
	if err := f.Sync(); err != nil {
		return fmt.Errorf("mail: sync %s after truncating: %w", f.Name(), err)
	}
	return nil
}

// truncatePath cuts the file at path back to size, provided it is still
// the file with signature have (the same inode, and the size this store
// gave it): a file someone else wrote since is not touched.
func (s *Store) truncatePath(path string, have fileSig, size int64) error {
	f, err := s.fs.OpenFile(path, os.O_WRONLY|syscall.O_NOFOLLOW|syscall.O_NONBLOCK, 0)
	if err != nil {
		return fmt.Errorf("mail: reopen %s to truncate it: %w", path, err)
	}
	fi, err := f.Stat()
	if err != nil {
		f.Close()
		return fmt.Errorf("mail: stat %s to truncate it: %w", path, err)
	}
	if got := sigOf(fi); got.dev != have.dev || got.ino != have.ino || got.size != have.size {
		f.Close()
		return fmt.Errorf("mail: %s changed on disk; not truncating it", path)
	}
	if err := truncateFile(f, size); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

// applyLetter writes msg, whose record in the write-ahead log is durable,
// into its inbox file: appended without an fsync of its own (the log
// holds it; a checkpoint fsyncs the file). It is idempotent, which is
// what replay needs: a letter already in the file at its position (the
// same id and bytes) is left as it is. The file is checked as LoadInbox
// checks it, so a file changed from outside is refused, never written.
func (s *Store) applyLetter(team string, rules core.InboxRules, msg core.Message, line []byte) error {
	// The usual case: the file is the version the store last wrote, and
	// the append's own identity check (lstat against the kept descriptor,
	// or fstat of the file opened) stands in for a full check, as in
	// AppendInbox's quick path.
	if cur := s.cached(cacheKey(team, rules.Recipient)); cur != nil && cur.exists && cur.size > 0 && cur.raw == nil &&
		cur.sig != (fileSig{}) && cur.fits(rules) && rules.Archive.Number(len(cur.msgs)+1) == letterNumber(msg.ID, rules.Recipient) {
		err := s.appendTo(team, rules, cur, msg, line, true, false)
		if !errors.Is(err, errStale) {
			return err
		}
	}
	cur, err := s.inbox(team, rules)
	if err != nil {
		return err
	}
	num, ok := letterIndex(msg.ID, rules.Recipient)
	n := rules.Archive.Position(num)
	switch {
	case !ok:
		return fmt.Errorf("mail: letter %q is not of %s's inbox", msg.ID, rules.Recipient)
	case n == 0:
		return nil // applied before, and archived since (replay)
	case n <= len(cur.msgs) && cur.msgs[n-1] == msg:
		return nil // applied before
	case n != len(cur.msgs)+1:
		return core.CorruptInbox(ErrInboxChanged)
	}
	if cur.exists && cur.sig == (fileSig{}) {
		return core.CorruptInbox(ErrInboxChanged)
	}
	return s.appendTo(team, rules, cur, msg, line, false, false)
}

// letterNumber is n of a letter id <recipient>-<n>, or 0.
func letterNumber(id, recipient string) int {
	n, _ := letterIndex(id, recipient)
	return n
}

// letterIndex is n of a letter id <recipient>-<n>.
func letterIndex(id, recipient string) (int, bool) {
	rest, ok := strings.CutPrefix(id, recipient+"-")
	if !ok {
		return 0, false
	}
	n, err := strconv.Atoi(rest)
	return n, err == nil && n >= 1
}

// fileSize is the size of member's inbox file, whose letters are prev, in
// the lesson's bytes: what the store holds for this very version, else
// counted (the file is rewritten in those bytes by the next append if it
// is in others).
func (s *Store) fileSize(team, member string, prev []core.Message) int64 {
	if len(prev) == 0 {
		return 0
	}
	if st := s.cached(cacheKey(team, member)); st != nil && st.raw == nil && len(st.msgs) == len(prev) && &st.msgs[0] == &prev[0] {
		return st.size
	}
	return int64(len(encodeAll(prev)))
}

// checkNext checks, before anything is logged, that msg can follow the
// letters of the inbox file (prev, as LoadInbox returned them) and the
// letters queued for it (pending, whose lines take pendingBytes): the
// checks appendTo makes, against what the file will hold.
func (s *Store) checkNext(team string, rules core.InboxRules, prev, pending []core.Message, pendingBytes int64, msg core.Message, line []byte) error {
	n := len(prev) + len(pending)
	if n+1 > rules.Limits.InboxMessages {
		return &core.Error{Code: core.CodeInboxFull, Message: "The recipient's inbox is full; old messages are not overwritten.", Err: core.ErrInboxCount}
	}
	if err := checkLetter(msg, n+1, rules); err != nil {
		return err
	}
	size := s.fileSize(team, rules.Recipient, prev) + pendingBytes + int64(len(line))
	if size > int64(rules.Limits.InboxBytes) {
		return &core.Error{Code: core.CodeInboxFull, Message: "The recipient's inbox file would exceed its byte limit; nothing was written.", Err: core.ErrInboxTooLarge}
	}
	return nil
}
