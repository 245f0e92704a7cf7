package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"mailroom/internal/core"
	"mailroom/internal/pgstore"
	"mailroom/internal/pgtest"
)

const pgAdminToken = "pg-admin-token-0123456789"

// call sends one API request and decodes a JSON answer into out (if not nil).
func call(t *testing.T, base *url.URL, token, method, path string, body any, out any) int {
	t.Helper()
	var rd io.Reader
	if body != nil {
		b, _ := json.Marshal(body)
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequest(method, base.Scheme+"://"+base.Host+"/api/v1"+path, rd)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+token)
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	data, _ := io.ReadAll(resp.Body)
	if out != nil && resp.StatusCode < 300 {
		if err := json.Unmarshal(data, out); err != nil {
			t.Fatalf("%s %s: %v: %s", method, path, err, data)
		}
	}
	if resp.StatusCode >= 300 {
		t.Logf("%s %s: %d %s", method, path, resp.StatusCode, data)
	}
	return resp.StatusCode
}

// TestPostgresUnreachableAtStartExits1: the real binary exits 1 with a
// message naming host and database, never the password.
func TestPostgresUnreachableAtStartExits1(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := ln.Addr().(*net.TCPAddr).Port
	ln.Close()
	dbURL := fmt.Sprintf("postgres://mailroom:hunter2-secret@127.0.0.1:%d/maildb?sslmode=disable&connect_timeout=2", port)
	p := start(t, []string{"MAILROOM_DATABASE_URL=" + dbURL, "MAILROOM_ADMIN_TOKEN=" + pgAdminToken},
		"--addr", "127.0.0.1:0", "--data", t.TempDir(), "--store", "postgres")
	if code := p.wait(exitDeadline); code != 1 {
		t.Fatalf("exit code %d, want 1; stderr:\n%s", code, p.stderr)
	}
	msg := p.stderr.String()
	if !strings.Contains(msg, `"maildb"`) || !strings.Contains(msg, fmt.Sprintf("127.0.0.1:%d", port)) {
		t.Errorf("stderr does not name host and database:\n%s", msg)
	}
	if strings.Contains(msg, "hunter2") {
		t.Errorf("stderr shows the password:\n%s", msg)
	}
}

// TestPostgresConfig: postgres needs a database URL and an admin token
// (replicas must share it); an unknown backend is refused.
func TestPostgresConfig(t *testing.T) {
	env := func(kv ...string) func(string) string {
		return func(k string) string {
			for i := 0; i+1 < len(kv); i += 2 {
				if kv[i] == k {
					return kv[i+1]
				}
			}
			return ""
		}
	}
	for _, tt := range []struct {
		name string
		args []string
		env  func(string) string
		ok   bool
	}{
		{"file by default", nil, env(), true},
		{"postgres without url", []string{"--store", "postgres", "--admin-token", pgAdminToken}, env(), false},
		{"postgres without admin token", []string{"--store", "postgres", "--database-url", "postgres://h/db"}, env(), false},
		{"postgres from env", nil, env("MAILROOM_STORE", "postgres", "MAILROOM_DATABASE_URL", "postgres://h/db", "MAILROOM_ADMIN_TOKEN", pgAdminToken), true},
		{"unknown store", []string{"--store", "sqlite"}, env(), false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			cfg, err := parseConfig(tt.args, tt.env, io.Discard)
			if (err == nil) != tt.ok {
				t.Fatalf("err %v, want ok=%v", err, tt.ok)
			}
			if tt.name == "postgres from env" && (cfg.store != storePostgres || cfg.databaseURL != "postgres://h/db") {
				t.Fatalf("cfg %+v", cfg)
			}
		})
	}
}

