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
	"slices"
	"syscall"

	"mailroom/internal/core"
)

// The archive (docs/api.md, "Mail that stays useful"; docs/storage.md).
// A member's archived letters live in <team>/archive/<member>.jsonl, one
// line per letter exactly as its inbox held it, in the order they were
// archived. Which letters are archived is the member's ArchiveMark in the
// team's state; the files follow it:
//
//   - a unit that archives logs its record (the state with the new mark),
//     waits until it is durable, drains and fsyncs the inboxes and writes
//     state.json (a checkpoint of the team), and only then moves the lines
//     (moveToArchive), all under the team's lock. So state.json's mark is
//     never behind the files: a file is at most as far as the mark.
//   - moving appends the letters the mark archives that the archive does
//     not hold yet, fsyncs it, then replaces the inbox with the rest (the
//     replace recipe). A crash in between leaves letters in both files;
//     the next move (at start, startInbox) appends none twice and finishes.
//   - at start each inbox is moved to the mark state.json holds, before
//     anything reads it; the log's replay reads the files at that mark
//     (filesMark) and moves them to the final mark after its checkpoint.

const archiveDir = "archive"

// archivePath is where member's archive lives.
func (s *Store) archivePath(team, member string) string {
	return filepath.Join(s.teamDir(team), archiveDir, member+inboxExt)
}

// LoadArchive implements core.Snapshot: member's archived letters, in the
// order they were sent, read and validated once and kept until the next
// move.
func (tx *fileTx) LoadArchive(member string) ([]core.Message, error) {
	if tx.e.damaged != nil {
		return nil, core.DamagedError(tx.e.damaged)
	}
	e := tx.e
	if items, ok := e.archives[member]; ok {
		return items, nil
	}
	m := e.st.Member(member)
	if m == nil || m.Archive.Count() == 0 {
		return []core.Message{}, nil
	}
	items, err := tx.s.readArchive(e.st.Name, e.st.Rules(member))
	if err != nil {
		return nil, err
	}
	if len(items) != m.Archive.Count() {
		return nil, core.CorruptInbox(fmt.Errorf("mail: archive of %s holds %d letters, its mark %d: %w", member, len(items), m.Archive.Count(), core.ErrInboxSequence))
	}
	if e.archives == nil {
		e.archives = map[string][]core.Message{}
	}
	e.archives[member] = items
	return items, nil
}

// readArchive reads and validates member's archive file; a missing file
// is an empty archive.
func (s *Store) readArchive(team string, rules core.InboxRules) ([]core.Message, error) {
	if !core.ValidName(team) || !core.ValidName(rules.Recipient) {
		return nil, fmt.Errorf("mail: invalid name %q/%q", team, rules.Recipient)
	}
	data, _, err := s.readRegular(s.archivePath(team, rules.Recipient), -1)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return []core.Message{}, nil
	case errors.Is(err, errSymlink):
		return nil, core.CorruptInbox(core.ErrInboxSymlink)
	case errors.Is(err, errNotRegular):
		return nil, core.CorruptInbox(ErrInboxNotRegular)
	case err != nil:
		return nil, fmt.Errorf("mail: read archive: %w", err)
	}
	return core.DecodeArchive(data, rules)
}

// commitArchive finishes a unit that archived (cs.Archived), record seq
// logged and the team's lock still held: it waits for the record to be
// durable, writes the team's files as a checkpoint does, and moves the
// letters. A move that fails leaves the team served read-only (damaged)
// until the next start moves them.
func (s *Store) commitArchive(ctx context.Context, e *teamEntry, cs *core.ChangeSet, seq uint64) error {
	if err := s.settle(seq); err != nil {
		s.drain(e) // rolls the record back (settleUndo)
		return err
	}
	s.drain(e)
	if err := e.drainErr(seq); err != nil {
		return err
	}
	if err := s.checkpointTeam(ctx, e); err != nil {
		// The record is durable: the next checkpoint writes the state,
		// and the letters move at the next start.
		s.markDirty(e)
		e.damaged = fmt.Errorf("archive: writing the team's state before moving letters: %w", err)
		return core.StorageError(err)
	}
	members := make([]string, 0, len(cs.Archived))
	for m := range cs.Archived {
		members = append(members, m)
	}
	slices.Sort(members)
	for _, m := range members {
		if err := s.moveToArchive(e.st.Name, e.st.Rules(m)); err != nil {
			e.damaged = fmt.Errorf("archive of %s: moving letters: %w", m, err)
			s.log.Error("moving archived letters failed; serving the team read-only until the next start moves them", "team", e.st.Name, "member", m, "err", err)
			return core.StorageError(err)
		}
		delete(e.archives, m)
	}
	e.overlay = nil
	return nil
}

// moveToArchive makes rules.Recipient's files agree with its mark
// (rules.Archive): the inbox's lines the mark archives are appended to
// the archive (those it does not hold yet) and fsynced, then the inbox is
// replaced with the rest. Nothing to move, nothing is written. It is
// idempotent, and every step is safe to interrupt (see the top of this
// file).
func (s *Store) moveToArchive(team string, rules core.InboxRules) error {
	member := rules.Recipient
	if rules.Archive.Count() == 0 || !core.ValidName(team) || !core.ValidName(member) {
		return nil
	}
	dir := filepath.Join(s.teamDir(team), inboxesDir)
	data, _, err := s.readRegular(filepath.Join(dir, member+inboxExt), -1)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("mail: read inbox to archive: %w", err)
	}
	return s.moveLines(team, rules, data)
}

