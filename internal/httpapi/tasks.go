package httpapi

import (
	"context"

	"mailroom/internal/core"
)

// The task board's routes: each converts the request, makes one core call
// (core/tasks.go holds every rule and right) and converts the task back.

// CreateTask adds a task to the team's board.
func (s *Server) CreateTask(ctx context.Context, req CreateTaskRequestObject) (CreateTaskResponseObject, error) {
	b := req.Body
	in := core.TaskInput{Team: req.Team, Title: b.Title, Detail: deref(b.Detail), Assignee: deref(b.Assignee)}
	if b.BlockedBy != nil {
		in.BlockedBy = *b.BlockedBy
	}
	if b.Needs != nil {
		in.Needs = *b.Needs
	}
	t, err := s.svc.CreateTask(ctx, in)
	if err != nil {
		return nil, err
	}
	return CreateTask201JSONResponse(taskOf(t)), nil
}

// ListTasks lists the team's tasks, filtered.
func (s *Server) ListTasks(ctx context.Context, req ListTasksRequestObject) (ListTasksResponseObject, error) {
	p := req.Params
	f := core.TaskFilter{Owner: deref(p.Owner), Assignee: deref(p.Assignee)}
	if p.Status != nil {
		f.Status = string(*p.Status)
	}
	tasks, err := s.svc.Tasks(ctx, req.Team, f)
	if err != nil {
		return nil, err
	}
	out := ListTasks200JSONResponse{Tasks: make([]Task, 0, len(tasks))}
	for _, t := range tasks {
		out.Tasks = append(out.Tasks, taskOf(t))
	}
	return out, nil
}

// GetTask returns one task.
func (s *Server) GetTask(ctx context.Context, req GetTaskRequestObject) (GetTaskResponseObject, error) {
	t, err := s.svc.Task(ctx, req.Team, req.TaskID)
	if err != nil {
		return nil, err
	}
	return GetTask200JSONResponse(taskOf(t)), nil
}

// UpdateTask changes a task.
func (s *Server) UpdateTask(ctx context.Context, req UpdateTaskRequestObject) (UpdateTaskResponseObject, error) {
	b := req.Body
	t, err := s.svc.UpdateTask(ctx, core.TaskUpdate{Team: req.Team, TaskID: req.TaskID, Title: b.Title, Detail: b.Detail,
		BlockedBy: b.BlockedBy, Assignee: b.Assignee, Needs: (*[]string)(b.Needs)})
	if err != nil {
		return nil, err
	}
	return UpdateTask200JSONResponse(taskOf(t)), nil
}

// DeleteTask marks a task deleted.
func (s *Server) DeleteTask(ctx context.Context, req DeleteTaskRequestObject) (DeleteTaskResponseObject, error) {
	t, err := s.svc.DeleteTask(ctx, req.Team, req.TaskID)
	if err != nil {
		return nil, err
	}
	return DeleteTask200JSONResponse(taskOf(t)), nil
}

// ClaimTask claims a task for the token's member.
func (s *Server) ClaimTask(ctx context.Context, req ClaimTaskRequestObject) (ClaimTaskResponseObject, error) {
	t, err := s.svc.ClaimTask(ctx, req.Team, req.TaskID)
	if err != nil {
		return nil, err
	}
	return ClaimTask200JSONResponse(taskOf(t)), nil
}

// ClaimNextTask claims the next task the token's member can claim; 204
// when there is none.
func (s *Server) ClaimNextTask(ctx context.Context, req ClaimNextTaskRequestObject) (ClaimNextTaskResponseObject, error) {
	t, ok, err := s.svc.ClaimNextTask(ctx, req.Team)
	if err != nil {
		return nil, err
	}
	if !ok {
		return ClaimNextTask204Response{}, nil
	}
	return ClaimNextTask200JSONResponse(taskOf(t)), nil
}

// CompleteTask completes an in-progress task.
func (s *Server) CompleteTask(ctx context.Context, req CompleteTaskRequestObject) (CompleteTaskResponseObject, error) {
	var result *string
	if req.Body != nil {
		result = req.Body.Result
	}
	t, err := s.svc.CompleteTask(ctx, req.Team, req.TaskID, result)
	if err != nil {
		return nil, err
	}
	return CompleteTask200JSONResponse(taskOf(t)), nil
}

// ReleaseTask gives an in-progress task back.
func (s *Server) ReleaseTask(ctx context.Context, req ReleaseTaskRequestObject) (ReleaseTaskResponseObject, error) {
	t, err := s.svc.ReleaseTask(ctx, req.Team, req.TaskID)
	if err != nil {
		return nil, err
	}
	return ReleaseTask200JSONResponse(taskOf(t)), nil
}

func taskOf(t core.Task) Task {
	return Task{TaskID: t.ID, Title: t.Title, Detail: t.Detail, Status: TaskStatus(t.Status), Owner: t.Owner,
		Assignee: t.Assignee, BlockedBy: nonNil(t.BlockedBy), Blocks: nonNil(t.Blocks), Needs: nonNil(t.Needs), Result: t.Result,
		CreatedBy: t.CreatedBy, CreatedAt: t.CreatedAt, UpdatedAt: t.UpdatedAt}
}

func nonNil(ids []string) []string {
	if ids == nil {
		return []string{}
	}
	return ids
}
