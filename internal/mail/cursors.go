package mail

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"path/filepath"
)

// Read cursors (core.TeamTx.ReadThrough): each member's position in its
// inbox, a few bytes per member. A unit of work that moves one logs the
// new positions in its record (walRecord.Cursors) rather than the team's
// whole state, and checkpoints write teams/<team>/cursors.json, replaced
// atomically like state.json. A team without the file has read nothing.

// cursorsFile holds a team's read cursors: {"<member>": <position>}.
const cursorsFile = "cursors.json"

// loadCursors reads a team's cursors.json; a missing file is no cursor.
func (s *Store) loadCursors(team string) (map[string]int, error) {
	data, _, err := s.readRegular(filepath.Join(s.teamDir(team), cursorsFile), 1<<20)
	if errors.Is(err, fs.ErrNotExist) {
		return map[string]int{}, nil
	}
	if err != nil {
		return nil, fmt.Errorf("mail: read %s: %w", cursorsFile, err)
	}
	out := map[string]int{}
	if err := json.Unmarshal(data, &out); err != nil {
		return nil, fmt.Errorf("mail: parse %s: %w", cursorsFile, err)
	}
	for member, n := range out {
		if n < 0 {
			return nil, fmt.Errorf("mail: %s: negative position for %q", cursorsFile, member)
		}
	}
	return out, nil
}

// saveCursors atomically replaces a team's cursors.json.
func (s *Store) saveCursors(team string, cursors map[string]int) error {
	data, err := json.Marshal(cursors)
	if err != nil {
		return fmt.Errorf("mail: encode %s: %w", cursorsFile, err)
	}
	dir := s.teamDir(team)
	old, _, rerr := s.readRegular(filepath.Join(dir, cursorsFile), -1)
	if rerr != nil && !errors.Is(rerr, fs.ErrNotExist) {
		return fmt.Errorf("mail: read %s: %w", cursorsFile, rerr)
	}
	_, err = s.replaceFile(dir, cursorsFile, data, previous{data: old, exists: rerr == nil})
	return err
}

// withCursors returns cursors with moves applied, as a new map: the old
// one stays as it is, for the undo of a record that fails.
func withCursors(cursors, moves map[string]int) map[string]int {
	out := make(map[string]int, len(cursors)+len(moves))
	maps.Copy(out, cursors)
	maps.Copy(out, moves)
	return out
}

// ReadThrough implements core.Snapshot.
func (tx *fileTx) ReadThrough(member string) (int, error) {
	return tx.e.cursors[member], nil
}