// moveLines is moveToArchive over data, the inbox file's whole bytes as
// the caller just read them (start-up reads each inbox once).
func (s *Store) moveLines(team string, rules core.InboxRules, data []byte) error {
	member := rules.Recipient
	if rules.Archive.Count() == 0 || !core.ValidName(team) || !core.ValidName(member) {
		return nil
	}
	dir := filepath.Join(s.teamDir(team), inboxesDir)
	var keep, move []byte
	var moving []int
	for line := range bytes.Lines(data) {
		n, ok := lineNumber(line, member)
		if !ok || line[len(line)-1] != '\n' {
			// Not a line of the store's: left where it is, for the
			// inbox's own check to refuse.
			keep = append(keep, line...)
			continue
		}
		if rules.Archive.Archived(n) {
			move = append(move, line...)
			moving = append(moving, n)
		} else {
			keep = append(keep, line...)
		}
	}
	if len(moving) == 0 {
		return nil
	}
	if err := s.appendArchive(team, member, move, moving); err != nil {
		return err
	}
	key := cacheKey(team, member)
	s.files.drop(key)
	s.forget(key)
	if _, err := s.replaceFile(dir, member+inboxExt, keep, previous{data: data, exists: true}); err != nil {
		return fmt.Errorf("mail: rewrite inbox after archiving: %w", err)
	}
	return nil
}

// lineNumber is n of the id <member>-<n> of an inbox line.
func lineNumber(line []byte, member string) (int, bool) {
	var v struct {
		ID string `json:"id"`
	}
	if json.Unmarshal(line, &v) != nil {
		return 0, false
	}
	who, n, ok := core.ParseLetterID(v.ID)
	return n, ok && who == member
}

// appendArchive appends to member's archive the lines (numbered numbers)
// it does not hold yet, and fsyncs it: after a crash between a move's
// two steps the archive already holds some. A torn last line (a crash in
// the middle of an append) is cut first.
func (s *Store) appendArchive(team, member string, lines []byte, numbers []int) error {
	dir := filepath.Join(s.teamDir(team), archiveDir)
	path := filepath.Join(dir, member+inboxExt)
	if err := s.fs.Mkdir(dir, dirMode); err == nil {
		// A new directory is an entry of the team's directory: synced,
		// or a power loss could lose the archive with it.
		if err := s.fs.SyncDir(s.teamDir(team)); err != nil {
			return fmt.Errorf("mail: sync team directory: %w", err)
		}
	} else if !errors.Is(err, fs.ErrExist) {
		return fmt.Errorf("mail: create archive directory: %w", err)
	}
	old, _, err := s.readRegular(path, -1)
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("mail: read archive: %w", err)
	}
	held := map[int]bool{}
	size := int64(0)
	for line := range bytes.Lines(old) {
		if line[len(line)-1] != '\n' {
			break // torn: cut below
		}
		if n, ok := lineNumber(line, member); ok {
			held[n] = true
		}
		size += int64(len(line))
	}
	var add []byte
	i := 0
	for line := range bytes.Lines(lines) {
		if !held[numbers[i]] {
			add = append(add, line...)
		}
		i++
	}
	created := errors.Is(err, fs.ErrNotExist)
	f, err := s.fs.OpenFile(path, os.O_WRONLY|os.O_CREATE|syscall.O_NOFOLLOW, fileMode)
	if err != nil {
		return fmt.Errorf("mail: open archive: %w", err)
	}
	if size != int64(len(old)) {
		if err := f.Truncate(size); err != nil {
			f.Close()
			return fmt.Errorf("mail: cut the torn last line of an archive: %w", err)
		}
	}
	if len(add) > 0 {
		if _, err := f.WriteAt(add, size); err != nil {
			f.Close()
			return fmt.Errorf("mail: append to archive: %w", err)
		}
	}
	// The inbox loses these lines next: they must be on disk here first.
	if err := f.Sync(); err != nil {
		f.Close()
		return fmt.Errorf("mail: sync archive: %w", err)
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("mail: close archive: %w", err)
	}
	if created {
		// The new file is an entry of the directory: synced before the
		// inbox loses its lines.
		if err := s.fs.SyncDir(dir); err != nil {
			return fmt.Errorf("mail: sync archive directory: %w", err)
		}
	}
	return nil
}

// filesBehind reports whether a member's inbox file is at an older mark
// than the team's state (a replayed archive not yet moved).
func (s *Store) filesBehind(e *teamEntry) bool {
	for _, m := range e.st.Members {
		if !m.Archive.Equal(e.filesMark[m.Name]) {
			return true
		}
	}
	return false
}

// moveReplayed moves the letters that records replayed from the log
// archived, once the replay's checkpoint wrote the state with their mark.
func (s *Store) moveReplayed(e *teamEntry) error {
	for _, m := range e.st.Members {
		if m.Archive.Equal(e.filesMark[m.Name]) {
			continue
		}
		if err := s.moveToArchive(e.st.Name, e.st.Rules(m.Name)); err != nil {
			return fmt.Errorf("archive of %s: moving letters after the replay: %w", m.Name, err)
		}
	}
	e.filesMark, e.archives, e.overlay = nil, nil, nil
	return nil
}

// ArchiveBytes returns member's archive file as it is on disk, lines in
// the order archived (no file: none): what an import copies, byte for
// byte. The importer checks them against the member's mark.
func (s *Store) ArchiveBytes(team, member string) ([]byte, error) {
	if !core.ValidName(team) || !core.ValidName(member) {
		return nil, fmt.Errorf("mail: invalid name %q/%q", team, member)
	}
	data, _, err := s.readRegular(s.archivePath(team, member), -1)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	return data, err
}
