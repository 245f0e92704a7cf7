package mcpserver_test

import (
	"testing"

	"mailroom/internal/core"
)

type taskAnswer struct {
	Task *core.Task `json:"task"`
}

// The board's tools through the official SDK client: the same rules and
// codes as REST.
func TestTaskTools(t *testing.T) {
	e := newEnv(t)
	lead, reader, reviewer := e.member("demo", "lead"), e.member("demo", "reader"), e.member("demo", "reviewer")

	var created taskAnswer
	mustCall(t, lead, "create_task", map[string]any{"title": " read the source ", "assignee": "reader"}, &created)
	if created.Task == nil || created.Task.ID != "task-1" || created.Task.Title != "read the source" || created.Task.CreatedBy != "lead" {
		t.Fatalf("create_task = %+v, want task-1 by lead", created.Task)
	}
	mustCall(t, lead, "create_task", map[string]any{"title": "review", "blocked_by": []string{"task-1"}}, &created)
	wantRefusal(t, lead, "create_task", map[string]any{"title": "  "}, "body_length")
	wantRefusal(t, lead, "create_task", map[string]any{"title": "x", "blocked_by": []string{"task-9"}}, "unknown_task")
	wantRefusal(t, lead, "create_task", map[string]any{"title": "x", "assignee": "nobody"}, "unknown_member")
	wantRefusal(t, lead, "create_task", map[string]any{"title": "x", "created_by": "reader"}, "validation_failed")

	wantRefusal(t, reviewer, "claim_task", map[string]any{"task_id": "task-1"}, "task_assigned")
	wantRefusal(t, reviewer, "claim_task", map[string]any{"task_id": "task-2"}, "task_blocked")
	var none taskAnswer
	mustCall(t, reviewer, "claim_task", map[string]any{}, &none)
	if none.Task != nil {
		t.Fatalf("reviewer's next = %+v, want none (task-1 is the reader's, task-2 blocked)", none.Task)
	}
	var claimed taskAnswer
	mustCall(t, reader, "claim_task", map[string]any{}, &claimed)
	if claimed.Task == nil || claimed.Task.ID != "task-1" || claimed.Task.Owner == nil || *claimed.Task.Owner != "reader" {
		t.Fatalf("reader's next = %+v, want task-1 owned by reader", claimed.Task)
	}
	wantRefusal(t, reviewer, "complete_task", map[string]any{"task_id": "task-1"}, "forbidden")
	wantRefusal(t, reviewer, "release_task", map[string]any{"task_id": "task-2"}, "forbidden")
	wantRefusal(t, lead, "release_task", map[string]any{"task_id": "task-2"}, "task_not_claimed")
	var done taskAnswer
	mustCall(t, reader, "complete_task", map[string]any{"task_id": "task-1", "result": "42"}, &done)
	if done.Task.Status != core.TaskCompleted || done.Task.Result == nil || *done.Task.Result != "42" {
		t.Fatalf("complete_task = %+v, want completed with result 42", done.Task)
	}
	wantRefusal(t, reader, "complete_task", map[string]any{"task_id": "task-1"}, "task_closed")
	mustCall(t, reviewer, "claim_task", map[string]any{"task_id": "task-2"}, &claimed)
	wantRefusal(t, reader, "claim_task", map[string]any{"task_id": "task-2"}, "task_claimed")
	var released taskAnswer
	mustCall(t, lead, "release_task", map[string]any{"task_id": "task-2"}, &released)
	if released.Task.Status != core.TaskPending || released.Task.Owner != nil {
		t.Fatalf("release_task = %+v, want pending without owner", released.Task)
	}

	var list struct {
		Tasks []core.Task `json:"tasks"`
	}
	mustCall(t, reviewer, "list_tasks", map[string]any{"status": "completed"}, &list)
	if len(list.Tasks) != 1 || list.Tasks[0].ID != "task-1" || len(list.Tasks[0].Blocks) != 1 {
		t.Fatalf("list_tasks completed = %+v, want task-1 blocking task-2", list.Tasks)
	}
	wantRefusal(t, reviewer, "list_tasks", map[string]any{"status": "done"}, "validation_failed")
}
