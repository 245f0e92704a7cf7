package httpapi_test

import (
	"net/http"
	"strings"
	"testing"

	"mailroom/internal/httpapi"
)

// TestWorkspaceListDeleteAndSlashes: the workspace lists its files with
// their sizes, a path with literal slashes reaches the handler for PUT,
// GET and DELETE, and a deleted file is gone from the list and the disk.
func TestWorkspaceListDeleteAndSlashes(t *testing.T) {
	e := openEnv(t, nil, 0)
	tm := e.workspaceTeam("crew", "ask", nil)

	want(t, e.putFile(tm.name, "src/app/main.go", "package main\n", adminToken), http.StatusNoContent, "")
	want(t, e.putFile(tm.name, "notes%2Ftodo.txt", "x", adminToken), http.StatusNoContent, "")
	if r := e.getFile(tm.name, "src/app/main.go", adminToken); r.status != http.StatusOK || string(r.body) != "package main\n" {
		t.Fatalf("GET src/app/main.go = %d %q, want 200 and the bytes put", r.status, r.body)
	}
	if r := e.getFile(tm.name, "notes/todo.txt", adminToken); r.status != http.StatusOK || string(r.body) != "x" {
		t.Fatalf("GET notes/todo.txt (put as %%2F) = %d %q, want 200 \"x\"", r.status, r.body)
	}

	list := func() map[string]int64 {
		t.Helper()
		r := e.get("/api/v1/teams/"+tm.name+"/workspace", adminToken)
		want(t, r, http.StatusOK, "")
		doc := decode[httpapi.WorkspaceFileList](t, r)
		got := map[string]int64{}
		for _, f := range doc.Files {
			if f.Modified.IsZero() {
				t.Errorf("file %s has no modified time", f.Path)
			}
			got[f.Path] = f.Bytes
		}
		return got
	}
	got := list()
	if got["src/app/main.go"] != 13 || got["notes/todo.txt"] != 1 || got["main.py"] == 0 {
		t.Fatalf("listed files = %v, want main.py, src/app/main.go (13 bytes) and notes/todo.txt (1 byte)", got)
	}

	want(t, e.do(call{method: http.MethodDelete, path: "/api/v1/teams/crew/workspace/files/src/app/main.go", token: adminToken}), http.StatusNoContent, "")
	if _, ok := list()["src/app/main.go"]; ok {
		t.Fatal("src/app/main.go is still listed after its deletion")
	}
	want(t, e.getFile(tm.name, "src/app/main.go", adminToken), http.StatusNotFound, "not_found")
	want(t, e.do(call{method: http.MethodDelete, path: "/api/v1/teams/crew/workspace/files/src/app/main.go", token: adminToken}), http.StatusNotFound, "not_found")
	want(t, e.do(call{method: http.MethodDelete, path: "/api/v1/teams/crew/workspace/files/src/app", token: adminToken}), http.StatusBadRequest, "validation_failed")
	want(t, e.do(call{method: http.MethodDelete, path: "/api/v1/teams/crew/workspace/files/main.py", token: tm.tokens["reader"]}), http.StatusForbidden, "forbidden")
	want(t, e.get("/api/v1/teams/crew/workspace", tm.tokens["lead"]), http.StatusForbidden, "forbidden")
	e.newTeam("plain", nil)
	want(t, e.get("/api/v1/teams/plain/workspace", adminToken), http.StatusNotFound, "not_found")
}

// TestErrorsSayWhatToDo checks the details of the refusals a first user
// meets: an unknown member lists the team's members, a bad name says what
// a name may be, and member_unavailable names its cause and its fix.
func TestErrorsSayWhatToDo(t *testing.T) {
	e := openEnv(t, nil, 0)
	tm := e.newTeam("crew", map[string]int{"turns": 1})

	r := e.get("/api/v1/teams/crew/members/raeder/inbox", adminToken)
	wantDetail(t, r, http.StatusNotFound, "not_found", "its members are lead, reader")

	r = e.post("/api/v1/teams", adminToken, map[string]any{"name": "Bad Name"})
	wantDetail(t, r, http.StatusBadRequest, "validation_failed", "lowercase letters a-z, digits and hyphens, starting with a letter")
	if strings.Contains(string(r.body), "[a-z]") {
		t.Errorf("bad name detail shows a regular expression: %s", r.body)
	}
	r = e.get("/api/v1/teams/Bad_Team", adminToken)
	wantDetail(t, r, http.StatusBadRequest, "validation_failed", "lowercase letters a-z")

	want(t, e.turn(tm, "reader", "Say done.", textStep("done")), http.StatusOK, "")
	wantDetail(t, e.turn(tm, "reader", "Again.", textStep("done")), http.StatusConflict, "member_unavailable",
		"reader is out of turns: it has taken 1 of the team's 1 (limits.turns); raise the limit")
	wantDetail(t, e.post("/api/v1/teams/crew/members/reviewer/reset", adminToken, nil), http.StatusConflict, "member_unavailable",
		"reviewer is idle and its wake is not held")
}

// wantDetail requires the status, the code and a detail containing part.
func wantDetail(t *testing.T, r result, status int, code, part string) {
	t.Helper()
	want(t, r, status, code)
	p := decode[httpapi.Problem](t, r)
	if !strings.Contains(p.Detail, part) {
		t.Errorf("detail = %q, want it to contain %q", p.Detail, part)
	}
}
