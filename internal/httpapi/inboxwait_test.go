package httpapi_test

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"runtime"
	"runtime/pprof"
	"strings"
	"testing"

	"mailroom/internal/httpapi"
)

type heldRead struct {
	status int
	inbox  httpapi.Inbox
	err    error
	// header, close, length and body are the response as received.
	header http.Header
	close  bool
	length int64
	body   []byte
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
		out.header, out.close, out.length = resp.Header, resp.Close, resp.ContentLength
		b, err := io.ReadAll(resp.Body)
		out.body = b
		if err == nil {
			err = json.Unmarshal(b, &out.inbox)
		}
		out.err = err
	}()
	for e.app.Live().Waiting(tm.name, member) < n {
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
	if n := e.app.Live().Waiting("alpha", "reader"); n != 0 {
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
	e := startEnv(t, envOptions{maxHeldReads: 50})
	a := e.newTeam("alpha", nil)
	const n = 50
	var dones []<-chan heldRead
	for i := range n {
		dones = append(dones, e.holdRead(a, "reader", a.tokens["reader"], "wait=60", i+1))
	}
	e.app.Live().StopWaiting()
	for _, d := range dones {
		if r := <-d; r.err != nil || r.status != http.StatusOK || len(r.inbox.Messages) != 0 {
			t.Fatalf("released read: %+v, want 200 with no letters", r)
		}
	}
	if got := e.app.Live().Waiting("alpha", "reader"); got != 0 {
		t.Errorf("reads still registered: got %d, want 0", got)
	}
}

// A held read's answer is written on the taken-over connection by hand: it
// must be a complete HTTP/1.1 response that closes the connection, and the
// client's next request works on a new one.
func TestInboxWaitAnswerIsCompleteResponse(t *testing.T) {
	held := &httpapi.HeldReads{}
	e := newEnv(t, func(o *httpapi.Options) { o.HeldReads = held })
	a := e.newTeam("alpha", nil)
	done := e.holdRead(a, "reader", a.tokens["reader"], "wait=60", 1)
	// Waiting counts the read from its watch, taken before the read that
	// finds nothing and holds: wait until the connection is really held,
	// or the letter is simply found and answered by net/http.
	for held.Held("alpha", "reader") < 1 {
		select {
		case r := <-done:
			t.Fatalf("the read was answered before anything was sent: %+v", r)
		default:
			runtime.Gosched()
		}
	}
	want(t, e.send(a, "reviewer", "reader", "hello"), http.StatusCreated, "")
	r := <-done
	if r.err != nil || r.status != http.StatusOK || len(r.inbox.Messages) != 1 {
		t.Fatalf("held read: %+v, want 200 with one letter", r)
	}
	if ct := r.header.Get("Content-Type"); ct != "application/json" {
		t.Errorf("Content-Type = %q, want application/json", ct)
	}
	if r.length != int64(len(r.body)) {
		t.Errorf("Content-Length = %d, want the body's %d bytes", r.length, len(r.body))
	}
	if !r.close {
		t.Errorf("the answer keeps the connection open; want Connection: close (net/http no longer serves it)")
	}
	if r.header.Get("Date") == "" {
		t.Errorf("no Date header")
	}
	// The same client goes on, on a new connection.
	if got := e.inbox(a, "reader"); len(got) != 1 {
		t.Fatalf("next read: %d letters, want 1", len(got))
	}
}

// While reads wait, no request-handling goroutine of net/http is held
// for them: that goroutine's stack and buffers were most of a held read's
// memory.
func TestInboxWaitHoldsNoHandlerGoroutine(t *testing.T) {
	e := startEnv(t, envOptions{maxHeldReads: 20})
	a := e.newTeam("alpha", nil)
	const n = 20
	var dones []<-chan heldRead
	for i := range n {
		dones = append(dones, e.holdRead(a, "reader", a.tokens["reader"], "wait=60", i+1))
	}
	var stacks strings.Builder
	if err := pprof.Lookup("goroutine").WriteTo(&stacks, 2); err != nil {
		t.Fatal(err)
	}
	// A read that has registered but not yet left its handler is on its
	// way out; count only goroutines parked in a select inside the handler.
	got := 0
	for _, g := range strings.Split(stacks.String(), "\n\n") {
		if strings.Contains(g, "(*Server).GetInbox") && strings.Contains(g, "runtime.selectgo") {
			got++
		}
	}
	if got != 0 {
		t.Errorf("%d goroutines wait inside the handler; want 0", got)
	}
	want(t, e.send(a, "reviewer", "reader", "hello"), http.StatusCreated, "")
	for _, d := range dones {
		if r := <-d; r.err != nil || len(r.inbox.Messages) != 1 {
			t.Fatalf("held read: %+v, want the one letter", r)
		}
	}
}

// A client that leaves releases its wait at once, not at the deadline.
func TestInboxWaitClientLeaves(t *testing.T) {
	e := newEnv(t)
	a := e.newTeam("alpha", nil)
	ctx, cancel := context.WithCancel(t.Context())
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, e.srv.URL+"/api/v1/teams/alpha/members/reader/inbox?wait=60", nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+a.tokens["reader"])
	errc := make(chan error, 1)
	go func() {
		resp, err := e.client.Do(req)
		if err == nil {
			resp.Body.Close()
		}
		errc <- err
	}()
	for e.app.Live().Waiting("alpha", "reader") < 1 {
		runtime.Gosched()
	}
	cancel()
	if err := <-errc; err == nil {
		t.Fatalf("the cancelled read was answered; want it cut off")
	}
	// The wait is released when the server sees the connection close.
	for e.app.Live().Waiting("alpha", "reader") != 0 {
		runtime.Gosched()
	}
}

