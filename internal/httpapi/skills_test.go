package httpapi_test

import (
	"io"
	"net/http"
	"slices"
	"strings"
	"testing"

	"mailroom/internal/httpapi"
)

// TestSkillsRoutes: members carry skills from POST /teams and the member
// PATCH, tasks carry needs from create and PATCH; a claim by a member
// lacking a label is task_needs naming it, claim-next passes such tasks
// over, and both survive a restart (every backend: TestMain).
func TestSkillsRoutes(t *testing.T) {
	e := newEnv(t)
	r := e.post("/api/v1/teams", adminToken, map[string]any{"name": "crew", "members": []map[string]any{
		{"name": "builder", "skills": []string{"go", "sql", "go"}},
		{"name": "writer"},
	}})
	want(t, r, http.StatusCreated, "")
	tm := team{name: "crew", tokens: map[string]string{}}
	for _, m := range decode[httpapi.CreatedTeam](t, r).Members {
		tm.tokens[m.Name] = m.Token
		wantSkills := []string{}
		if m.Name == "builder" {
			wantSkills = []string{"go", "sql"}
		}
		if !slices.Equal(m.Skills, wantSkills) {
			t.Errorf("%s skills = %v, want %v", m.Name, m.Skills, wantSkills)
		}
	}
	builder, writer, lead := tm.tokens["builder"], tm.tokens["writer"], tm.tokens["lead"]

	r = e.task(tm, http.MethodPost, "", lead, map[string]any{"title": "build", "needs": []string{"go"}})
	want(t, r, http.StatusCreated, "")
	if got := decode[httpapi.Task](t, r); !slices.Equal(got.Needs, []string{"go"}) {
		t.Fatalf("needs = %v, want [go]", got.Needs)
	}
	r = e.task(tm, http.MethodPost, "", lead, map[string]any{"title": "plain"})
	if got := decode[httpapi.Task](t, r); got.Needs == nil || len(got.Needs) != 0 {
		t.Fatalf("needs of a plain task = %#v, want []", got.Needs)
	}

	for _, tc := range []struct {
		name, method, path, token string
		body                      any
		status                    int
		code                      string
	}{
		{"ErrBadNeed", http.MethodPost, "", lead, map[string]any{"title": "t", "needs": []string{"Go"}}, 400, "validation_failed"},
		{"ErrTooManyNeeds", http.MethodPost, "", lead, map[string]any{"title": "t", "needs": strings.Split("a b c d e f g h i j k l m n o p q", " ")}, 400, "validation_failed"},
		{"ErrPatchBadNeed", http.MethodPatch, "/task-1", lead, map[string]any{"needs": []string{"-x"}}, 400, "validation_failed"},
		{"ErrNeeds", http.MethodPost, "/task-1/claim", writer, nil, 409, "task_needs"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			want(t, e.task(tm, tc.method, tc.path, tc.token, tc.body), tc.status, tc.code)
		})
	}
	r = e.task(tm, http.MethodPost, "/task-1/claim", writer, nil)
	if p := decode[httpapi.Problem](t, r); !strings.Contains(p.Detail, "go") {
		t.Errorf("task_needs detail = %q, want it to name go", p.Detail)
	}
	bad := e.patchJSON("/api/v1/teams/crew/members/writer", adminToken, map[string]any{"skills": []string{"has space"}})
	want(t, bad, http.StatusBadRequest, "validation_failed")

	// claim-next passes task-1 over for writer and hands it task-2.
	r = e.task(tm, http.MethodPost, "/claim-next", writer, nil)
	want(t, r, http.StatusOK, "")
	if got := decode[httpapi.Task](t, r); got.TaskID != "task-2" {
		t.Fatalf("claim-next as writer = %s, want task-2", got.TaskID)
	}
	want(t, e.task(tm, http.MethodPost, "/claim-next", writer, nil), http.StatusNoContent, "")

	// Given the skill, writer may claim it; PATCH needs changes who may.
	r = e.patchJSON("/api/v1/teams/crew/members/writer", adminToken, map[string]any{"skills": []string{"docs"}})
	want(t, r, http.StatusOK, "")
	if got := decode[httpapi.Member](t, r); !slices.Equal(got.Skills, []string{"docs"}) {
		t.Fatalf("patched skills = %v, want [docs]", got.Skills)
	}
	want(t, e.task(tm, http.MethodPatch, "/task-1", lead, map[string]any{"needs": []string{"docs"}}), http.StatusOK, "")
	want(t, e.task(tm, http.MethodPost, "/task-1/claim", builder, nil), http.StatusConflict, "task_needs")

	// Restarted over the same data, skills and needs are as stored.
	if c, ok := e.store.(io.Closer); ok {
		if err := c.Close(); err != nil {
			t.Fatal(err)
		}
	}
	e2 := startEnv(t, envOptions{place: e.place})
	if got := e2.memberDoc(tm, "builder").Skills; !slices.Equal(got, []string{"go", "sql"}) {
		t.Errorf("builder skills after restart = %v, want [go sql]", got)
	}
	if got := e2.memberDoc(tm, "lead").Skills; got == nil || len(got) != 0 {
		t.Errorf("lead skills after restart = %#v, want []", got)
	}
	r = e2.task(tm, http.MethodGet, "/task-1", lead, nil)
	if got := decode[httpapi.Task](t, r); !slices.Equal(got.Needs, []string{"docs"}) {
		t.Errorf("task-1 needs after restart = %v, want [docs]", got.Needs)
	}
	r = e2.task(tm, http.MethodPost, "/task-1/claim", writer, nil)
	want(t, r, http.StatusOK, "")
}
