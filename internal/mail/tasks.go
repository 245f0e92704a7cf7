package mail

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"path/filepath"

	"mailroom/internal/core"
)

// A team's task board lives in <team>/tasks.json, the whole board as one
// JSON array in id order, written by the replace recipe at checkpoints.
// Between checkpoints each unit of work that changed tasks logs only the
// tasks it put (walRecord.Tasks), so a claim on a board of 500 tasks
// logs one task, not 500. Tasks are never removed (a deleted task keeps
// its id), so the board's length is its last id and no id is ever given
// twice, across restarts and crashes alike: an acknowledged task is in
// the log or in the file.

const tasksFile = "tasks.json"

// maxTasksFile bounds what is read of a board: 10,000 tasks of about 9 KB.
const maxTasksFile = 96 << 20

// LoadTasks reads a team's board; a missing file is an empty board.
func (s *Store) LoadTasks(_ context.Context, team string) ([]core.Task, error) {
	data, _, err := s.readRegular(filepath.Join(s.teamDir(team), tasksFile), maxTasksFile)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("mail: read tasks: %w", err)
	}
	if len(data) > maxTasksFile {
		return nil, fmt.Errorf("mail: tasks file over %d bytes", maxTasksFile)
	}
	var tasks []core.Task
	if err := json.Unmarshal(data, &tasks); err != nil {
		return nil, fmt.Errorf("mail: parse tasks: %w", err)
	}
	for i, t := range tasks {
		if t.ID != core.TaskID(i+1) {
			return nil, fmt.Errorf("mail: tasks file: task %d is %q", i+1, t.ID)
		}
	}
	return tasks, nil
}

// SaveTasks durably replaces a team's board.
func (s *Store) SaveTasks(_ context.Context, team string, tasks []core.Task) error {
	if tasks == nil {
		tasks = []core.Task{}
	}
	data, err := json.Marshal(tasks)
	if err != nil {
		return fmt.Errorf("mail: encode tasks: %w", err)
	}
	dir := s.teamDir(team)
	old, _, rerr := s.readRegular(filepath.Join(dir, tasksFile), -1)
	if rerr != nil && !errors.Is(rerr, fs.ErrNotExist) {
		return fmt.Errorf("mail: read tasks: %w", rerr)
	}
	_, err = s.replaceFile(dir, tasksFile, data, previous{data: old, exists: rerr == nil})
	return err
}

// Tasks implements core.Snapshot.
func (tx *fileTx) Tasks() ([]core.Task, error) {
	if tx.e.damaged != nil {
		return nil, core.DamagedError(tx.e.damaged)
	}
	return tx.e.tasks, nil
}

// restoreTasks loads a team's board at start; a board that cannot be read
// makes the team damaged, never empty (its ids would be given again).
func (s *Store) restoreTasks(ctx context.Context, e *teamEntry) {
	tasks, err := s.LoadTasks(ctx, e.st.Name)
	if err != nil {
		e.damaged = fmt.Errorf("tasks: %w", err)
		return
	}
	e.tasks = tasks
}
