package mail

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"path/filepath"
	"regexp"
	"strings"

	"mailroom/internal/core"
)

// turnsDir holds a team's turn documents, one file per turn:
//
//	teams/<team>/turns/<turn_id>.json
//
// A document is rewritten whole (temporary file, fsync, rename) each time
// its turn records something worth keeping, so one file per turn keeps
// every write as small as one document. The directory lives in the team's
// directory and goes wherever the team goes.
const (
	turnsDir = "turns"
	turnExt  = ".json"
	// maxTurnFile bounds what is read of one document; core keeps them
	// far smaller (bounded steps, shortened inputs and results).
	maxTurnFile = 4 << 20
)

// turnIDPattern is the shape of a turn id, <member>-t<n>; anything else is
// never a file name here.
var turnIDPattern = regexp.MustCompile(`^[a-z][a-z0-9-]{0,23}-t[0-9]{1,9}$`)

// LoadTurns returns every turn document of the team. A file that cannot
// be read or parsed is skipped with a warning: documents are records of
// what turns did, and the team's rules never depend on them.
func (s *Store) LoadTurns(_ context.Context, team string) ([]core.TurnDoc, error) {
	if !core.ValidName(team) {
		return nil, fmt.Errorf("mail: invalid team name %q", team)
	}
	dir := filepath.Join(s.teamDir(team), turnsDir)
	entries, err := s.listClean(dir)
	if err != nil {
		return nil, fmt.Errorf("mail: list turn documents: %w", err)
	}
	var out []core.TurnDoc
	for name, typ := range entries {
		id, ok := strings.CutSuffix(name, turnExt)
		if !ok || !typ.IsRegular() || !turnIDPattern.MatchString(id) {
			continue
		}
		data, _, err := s.readRegular(filepath.Join(dir, name), maxTurnFile)
		var doc core.TurnDoc
		if err == nil {
			err = json.Unmarshal(data, &doc)
		}
		if err == nil && doc.TurnID != id {
			err = fmt.Errorf("the document names turn %q", doc.TurnID)
		}
		if err != nil {
			s.log.Warn("skipped a turn document that cannot be read", "team", team, "file", name, "err", err)
			continue
		}
		out = append(out, doc)
	}
	return out, nil
}

// SaveTurn durably writes one turn document.
func (s *Store) SaveTurn(_ context.Context, team string, doc *core.TurnDoc) error {
	if !core.ValidName(team) || !turnIDPattern.MatchString(doc.TurnID) {
		return fmt.Errorf("mail: invalid team %q or turn id %q", team, doc.TurnID)
	}
	data, err := json.Marshal(doc)
	if err != nil {
		return fmt.Errorf("mail: encode turn document: %w", err)
	}
	dir := filepath.Join(s.teamDir(team), turnsDir)
	if err := s.ensureDir(dir); err != nil {
		return fmt.Errorf("mail: create turns directory: %w", err)
	}
	target := filepath.Join(dir, doc.TurnID+turnExt)
	if _, err := s.writeRename(dir, target, data); err != nil {
		return err
	}
	if err := s.fs.SyncDir(dir); err != nil {
		return fmt.Errorf("mail: sync turns directory: %w", err)
	}
	return nil
}

// DeleteTurn removes one turn document; a missing one is no error.
func (s *Store) DeleteTurn(_ context.Context, team, turnID string) error {
	if !core.ValidName(team) || !turnIDPattern.MatchString(turnID) {
		return fmt.Errorf("mail: invalid team %q or turn id %q", team, turnID)
	}
	err := s.fs.Remove(filepath.Join(s.teamDir(team), turnsDir, turnID+turnExt))
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("mail: remove turn document: %w", err)
	}
	return nil
}
