package mcpserver_test

import (
	"slices"
	"testing"

	"mailroom/internal/core"
)

// TestSkillsTools: create_task takes needs, team shows each member's
// skills, and claim_task answers task_needs or passes such a task over,
// as REST does.
func TestSkillsTools(t *testing.T) {
	e := newEnv(t)
	skills := []string{"go"}
	if _, err := e.svc.UpdateMember(core.AsAdmin(t.Context()), "demo", "reader", core.MemberUpdate{Skills: &skills}); err != nil {
		t.Fatal(err)
	}
	lead, reader, reviewer := e.member("demo", "lead"), e.member("demo", "reader"), e.member("demo", "reviewer")

	var team struct {
		Members []struct {
			Name   string   `json:"name"`
			Skills []string `json:"skills"`
		} `json:"members"`
	}
	mustCall(t, reviewer, "team", map[string]any{}, &team)
	for _, m := range team.Members {
		want := []string{}
		if m.Name == "reader" {
			want = skills
		}
		if m.Skills == nil || !slices.Equal(m.Skills, want) {
			t.Errorf("team shows %s with skills %#v, want %v", m.Name, m.Skills, want)
		}
	}

	var created taskAnswer
	mustCall(t, lead, "create_task", map[string]any{"title": "build", "needs": []string{"go", "go"}}, &created)
	if created.Task == nil || !slices.Equal(created.Task.Needs, []string{"go"}) {
		t.Fatalf("create_task = %+v, want needs [go]", created.Task)
	}
	wantRefusal(t, lead, "create_task", map[string]any{"title": "x", "needs": []string{"Go"}}, "validation_failed")
	wantRefusal(t, reviewer, "claim_task", map[string]any{"task_id": "task-1"}, "task_needs")

	var next taskAnswer
	mustCall(t, reviewer, "claim_task", map[string]any{}, &next)
	if next.Task != nil {
		t.Fatalf("claim_task without id as reviewer = %+v, want task null", next.Task)
	}
	mustCall(t, reader, "claim_task", map[string]any{}, &next)
	if next.Task == nil || next.Task.ID != "task-1" || next.Task.Owner == nil || *next.Task.Owner != "reader" {
		t.Fatalf("claim_task without id as reader = %+v, want task-1 owned by reader", next.Task)
	}
}
