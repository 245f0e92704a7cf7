package core_test

import (
	"context"
	"slices"
	"strings"
	"sync"
	"testing"

	"mailroom/internal/core"
	"mailroom/internal/testkit"
)

// board is a fixture's team seen through the task rules.
type board struct {
	*fixture
}

func newBoard(t *testing.T, limits *core.Limits) board { return board{newFixture(t, limits)} }

func (b board) as(member string) context.Context {
	if member == "admin" {
		return core.AsAdmin(b.t.Context())
	}
	return core.AsMember(b.t.Context(), b.team, member)
}

func (b board) create(by, title string, blockedBy []string, assignee string) core.Task {
	b.t.Helper()
	task, err := b.svc.CreateTask(b.as(by), core.TaskInput{Team: b.team, Title: title, BlockedBy: blockedBy, Assignee: assignee})
	if err != nil {
		b.t.Fatalf("CreateTask(%q) as %s: %v", title, by, err)
	}
	return task
}

func (b board) claim(member, id string) (core.Task, error) {
	return b.svc.ClaimTask(b.as(member), b.team, id)
}

func (b board) get(id string) core.Task {
	b.t.Helper()
	task, err := b.svc.Task(b.as("admin"), b.team, id)
	if err != nil {
		b.t.Fatalf("Task(%s): %v", id, err)
	}
	return task
}

func str(p *string) string {
	if p == nil {
		return "<nil>"
	}
	return *p
}

func TestCreateTask(t *testing.T) {
	b := newBoard(t, nil)
	got := b.create("reader", "  read the source  ", nil, "")
	if got.ID != "task-1" || got.Title != "read the source" || got.Status != core.TaskPending || got.Owner != nil ||
		got.Assignee != nil || got.Result != nil || got.CreatedBy != "reader" || len(got.BlockedBy) != 0 || len(got.Blocks) != 0 ||
		got.CreatedAt.IsZero() || !got.UpdatedAt.Equal(got.CreatedAt) {
		t.Fatalf("created = %+v, want task-1 pending by reader, title trimmed", got)
	}
	second := b.create("admin", "review", []string{"task-1", "task-1"}, "reviewer")
	if second.ID != "task-2" || second.CreatedBy != "admin" || str(second.Assignee) != "reviewer" ||
		!slices.Equal(second.BlockedBy, []string{"task-1"}) {
		t.Fatalf("second = %+v, want task-2 by admin, assigned to reviewer, blocked by task-1 once", second)
	}
	if first := b.get("task-1"); !slices.Equal(first.Blocks, []string{"task-2"}) {
		t.Fatalf("task-1 blocks %v, want [task-2]", first.Blocks)
	}

	long := strings.Repeat("x", core.MaxTaskTitle+1)
	for _, tc := range []struct {
		name string
		as   string
		in   core.TaskInput
		code core.Code
	}{
		{"ErrBlankTitle", "reader", core.TaskInput{Title: " \t\n "}, core.CodeBodyLength},
		{"ErrLongTitle", "reader", core.TaskInput{Title: long}, core.CodeBodyLength},
		{"ErrLongDetail", "reader", core.TaskInput{Title: "t", Detail: strings.Repeat("d", core.MaxTaskDetail+1)}, core.CodeBodyLength},
		{"ErrUnknownAssignee", "reader", core.TaskInput{Title: "t", Assignee: "nobody"}, core.CodeUnknownMember},
		{"ErrUnknownBlocker", "reader", core.TaskInput{Title: "t", BlockedBy: []string{"task-9"}}, core.CodeUnknownTask},
		{"ErrMalformedBlocker", "reader", core.TaskInput{Title: "t", BlockedBy: []string{"task-01"}}, core.CodeUnknownTask},
		{"ErrBodyBeforeMember", "reader", core.TaskInput{Title: "", Assignee: "nobody"}, core.CodeBodyLength},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tc.in.Team = b.team
			_, err := b.svc.CreateTask(b.as(tc.as), tc.in)
			wantCode(t, err, tc.code)
		})
	}
	t.Run("ErrOtherTeam", func(t *testing.T) {
		_, err := b.svc.CreateTask(core.AsMember(t.Context(), "other", "lead"), core.TaskInput{Team: b.team, Title: "t"})
		wantCode(t, err, core.CodeForbidden)
	})
	t.Run("ErrDeletedBlocker", func(t *testing.T) {
		gone := b.create("lead", "gone", nil, "")
		if _, err := b.svc.DeleteTask(b.as("lead"), b.team, gone.ID); err != nil {
			t.Fatal(err)
		}
		_, err := b.svc.CreateTask(b.as("lead"), core.TaskInput{Team: b.team, Title: "t", BlockedBy: []string{gone.ID}})
		wantCode(t, err, core.CodeUnknownTask)
	})
}

