package httpapi_test

import (
	"encoding/json"
	"io"
	"net/http"
	"runtime"
	"testing"

	"mailroom/internal/httpapi"
)

type heldRead struct {
	status int
	inbox  httpapi.Inbox
	err    error
}

// holdRead starts GET inbox?query in the background and returns once the
// server holds it (n reads waiting on that inbox in all).
func (e *env) holdRead(tm team, member, token, query string, n int) <-chan heldRead {
	e.t.Helper()
	done := make(chan heldRead, 1)
	req, err := http.NewRequestWithContext(e.t.Context(), http.MethodGet, e.srv.URL+"/api/v1/teams/"+tm.name+"/members/"+member+"/inbox?"+query, nil)
	if err != nil {
		e.t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+token)
	go func() {
		var out heldRead
		defer func() { done <- out }()
		resp, err := e.client.Do(req)
		if err != nil {
			out.err = err
			return
		}
		defer resp.Body.Close()
		out.status = resp.StatusCode
		b, err := io.ReadAll(resp.Body)
		if err == nil {
			err = json.Unmarshal(b, &out.inbox)
		}
		out.err = err
	}()
	for e.svc.Waiting(tm.name, member) < n {
		select {
		case r := <-done:
			e.t.Fatalf("the read was answered before anything was sent: %+v", r)
		default:
			runtime.Gosched()
		}
	}
	return done
}

func TestInboxWaitWokenBySend(t *testing.T) {
	e := newEnv(t)
	a := e.newTeam("alpha", nil)
	want(t, e.send(a, "lead", "reader", "first"), http.StatusCreated, "")
	done := e.holdRead(a, "reader", a.tokens["reader"], "after=reader-1&wait=60", 1)
	want(t, e.send(a, "reviewer", "reader", "second"), http.StatusCreated, "")
	r := <-done
	if r.err != nil || r.status != http.StatusOK {
		t.Fatalf("held read: status %d, err %v; want 200", r.status, r.err)
	}
	if len(r.inbox.Messages) != 1 || r.inbox.Messages[0].ID != "reader-2" || r.inbox.Messages[0].Body != "second" {
		t.Fatalf("held read answered %+v, want only reader-2", r.inbox.Messages)
	}
}

func TestInboxWaitAdminReads(t *testing.T) {
	e := newEnv(t)
	a := e.newTeam("alpha", nil)
	done := e.holdRead(a, "reader", adminToken, "wait=60", 1)
	want(t, e.send(a, "lead", "reader", "hello"), http.StatusCreated, "")
	if r := <-done; r.err != nil || len(r.inbox.Messages) != 1 {
		t.Fatalf("admin's held read: %+v, want the one letter", r)
	}
}

func TestInboxWaitTimesOut(t *testing.T) {
	e := newEnv(t)
	a := e.newTeam("alpha", nil)
	want(t, e.send(a, "lead", "reader", "old"), http.StatusCreated, "")
	r := e.get("/api/v1/teams/alpha/members/reader/inbox?after=reader-1&wait=1", a.tokens["reader"])
	want(t, r, http.StatusOK, "")
	if got := decode[httpapi.Inbox](t, r); got.Messages == nil || len(got.Messages) != 0 {
		t.Fatalf("messages = %#v, want an empty list", got.Messages)
	}
	if n := e.svc.Waiting("alpha", "reader"); n != 0 {
		t.Errorf("reads still registered after the deadline: got %d, want 0", n)
	}
}

func TestInboxAfter(t *testing.T) {
	e := newEnv(t)
	a := e.newTeam("alpha", nil)
	for _, body := range []string{"one", "two", "three"} {
		want(t, e.send(a, "lead", "reader", body), http.StatusCreated, "")
	}
	want(t, e.send(a, "lead", "reviewer", "elsewhere"), http.StatusCreated, "")
	base := "/api/v1/teams/alpha/members/reader/inbox"
	tok := a.tokens["reader"]

	r := e.get(base+"?after=reader-2", tok)
	want(t, r, http.StatusOK, "")
	if got := decode[httpapi.Inbox](t, r).Messages; len(got) != 1 || got[0].ID != "reader-3" {
		t.Fatalf("after reader-2: %+v, want reader-3 only", got)
	}
	// Letters already there are answered at once, wait or not.
	r = e.get(base+"?wait=60", tok)
	want(t, r, http.StatusOK, "")
	if got := decode[httpapi.Inbox](t, r).Messages; len(got) != 3 {
		t.Fatalf("wait with letters present: %d letters, want 3", len(got))
	}

	tests := []struct {
		name, query, token string
		status             int
		code               string
	}{
		{"ErrAfterOtherInbox", "after=reviewer-1&wait=60", tok, http.StatusBadRequest, "validation_failed"},
		{"ErrAfterUnknown", "after=reader-9", tok, http.StatusBadRequest, "validation_failed"},
		{"ErrAfterEmpty", "after=", tok, http.StatusBadRequest, "validation_failed"},
		{"ErrWaitTooLong", "wait=61", tok, http.StatusBadRequest, "validation_failed"},
		{"ErrWaitNegative", "wait=-1", tok, http.StatusBadRequest, "validation_failed"},
		{"ErrWaitNotNumber", "wait=soon", tok, http.StatusBadRequest, "validation_failed"},
		{"ErrOtherMember", "wait=60", a.tokens["reviewer"], http.StatusForbidden, "forbidden"},
		{"ErrNoToken", "wait=60", "", http.StatusUnauthorized, "unauthorized"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			want(t, e.get(base+"?"+tt.query, tt.token), tt.status, tt.code)
		})
	}
}

func TestInboxWaitersReleasedAtShutdown(t *testing.T) {
	e := newEnv(t)
	a := e.newTeam("alpha", nil)
	const n = 50
	var dones []<-chan heldRead
	for i := range n {
		dones = append(dones, e.holdRead(a, "reader", a.tokens["reader"], "wait=60", i+1))
	}
	e.svc.StopWaiting()
	for _, d := range dones {
		if r := <-d; r.err != nil || r.status != http.StatusOK || len(r.inbox.Messages) != 0 {
			t.Fatalf("released read: %+v, want 200 with no letters", r)
		}
	}
	if got := e.svc.Waiting("alpha", "reader"); got != 0 {
		t.Errorf("reads still registered: got %d, want 0", got)
	}
}
