package httpapi_test

import (
	"encoding/json"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"

	"mailroom/internal/agent"
	"mailroom/internal/httpapi"
)

func (e *env) task(tm team, method, path, token string, body any) result {
	e.t.Helper()
	return e.do(call{method: method, path: "/api/v1/teams/" + tm.name + "/tasks" + path, token: token, json: body})
}

func TestTaskRoutes(t *testing.T) {
	e := newEnv(t)
	tm := e.newTeam("board", map[string]int{"tasks": 4})
	lead, reader, reviewer := tm.tokens["lead"], tm.tokens["reader"], tm.tokens["reviewer"]
	other := e.newTeam("other", nil)

	r := e.task(tm, http.MethodPost, "", reader, map[string]any{"title": " read the source ", "detail": "all of it"})
	want(t, r, http.StatusCreated, "")
	first := decode[httpapi.Task](t, r)
	if first.TaskID != "task-1" || first.Title != "read the source" || first.Status != httpapi.TaskStatus("pending") ||
		first.CreatedBy != "reader" || first.Owner != nil || first.Result != nil {
		t.Fatalf("created = %+v, want task-1 pending by reader", first)
	}
	r = e.task(tm, http.MethodPost, "", adminToken, map[string]any{"title": "review", "blocked_by": []string{"task-1"}, "assignee": "reviewer"})
	want(t, r, http.StatusCreated, "")
	if got := decode[httpapi.Task](t, r); got.CreatedBy != "admin" || got.Assignee == nil || *got.Assignee != "reviewer" {
		t.Fatalf("created by admin = %+v", got)
	}

	for _, tc := range []struct {
		name, method, path, token string
		body                      any
		status                    int
		code                      string
	}{
		{"ErrBlankTitle", http.MethodPost, "", reader, map[string]any{"title": "   "}, 400, "body_length"},
		{"ErrLongTitle", http.MethodPost, "", reader, map[string]any{"title": strings.Repeat("t", 201)}, 400, "body_length"},
		{"ErrUnknownField", http.MethodPost, "", reader, map[string]any{"title": "t", "owner": "reader"}, 400, "validation_failed"},
		{"ErrUnknownBlocker", http.MethodPost, "", reader, map[string]any{"title": "t", "blocked_by": []string{"task-7"}}, 422, "unknown_task"},
		{"ErrUnknownAssignee", http.MethodPost, "", reader, map[string]any{"title": "t", "assignee": "nobody"}, 422, "unknown_member"},
		{"ErrOtherTeam", http.MethodPost, "", other.tokens["lead"], map[string]any{"title": "t"}, 403, "forbidden"},
		{"ErrNoToken", http.MethodGet, "", "", nil, 401, "unauthorized"},
		{"ErrNoTask", http.MethodGet, "/task-9", reader, nil, 404, "not_found"},
		{"ErrBadTaskID", http.MethodGet, "/job-1", reader, nil, 400, "validation_failed"},
		{"ErrPatchOthers", http.MethodPatch, "/task-1", reviewer, map[string]any{"title": "x"}, 403, "forbidden"},
		{"ErrCycle", http.MethodPatch, "/task-1", lead, map[string]any{"blocked_by": []string{"task-2"}}, 409, "task_cycle"},
		{"ErrAdminClaims", http.MethodPost, "/task-1/claim", adminToken, nil, 403, "forbidden"},
		{"ErrAssigned", http.MethodPost, "/task-2/claim", reader, nil, 409, "task_assigned"},
		{"ErrBlocked", http.MethodPost, "/task-2/claim", reviewer, nil, 409, "task_blocked"},
		{"ErrNotClaimed", http.MethodPost, "/task-1/release", lead, nil, 409, "task_not_claimed"},
		{"ErrCompletePending", http.MethodPost, "/task-1/complete", lead, map[string]any{}, 409, "task_not_claimed"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			want(t, e.task(tm, tc.method, tc.path, tc.token, tc.body), tc.status, tc.code)
		})
	}
	r = e.task(tm, http.MethodPost, "/task-2/claim", reviewer, nil)
	if p := decode[httpapi.Problem](t, r); !strings.Contains(p.Detail, "task-1") {
		t.Fatalf("task_blocked detail = %q, want it to name task-1", p.Detail)
	}

	r = e.task(tm, http.MethodPatch, "/task-1", reader, map[string]any{"detail": "half of it", "assignee": ""})
	want(t, r, http.StatusOK, "")
	if got := decode[httpapi.Task](t, r); got.Detail != "half of it" || got.Title != "read the source" {
		t.Fatalf("patched = %+v", got)
	}
	r = e.task(tm, http.MethodPost, "/task-1/claim", reader, nil)
	want(t, r, http.StatusOK, "")
	if got := decode[httpapi.Task](t, r); got.Owner == nil || *got.Owner != "reader" || got.Status != "in_progress" {
		t.Fatalf("claimed = %+v", got)
	}
	want(t, e.task(tm, http.MethodPost, "/task-1/claim", reader, nil), http.StatusOK, "")
	want(t, e.task(tm, http.MethodPost, "/task-1/claim", lead, nil), http.StatusConflict, "task_claimed")
	want(t, e.task(tm, http.MethodPost, "/task-1/complete", reviewer, map[string]any{"result": "x"}), http.StatusForbidden, "forbidden")
	r = e.task(tm, http.MethodPost, "/task-1/complete", reader, map[string]any{"result": " 42 "})
	want(t, r, http.StatusOK, "")
	if got := decode[httpapi.Task](t, r); got.Status != "completed" || got.Result == nil || *got.Result != "42" || *got.Owner != "reader" {
		t.Fatalf("completed = %+v", got)
	}
	want(t, e.task(tm, http.MethodPost, "/task-1/claim", reader, nil), http.StatusConflict, "task_closed")
	want(t, e.task(tm, http.MethodPatch, "/task-1", lead, map[string]any{"title": "x"}), http.StatusConflict, "task_closed")

	// claim-next: task-2 is the reviewer's and now unblocked; nothing for reader.
	r = e.task(tm, http.MethodPost, "/claim-next", reader, nil)
	want(t, r, http.StatusNoContent, "")
	r = e.task(tm, http.MethodPost, "/claim-next", reviewer, nil)
	want(t, r, http.StatusOK, "")
	if got := decode[httpapi.Task](t, r); got.TaskID != "task-2" || *got.Owner != "reviewer" {
		t.Fatalf("claim-next = %+v, want task-2 for reviewer", got)
	}
	want(t, e.task(tm, http.MethodPost, "/claim-next", adminToken, nil), http.StatusForbidden, "forbidden")
	r = e.task(tm, http.MethodPost, "/task-2/release", lead, nil)
	want(t, r, http.StatusOK, "")
	if got := decode[httpapi.Task](t, r); got.Status != "pending" || got.Owner != nil {
		t.Fatalf("released = %+v", got)
	}

	// Filters.
	r = e.task(tm, http.MethodGet, "?status=completed&owner=reader", reviewer, nil)
	want(t, r, http.StatusOK, "")
	if got := decode[httpapi.TaskList](t, r).Tasks; len(got) != 1 || got[0].TaskID != "task-1" {
		t.Fatalf("completed by reader = %+v, want [task-1]", got)
	}
	r = e.task(tm, http.MethodGet, "?assignee=reader", reviewer, nil)
	if got := decode[httpapi.TaskList](t, r).Tasks; len(got) != 0 {
		t.Fatalf("assigned to reader = %+v, want []", got)
	}
	want(t, e.task(tm, http.MethodGet, "?status=done", reviewer, nil), http.StatusBadRequest, "validation_failed")

	// Delete, keep, limit (deleted tasks count).
	want(t, e.task(tm, http.MethodDelete, "/task-2", reviewer, nil), http.StatusForbidden, "forbidden")
	r = e.task(tm, http.MethodDelete, "/task-2", lead, nil)
	want(t, r, http.StatusOK, "")
	if got := decode[httpapi.Task](t, r); got.Status != "deleted" {
		t.Fatalf("deleted = %+v", got)
	}
	want(t, e.task(tm, http.MethodGet, "/task-2", reader, nil), http.StatusOK, "")
	want(t, e.task(tm, http.MethodPost, "", reader, map[string]any{"title": "three"}), http.StatusCreated, "")
	r = e.task(tm, http.MethodPost, "", reader, map[string]any{"title": "four"})
	want(t, r, http.StatusCreated, "")
	if got := decode[httpapi.Task](t, r); got.TaskID != "task-4" {
		t.Fatalf("fourth task = %s, want task-4", got.TaskID)
	}
	want(t, e.task(tm, http.MethodPost, "", reader, map[string]any{"title": "five"}), http.StatusConflict, "task_limit")
	r = e.do(call{method: http.MethodPatch, path: "/api/v1/teams/board", token: adminToken, json: map[string]any{"limits": map[string]int{"tasks": 5}}})
	want(t, r, http.StatusOK, "")
	want(t, e.task(tm, http.MethodPost, "", reader, map[string]any{"title": "five"}), http.StatusCreated, "")
}