func TestTaskLimit(t *testing.T) {
	limits := core.DefaultLimits()
	limits.Tasks = 2
	b := newBoard(t, &limits)
	b.create("lead", "one", nil, "")
	two := b.create("lead", "two", nil, "")
	_, err := b.svc.CreateTask(b.as("lead"), core.TaskInput{Team: b.team, Title: "three"})
	wantCode(t, err, core.CodeTaskLimit)
	// Deleted tasks are kept, so they still count.
	if _, err := b.svc.DeleteTask(b.as("lead"), b.team, two.ID); err != nil {
		t.Fatal(err)
	}
	_, err = b.svc.CreateTask(b.as("lead"), core.TaskInput{Team: b.team, Title: "three"})
	wantCode(t, err, core.CodeTaskLimit)
	// The admin raises the limit.
	n := 3
	if _, err := b.svc.UpdateLimits(b.as("admin"), b.team, core.LimitsUpdate{Tasks: &n}); err != nil {
		t.Fatal(err)
	}
	if got := b.create("lead", "three", nil, ""); got.ID != "task-3" {
		t.Fatalf("after raising the limit: %s, want task-3", got.ID)
	}
	zero := 0
	_, err = b.svc.UpdateLimits(b.as("admin"), b.team, core.LimitsUpdate{Tasks: &zero})
	wantCode(t, err, core.CodeValidation)
}

func TestListTasksFilters(t *testing.T) {
	b := newBoard(t, nil)
	b.create("lead", "one", nil, "reader")
	b.create("lead", "two", nil, "")
	b.create("lead", "three", nil, "reviewer")
	if _, err := b.claim("reader", "task-1"); err != nil {
		t.Fatal(err)
	}
	ids := func(f core.TaskFilter) []string {
		t.Helper()
		tasks, err := b.svc.Tasks(b.as("reviewer"), b.team, f)
		if err != nil {
			t.Fatal(err)
		}
		out := []string{}
		for _, x := range tasks {
			out = append(out, x.ID)
		}
		return out
	}
	for _, tc := range []struct {
		f    core.TaskFilter
		want []string
	}{
		{core.TaskFilter{}, []string{"task-1", "task-2", "task-3"}},
		{core.TaskFilter{Status: core.TaskPending}, []string{"task-2", "task-3"}},
		{core.TaskFilter{Owner: "reader"}, []string{"task-1"}},
		{core.TaskFilter{Assignee: "reviewer"}, []string{"task-3"}},
		{core.TaskFilter{Status: core.TaskCompleted}, []string{}},
	} {
		if got := ids(tc.f); !slices.Equal(got, tc.want) {
			t.Errorf("Tasks(%+v) = %v, want %v", tc.f, got, tc.want)
		}
	}
	_, err := b.svc.Task(b.as("reader"), b.team, "task-9")
	wantCode(t, err, core.CodeNotFound)
	_, err = b.svc.Tasks(core.AsMember(t.Context(), "other", "lead"), b.team, core.TaskFilter{})
	wantCode(t, err, core.CodeForbidden)
}

