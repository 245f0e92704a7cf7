package agent

import (
	"context"
	"encoding/json"
	"fmt"

	"mailroom/internal/core"
)

// The task board's tools (core/tasks.go holds every rule): the same for
// a model's turn and an MCP client, refused with the codes REST answers.

// Task tool names.
const (
	ToolCreateTask   = "create_task"
	ToolListTasks    = "list_tasks"
	ToolClaimTask    = "claim_task"
	ToolCompleteTask = "complete_task"
	ToolReleaseTask  = "release_task"
)

// taskTools are the board's tools of the registry.
func (r registry) taskTools() []Tool {
	all := Offer{Lead: true, Teammates: true}
	both := DoorAgent | DoorMCP
	taskID := prop{name: "task_id", typ: "string", desc: "The task's id, e.g. task-1.", required: true}
	return []Tool{
		{
			Name: ToolCreateTask, Doors: both, Offer: all, Handler: r.createTask,
			Description: fmt.Sprintf("Add a pending task to your team's board (at most %d tasks). Teammates claim it with claim_task once every task it is blocked by is completed.", r.env.Limits.TaskLimit()),
			InputSchema: object(
				prop{name: "title", typ: "string", desc: fmt.Sprintf("What to do, 1 to %d characters after trimming.", core.MaxTaskTitle), required: true},
				prop{name: "detail", typ: "string", desc: fmt.Sprintf("Optional: more about it, at most %d characters.", core.MaxTaskDetail)},
				prop{name: "blocked_by", typ: "array", items: "string", desc: "Optional: ids of tasks that must be completed first."},
				prop{name: "assignee", typ: "string", desc: "Optional: the only member who may claim it."},
				prop{name: "needs", typ: "array", items: "string", desc: fmt.Sprintf("Optional: skills a member must have to claim it (see team), at most %d labels of a-z, 0-9, _ and -.", core.MaxLabels)}),
		},
		{
			Name: ToolListTasks, Doors: both, Offer: all, Handler: r.listTasks,
			Description: "List your team's tasks in id order, with status, owner, assignee, blockers and results; optionally only those of one status, owner or assignee.",
			InputSchema: object(
				prop{name: "status", typ: "string", desc: "Optional: pending, in_progress, completed or deleted."},
				prop{name: "owner", typ: "string", desc: "Optional: only tasks this member owns."},
				prop{name: "assignee", typ: "string", desc: "Optional: only tasks assigned to this member."}),
		},
		{
			Name: ToolClaimTask, Doors: both, Offer: all, Handler: r.claimTask,
			Description: "Claim a task: you become its owner and it is in progress. Without task_id you get the lowest-numbered task you can claim (pending, unblocked, assigned to you or to nobody, needing no skill you lack), or task null when there is none.",
			InputSchema: object(prop{name: "task_id", typ: "string", desc: "Optional: the task to claim; the next claimable one when left out."}),
		},
		{
			Name: ToolCompleteTask, Doors: both, Offer: all, Handler: r.completeTask,
			Description: fmt.Sprintf("Mark a task you own (lead: any in progress) completed, with an optional result of at most %d characters. Tasks blocked by it may then be claimed.", core.MaxTaskResult),
			InputSchema: object(taskID,
				prop{name: "result", typ: "string", desc: fmt.Sprintf("Optional: what came of it, at most %d characters.", core.MaxTaskResult)}),
		},
		{
			Name: ToolReleaseTask, Doors: both, Offer: all, Handler: r.releaseTask,
			Description: "Give back a task you own (lead: any in progress): it is pending again, with no owner.",
			InputSchema: object(taskID),
		},
	}
}

// taskOutput is a tool's answer about one task; claim_task's Task is null
// when nothing could be claimed.
type taskOutput struct {
	Task *core.Task `json:"task"`
}

func taskResult(t core.Task, verb string) Result {
	return Result{Value: taskOutput{Task: &t}, Text: fmt.Sprintf("%s %s (%s): %s", verb, t.ID, t.Status, t.Title)}
}

type tasksOutput struct {
	Tasks []core.Task `json:"tasks"`
}

