package core_test

import (
	"encoding/json"
	"errors"
	"slices"
	"strings"
	"testing"

	"mailroom/internal/core"
)

// setSkills gives member labels through the admin's member update.
func (b board) setSkills(member string, labels ...string) {
	b.t.Helper()
	if _, err := b.svc.UpdateMember(b.as("admin"), b.team, member, core.MemberUpdate{Skills: &labels}); err != nil {
		b.t.Fatalf("UpdateMember(%s, skills %v): %v", member, labels, err)
	}
}

// claimableOf is the tasks of the board member could claim now, with the
// skills the team's view shows for it (core.ClaimableTasks, as the wake
// rule asks it).
func (b board) claimableOf(member string) []core.Task {
	b.t.Helper()
	tasks, err := b.svc.Tasks(b.as("admin"), b.team, core.TaskFilter{})
	if err != nil {
		b.t.Fatal(err)
	}
	view, err := b.svc.Team(b.as("admin"), b.team)
	if err != nil {
		b.t.Fatal(err)
	}
	for _, m := range view.Members {
		if m.Name == member {
			return core.ClaimableTasks(tasks, member, m.Skills)
		}
	}
	b.t.Fatalf("no member %s", member)
	return nil
}

func (b board) createNeeding(title, assignee string, needs ...string) core.Task {
	b.t.Helper()
	task, err := b.svc.CreateTask(b.as("lead"), core.TaskInput{Team: b.team, Title: title, Assignee: assignee, Needs: needs})
	if err != nil {
		b.t.Fatalf("CreateTask(%q, needs %v): %v", title, needs, err)
	}
	return task
}

func TestCheckLabels(t *testing.T) {
	got, err := core.CheckLabels([]string{"go", "sql", "go", "a-b_c", "9"}, "skills")
	if err != nil || !slices.Equal(got, []string{"go", "sql", "a-b_c", "9"}) {
		t.Fatalf("CheckLabels = %v, %v; want [go sql a-b_c 9] (duplicates collapsed)", got, err)
	}
	if got, err := core.CheckLabels(nil, "needs"); err != nil || got == nil || len(got) != 0 {
		t.Fatalf("CheckLabels(nil) = %#v, %v; want an empty, non-nil list", got, err)
	}
	sixteen := make([]string, 0, 17)
	for i := range 16 {
		sixteen = append(sixteen, "l"+strings.Repeat("x", i))
	}
	if _, err := core.CheckLabels(append(sixteen, sixteen[0]), "skills"); err != nil {
		t.Fatalf("16 distinct labels and a repeat: %v, want accepted", err)
	}
	for _, bad := range [][]string{
		{""}, {"Go"}, {"-go"}, {"_go"}, {"go lang"}, {"gö"}, {strings.Repeat("a", 33)},
		append(slices.Clone(sixteen), "seventeen"),
	} {
		_, err := core.CheckLabels(bad, "skills")
		wantCode(t, err, core.CodeValidation)
	}
	if _, err := core.CheckLabels([]string{strings.Repeat("a", 32)}, "skills"); err != nil {
		t.Fatalf("a 32-character label: %v, want accepted", err)
	}
}

func TestSkillsOnMembersAndTasks(t *testing.T) {
	b := newBoard(t, nil)
	b.setSkills("reader", "go", "sql", "go")
	v, err := b.svc.Team(b.as("admin"), b.team)
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range v.Members {
		want := []string{}
		if m.Name == "reader" {
			want = []string{"go", "sql"}
		}
		if m.Skills == nil || !slices.Equal(m.Skills, want) {
			t.Errorf("%s skills = %#v, want %v", m.Name, m.Skills, want)
		}
	}
	bad := []string{"Go"}
	_, err = b.svc.UpdateMember(b.as("admin"), b.team, "reader", core.MemberUpdate{Skills: &bad})
	wantCode(t, err, core.CodeValidation)
	_, err = b.svc.CreateTask(b.as("lead"), core.TaskInput{Team: b.team, Title: "t", Needs: []string{"a b"}})
	wantCode(t, err, core.CodeValidation)

	task := b.createNeeding("build", "", "go", "go")
	if !slices.Equal(task.Needs, []string{"go"}) {
		t.Fatalf("needs = %v, want [go]", task.Needs)
	}
	plain := b.create("lead", "plain", nil, "")
	if plain.Needs == nil || len(plain.Needs) != 0 {
		t.Fatalf("needs of a task created without = %#v, want []", plain.Needs)
	}
	// A task without needs is written in history as before needs existed.
	if text := core.TaskHistoryText(plain); strings.Contains(text, "needs") {
		t.Errorf("history text %s names needs, want it left out when empty", text)
	}
	if text := core.TaskHistoryText(task); !strings.Contains(text, `"needs": ["go"]`) {
		t.Errorf("history text %s, want it to carry needs", text)
	}
	none := []string{}
	got, err := b.svc.UpdateTask(b.as("lead"), core.TaskUpdate{Team: b.team, TaskID: task.ID, Needs: &none})
	if err != nil || len(got.Needs) != 0 {
		t.Fatalf("PATCH needs [] = %v, %v; want none", got.Needs, err)
	}
	badNeeds := []string{"X"}
	_, err = b.svc.UpdateTask(b.as("lead"), core.TaskUpdate{Team: b.team, TaskID: task.ID, Needs: &badNeeds})
	wantCode(t, err, core.CodeValidation)
}

