package mail

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"path/filepath"

	"mailroom/internal/core"
)

// repairTornLine removes the torn last line a crash during an append can
// leave in member's inbox: the bytes after the file's last newline. Such a
// line was never acknowledged, since AppendInbox reports success only
// after the whole line, newline included, was fsynced. The repair is
// logged at WARN with the team, the member and the bytes removed and kept.
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
// A missing file or inboxes directory is fine. An error means the repair
// was needed but could not be made.
func (s *Store) repairTornLine(st *core.TeamState, member string) error {
	if !core.ValidName(member) {
		return nil // core reports it; never a path from an unchecked name
	}
	dir := filepath.Join(s.teamDir(st.Name), inboxesDir)
	if fi, err := s.fs.Lstat(dir); err != nil || !fi.IsDir() {
		return nil // missing, or a symbolic link core refuses
	}
	path := filepath.Join(dir, member+inboxExt)
	limit := st.Limits.InboxBytes
	data, fi, err := s.readRegular(path, limit)
	switch {
	case errors.Is(err, fs.ErrNotExist), errors.Is(err, errSymlink), errors.Is(err, errNotRegular):
		return nil
	case err != nil:
		return fmt.Errorf("mail: read inbox %s to check its last line: %w", member, err)
	case len(data) == 0 || len(data) > limit || data[len(data)-1] == '\n':
		return nil
	}
	keep := bytes.LastIndexByte(data, '\n') + 1
	if keep == 0 {
		return nil
	}
	if err := s.truncatePath(path, sigOf(fi), int64(keep)); err != nil {
		return fmt.Errorf("mail: remove the torn last line of inbox %s: %w", member, err)
	}
	s.log.Warn("removed the torn last line of an inbox; that send was interrupted and never acknowledged",
		"team", st.Name, "member", member, "bytes_removed", len(data)-keep, "bytes_kept", keep)
	return nil
}
