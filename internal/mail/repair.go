package mail

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"path/filepath"

	"mailroom/internal/core"
)

// startInbox does start-up's work on member's inbox with one read of the
// file. boxes is what listClean found in the team's inboxes directory (nil
// when it is missing or not a real directory).
//
// First it removes the torn last line a crash during an append can leave:
// the bytes after the file's last newline. Such a line was never
// acknowledged, since AppendInbox reports success only after the whole
// line, newline included, was fsynced. The repair is logged at WARN with
// the team, the member and the bytes removed and kept.
//
// Only that shape is repaired; everything else is left exactly as it is
// for core to report as inbox_corrupt (and the team as damaged):
//   - a file with no newline at all, because the store writes a first
//     letter whole (create and rename), never by appending;
//   - a file over the team's byte limit, because an append is refused
//     before it could go over;
//   - a torn line in the middle, a symbolic link, anything not a regular
//     file, or damaged complete lines.
//
// A file that needed no repair is then validated from the bytes just read,
// under the team's limits and members, and kept as LoadInbox keeps a file
// it reads (see readInbox), so core's LoadInbox that follows finds it
// without reading it again. A file that fails validation is not kept; core
// reads it and reports why.
//
// A missing file or inboxes directory is fine. An error means the repair
// was needed but could not be made.
func (s *Store) startInbox(st *core.TeamState, member string, boxes map[string]fs.FileMode) error {
	if !core.ValidName(member) || boxes == nil {
		return nil // core reports it; never a path from an unchecked name
	}
	path := filepath.Join(s.teamDir(st.Name), inboxesDir, member+inboxExt)
	limits := s.logged.of(st)
	limit := limits.InboxBytes
	data, fi, err := s.readListed(path, boxes, limit)
	switch {
	case errors.Is(err, fs.ErrNotExist), errors.Is(err, errSymlink), errors.Is(err, errNotRegular):
		return nil
	case err != nil:
		return fmt.Errorf("mail: read inbox %s to check its last line: %w", member, err)
	}
	if len(data) > 0 && len(data) <= limit && data[len(data)-1] != '\n' {
		if keep := bytes.LastIndexByte(data, '\n') + 1; keep > 0 {
			if err := s.truncatePath(path, sigOf(fi), int64(keep)); err != nil {
				return fmt.Errorf("mail: remove the torn last line of inbox %s: %w", member, err)
			}
			s.log.Warn("removed the torn last line of an inbox; that send was interrupted and never acknowledged",
				"team", st.Name, "member", member, "bytes_removed", len(data)-keep, "bytes_kept", keep)
			return nil // the file changed: LoadInbox reads it
		}
	}
	isMember := func(name string) bool {
		for _, m := range st.Members {
			if m.Name == name {
				return true
			}
		}
		return false
	}
	rules := core.InboxRules{Recipient: member, Limits: limits, IsMember: isMember}
	if m := st.Member(member); m != nil && m.Archive.Count() > 0 {
		// Letters state.json archives that a crash left in the inbox
		// move now, before anything reads it (archive.go).
		rules.Archive = m.Archive
		move := s.moveToArchive
		if len(data) <= limit {
			// Read whole above: not read again.
			move = func(team string, rules core.InboxRules) error { return s.moveLines(team, rules, data) }
		}
		if err := move(st.Name, rules); err != nil {
			return fmt.Errorf("mail: finish archiving %s's letters: %w", member, err)
		}
		return nil // the file may have changed: LoadInbox reads it
	}
	_, _ = s.decodeInbox(cacheKey(st.Name, member), data, fi, rules)
	return nil
}
