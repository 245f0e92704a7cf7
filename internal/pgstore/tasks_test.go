package pgstore_test

import (
	"context"
	"testing"
	"time"

	"mailroom/internal/core"
	"mailroom/internal/pgstore"
	"mailroom/internal/pgtest"
)

// claim claims task id for member on s, as core does: read the board,
// refuse an owned task, put the claimed one. It reports whether it won.
func claim(t *testing.T, s *pgstore.Store, team, id, member string) bool {
	t.Helper()
	won := false
	err := core.Update(context.Background(), s, team, func(tx core.TeamTx) error {
		won = false
		tasks, err := tx.Tasks()
		if err != nil {
			return err
		}
		task := tasks[core.TaskNumber(id)-1]
		if task.Owner != nil {
			return nil
		}
		task.Owner, task.Status = &member, core.TaskInProgress
		won = true
		return tx.PutTask(task)
	})
	if err != nil {
		t.Fatalf("claim %s as %s: %v", id, member, err)
	}
	return won
}

// A replica that remembers a team's board never decides a claim on it
// once another replica changed a task: the task write bumps the team's
// version, and the remembered board is refused.
func TestRememberedBoardAcrossReplicas(t *testing.T) {
	ctx := context.Background()
	url := pgtest.New(t)
	a, b := open(t, url), open(t, url)
	if err := a.CreateTeam(ctx, newTeam("board", "reader", "writer")); err != nil {
		t.Fatal(err)
	}
	at := time.Now().UTC().Truncate(time.Millisecond)
	if err := core.Update(ctx, a, "board", func(tx core.TeamTx) error {
		for n := 1; n <= 3; n++ {
			if err := tx.PutTask(core.Task{ID: core.TaskID(n), Title: "t", Status: core.TaskPending, BlockedBy: []string{}, CreatedBy: "lead", CreatedAt: at, UpdatedAt: at}); err != nil {
				return err
			}
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	// a remembers the board as its claim of task-1 left it.
	if !claim(t, a, "board", "task-1", "reader") {
		t.Fatal("the first claim of task-1 lost")
	}
	// b claims task-2; a's remembered board still shows it free.
	if !claim(t, b, "board", "task-2", "writer") {
		t.Fatal("b's claim of task-2 lost")
	}
	if claim(t, a, "board", "task-2", "reader") {
		t.Fatal("a claimed task-2 from its remembered board although b owns it")
	}
	// And the other way round, a board b remembers.
	if !claim(t, a, "board", "task-3", "reader") {
		t.Fatal("a's claim of task-3 lost")
	}
	if claim(t, b, "board", "task-3", "writer") {
		t.Fatal("b claimed task-3 from its remembered board although a owns it")
	}
	err := core.View(ctx, b, "board", func(tx core.TeamTx) error {
		tasks, err := tx.Tasks()
		if err != nil {
			return err
		}
		for i, want := range []string{"reader", "writer", "reader"} {
			if tasks[i].Owner == nil || *tasks[i].Owner != want {
				t.Errorf("task-%d owner = %v, want %s", i+1, tasks[i].Owner, want)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}