// TestImportRoundTrip: a file-store data directory with teams, letters and
// pending and decided requests is imported; a server on PostgreSQL then
// answers the same tokens with the same inboxes and requests, the stored
// lines are the files' bytes, and a second import is refused.
func TestImportRoundTrip(t *testing.T) {
	dataDir := t.TempDir()
	fileSrv, base := startServer(t, dataDir, []string{"MAILROOM_ADMIN_TOKEN=" + pgAdminToken})
	var team struct {
		Members []struct{ Name, Token string } `json:"members"`
	}
	if code := call(t, base, pgAdminToken, "POST", "/teams", map[string]any{"name": "demo",
		"members": []map[string]string{{"name": "reader", "role": "reads"}, {"name": "writer", "role": "writes"}}}, &team); code != 201 {
		t.Fatalf("create team: %d", code)
	}
	tokens := map[string]string{}
	for _, m := range team.Members {
		tokens[m.Name] = m.Token
	}
	send := func(from, to, body string) {
		if code := call(t, base, tokens[from], "POST", "/teams/demo/messages", map[string]string{"to": to, "body": body}, nil); code != 201 {
			t.Fatalf("send %s→%s: %d", from, to, code)
		}
	}
	send("lead", "reader", "read the source")
	send("lead", "reader", "ünïcode \u2028 \"quoted\" 😀")
	// A reply that asks for an ack, acknowledged, and a limit raised
	// after creation: the letter's line, the team's acks and limits.
	if code := call(t, base, tokens["reader"], "POST", "/teams/demo/messages", map[string]any{"to": "lead", "body": "done", "in_reply_to": "reader-1", "ack_required": true}, nil); code != 201 {
		t.Fatalf("reply: %d", code)
	}
	if code := call(t, base, tokens["lead"], "POST", "/teams/demo/members/lead/inbox/lead-1/ack", map[string]string{"outcome": "done", "note": "thanks"}, nil); code != 200 {
		t.Fatalf("ack: %d", code)
	}
	if code := call(t, base, pgAdminToken, "PATCH", "/teams/demo", map[string]any{"limits": map[string]int{"inbox_messages": 12}}, nil); code != 200 {
		t.Fatalf("raise inbox_messages: %d", code)
	}
	// writer's inbox stays empty (no file at all): imported as empty.
	var opened struct {
		RequestID string `json:"request_id"`
	}
	if code := call(t, base, tokens["reader"], "POST", "/teams/demo/requests", map[string]string{"kind": "plan", "target": "lead", "payload": "plan A"}, &opened); code != 201 {
		t.Fatalf("open plan: %d", code)
	}
	if code := call(t, base, tokens["lead"], "POST", "/teams/demo/requests/"+opened.RequestID+"/reply", map[string]any{"approve": true, "feedback": "ok"}, nil); code != 200 {
		t.Fatalf("reply: %d", code)
	}
	if code := call(t, base, tokens["writer"], "POST", "/teams/demo/requests", map[string]string{"kind": "plan", "target": "lead", "payload": "plan B"}, nil); code != 201 {
		t.Fatalf("open second plan: %d", code)
	}
	before := map[string]json.RawMessage{}
	for name, tok := range tokens {
		var inbox json.RawMessage
		if code := call(t, base, tok, "GET", "/teams/demo/members/"+name+"/inbox", nil, &inbox); code != 200 {
			t.Fatalf("inbox of %s: %d", name, code)
		}
		before[name] = inbox
	}
	var reqsBefore json.RawMessage
	call(t, base, tokens["lead"], "GET", "/teams/demo/requests", nil, &reqsBefore)
	// The task board: two tasks, one claimed and completed, one deleted.
	for _, title := range []string{"first", "second"} {
		if code := call(t, base, tokens["lead"], "POST", "/teams/demo/tasks", map[string]string{"title": title}, nil); code != 201 {
			t.Fatalf("create task %s: %d", title, code)
		}
	}
	for _, step := range []struct {
		method, path, token string
		body                any
	}{
		{"POST", "/teams/demo/tasks/task-1/claim", tokens["reader"], nil},
		{"POST", "/teams/demo/tasks/task-1/complete", tokens["reader"], map[string]string{"result": "42"}},
		{"DELETE", "/teams/demo/tasks/task-2", tokens["lead"], nil},
	} {
		if code := call(t, base, step.token, step.method, step.path, step.body, nil); code != 200 {
			t.Fatalf("%s %s: %d", step.method, step.path, code)
		}
	}
	var tasksBefore json.RawMessage
	call(t, base, tokens["lead"], "GET", "/teams/demo/tasks", nil, &tasksBefore)
	fileSrv.stop()

	dbURL := pgtest.New(t)
	imp := start(t, nil, "import", "--data", dataDir, "--database-url", dbURL)
	if code := imp.wait(exitDeadline); code != 0 {
		t.Fatalf("import exit %d; stderr:\n%s", code, imp.stderr)
	}
	// The stored lines are the inbox files' bytes.
	pg, err := pgstore.Open(context.Background(), dbURL, pgstore.Options{})
	if err != nil {
		t.Fatal(err)
	}
	err = core.View(context.Background(), pg, "demo", func(tx core.TeamTx) error {
		for name := range tokens {
			file, _ := os.ReadFile(filepath.Join(dataDir, "teams", "demo", "inboxes", name+".jsonl"))
			got, err := tx.InboxBytes(name)
			if err != nil {
				return err
			}
			if !bytes.Equal(got, file) {
				t.Errorf("inbox of %s:\n got %q\nwant %q", name, got, file)
			}
		}
		return nil
	})
	pg.Close()
	if err != nil {
		t.Fatal(err)
	}
	again := start(t, nil, "import", "--data", dataDir, "--database-url", dbURL)
	if code := again.wait(exitDeadline); code != 1 || !strings.Contains(again.stderr.String(), "already holds teams") {
		t.Fatalf("second import: exit %d; stderr:\n%s", code, again.stderr)
	}

	pgSrv, pgBase := startServer(t, t.TempDir(), []string{"MAILROOM_ADMIN_TOKEN=" + pgAdminToken},
		"--store", "postgres", "--database-url", dbURL)
	for name, tok := range tokens {
		var inbox json.RawMessage
		if code := call(t, pgBase, tok, "GET", "/teams/demo/members/"+name+"/inbox", nil, &inbox); code != 200 {
			t.Fatalf("inbox of %s on postgres: %d", name, code)
		}
		if !bytes.Equal(inbox, before[name]) {
			t.Errorf("inbox of %s:\n got %s\nwant %s", name, inbox, before[name])
		}
	}
	var receipts struct {
		Receipts []struct {
			Ack *struct{ Outcome, Note string } `json:"ack"`
		} `json:"receipts"`
	}
	if code := call(t, pgBase, tokens["reader"], "GET", "/teams/demo/receipts?ids=lead-1", nil, &receipts); code != 200 || len(receipts.Receipts) != 1 || receipts.Receipts[0].Ack == nil || receipts.Receipts[0].Ack.Note != "thanks" {
		t.Errorf("receipt of lead-1 on postgres: %d %+v, want the ack done with its note", code, receipts)
	}
	var teamDoc struct {
		Limits struct {
			InboxMessages int `json:"inbox_messages"`
		} `json:"limits"`
	}
	if code := call(t, pgBase, pgAdminToken, "GET", "/teams/demo", nil, &teamDoc); code != 200 || teamDoc.Limits.InboxMessages != 12 {
		t.Errorf("team on postgres: %d, inbox_messages %d; want 12", code, teamDoc.Limits.InboxMessages)
	}
	var reqsAfter json.RawMessage
	call(t, pgBase, tokens["lead"], "GET", "/teams/demo/requests", nil, &reqsAfter)
	if !bytes.Equal(reqsAfter, reqsBefore) {
		t.Errorf("requests:\n got %s\nwant %s", reqsAfter, reqsBefore)
	}
	var tasksAfter json.RawMessage
	call(t, pgBase, tokens["lead"], "GET", "/teams/demo/tasks", nil, &tasksAfter)
	if !bytes.Equal(tasksAfter, tasksBefore) {
		t.Errorf("tasks:\n got %s\nwant %s", tasksAfter, tasksBefore)
	}
	var next struct {
		TaskID string `json:"task_id"`
	}
	if code := call(t, pgBase, tokens["lead"], "POST", "/teams/demo/tasks", map[string]string{"title": "third"}, &next); code != 201 || next.TaskID != "task-3" {
		t.Errorf("a task on postgres: %d %q, want task-3", code, next.TaskID)
	}
	// The numbering goes on where the file store left it, without a gap:
	// reader holds lead's two letters and the reply to its plan, writer
	// nothing, lead the reader's letter and the two plans.
	for _, tt := range []struct{ to, want string }{{"reader", "reader-4"}, {"writer", "writer-1"}, {"lead", "lead-4"}} {
		var inbox struct{ Messages []struct{ ID string } }
		if err := json.Unmarshal(before[tt.to], &inbox); err != nil {
			t.Fatal(err)
		}
		if want := fmt.Sprintf("%s-%d", tt.to, len(inbox.Messages)+1); want != tt.want {
			t.Fatalf("inbox of %s before the import holds %d letters; the test expects %s next", tt.to, len(inbox.Messages), tt.want)
		}
		from := "lead"
		if tt.to == "lead" {
			from = "writer"
		}
		var sent struct{ ID string }
		if code := call(t, pgBase, tokens[from], "POST", "/teams/demo/messages", map[string]string{"to": tt.to, "body": "on postgres"}, &sent); code != 201 || sent.ID != tt.want {
			t.Errorf("send to %s on postgres: %d %q, want %s", tt.to, code, sent.ID, tt.want)
		}
	}
	pgSrv.stop()
}