// TestConcurrentTaskClaims: of many concurrent claims of one task, one
// wins and every other gets task_claimed.
func TestConcurrentTaskClaims(t *testing.T) {
	e := newEnv(t)
	body := map[string]any{"name": "race", "members": []map[string]string{}}
	var names []string
	for i := range 12 {
		name := "m" + string(rune('a'+i))
		names = append(names, name)
		body["members"] = append(body["members"].([]map[string]string), map[string]string{"name": name})
	}
	r := e.post("/api/v1/teams", adminToken, body)
	want(t, r, http.StatusCreated, "")
	tm := team{name: "race", tokens: map[string]string{}}
	for _, m := range decode[httpapi.CreatedTeam](t, r).Members {
		tm.tokens[m.Name] = m.Token
	}
	want(t, e.task(tm, http.MethodPost, "", adminToken, map[string]any{"title": "contested"}), http.StatusCreated, "")
	var wg sync.WaitGroup
	results := make([]result, len(names))
	for i, name := range names {
		wg.Go(func() { results[i] = e.task(tm, http.MethodPost, "/task-1/claim", tm.tokens[name], nil) })
	}
	wg.Wait()
	winner := ""
	for i, r := range results {
		switch r.status {
		case http.StatusOK:
			if winner != "" {
				t.Fatalf("%s and %s both won the claim", winner, names[i])
			}
			winner = names[i]
		case http.StatusConflict:
			if p := decode[httpapi.Problem](t, r); p.Code != "task_claimed" {
				t.Fatalf("loser %s got %s, want task_claimed", names[i], p.Code)
			}
		default:
			t.Fatalf("claim by %s: status %d, body %s", names[i], r.status, r.body)
		}
	}
	r = e.task(tm, http.MethodGet, "/task-1", adminToken, nil)
	if got := decode[httpapi.Task](t, r); winner == "" || got.Owner == nil || *got.Owner != winner {
		t.Fatalf("owner = %v, want the one winner %q", got.Owner, winner)
	}
}

