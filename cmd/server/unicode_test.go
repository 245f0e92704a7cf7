package main

import (
	"bytes"
	"encoding/json"
	"net/url"
	"testing"

	"mailroom/internal/pgtest"
	"mailroom/internal/storetest"
)

// fillWithScalars writes text containing every interesting scalar value
// (U+0000 included) into a letter body, a plan's payload and its reply's
// feedback, and a task's title, detail and result, through the API of the
// server at base, and returns what the team's inboxes, requests and tasks
// then read, keyed by path.
func fillWithScalars(t *testing.T, base *url.URL) map[string]json.RawMessage {
	t.Helper()
	text := storetest.UnicodeText()
	var team struct {
		Members []struct{ Name, Token string } `json:"members"`
	}
	if code := call(t, base, pgAdminToken, "POST", "/teams", map[string]any{"name": "demo",
		"members": []map[string]string{{"name": "reader", "role": "reads"}}}, &team); code != 201 {
		t.Fatalf("create team: %d", code)
	}
	tokens := map[string]string{}
	for _, m := range team.Members {
		tokens[m.Name] = m.Token
	}
	if code := call(t, base, tokens["lead"], "POST", "/teams/demo/messages", map[string]string{"to": "reader", "body": text}, nil); code != 201 {
		t.Fatalf("send a body of %+q: %d, want 201", text, code)
	}
	var opened struct {
		RequestID string `json:"request_id"`
	}
	if code := call(t, base, tokens["reader"], "POST", "/teams/demo/requests", map[string]string{"kind": "plan", "target": "lead", "payload": text}, &opened); code != 201 {
		t.Fatalf("open a plan with payload %+q: %d, want 201", text, code)
	}
	if code := call(t, base, tokens["lead"], "POST", "/teams/demo/requests/"+opened.RequestID+"/reply", map[string]any{"approve": false, "feedback": text}, nil); code != 200 {
		t.Fatalf("reply with feedback %+q: %d, want 200", text, code)
	}
	if code := call(t, base, tokens["lead"], "POST", "/teams/demo/tasks", map[string]string{"title": text, "detail": text}, nil); code != 201 {
		t.Fatalf("create a task titled %+q: %d, want 201", text, code)
	}
	for _, step := range []struct {
		path string
		body any
	}{{"/teams/demo/tasks/task-1/claim", nil}, {"/teams/demo/tasks/task-1/complete", map[string]string{"result": text}}} {
		if code := call(t, base, tokens["reader"], "POST", step.path, step.body, nil); code != 200 {
			t.Fatalf("POST %s: %d, want 200", step.path, code)
		}
	}
	return readTeam(t, base, tokens)
}

// readTeam reads the demo team's inboxes, requests and tasks.
func readTeam(t *testing.T, base *url.URL, tokens map[string]string) map[string]json.RawMessage {
	t.Helper()
	out := map[string]json.RawMessage{}
	for _, path := range []string{"/teams/demo/members/reader/inbox", "/teams/demo/members/lead/inbox", "/teams/demo/requests", "/teams/demo/tasks"} {
		var doc json.RawMessage
		if code := call(t, base, pgAdminToken, "GET", path, nil, &doc); code != 200 {
			t.Fatalf("GET %s: %d, want 200", path, code)
		}
		out[path] = doc
	}
	return out
}

// TestEveryScalarOnBothStores: text holding U+0000 and the other
// interesting scalar values is stored by the file store and by
// PostgreSQL alike, read back the same, and `mailroom import` moves a data
// directory holding it into PostgreSQL, where it reads as it did.
func TestEveryScalarOnBothStores(t *testing.T) {
	text := storetest.UnicodeText()
	dataDir := t.TempDir()
	fileSrv, base := startServer(t, dataDir, []string{"MAILROOM_ADMIN_TOKEN=" + pgAdminToken})
	before := fillWithScalars(t, base)
	fileSrv.stop()
	if !bytes.Contains(before["/teams/demo/members/reader/inbox"], []byte(`\u0000`)) {
		t.Fatalf("reader's inbox does not hold the NUL: %s", before["/teams/demo/members/reader/inbox"])
	}

	// The same writes on PostgreSQL read the same (the letters' and
	// tasks' times and tokens aside, compared by the import below).
	direct, directBase := startServer(t, t.TempDir(), []string{"MAILROOM_ADMIN_TOKEN=" + pgAdminToken},
		"--store", "postgres", "--database-url", pgtest.New(t))
	onPG := fillWithScalars(t, directBase)
	direct.stop()
	for _, path := range []string{"/teams/demo/members/reader/inbox", "/teams/demo/members/lead/inbox"} {
		if !bytes.Equal(onPG[path], before[path]) {
			t.Errorf("%s on postgres:\n got %s\nwant %s", path, onPG[path], before[path])
		}
	}
	var tasks struct {
		Tasks []struct {
			Title, Detail string
			Result        *string
		}
	}
	if err := json.Unmarshal(onPG["/teams/demo/tasks"], &tasks); err != nil || len(tasks.Tasks) != 1 ||
		tasks.Tasks[0].Title != text || tasks.Tasks[0].Detail != text || tasks.Tasks[0].Result == nil || *tasks.Tasks[0].Result != text {
		t.Errorf("tasks on postgres = %s (%v), want one with title, detail and result %+q", onPG["/teams/demo/tasks"], err, text)
	}

	dbURL := pgtest.New(t)
	imp := start(t, nil, "import", "--data", dataDir, "--database-url", dbURL)
	if code := imp.wait(exitDeadline); code != 0 {
		t.Fatalf("import exit %d, want 0; stderr:\n%s", code, imp.stderr)
	}
	pgSrv, pgBase := startServer(t, t.TempDir(), []string{"MAILROOM_ADMIN_TOKEN=" + pgAdminToken},
		"--store", "postgres", "--database-url", dbURL)
	after := readTeam(t, pgBase, nil)
	pgSrv.stop()
	for path, want := range before {
		if !bytes.Equal(after[path], want) {
			t.Errorf("%s after the import:\n got %s\nwant %s", path, after[path], want)
		}
	}
}
