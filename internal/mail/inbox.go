package mail

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"path/filepath"
	"slices"

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
// (SPEC §4.2). A missing file is an empty inbox; a symbolic link (even a
// dangling one), anything but a regular file, a file over the byte limit
// or any content core.DecodeInbox rejects is inbox_corrupt, never empty.
func (s *Store) LoadInbox(_ context.Context, team string, rules core.InboxRules) ([]core.Message, error) {
	msgs, _, err := s.loadInbox(team, rules)
	return msgs, err
}

// AppendInbox writes prev followed by msg as the whole inbox, in the bytes
// of the lesson's save_inbox (SPEC §4.3, §13.1), through replaceFile.
//
// The file is loaded and validated again first and must still hold exactly
// prev: core holds the team lock, so only something outside the server can
// have changed it, and a file replaced, corrupted, turned into a symbolic
// link or given a blank line is answered with inbox_corrupt and left
// untouched rather than overwritten.
func (s *Store) AppendInbox(_ context.Context, team string, rules core.InboxRules, prev []core.Message, msg core.Message) error {
	cur, old, err := s.loadInbox(team, rules)
	if err != nil {
		return err
	}
	if !slices.Equal(cur, prev) {
		return core.CorruptInbox(ErrInboxChanged)
	}
	if len(prev)+1 > rules.Limits.InboxMessages {
		return fmt.Errorf("mail: inbox of %s would exceed %d messages: %w", rules.Recipient, rules.Limits.InboxMessages, core.ErrInboxCount)
	}
	var buf bytes.Buffer
	for _, m := range prev {
		buf.Write(core.EncodeInboxLine(m))
	}
	buf.Write(core.EncodeInboxLine(msg))
	// As in the lesson, an oversized inbox is refused before the disk is
	// touched.
	if buf.Len() > rules.Limits.InboxBytes {
		return fmt.Errorf("mail: inbox of %s would exceed %d bytes: %w", rules.Recipient, rules.Limits.InboxBytes, core.ErrInboxTooLarge)
	}
	dir := filepath.Join(s.teamDir(team), inboxesDir)
	if err := s.ensureDir(dir); err != nil {
		return fmt.Errorf("mail: create inboxes directory: %w", err)
	}
	return s.replaceFile(dir, rules.Recipient+inboxExt, buf.Bytes(), old)
}

// loadInbox is LoadInbox that also returns the raw bytes read, so that
// AppendInbox can restore them if its replace must be undone.
func (s *Store) loadInbox(team string, rules core.InboxRules) ([]core.Message, previous, error) {
	// The names become path components; core has validated them already,
	// but a path is never built from an unchecked name.
	if !core.ValidName(team) {
		return nil, previous{}, fmt.Errorf("mail: invalid team name %q", team)
	}
	if !core.ValidName(rules.Recipient) {
		return nil, previous{}, fmt.Errorf("mail: invalid member name %q", rules.Recipient)
	}
	dir := filepath.Join(s.teamDir(team), inboxesDir)
	// O_NOFOLLOW guards only the last component; a symbolic link in place
	// of the inboxes directory would let writes escape the data directory.
	fi, err := s.fs.Lstat(dir)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return []core.Message{}, previous{}, nil
	case err != nil:
		return nil, previous{}, fmt.Errorf("mail: inboxes directory: %w", err)
	case fi.Mode()&fs.ModeSymlink != 0:
		return nil, previous{}, core.CorruptInbox(core.ErrInboxSymlink)
	case !fi.IsDir():
		return nil, previous{}, core.CorruptInbox(ErrInboxNotRegular)
	}
	limit := rules.Limits.InboxBytes
	data, err := s.readRegular(filepath.Join(dir, rules.Recipient+inboxExt), limit)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return []core.Message{}, previous{}, nil
	case errors.Is(err, errSymlink):
		return nil, previous{}, core.CorruptInbox(core.ErrInboxSymlink)
	case errors.Is(err, errNotRegular):
		return nil, previous{}, core.CorruptInbox(ErrInboxNotRegular)
	case err != nil:
		return nil, previous{}, fmt.Errorf("mail: read inbox: %w", err)
	case len(data) > limit:
		return nil, previous{}, core.CorruptInbox(core.ErrInboxTooLarge)
	}
	msgs, err := core.DecodeInbox(data, rules)
	if err != nil {
		return nil, previous{}, err
	}
	if msgs == nil {
		msgs = []core.Message{}
	}
	return msgs, previous{data: data, exists: true}, nil
}