func (r registry) createTask(ctx context.Context, input json.RawMessage) (Result, error) {
	var in struct {
		Title     *string  `json:"title"`
		Detail    string   `json:"detail"`
		BlockedBy []string `json:"blocked_by"`
		Assignee  string   `json:"assignee"`
		Needs     []string `json:"needs"`
	}
	if err := decode(ToolCreateTask, input, &in); err != nil {
		return Result{}, err
	}
	if in.Title == nil {
		return Result{}, toolErr(core.CodeValidation, "create_task: title is required")
	}
	team, _, err := callerOf(ctx)
	if err != nil {
		return Result{}, err
	}
	t, err := r.env.Svc.CreateTask(ctx, core.TaskInput{Team: team, Title: *in.Title, Detail: in.Detail, BlockedBy: in.BlockedBy, Assignee: in.Assignee, Needs: in.Needs})
	if err != nil {
		return Result{}, err
	}
	return taskResult(t, "Created"), nil
}

func (r registry) listTasks(ctx context.Context, input json.RawMessage) (Result, error) {
	var in struct {
		Status   string `json:"status"`
		Owner    string `json:"owner"`
		Assignee string `json:"assignee"`
	}
	if err := decode(ToolListTasks, input, &in); err != nil {
		return Result{}, err
	}
	switch in.Status {
	case "", core.TaskPending, core.TaskInProgress, core.TaskCompleted, core.TaskDeleted:
	default:
		return Result{}, toolErr(core.CodeValidation, "list_tasks: status must be pending, in_progress, completed or deleted")
	}
	team, _, err := callerOf(ctx)
	if err != nil {
		return Result{}, err
	}
	tasks, err := r.env.Svc.Tasks(ctx, team, core.TaskFilter{Status: in.Status, Owner: in.Owner, Assignee: in.Assignee})
	if err != nil {
		return Result{}, err
	}
	return Result{Value: tasksOutput{Tasks: tasks}, Text: fmt.Sprintf("%d tasks.", len(tasks))}, nil
}

func (r registry) claimTask(ctx context.Context, input json.RawMessage) (Result, error) {
	var in struct {
		TaskID *string `json:"task_id"`
	}
	if err := decode(ToolClaimTask, input, &in); err != nil {
		return Result{}, err
	}
	team, _, err := callerOf(ctx)
	if err != nil {
		return Result{}, err
	}
	if in.TaskID != nil {
		t, err := r.env.Svc.ClaimTask(ctx, team, *in.TaskID)
		if err != nil {
			return Result{}, err
		}
		return taskResult(t, "Claimed"), nil
	}
	t, ok, err := r.env.Svc.ClaimNextTask(ctx, team)
	if err != nil {
		return Result{}, err
	}
	if !ok {
		return Result{Value: taskOutput{}, Text: "No task can be claimed now."}, nil
	}
	return taskResult(t, "Claimed"), nil
}

func (r registry) completeTask(ctx context.Context, input json.RawMessage) (Result, error) {
	var in struct {
		TaskID *string `json:"task_id"`
		Result *string `json:"result"`
	}
	if err := decode(ToolCompleteTask, input, &in); err != nil {
		return Result{}, err
	}
	if in.TaskID == nil {
		return Result{}, toolErr(core.CodeValidation, "complete_task: task_id is required")
	}
	team, _, err := callerOf(ctx)
	if err != nil {
		return Result{}, err
	}
	t, err := r.env.Svc.CompleteTask(ctx, team, *in.TaskID, in.Result)
	if err != nil {
		return Result{}, err
	}
	return taskResult(t, "Completed"), nil
}

func (r registry) releaseTask(ctx context.Context, input json.RawMessage) (Result, error) {
	var in struct {
		TaskID *string `json:"task_id"`
	}
	if err := decode(ToolReleaseTask, input, &in); err != nil {
		return Result{}, err
	}
	if in.TaskID == nil {
		return Result{}, toolErr(core.CodeValidation, "release_task: task_id is required")
	}
	team, _, err := callerOf(ctx)
	if err != nil {
		return Result{}, err
	}
	t, err := r.env.Svc.ReleaseTask(ctx, team, *in.TaskID)
	if err != nil {
		return Result{}, err
	}
	return taskResult(t, "Released"), nil
}