func TestUpdateTask(t *testing.T) {
	b := newBoard(t, nil)
	b.create("reader", "one", nil, "")
	b.create("reader", "two", []string{"task-1"}, "")
	b.create("reader", "three", []string{"task-2"}, "")
	title, assignee := "  renamed  ", "reviewer"
	for _, who := range []string{"reader", "lead", "admin"} {
		got, err := b.svc.UpdateTask(b.as(who), core.TaskUpdate{Team: b.team, TaskID: "task-1", Title: &title, Assignee: &assignee})
		if err != nil {
			t.Fatalf("UpdateTask as %s: %v", who, err)
		}
		if got.Title != "renamed" || str(got.Assignee) != "reviewer" || got.UpdatedAt.Before(got.CreatedAt) {
			t.Fatalf("updated = %+v, want renamed, assigned to reviewer", got)
		}
	}
	_, err := b.svc.UpdateTask(b.as("reviewer"), core.TaskUpdate{Team: b.team, TaskID: "task-1", Title: &title})
	wantCode(t, err, core.CodeForbidden)
	_, err = b.svc.UpdateTask(b.as("reader"), core.TaskUpdate{Team: b.team, TaskID: "task-7", Title: &title})
	wantCode(t, err, core.CodeNotFound)
	blank := ""
	_, err = b.svc.UpdateTask(b.as("reader"), core.TaskUpdate{Team: b.team, TaskID: "task-7", Title: &blank})
	wantCode(t, err, core.CodeBodyLength)
	nobody := "nobody"
	_, err = b.svc.UpdateTask(b.as("reader"), core.TaskUpdate{Team: b.team, TaskID: "task-1", Assignee: &nobody})
	wantCode(t, err, core.CodeUnknownMember)
	clear := ""
	if got, err := b.svc.UpdateTask(b.as("reader"), core.TaskUpdate{Team: b.team, TaskID: "task-1", Assignee: &clear}); err != nil || got.Assignee != nil {
		t.Fatalf("clearing the assignee: %+v, %v; want no assignee", got, err)
	}

	cycles := []struct {
		name    string
		task    string
		blocked []string
	}{
		{"ErrSelf", "task-1", []string{"task-1"}},
		{"ErrDirect", "task-1", []string{"task-2"}},
		{"ErrLonger", "task-1", []string{"task-3"}},
	}
	for _, tc := range cycles {
		t.Run(tc.name, func(t *testing.T) {
			ids := tc.blocked
			_, err := b.svc.UpdateTask(b.as("lead"), core.TaskUpdate{Team: b.team, TaskID: tc.task, BlockedBy: &ids})
			wantCode(t, err, core.CodeTaskCycle)
			if got := b.get(tc.task); len(got.BlockedBy) != 0 {
				t.Fatalf("%s blocked by %v after a refused cycle, want unchanged", tc.task, got.BlockedBy)
			}
		})
	}
	// Re-pointing a chain without a cycle is fine, and blocks follow.
	ids := []string{"task-1"}
	if _, err := b.svc.UpdateTask(b.as("lead"), core.TaskUpdate{Team: b.team, TaskID: "task-3", BlockedBy: &ids}); err != nil {
		t.Fatal(err)
	}
	if got := b.get("task-1"); !slices.Equal(got.Blocks, []string{"task-2", "task-3"}) {
		t.Fatalf("task-1 blocks %v, want [task-2 task-3]", got.Blocks)
	}
	if got := b.get("task-2"); len(got.Blocks) != 0 {
		t.Fatalf("task-2 blocks %v, want none", got.Blocks)
	}
	// Closed tasks take no changes.
	if _, err := b.claim("reader", "task-1"); err != nil {
		t.Fatal(err)
	}
	if _, err := b.svc.CompleteTask(b.as("reader"), b.team, "task-1", nil); err != nil {
		t.Fatal(err)
	}
	_, err = b.svc.UpdateTask(b.as("lead"), core.TaskUpdate{Team: b.team, TaskID: "task-1", Title: &title})
	wantCode(t, err, core.CodeTaskClosed)
}