// TestClaimNeedsOrder: task_needs comes after task_assigned and before
// task_claimed, and names the missing labels; lead needs them too.
func TestClaimNeedsOrder(t *testing.T) {
	b := newBoard(t, nil)
	b.setSkills("reader", "go")
	b.setSkills("reviewer", "docs")

	assigned := b.createNeeding("assigned elsewhere", "reader", "go", "sql")
	_, err := b.claim("reviewer", assigned.ID)
	wantCode(t, err, core.CodeTaskAssigned)

	task := b.createNeeding("needs go and sql", "", "go", "sql")
	_, err = b.claim("reviewer", task.ID)
	wantCode(t, err, core.CodeTaskNeeds)
	if e := (*core.Error)(nil); !errors.As(err, &e) || !strings.Contains(e.Message, "go, sql") {
		t.Errorf("detail = %v, want it to name go, sql", err)
	}
	_, err = b.claim("lead", task.ID)
	wantCode(t, err, core.CodeTaskNeeds)

	// Owned by reader (who now has both): reviewer, lacking them, hears
	// task_needs before task_claimed.
	b.setSkills("reader", "sql", "go")
	if _, err := b.claim("reader", task.ID); err != nil {
		t.Fatalf("claim by a member with every label: %v", err)
	}
	_, err = b.claim("reviewer", task.ID)
	wantCode(t, err, core.CodeTaskNeeds)
	b.setSkills("reviewer", "go", "sql")
	_, err = b.claim("reviewer", task.ID)
	wantCode(t, err, core.CodeTaskClaimed)
}

// TestClaimNextSkipsNeeds: claim-next passes over tasks the caller cannot
// do, and finds none when it can do none.
func TestClaimNextSkipsNeeds(t *testing.T) {
	b := newBoard(t, nil)
	b.setSkills("reader", "docs")
	b.createNeeding("build", "", "go")
	b.createNeeding("review", "", "docs", "go")
	docs := b.createNeeding("write", "", "docs")
	got, ok, err := b.svc.ClaimNextTask(b.as("reader"), b.team)
	if err != nil || !ok || got.ID != docs.ID {
		t.Fatalf("claim-next = %s, %v, %v; want %s", got.ID, ok, err, docs.ID)
	}
	if got, ok, err := b.svc.ClaimNextTask(b.as("reader"), b.team); err != nil || ok {
		t.Fatalf("claim-next = %s, %v, %v; want none", got.ID, ok, err)
	}
	b.setSkills("reviewer", "go")
	if got, ok, err := b.svc.ClaimNextTask(b.as("reviewer"), b.team); err != nil || !ok || got.ID != "task-1" {
		t.Fatalf("claim-next as reviewer = %s, %v, %v; want task-1", got.ID, ok, err)
	}
}

// TestClaimableTasksNeeds: what wakes a member for a task assigned to it
// leaves out a task it lacks a skill for.
func TestClaimableTasksNeeds(t *testing.T) {
	b := newBoard(t, nil)
	b.createNeeding("build", "reader", "go")
	b.createNeeding("plain", "reader")
	if of := b.claimableOf("reader"); len(of) != 1 || of[0].ID != "task-2" {
		t.Fatalf("claimable by reader = %+v; want [task-2]", of)
	}
	b.setSkills("reader", "go")
	if of := b.claimableOf("reader"); len(of) != 2 {
		t.Fatalf("claimable by reader = %+v; want task-1 and task-2", of)
	}
}

// TestOldDocumentsWithoutLabels: a task and a member stored before skills
// existed decode with no labels; the task is claimable by anyone assigned
// and its history line is the one written before.
func TestOldDocumentsWithoutLabels(t *testing.T) {
	var task core.Task
	old := `{"task_id": "task-1", "title": "t", "detail": "", "status": "pending", "owner": null, "assignee": "reader",` +
		` "blocked_by": [], "result": null, "created_by": "lead", "created_at": "2026-01-02T03:04:05Z", "updated_at": "2026-01-02T03:04:05Z"}`
	if err := json.Unmarshal([]byte(old), &task); err != nil {
		t.Fatal(err)
	}
	var m core.MemberState
	if err := json.Unmarshal([]byte(`{"name": "reader", "role": "", "status": "idle", "turns": 0, "history": [], "token_hash": "x"}`), &m); err != nil {
		t.Fatal(err)
	}
	if task.Needs != nil || m.Skills != nil {
		t.Fatalf("needs %v, skills %v; want none", task.Needs, m.Skills)
	}
	got := core.ClaimableTasks([]core.Task{task}, m.Name, m.Skills)
	if len(got) != 1 || got[0].Needs == nil {
		t.Fatalf("ClaimableTasks = %+v, want task-1 with needs []", got)
	}
	if text := core.TaskHistoryText(got[0]); strings.Contains(text, "needs") {
		t.Errorf("history line %s names needs, want the line written before needs existed", text)
	}
}