// TestModelTurnClaimsAndCompletesTask: a real model turn (the fake
// Anthropic provider's wire format, the official SDK as client) claims
// the next task with claim_task and completes it with complete_task.
func TestModelTurnClaimsAndCompletesTask(t *testing.T) {
	m := newModelEnv(t, agent.ProviderAnthropic)
	tm := m.team(nil)
	want(t, m.task(tm, http.MethodPost, "", tm.tokens["lead"], map[string]any{"title": "print the answer", "assignee": "reader"}), http.StatusCreated, "")
	m.fake.Push(
		m.toolUse("claim_task", map[string]any{}, 100, 20),
		m.toolUse("complete_task", map[string]any{"task_id": "task-1", "result": "42"}, 120, 20),
		m.text("Done.", 150, 10),
	)
	r := m.realTurn(tm, "reader", "Take your next task and finish it.")
	want(t, r, http.StatusOK, "")
	d := decode[turnDoc](t, r)
	if d.Status != "answered" || d.kinds() != "model_request,tool_call,model_request,tool_call,model_request" {
		t.Fatalf("turn = %s with steps %s, want answered after two tool calls", d.Status, d.kinds())
	}
	if s := d.Steps[1]; s.Tool != "claim_task" || s.IsError || !strings.Contains(s.Result, `"owner":"reader"`) {
		t.Fatalf("claim step = %+v, want task-1 owned by reader", s)
	}
	if s := d.Steps[3]; s.Tool != "complete_task" || s.IsError || !strings.Contains(s.Result, `"status":"completed"`) {
		t.Fatalf("complete step = %+v, want completed", s)
	}
	r = m.task(tm, http.MethodGet, "/task-1", adminToken, nil)
	got := decode[httpapi.Task](t, r)
	if got.Status != "completed" || got.Owner == nil || *got.Owner != "reader" || got.Result == nil || *got.Result != "42" {
		t.Fatalf("task-1 = %+v, want completed by reader with result 42", got)
	}
	if body := string(m.fake.Requests()[0].Body); !strings.Contains(body, "claim_task") || !strings.Contains(body, "complete_task") {
		t.Fatalf("the model was not offered the task tools: %s", body)
	}
}

// TestTaskEvents: a member's event stream carries its team's task events,
// the task document each time, and a completion also announces the task
// it unblocked.
func TestTaskEvents(t *testing.T) {
	e := newEnv(t)
	tm := e.newTeam("evts", nil)
	s := e.openStream(t, "?team=evts", tm.tokens["reviewer"])
	defer s.close()
	want(t, e.task(tm, http.MethodPost, "", tm.tokens["lead"], map[string]any{"title": "first"}), http.StatusCreated, "")
	want(t, e.task(tm, http.MethodPost, "", tm.tokens["lead"], map[string]any{"title": "second", "blocked_by": []string{"task-1"}}), http.StatusCreated, "")
	want(t, e.task(tm, http.MethodPost, "/task-1/claim", tm.tokens["reader"], nil), http.StatusOK, "")
	want(t, e.task(tm, http.MethodPost, "/task-1/complete", tm.tokens["reader"], nil), http.StatusOK, "")
	var got []string
	for len(got) < 6 {
		ev := s.nextOf("task")
		var d httpapi.Task
		if err := json.Unmarshal(ev.data.Data, &d); err != nil {
			t.Fatalf("task event data %s: %v", ev.data.Data, err)
		}
		if ev.data.Team != "evts" || ev.data.Type != "task" {
			t.Fatalf("event = %+v, want a task event of evts", ev.data)
		}
		got = append(got, d.TaskID+" "+string(d.Status))
	}
	// task-1 created; task-2 created (and task-1, whose blocks changed);
	// task-1 claimed; task-1 completed (and task-2, now claimable).
	wantEvents := []string{"task-1 pending", "task-2 pending", "task-1 pending", "task-1 in_progress", "task-1 completed", "task-2 pending"}
	if !slices.Equal(got, wantEvents) {
		t.Fatalf("task events = %v, want %v", got, wantEvents)
	}
}