// Every check answers before a read waits: the wait changes nothing in
// the refusals.
func TestInboxWaitRefusedBeforeWaiting(t *testing.T) {
	e := newEnv(t)
	a := e.newTeam("alpha", nil)
	base := "/api/v1/teams/alpha/members/"
	tests := []struct {
		name, path, token string
		status            int
		code              string
	}{
		{"ErrUnknownToken", base + "reader/inbox?wait=60", "no-such-token", http.StatusUnauthorized, "unauthorized"},
		{"ErrOtherMember", base + "reader/inbox?wait=60", a.tokens["reviewer"], http.StatusForbidden, "forbidden"},
		{"ErrUnknownMember", base + "nobody/inbox?wait=60", adminToken, http.StatusNotFound, "not_found"},
		{"ErrUnknownTeam", "/api/v1/teams/omega/members/reader/inbox?wait=60", adminToken, http.StatusNotFound, "not_found"},
		{"ErrAfterUnknown", base + "reader/inbox?after=reader-7&wait=60", a.tokens["reader"], http.StatusBadRequest, "validation_failed"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			want(t, e.get(tt.path, tt.token), tt.status, tt.code)
		})
	}
	if n := e.app.Live().Waiting("alpha", "reader"); n != 0 {
		t.Errorf("refused reads left %d waits registered, want 0", n)
	}
}

// HeldReads.Wait, which the server calls after http.Server.Shutdown (that
// does not wait for taken-over connections), returns once every held read
// released by StopWaiting has been answered.
func TestHeldReadsWaitAtShutdown(t *testing.T) {
	held := &httpapi.HeldReads{}
	e := startEnv(t, envOptions{maxHeldReads: 20, configure: []func(*httpapi.Options){func(o *httpapi.Options) { o.HeldReads = held }}})
	a := e.newTeam("alpha", nil)
	const n = 20
	var dones []<-chan heldRead
	for i := range n {
		dones = append(dones, e.holdRead(a, "reader", a.tokens["reader"], "wait=60", i+1))
	}
	e.app.Live().StopWaiting()
	if err := held.Wait(t.Context()); err != nil {
		t.Fatalf("wait for held reads: %v", err)
	}
	for _, d := range dones {
		if r := <-d; r.err != nil || r.status != http.StatusOK || r.inbox.Messages == nil || len(r.inbox.Messages) != 0 {
			t.Fatalf("released read: %+v, want 200 with an empty list", r)
		}
	}
	// A read that comes after the stop answers at once.
	r := e.get("/api/v1/teams/alpha/members/reader/inbox?wait=60", a.tokens["reader"])
	want(t, r, http.StatusOK, "")
}
