package httpapi_test

import (
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"mailroom/internal/core"
	"mailroom/internal/httpapi"
	"mailroom/internal/testkit"
)

func TestSendMessage(t *testing.T) {
	e := newEnv(t)
	a := e.newTeam("alpha", nil)
	b := e.newTeam("beta", nil)
	path := "/api/v1/teams/alpha/messages"

	t.Run("OK", func(t *testing.T) {
		r := e.send(a, "reviewer", "reader", "  expected is 42 \n")
		want(t, r, http.StatusCreated, "")
		got := decode[httpapi.SendResult](t, r)
		if got.ID != "reader-1" || got.Status != "queued" {
			t.Fatalf("result = %+v, want reader-1 queued", got)
		}
		msgs := e.inbox(a, "reader")
		if len(msgs) != 1 || msgs[0].Body != "expected is 42" || msgs[0].Sender != "reviewer" || msgs[0].Recipient != "reader" {
			t.Fatalf("inbox = %+v, want one trimmed letter from reviewer", msgs)
		}
	})

	tests := []struct {
		name   string
		token  string
		body   any
		status int
		code   string
	}{
		{"ErrSpoofedSender", a.tokens["reader"], map[string]string{"to": "lead", "body": "hi", "sender": "reviewer"}, http.StatusBadRequest, "validation_failed"},
		{"ErrNoBody", a.tokens["reader"], map[string]string{"to": "lead"}, http.StatusBadRequest, "validation_failed"},
		{"ErrBodyNotString", a.tokens["reader"], map[string]any{"to": "lead", "body": 42}, http.StatusBadRequest, "validation_failed"},
		{"ErrMalformedTo", a.tokens["reader"], map[string]string{"to": "Lead", "body": "hi"}, http.StatusBadRequest, "validation_failed"},
		{"ErrBlankBody", a.tokens["reader"], map[string]string{"to": "lead", "body": " \t\n "}, http.StatusBadRequest, "body_length"},
		{"ErrLongBody", a.tokens["reader"], map[string]string{"to": "lead", "body": strings.Repeat("é", 601)}, http.StatusBadRequest, "body_length"},
		{"ErrUnknownMember", a.tokens["reader"], map[string]string{"to": "writer", "body": "hi"}, http.StatusUnprocessableEntity, "unknown_member"},
		// The recipient is checked before the body, as in the lesson.
		{"ErrUnknownMemberBeatsBody", a.tokens["reader"], map[string]string{"to": "writer", "body": ""}, http.StatusUnprocessableEntity, "unknown_member"},
		{"ErrAdminIsNotAMember", adminToken, map[string]string{"to": "lead", "body": "hi"}, http.StatusForbidden, "forbidden"},
		{"ErrOtherTeam", b.tokens["lead"], map[string]string{"to": "lead", "body": "hi"}, http.StatusForbidden, "forbidden"},
		{"ErrNoToken", "", map[string]string{"to": "lead", "body": "hi"}, http.StatusUnauthorized, "unauthorized"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			want(t, e.post(path, tt.token, tt.body), tt.status, tt.code)
		})
	}

	t.Run("ErrInboxFull", func(t *testing.T) {
		tiny := e.newTeam("tiny", map[string]int{"inbox_messages": 1})
		want(t, e.send(tiny, "lead", "reader", "one"), http.StatusCreated, "")
		want(t, e.send(tiny, "lead", "reader", "two"), http.StatusConflict, "inbox_full")
		if msgs := e.inbox(tiny, "reader"); len(msgs) != 1 || msgs[0].Body != "one" {
			t.Fatalf("inbox = %+v, want the first letter only", msgs)
		}
	})

	t.Run("ErrStorageFailed", func(t *testing.T) {
		fileOnly(t, "the fault is injected into the file store's file system")
		e.faults.failing.Store(true)
		r := e.send(a, "lead", "reviewer", "this write fails")
		e.faults.failing.Store(false)
		want(t, r, http.StatusInternalServerError, "storage_failed")
		if strings.Contains(string(r.body), errInjected.Error()) {
			t.Errorf("the cause reached the client: %s", r.body)
		}
		if msgs := e.inbox(a, "reviewer"); len(msgs) != 0 {
			t.Fatalf("inbox = %+v, want nothing stored", msgs)
		}
	})
}