func TestClaimTaskRefusalOrder(t *testing.T) {
	b := newBoard(t, nil)
	b.create("lead", "free", nil, "")                             // task-1
	b.create("lead", "for reviewer", nil, "reviewer")             // task-2
	b.create("lead", "blocked", []string{"task-1", "task-2"}, "") // task-3
	b.create("lead", "closed later", nil, "")                     // task-4

	if _, err := b.claim("reader", "task-9"); core.ErrorCode(err) != core.CodeNotFound {
		t.Fatalf("claim of a missing task: %v, want not_found", err)
	}
	_, err := b.svc.ClaimTask(b.as("admin"), b.team, "task-1")
	wantCode(t, err, core.CodeForbidden)

	got, err := b.claim("reader", "task-1")
	if err != nil || str(got.Owner) != "reader" || got.Status != core.TaskInProgress {
		t.Fatalf("claim = %+v, %v; want owned by reader, in progress", got, err)
	}
	again, err := b.claim("reader", "task-1")
	if err != nil || !again.UpdatedAt.Equal(got.UpdatedAt) || str(again.Owner) != "reader" {
		t.Fatalf("the owner claiming again: %+v, %v; want 200 unchanged", again, err)
	}
	_, err = b.claim("reviewer", "task-1")
	wantCode(t, err, core.CodeTaskClaimed)
	_, err = b.claim("reader", "task-2")
	wantCode(t, err, core.CodeTaskAssigned)
	_, err = b.claim("reader", "task-3")
	wantCode(t, err, core.CodeTaskBlocked)
	if msg := core.ErrorMessage(err); !strings.Contains(msg, "task-1") || !strings.Contains(msg, "task-2") {
		t.Fatalf("task_blocked says %q, want it to name task-1 and task-2", msg)
	}
	// Deleted (and completed) tasks are closed, before anything else.
	if _, err := b.svc.DeleteTask(b.as("lead"), b.team, "task-4"); err != nil {
		t.Fatal(err)
	}
	_, err = b.claim("reader", "task-4")
	wantCode(t, err, core.CodeTaskClosed)

	// A member shut down: member_closed comes after task_closed, before
	// task_assigned.
	req := b.open("lead", "reviewer", core.KindShutdown, "stop")
	b.reply(req.RequestID, "reviewer", true, "")
	_, err = b.claim("reviewer", "task-4")
	wantCode(t, err, core.CodeTaskClosed)
	_, err = b.claim("reviewer", "task-2")
	wantCode(t, err, core.CodeMemberClosed)
	_, _, err = b.svc.ClaimNextTask(b.as("reviewer"), b.team)
	wantCode(t, err, core.CodeMemberClosed)
}

func TestClaimNextTask(t *testing.T) {
	b := newBoard(t, nil)
	b.create("lead", "first", nil, "reviewer")         // task-1: someone else's
	b.create("lead", "second", []string{"task-1"}, "") // task-2: blocked
	b.create("lead", "third", nil, "reader")           // task-3: the reader's
	b.create("lead", "fourth", nil, "")                // task-4: anybody's
	next := func(member string) (string, bool) {
		t.Helper()
		task, ok, err := b.svc.ClaimNextTask(b.as(member), b.team)
		if err != nil {
			t.Fatalf("ClaimNextTask as %s: %v", member, err)
		}
		if ok && (str(task.Owner) != member || task.Status != core.TaskInProgress) {
			t.Fatalf("claimed %+v, want owned by %s", task, member)
		}
		return task.ID, ok
	}
	for _, want := range []string{"task-3", "task-4"} {
		if id, ok := next("reader"); !ok || id != want {
			t.Fatalf("reader's next = %s, %v; want %s", id, ok, want)
		}
	}
	if id, ok := next("reader"); ok {
		t.Fatalf("reader's next = %s, want none", id)
	}
	if id, ok := next("reviewer"); !ok || id != "task-1" {
		t.Fatalf("reviewer's next = %s, %v; want task-1", id, ok)
	}
	if _, err := b.svc.CompleteTask(b.as("reviewer"), b.team, "task-1", nil); err != nil {
		t.Fatal(err)
	}
	if id, ok := next("lead"); !ok || id != "task-2" {
		t.Fatalf("lead's next once task-1 completed = %s, %v; want task-2", id, ok)
	}
	_, _, err := b.svc.ClaimNextTask(b.as("admin"), b.team)
	wantCode(t, err, core.CodeForbidden)
}

