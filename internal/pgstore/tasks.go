package pgstore

import (
	"encoding/json"
	"fmt"

	"github.com/jackc/pgx/v5"

	"mailroom/internal/core"
)

// The task board (migration 00008): one row per task. A unit of work
// reads the board under the team's row lock, or uses the board this
// replica's last unit of work on the team committed (cache.go), which the
// commit's lock confirms is current: every write of a task bumps the
// team's version. Its puts are written by the commit's round trip.

// tasksRead reads the board once per unit of work.
func (t *teamTx) tasksRead() ([]core.Task, error) {
	if t.tasks == nil {
		if t.damaged != nil {
			return nil, core.CorruptInbox(t.damaged)
		}
		if err := t.read(); err != nil {
			return nil, err
		}
		rows, err := t.tx.Query(t.ctx, `SELECT seq, doc FROM tasks WHERE team = $1 ORDER BY seq`, t.name)
		if err != nil {
			return nil, err
		}
		board := []core.Task{}
		for rows.Next() {
			var seq int
			var doc []byte
			if err := rows.Scan(&seq, &doc); err != nil {
				return nil, err
			}
			var task core.Task
			if err := json.Unmarshal(doc, &task); err != nil {
				return nil, fmt.Errorf("pgstore: task %d: %w", seq, err)
			}
			if seq != len(board)+1 || task.ID != core.TaskID(seq) {
				return nil, fmt.Errorf("pgstore: task row %d holds %q after %d tasks", seq, task.ID, len(board))
			}
			board = append(board, task)
		}
		if err := rows.Err(); err != nil {
			return nil, err
		}
		t.tasks = board
	}
	return t.tasks, nil
}

// queueTasks queues the writes of the tasks put in this unit of work and
// the bump of the team's version that tells every replica's remembered
// board it is stale.
func (t *teamTx) queueTasks(b *pgx.Batch) {
	if len(t.taskPuts) > 0 {
		b.Queue(`UPDATE teams SET version = version + 1 WHERE name = $1`, t.name)
	}
	for _, task := range t.taskPuts {
		b.Queue(`INSERT INTO tasks (team, seq, status, doc) VALUES ($1, $2, $3, $4)
			ON CONFLICT (team, seq) DO UPDATE SET status = EXCLUDED.status, doc = EXCLUDED.doc`,
			t.name, core.TaskNumber(task.ID), task.Status, canonical(task))
	}
}
