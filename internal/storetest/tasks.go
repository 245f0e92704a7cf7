package storetest

import (
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"mailroom/internal/core"
)

// RunTasks runs the task board's part of the contract (TeamTx.Tasks,
// PutTask); Run calls it.
func RunTasks(t *testing.T, newStore func(t *testing.T) core.Store) {
	t.Run("TasksCommitAndRollback", func(t *testing.T) { testTasks(t, newStore(t)) })
	t.Run("TaskIDsInOrder", func(t *testing.T) { testTaskIDs(t, newStore(t)) })
	t.Run("ConcurrentTaskClaimsSerialise", func(t *testing.T) { testTaskClaims(t, newStore(t)) })
	t.Run("TasksOfOneTeamOnly", func(t *testing.T) { testTasksPerTeam(t, newStore(t)) })
	t.Run("SkillsAndNeedsKept", func(t *testing.T) { testSkillsAndNeeds(t, newStore(t)) })
}

// testSkillsAndNeeds: a member's skills and a task's needs live in what
// the store already keeps (the member's state, the task's document), and
// come back as stored; a task stored without needs reads with none.
func testSkillsAndNeeds(t *testing.T, s core.Store) {
	st := Team("alpha", "reader")
	st.Members[1].Skills = []string{"go", "sql"}
	create(t, s, st)
	needy := Task(1, "build")
	needy.Needs = []string{"go"}
	putTask(t, s, "alpha", needy)
	putTask(t, s, "alpha", Task(2, "plain"))
	if err := core.Update(t.Context(), s, "alpha", func(tx core.TeamTx) error {
		tx.State().Members[0].Skills = []string{"lead-work"}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	members := state(t, s, "alpha").Members
	if got := fmt.Sprint(members[0].Skills, members[1].Skills); got != "[lead-work] [go sql]" {
		t.Fatalf("skills = %s, want [lead-work] [go sql]", got)
	}
	got := board(t, s, "alpha")
	if len(got) != 2 || fmt.Sprint(got[0].Needs) != "[go]" || len(got[1].Needs) != 0 {
		t.Fatalf("needs = %+v, want [go] and none", got)
	}
}

// Task returns task n of a board as a test stores it.
func Task(n int, title string) core.Task {
	at := time.Now().UTC().Truncate(time.Millisecond)
	return core.Task{ID: core.TaskID(n), Title: title, Status: core.TaskPending, BlockedBy: []string{},
		CreatedBy: core.LeadName, CreatedAt: at, UpdatedAt: at}
}

func board(t *testing.T, s core.Store, team string) []core.Task {
	t.Helper()
	var out []core.Task
	if err := core.View(t.Context(), s, team, func(tx core.TeamTx) error {
		tasks, err := tx.Tasks()
		out = append([]core.Task{}, tasks...)
		return err
	}); err != nil {
		t.Fatalf("ViewTeam: %v", err)
	}
	return out
}

func putTask(t *testing.T, s core.Store, team string, task core.Task) {
	t.Helper()
	if err := core.Update(t.Context(), s, team, func(tx core.TeamTx) error { return tx.PutTask(task) }); err != nil {
		t.Fatalf("PutTask(%s): %v", task.ID, err)
	}
}

func testTasks(t *testing.T, s core.Store) {
	ctx := t.Context()
	create(t, s, Team("alpha", "reader"))
	if got := board(t, s, "alpha"); len(got) != 0 {
		t.Fatalf("a new team's board = %+v, want empty", got)
	}
	// A unit of work that fails stores none of its tasks.
	boom := errors.New("boom")
	err := core.Update(ctx, s, "alpha", func(tx core.TeamTx) error {
		if err := tx.PutTask(Task(1, "lost")); err != nil {
			return err
		}
		return boom
	})
	if !errors.Is(err, boom) {
		t.Fatalf("UpdateTeam = %v, want the function's error", err)
	}
	if got := board(t, s, "alpha"); len(got) != 0 {
		t.Fatalf("board after a failed unit = %+v, want empty", got)
	}
	// Two tasks in one unit, seen by the unit itself before the commit.
	if err := core.Update(ctx, s, "alpha", func(tx core.TeamTx) error {
		if err := tx.PutTask(Task(1, "one")); err != nil {
			return err
		}
		if err := tx.PutTask(Task(2, "two")); err != nil {
			return err
		}
		tasks, err := tx.Tasks()
		if err != nil {
			return err
		}
		if len(tasks) != 2 || tasks[1].Title != "two" {
			return fmt.Errorf("inside the unit: %+v", tasks)
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	// A change replaces the task with its id, every field kept.
	claimed := Task(1, "one")
	owner, result := "reader", "done: 42"
	claimed.Status, claimed.Owner, claimed.Result = core.TaskCompleted, &owner, &result
	claimed.Assignee, claimed.BlockedBy = &owner, []string{"task-2"}
	putTask(t, s, "alpha", claimed)
	got := board(t, s, "alpha")
	if len(got) != 2 {
		t.Fatalf("board = %+v, want 2 tasks", got)
	}
	g := got[0]
	if g.ID != "task-1" || g.Status != core.TaskCompleted || g.Owner == nil || *g.Owner != "reader" ||
		g.Result == nil || *g.Result != result || g.Assignee == nil || *g.Assignee != "reader" ||
		len(g.BlockedBy) != 1 || g.BlockedBy[0] != "task-2" || !g.CreatedAt.Equal(claimed.CreatedAt) {
		t.Fatalf("task-1 = %+v, want %+v", g, claimed)
	}
	if got[1].Owner != nil || got[1].Result != nil || got[1].Title != "two" {
		t.Fatalf("task-2 = %+v, want unchanged", got[1])
	}
	// A view cannot put.
	if err := core.View(ctx, s, "alpha", func(tx core.TeamTx) error { return tx.PutTask(Task(3, "x")) }); err == nil {
		t.Fatal("PutTask inside ViewTeam succeeded, want an error")
	}
}

func testTaskIDs(t *testing.T, s core.Store) {
	ctx := t.Context()
	create(t, s, Team("alpha"))
	putTask(t, s, "alpha", Task(1, "one"))
	// Only the next id may be added: no gap, no second task-1.
	for _, n := range []int{3, 0} {
		task := Task(1, "bad")
		task.ID = core.TaskID(n)
		if n == 0 {
			task.ID = "task-x"
		}
		if err := core.Update(ctx, s, "alpha", func(tx core.TeamTx) error { return tx.PutTask(task) }); err == nil {
			t.Errorf("PutTask(%s) on a board of 1 succeeded, want an error", task.ID)
		}
	}
	putTask(t, s, "alpha", Task(2, "two"))
	got := board(t, s, "alpha")
	if len(got) != 2 || got[0].ID != "task-1" || got[1].ID != "task-2" {
		t.Fatalf("board = %+v, want task-1, task-2", got)
	}
}

// testTaskClaims: units of work that each read the board and claim
// task-1 if it has no owner; exactly one claims it.
func testTaskClaims(t *testing.T, s core.Store) {
	ctx := t.Context()
	create(t, s, Team("alpha"))
	putTask(t, s, "alpha", Task(1, "contested"))
	const n = 16
	var wg sync.WaitGroup
	wins := make([]bool, n)
	errs := make([]error, n)
	for i := range n {
		wg.Go(func() {
			errs[i] = core.Update(ctx, s, "alpha", func(tx core.TeamTx) error {
				wins[i] = false
				tasks, err := tx.Tasks()
				if err != nil {
					return err
				}
				if tasks[0].Owner != nil {
					return nil
				}
				task := tasks[0]
				owner := fmt.Sprintf("m%d", i)
				task.Owner, task.Status = &owner, core.TaskInProgress
				wins[i] = true
				return tx.PutTask(task)
			})
		})
	}
	wg.Wait()
	won := 0
	for i := range n {
		if errs[i] != nil {
			t.Fatalf("claim %d: %v", i, errs[i])
		}
		if wins[i] {
			won++
		}
	}
	if won != 1 {
		t.Fatalf("%d units claimed the task, want exactly 1", won)
	}
	if got := board(t, s, "alpha"); got[0].Owner == nil || got[0].Status != core.TaskInProgress {
		t.Fatalf("task-1 = %+v, want claimed", got[0])
	}
}

func testTasksPerTeam(t *testing.T, s core.Store) {
	ctx := t.Context()
	create(t, s, Team("alpha"))
	create(t, s, Team("beta"))
	putTask(t, s, "alpha", Task(1, "alpha's"))
	if got := board(t, s, "beta"); len(got) != 0 {
		t.Fatalf("beta's board = %+v, want empty", got)
	}
	// A team deleted and created again starts a new board.
	if err := s.DeleteTeam(ctx, "alpha"); err != nil {
		t.Fatal(err)
	}
	create(t, s, Team("alpha"))
	if got := board(t, s, "alpha"); len(got) != 0 {
		t.Fatalf("board of the new alpha = %+v, want empty", got)
	}
}