func TestGetInbox(t *testing.T) {
	e := newEnv(t)
	a := e.newTeam("alpha", nil)
	b := e.newTeam("beta", nil)
	want(t, e.send(a, "lead", "reader", "first"), http.StatusCreated, "")
	want(t, e.send(a, "reviewer", "reader", "second"), http.StatusCreated, "")
	path := "/api/v1/teams/alpha/members/reader/inbox"

	for _, tok := range []struct{ name, token string }{{"self", a.tokens["reader"]}, {"admin", adminToken}} {
		t.Run("OK/"+tok.name, func(t *testing.T) {
			for range 2 { // reading deletes nothing
				r := e.get(path, tok.token)
				want(t, r, http.StatusOK, "")
				got := decode[httpapi.Inbox](t, r).Messages
				if len(got) != 2 || got[0].ID != "reader-1" || got[1].ID != "reader-2" || got[1].Body != "second" {
					t.Fatalf("inbox = %+v, want reader-1 and reader-2", got)
				}
			}
		})
	}
	t.Run("OK/empty inbox is an array", func(t *testing.T) {
		r := e.get("/api/v1/teams/alpha/members/lead/inbox", a.tokens["lead"])
		want(t, r, http.StatusOK, "")
		if got := strings.TrimSpace(string(r.body)); got != `{"messages":[]}` {
			t.Errorf("body = %s", got)
		}
	})

	tests := []struct {
		name, path, token string
		status            int
		code              string
	}{
		{"ErrAnotherMembersInbox", path, a.tokens["lead"], http.StatusForbidden, "forbidden"},
		{"ErrOtherTeam", path, b.tokens["reader"], http.StatusForbidden, "forbidden"},
		{"ErrNoToken", path, "", http.StatusUnauthorized, "unauthorized"},
		{"ErrUnknownMember", "/api/v1/teams/alpha/members/ghost/inbox", adminToken, http.StatusNotFound, "not_found"},
		{"ErrUnknownTeam", "/api/v1/teams/nope/members/reader/inbox", adminToken, http.StatusNotFound, "not_found"},
		{"ErrBadMemberName", "/api/v1/teams/alpha/members/READER/inbox", adminToken, http.StatusBadRequest, "validation_failed"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			want(t, e.get(tt.path, tt.token), tt.status, tt.code)
		})
	}

	t.Run("ErrInboxCorrupt", func(t *testing.T) {
		fileOnly(t, "the inbox file is broken on disk")
		file := filepath.Join(e.dir, "teams", "alpha", "inboxes", "reader.jsonl")
		before, err := os.ReadFile(file)
		if err != nil {
			t.Fatalf("read inbox file: %v", err)
		}
		broken := append(append([]byte{}, before...), '\n') // a blank line is corruption
		if err := os.WriteFile(file, broken, 0o600); err != nil {
			t.Fatal(err)
		}
		want(t, e.get(path, adminToken), http.StatusInternalServerError, "inbox_corrupt")
		want(t, e.send(a, "lead", "reader", "third"), http.StatusInternalServerError, "inbox_corrupt")
		after, err := os.ReadFile(file)
		if err != nil || string(after) != string(broken) {
			t.Fatalf("the corrupt inbox was changed (err %v)", err)
		}
	})
}

// TestInboxJSONL: Accept: application/jsonl answers the inbox in the
// lesson's file bytes, from either backend: each letter's
// core.EncodeInboxLine, and on the file store exactly the file on disk.
func TestInboxJSONL(t *testing.T) {
	e := newEnv(t)
	a := e.newTeam("alpha", nil)
	path := "/api/v1/teams/alpha/members/reader/inbox"
	jsonl := func(p, token, accept string) result {
		t.Helper()
		return e.do(call{method: http.MethodGet, path: p, token: token, header: map[string]string{"Accept": accept}})
	}

	// An empty inbox is no bytes.
	r := jsonl(path, adminToken, "application/jsonl")
	want(t, r, http.StatusOK, "")
	if ct := r.header.Get("Content-Type"); ct != "application/jsonl" || len(r.body) != 0 {
		t.Fatalf("empty inbox: Content-Type %q, body %q; want application/jsonl and nothing", ct, r.body)
	}

	for _, body := range []string{"read the source", "ünïcode \u2028 \"quoted\" \\ 😀 <&> \t tab", "third"} {
		want(t, e.send(a, "lead", "reader", body), http.StatusCreated, "")
	}
	var wantBytes []byte
	for _, m := range e.inbox(a, "reader") {
		wantBytes = append(wantBytes, core.EncodeInboxLine(core.Message{ID: m.ID, Sender: m.Sender, Recipient: m.Recipient, Body: m.Body})...)
	}
	for _, tc := range []struct{ name, token, accept string }{
		{"admin", adminToken, "application/jsonl"},
		{"the member itself", a.tokens["reader"], "application/jsonl"},
		{"preferred by quality", adminToken, "application/json;q=0.5, application/jsonl"},
		{"over a wildcard", adminToken, "*/*, application/jsonl"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := jsonl(path, tc.token, tc.accept)
			want(t, r, http.StatusOK, "")
			if ct := r.header.Get("Content-Type"); ct != "application/jsonl" {
				t.Fatalf("Content-Type = %q", ct)
			}
			if string(r.body) != string(wantBytes) {
				t.Fatalf("body:\n got %q\nwant %q", r.body, wantBytes)
			}
		})
	}
	if backend == testkit.BackendFile {
		file, err := os.ReadFile(filepath.Join(e.dir, "teams", "alpha", "inboxes", "reader.jsonl"))
		if err != nil || string(file) != string(wantBytes) {
			t.Fatalf("the file holds %q (%v); the answer was %q", file, err, wantBytes)
		}
	}

	// JSON stays the default, and wins a tie or a higher quality.
	for _, accept := range []string{"", "application/json", "application/json, application/jsonl", "application/jsonl;q=0.1, application/json", "application/jsonl;q=0"} {
		r := jsonl(path, adminToken, accept)
		want(t, r, http.StatusOK, "")
		if ct := r.header.Get("Content-Type"); ct != "application/json" {
			t.Errorf("Accept %q: Content-Type %q, want application/json", accept, ct)
		}
	}
	// The rights and the refusals are the JSON form's.
	want(t, jsonl(path, a.tokens["reviewer"], "application/jsonl"), http.StatusForbidden, "forbidden")
	want(t, jsonl("/api/v1/teams/alpha/members/ghost/inbox", adminToken, "application/jsonl"), http.StatusNotFound, "not_found")
	want(t, jsonl(path+"?after=reader-1", adminToken, "application/jsonl"), http.StatusBadRequest, "validation_failed")
	want(t, jsonl(path+"?wait=1", adminToken, "application/jsonl"), http.StatusBadRequest, "validation_failed")
}
