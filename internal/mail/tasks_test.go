package mail_test

import (
	"encoding/json"
	"path/filepath"
	"testing"
	"time"

	"mailroom/internal/core"
	"mailroom/internal/mail"
)

func putTasks(t *testing.T, s *mail.Store, team string, tasks ...core.Task) {
	t.Helper()
	if err := core.Update(ctx, s, team, func(tx core.TeamTx) error {
		for _, task := range tasks {
			if err := tx.PutTask(task); err != nil {
				return err
			}
		}
		return nil
	}); err != nil {
		t.Fatalf("PutTask: %v", err)
	}
}

func taskNo(n int, status string) core.Task {
	at := time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)
	return core.Task{ID: core.TaskID(n), Title: "t", Status: status, BlockedBy: []string{}, CreatedBy: "lead", CreatedAt: at, UpdatedAt: at}
}

func boardOf(t *testing.T, s *mail.Store, team string) ([]core.Task, error) {
	t.Helper()
	var out []core.Task
	err := core.View(ctx, s, team, func(tx core.TeamTx) error {
		tasks, err := tx.Tasks()
		out = append(out, tasks...)
		return err
	})
	return out, err
}

// The board survives a restart from the log alone (no checkpoint: as
// after kill -9), from tasks.json alone (a checkpoint, the log emptied),
// and from both (records replayed over an older tasks.json).
func TestTasksSurviveRestart(t *testing.T) {
	s, data := openStore(t)
	createTeam(t, s, "alpha")
	putTasks(t, s, "alpha", taskNo(1, core.TaskPending), taskNo(2, core.TaskPending))

	// A second store over the same directory, the first never closed:
	// only the log holds the tasks.
	again, err := mail.Open(data)
	if err != nil {
		t.Fatal(err)
	}
	got, err := boardOf(t, again, "alpha")
	if err != nil || len(got) != 2 || got[1].ID != "task-2" {
		t.Fatalf("board from the log = %+v, %v; want task-1, task-2", got, err)
	}
	if err := again.Checkpoint(ctx); err != nil {
		t.Fatal(err)
	}
	var onDisk []core.Task
	if err := json.Unmarshal(readFile(t, filepath.Join(data, "teams", "alpha", "tasks.json")), &onDisk); err != nil || len(onDisk) != 2 {
		t.Fatalf("tasks.json = %+v, %v; want 2 tasks", onDisk, err)
	}
	// After the checkpoint, one more change only in the log.
	putTasks(t, again, "alpha", taskNo(2, core.TaskDeleted), taskNo(3, core.TaskPending))
	third, err := mail.Open(data)
	if err != nil {
		t.Fatal(err)
	}
	defer third.Close()
	got, err = boardOf(t, third, "alpha")
	if err != nil || len(got) != 3 || got[1].Status != core.TaskDeleted || got[2].ID != "task-3" {
		t.Fatalf("board from tasks.json and the log = %+v, %v; want task-2 deleted and task-3", got, err)
	}
	_ = again.Close()
}

// A tasks.json that cannot be read makes the team damaged, never an empty
// board whose ids would be given again.
func TestDamagedTasksFile(t *testing.T) {
	s, data := openStore(t)
	createTeam(t, s, "alpha")
	putTasks(t, s, "alpha", taskNo(1, core.TaskPending))
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	for name, content := range map[string]string{
		"NotJSON": "[{",
		"Gap":     `[{"task_id": "task-2", "title": "t", "status": "pending"}]`,
	} {
		t.Run(name, func(t *testing.T) {
			writeFile(t, filepath.Join(data, "teams", "alpha", "tasks.json"), []byte(content))
			again, err := mail.Open(data)
			if err != nil {
				t.Fatal(err)
			}
			defer again.Close()
			if _, err := boardOf(t, again, "alpha"); core.ErrorCode(err) != core.CodeInboxCorrupt {
				t.Fatalf("board of a team with a bad tasks.json: %v, want inbox_corrupt (damaged)", err)
			}
			err = core.Update(ctx, again, "alpha", func(tx core.TeamTx) error { return tx.PutTask(taskNo(1, core.TaskPending)) })
			if core.ErrorCode(err) != core.CodeInboxCorrupt {
				t.Fatalf("PutTask on the damaged team: %v, want inbox_corrupt", err)
			}
		})
	}
}
