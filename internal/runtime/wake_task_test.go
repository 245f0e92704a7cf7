package runtime_test

import (
	"errors"
	"slices"
	"testing"

	"mailroom/internal/core"
)

// Members woken by the work they own (core/wake.go): a task assigned to
// a wake member that becomes claimable wakes it, through the same rig as
// letters.

func (r *wakeRig) createTask(title, assignee string, blockedBy ...string) core.Task {
	r.t.Helper()
	task, err := r.svc.CreateTask(core.AsMember(r.t.Context(), "demo", "lead"), core.TaskInput{Team: "demo", Title: title, Assignee: assignee, BlockedBy: blockedBy})
	if err != nil {
		r.t.Fatalf("create task %q: %v", title, err)
	}
	return task
}

func (r *wakeRig) task(id string) core.Task {
	r.t.Helper()
	task, err := r.svc.Task(core.AsAdmin(r.t.Context()), "demo", id)
	if err != nil {
		r.t.Fatalf("task %s: %v", id, err)
	}
	return task
}

// finishTask has reviewer claim and complete id.
func (r *wakeRig) finishTask(id string) {
	r.t.Helper()
	ctx := core.AsMember(r.t.Context(), "demo", "reviewer")
	if _, err := r.svc.ClaimTask(ctx, "demo", id); err != nil {
		r.t.Fatalf("claim %s: %v", id, err)
	}
	if _, err := r.svc.CompleteTask(ctx, "demo", id, nil); err != nil {
		r.t.Fatalf("complete %s: %v", id, err)
	}
}

// expectTaskTurn waits for a woken turn and checks that the task woke it
// and that its first request carried exactly the task's [team-task] line
// as the task is now.
func (r *wakeRig) expectTaskTurn(id string) *woken {
	r.t.Helper()
	r.timer().fire()
	w := r.turn()
	if w.trigger.Kind != core.TriggerTask || w.trigger.TaskID != id {
		r.t.Errorf("trigger = %+v, want kind task with %s", w.trigger, id)
	}
	if want := []string{core.TaskHistoryText(r.task(id))}; !slices.Equal(w.attached, want) {
		r.t.Errorf("attached = %q, want exactly %q", w.attached, want)
	}
	return w
}

// TestWakeTaskCreatedAssigned: a task created unblocked and assigned to a
// wake member wakes it (trigger kind task); once attended, the same task
// does not wake it again.
func TestWakeTaskCreatedAssigned(t *testing.T) {
	limits := core.DefaultLimits()
	limits.Turns = 5
	r := newWakeRig(t, &limits, 0)
	task := r.createTask("index the shelf", "reader")
	w := r.expectTaskTurn(task.ID)
	w.release <- turnEnd{}
	if doc := r.waitEnded("reader"); doc.TurnID != "reader-t1" || doc.Status != core.TurnAnswered {
		t.Fatalf("turn = %s %s, want reader-t1 answered", doc.TurnID, doc.Status)
	}
	if doc := r.waitEnded("reader"); doc.Trigger.Kind != core.TriggerTask || doc.Trigger.TaskID != task.ID {
		t.Errorf("stored trigger = %+v, want kind task with %s", doc.Trigger, task.ID)
	}
	// The turn's end looks at reader again: the task is attended.
	r.settled()
}

// TestWakeTaskAssignedByPatch: a claimable task that gets a wake member
// as its assignee wakes it; assigned to a member without wake, nobody.
func TestWakeTaskAssignedByPatch(t *testing.T) {
	r := newWakeRig(t, nil, 0)
	task := r.createTask("unowned", "")
	r.settled()
	lead := core.AsMember(t.Context(), "demo", "lead")
	reviewer := "reviewer"
	if _, err := r.svc.UpdateTask(lead, core.TaskUpdate{Team: "demo", TaskID: task.ID, Assignee: &reviewer}); err != nil {
		t.Fatal(err)
	}
	r.settled()
	if docs, _ := r.svc.Turns(t.Context(), "demo"); len(docs) != 0 {
		t.Errorf("turns = %+v, want none for a task assigned to a member without wake", docs)
	}
	reader := "reader"
	if _, err := r.svc.UpdateTask(lead, core.TaskUpdate{Team: "demo", TaskID: task.ID, Assignee: &reader}); err != nil {
		t.Fatal(err)
	}
	r.expectTaskTurn(task.ID).release <- turnEnd{}
	r.waitEnded("reader")
}

// TestWakeTaskBlocked: a task assigned to a wake member but blocked wakes
// it only when its last blocker is completed, or deleted.
func TestWakeTaskBlocked(t *testing.T) {
	for _, last := range []string{"completed", "deleted"} {
		t.Run(last, func(t *testing.T) {
			r := newWakeRig(t, nil, 0)
			b1 := r.createTask("first", "")
			b2 := r.createTask("second", "")
			task := r.createTask("after both", "reader", b1.ID, b2.ID)
			r.settled()
			r.finishTask(b1.ID)
			r.settled()
			if last == "completed" {
				r.finishTask(b2.ID)
			} else if _, err := r.svc.DeleteTask(core.AsMember(t.Context(), "demo", "lead"), "demo", b2.ID); err != nil {
				t.Fatal(err)
			}
			r.expectTaskTurn(task.ID).release <- turnEnd{}
			r.waitEnded("reader")
		})
	}
}

// TestWakeTaskHeld: after a task-woken turn that failed the wake is held:
// neither that task nor a new one wakes the member again by itself.
func TestWakeTaskHeld(t *testing.T) {
	limits := core.DefaultLimits()
	limits.Turns = 5
	r := newWakeRig(t, &limits, 0)
	task := r.createTask("first", "reader")
	r.expectTaskTurn(task.ID).release <- turnEnd{err: errors.New("boom")}
	if doc := r.waitEnded("reader"); doc.Status != core.TurnFailed {
		t.Fatalf("turn ended %s, want failed", doc.Status)
	}
	if m := r.member("reader"); !m.WakeHeld {
		t.Fatalf("member = %+v, want wake_held", m)
	}
	r.createTask("second", "reader")
	r.settled()
	if docs, _ := r.svc.Turns(t.Context(), "demo"); len(docs) != 1 {
		t.Errorf("turns = %d, want the failed one only", len(docs))
	}
}

// TestWakeTaskNeeds: a task assigned to a wake member that lacks a skill
// it needs does not wake it; given the skill, the member is woken.
func TestWakeTaskNeeds(t *testing.T) {
	r := newWakeRig(t, nil, 0)
	task, err := r.svc.CreateTask(core.AsMember(t.Context(), "demo", "lead"), core.TaskInput{Team: "demo", Title: "build", Assignee: "reader", Needs: []string{"go"}})
	if err != nil {
		t.Fatal(err)
	}
	r.settled()
	if docs, _ := r.svc.Turns(t.Context(), "demo"); len(docs) != 0 {
		t.Fatalf("turns = %+v, want none for a member that lacks the task's needs", docs)
	}
	skills := []string{"go"}
	if _, err := r.svc.UpdateMember(core.AsAdmin(t.Context()), "demo", "reader", core.MemberUpdate{Skills: &skills}); err != nil {
		t.Fatal(err)
	}
	r.expectTaskTurn(task.ID).release <- turnEnd{}
	r.waitEnded("reader")
}