func TestCompleteReleaseTask(t *testing.T) {
	b := newBoard(t, nil)
	b.create("lead", "work", nil, "")
	b.create("lead", "after", []string{"task-1"}, "")
	_, err := b.svc.CompleteTask(b.as("lead"), b.team, "task-1", nil)
	wantCode(t, err, core.CodeTaskNotClaimed)
	_, err = b.svc.ReleaseTask(b.as("lead"), b.team, "task-1")
	wantCode(t, err, core.CodeTaskNotClaimed)
	if _, err := b.claim("reader", "task-1"); err != nil {
		t.Fatal(err)
	}
	_, err = b.svc.CompleteTask(b.as("reviewer"), b.team, "task-1", nil)
	wantCode(t, err, core.CodeForbidden)
	_, err = b.svc.ReleaseTask(b.as("reviewer"), b.team, "task-1")
	wantCode(t, err, core.CodeForbidden)
	long := strings.Repeat("r", core.MaxTaskResult+1)
	_, err = b.svc.CompleteTask(b.as("reader"), b.team, "task-9", &long)
	wantCode(t, err, core.CodeBodyLength)

	released, err := b.svc.ReleaseTask(b.as("reader"), b.team, "task-1")
	if err != nil || released.Status != core.TaskPending || released.Owner != nil {
		t.Fatalf("release = %+v, %v; want pending, no owner", released, err)
	}
	if _, err := b.claim("reviewer", "task-1"); err != nil {
		t.Fatal(err)
	}
	result := " 42 "
	done, err := b.svc.CompleteTask(b.as("lead"), b.team, "task-1", &result)
	if err != nil || done.Status != core.TaskCompleted || str(done.Owner) != "reviewer" || str(done.Result) != "42" {
		t.Fatalf("complete by lead = %+v, %v; want completed, owner reviewer kept, result 42", done, err)
	}
	_, err = b.svc.CompleteTask(b.as("reviewer"), b.team, "task-1", nil)
	wantCode(t, err, core.CodeTaskClosed)
	_, err = b.svc.ReleaseTask(b.as("reviewer"), b.team, "task-1")
	wantCode(t, err, core.CodeTaskNotClaimed)
	if got, err := b.claim("reader", "task-2"); err != nil || got.Status != core.TaskInProgress {
		t.Fatalf("claim of the dependent once its blocker completed: %+v, %v", got, err)
	}
	got, err := b.svc.CompleteTask(b.as("admin"), b.team, "task-2", nil)
	if err != nil || str(got.Result) != "" || got.Result == nil {
		t.Fatalf("complete by admin without result = %+v, %v; want result \"\"", got, err)
	}
}

func TestDeleteTask(t *testing.T) {
	b := newBoard(t, nil)
	b.create("reader", "blocker", nil, "")                // task-1
	b.create("lead", "dependent", []string{"task-1"}, "") // task-2
	_, err := b.claim("reviewer", "task-2")
	wantCode(t, err, core.CodeTaskBlocked)
	_, err = b.svc.DeleteTask(b.as("reviewer"), b.team, "task-1")
	wantCode(t, err, core.CodeForbidden)
	_, err = b.svc.DeleteTask(b.as("reviewer"), b.team, "task-5")
	wantCode(t, err, core.CodeNotFound)

	var mu sync.Mutex
	var events []core.Task
	cancel := testkit.Hub(b.svc).Subscribe(func(ev core.Event) {
		if ev.Type == core.EventTask {
			mu.Lock()
			events = append(events, ev.Data.(core.Task))
			mu.Unlock()
		}
	})
	defer cancel()
	gone, err := b.svc.DeleteTask(b.as("reader"), b.team, "task-1")
	if err != nil || gone.Status != core.TaskDeleted || len(gone.Blocks) != 0 {
		t.Fatalf("delete = %+v, %v; want deleted, blocking nothing", gone, err)
	}
	if kept := b.get("task-1"); kept.Status != core.TaskDeleted || kept.Title != "blocker" {
		t.Fatalf("task-1 after delete = %+v, want kept as deleted", kept)
	}
	dep := b.get("task-2")
	if len(dep.BlockedBy) != 0 {
		t.Fatalf("dependent blocked by %v after its blocker was deleted, want none", dep.BlockedBy)
	}
	mu.Lock()
	seen := map[string]string{}
	for _, e := range events {
		seen[e.ID] = e.Status
	}
	mu.Unlock()
	if seen["task-1"] != core.TaskDeleted || seen["task-2"] != core.TaskPending {
		t.Fatalf("task events = %v, want task-1 deleted and task-2 announced", seen)
	}
	if got, err := b.claim("reviewer", "task-2"); err != nil || got.Status != core.TaskInProgress {
		t.Fatalf("claim once the blocker is deleted: %+v, %v", got, err)
	}
	if _, err := b.svc.DeleteTask(b.as("admin"), b.team, "task-2"); err != nil {
		t.Fatalf("admin deleting a claimed task: %v", err)
	}
	if next := b.create("lead", "new", nil, ""); next.ID != "task-3" {
		t.Fatalf("a task after two deletions is %s, want task-3 (ids are never reused)", next.ID)
	}
}

