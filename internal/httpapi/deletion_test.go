package httpapi_test

import (
	"io"
	"net/http"
	"strings"
	"testing"
	"time"
)

// rest reads the stream to its end and returns what came, failing the test
// when the server has not ended it within a generous bound (it must end at
// once; the bound only keeps a failing test from hanging).
func (s *sse) rest(t *testing.T) string {
	t.Helper()
	type read struct {
		b   []byte
		err error
	}
	done := make(chan read, 1)
	go func() {
		b, err := io.ReadAll(s.lines)
		done <- read{b, err}
	}()
	select {
	case r := <-done:
		return string(r.b)
	case <-time.After(30 * time.Second):
		s.close()
		t.Fatal("the event stream is still open 30 s after its team was deleted, want it ended at once")
		return ""
	}
}

// TestDeletingATeamEndsItsConnections: deleting a team ends its event
// streams (a member's and the admin's of that team) and answers its held
// reads with 200 and no letters; a new team of the same name, its letters
// and events, never reach them.
func TestDeletingATeamEndsItsConnections(t *testing.T) {
	e := newEnv(t)
	a := e.newTeam("alpha", nil)
	memberStream := e.openStream(t, "", a.tokens["reader"])
	adminStream := e.openStream(t, "?team=alpha", adminToken)
	everyTeam := e.openStream(t, "", adminToken)
	held := e.holdRead(a, "reader", a.tokens["reader"], "wait=60", 1)

	want(t, e.do(call{method: http.MethodDelete, path: "/api/v1/teams/alpha", token: adminToken}), http.StatusNoContent, "")
	b := e.newTeam("alpha", nil)
	want(t, e.send(b, "lead", "reader", "for the new team"), http.StatusCreated, "")

	r := <-held
	if r.err != nil || r.status != http.StatusOK || len(r.inbox.Messages) != 0 {
		t.Fatalf("held read of the deleted team: status %d, err %v, letters %+v, body %s; want 200 with none", r.status, r.err, r.inbox.Messages, r.body)
	}
	for name, s := range map[string]*sse{"member's": memberStream, "admin's of the team": adminStream} {
		if rest := s.rest(t); strings.Contains(rest, "for the new team") || strings.Contains(rest, "event: ") {
			t.Errorf("the %s stream received after the deletion:\n%s", name, rest)
		}
	}
	// The admin's stream of every team goes on, and shows the new team.
	if ev := everyTeam.nextOf("message"); !strings.Contains(string(ev.data.Data), "for the new team") {
		t.Errorf("the admin's stream of every team: message %s, want the new team's letter", ev.data.Data)
	}
	// The new team's own connections work as ever.
	fresh := e.holdRead(b, "reviewer", b.tokens["reviewer"], "wait=60", 1)
	want(t, e.send(b, "lead", "reviewer", "hello"), http.StatusCreated, "")
	if r := <-fresh; r.status != http.StatusOK || len(r.inbox.Messages) != 1 {
		t.Fatalf("the new team's held read: status %d, letters %+v; want the one letter", r.status, r.inbox.Messages)
	}
}

// TestHeldReadsPerToken: one token holds at most 8 waiting reads; the
// ninth is 429 too_many_streams, and an answered read frees its place.
// Another member's token has places of its own.
func TestHeldReadsPerToken(t *testing.T) {
	e := newEnv(t)
	a := e.newTeam("alpha", nil)
	tok := a.tokens["reader"]
	var held []<-chan heldRead
	for i := range 8 {
		held = append(held, e.holdRead(a, "reader", tok, "wait=60", i+1))
	}
	want(t, e.get("/api/v1/teams/alpha/members/reader/inbox?wait=60", tok), http.StatusTooManyRequests, "too_many_streams")
	// A read that does not wait is not held and not refused.
	want(t, e.get("/api/v1/teams/alpha/members/reader/inbox", tok), http.StatusOK, "")
	other := e.holdRead(a, "reviewer", a.tokens["reviewer"], "wait=60", 1)

	want(t, e.send(a, "lead", "reader", "wake"), http.StatusCreated, "")
	for i, ch := range held {
		if r := <-ch; r.status != http.StatusOK || len(r.inbox.Messages) != 1 {
			t.Fatalf("held read %d: status %d, letters %+v; want the letter", i+1, r.status, r.inbox.Messages)
		}
	}
	// The places are free again once the answers are out.
	again := e.holdRead(a, "reader", tok, "after=reader-1&wait=60", 1)
	want(t, e.send(a, "lead", "reader", "again"), http.StatusCreated, "")
	if r := <-again; r.status != http.StatusOK || len(r.inbox.Messages) != 1 {
		t.Fatalf("read after the others: status %d, letters %+v", r.status, r.inbox.Messages)
	}
	want(t, e.send(a, "lead", "reviewer", "wake"), http.StatusCreated, "")
	<-other
}