// TestImportMovesWorkspaces: an import of a data directory whose teams
// have workspaces refuses to leave them behind without --workspaces-to,
// storing nothing; with it the files (a path with folders included) are
// in the PostgreSQL server's workspaces root and served from there.
func TestImportMovesWorkspaces(t *testing.T) {
	dataDir := t.TempDir()
	fileSrv, base := startServer(t, dataDir, []string{"MAILROOM_ADMIN_TOKEN=" + pgAdminToken})
	if code := call(t, base, pgAdminToken, "POST", "/teams", map[string]any{"name": "ws", "workspace": true,
		"members": []map[string]string{{"name": "reader", "role": "reads"}}}, nil); code != 201 {
		t.Fatalf("create team: %d", code)
	}
	put := func(base *url.URL, path, body string) int {
		req, _ := http.NewRequest("PUT", base.Scheme+"://"+base.Host+"/api/v1/teams/ws/workspace/files/"+path, strings.NewReader(body))
		req.Header.Set("Authorization", "Bearer "+pgAdminToken)
		req.Header.Set("Content-Type", "application/octet-stream")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	if code := put(base, "src/main.py", "print(42)\n"); code != 204 {
		t.Fatalf("put src/main.py: %d", code)
	}
	fileSrv.stop()

	dbURL := pgtest.New(t)
	refused := start(t, nil, "import", "--data", dataDir, "--database-url", dbURL)
	if code := refused.wait(exitDeadline); code == 0 || !strings.Contains(refused.stderr.String(), "--workspaces-to") {
		t.Fatalf("import without --workspaces-to: exit %d, want a refusal naming --workspaces-to; stderr:\n%s", code, refused.stderr)
	}
	wsRoot := filepath.Join(t.TempDir(), "workspaces")
	imp := start(t, nil, "import", "--data", dataDir, "--database-url", dbURL, "--workspaces-to", wsRoot)
	if code := imp.wait(exitDeadline); code != 0 {
		t.Fatalf("import exit %d (the refused one must have stored nothing); stderr:\n%s", code, imp.stderr)
	}
	if b, err := os.ReadFile(filepath.Join(wsRoot, "ws", "src", "main.py")); err != nil || string(b) != "print(42)\n" {
		t.Fatalf("imported src/main.py = %q, %v; want the file put", b, err)
	}
	if left, _ := filepath.Glob(filepath.Join(wsRoot, ".mailroom-import-*")); len(left) != 0 {
		t.Errorf("staging directories left behind: %v", left)
	}
	pgSrv, pgBase := startServer(t, t.TempDir(), []string{"MAILROOM_ADMIN_TOKEN=" + pgAdminToken},
		"--store", "postgres", "--database-url", dbURL, "--workspaces", wsRoot)
	defer pgSrv.stop()
	var list struct {
		Files []struct {
			Path  string `json:"path"`
			Bytes int64  `json:"bytes"`
		} `json:"files"`
	}
	if code := call(t, pgBase, pgAdminToken, "GET", "/teams/ws/workspace", nil, &list); code != 200 {
		t.Fatalf("list the workspace on postgres: %d", code)
	}
	if len(list.Files) != 1 || list.Files[0].Path != "src/main.py" || list.Files[0].Bytes != 10 {
		t.Errorf("workspace on postgres lists %+v, want src/main.py of 10 bytes", list.Files)
	}
}