func TestTaskIDsSurviveRestart(t *testing.T) {
	b := newBoard(t, nil)
	b.create("lead", "one", nil, "")
	b.create("lead", "two", nil, "")
	if _, err := b.claim("reader", "task-2"); err != nil {
		t.Fatal(err)
	}
	if _, err := b.svc.DeleteTask(b.as("lead"), b.team, "task-2"); err != nil {
		t.Fatal(err)
	}
	b.svc = b.reopen()
	if got := b.get("task-2"); got.Status != core.TaskDeleted || str(got.Owner) != "reader" {
		t.Fatalf("task-2 after restart = %+v, want deleted, owner reader", got)
	}
	if next := b.create("lead", "three", nil, ""); next.ID != "task-3" {
		t.Fatalf("first task after restart is %s, want task-3", next.ID)
	}
}

func TestClaimableTasksAndHistoryText(t *testing.T) {
	b := newBoard(t, nil)
	b.create("lead", "mine", nil, "reader")
	b.create("lead", "later", []string{"task-1"}, "reader")
	b.create("lead", "anyone's", nil, "")
	tasks, err := b.svc.Tasks(b.as("admin"), b.team, core.TaskFilter{})
	if err != nil {
		t.Fatal(err)
	}
	got := core.ClaimableTasks(tasks, "reader", nil)
	if len(got) != 1 || got[0].ID != "task-1" {
		t.Fatalf("ClaimableTasks = %+v, want [task-1]", got)
	}
	if of := b.claimableOf("reviewer"); len(of) != 0 {
		t.Fatalf("claimable by reviewer = %+v; want none (task-3 is assigned to nobody)", of)
	}
	text := core.TaskHistoryText(got[0])
	want := `[team-task] {"assignee": "reader", "blocked_by": [], "blocks": ["task-2"], "created_at": "` +
		got[0].CreatedAt.Format("2006-01-02T15:04:05.999999999Z07:00") + `", "created_by": "lead", "detail": "", "owner": null, ` +
		`"result": null, "status": "pending", "task_id": "task-1", "title": "mine", "updated_at": "` +
		got[0].UpdatedAt.Format("2006-01-02T15:04:05.999999999Z07:00") + `"}`
	if text != want {
		t.Fatalf("TaskHistoryText =\n%s\nwant\n%s", text, want)
	}
}

// A member named admin (of a team stored before the name was refused)
// gets no creator's right over the admin's tasks (both are created_by
// "admin").
func TestMemberNamedAdmin(t *testing.T) {
	svc := storedWithAdmin(t, "named")
	f := &fixture{t: t, svc: svc, team: "named"}
	byAdmin, err := f.svc.CreateTask(core.AsAdmin(t.Context()), core.TaskInput{Team: "named", Title: "the admin's"})
	if err != nil || byAdmin.CreatedBy != "admin" {
		t.Fatalf("created = %+v, %v", byAdmin, err)
	}
	member := core.AsMember(t.Context(), "named", "admin")
	_, err = f.svc.DeleteTask(member, "named", byAdmin.ID)
	wantCode(t, err, core.CodeForbidden)
	title := "renamed"
	_, err = f.svc.UpdateTask(member, core.TaskUpdate{Team: "named", TaskID: byAdmin.ID, Title: &title})
	wantCode(t, err, core.CodeForbidden)
}
