package httpapi_test

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"mailroom/internal/httpapi"
)

// sse is an open event stream read line by line.
type sse struct {
	t      *testing.T
	resp   *http.Response
	lines  *bufio.Reader
	cancel context.CancelFunc
}

type sseEvent struct {
	typ  string
	data struct {
		Type string          `json:"type"`
		Team string          `json:"team"`
		Data json.RawMessage `json:"data"`
	}
}

// openStream connects and returns once the server's opening comment has
// arrived: from then on the client is subscribed and misses nothing.
func (e *env) openStream(t *testing.T, query, token string) *sse {
	t.Helper()
	s, r := e.tryStream(t, query, token)
	if s == nil {
		t.Fatalf("GET events = %d %q, want 200 text/event-stream\nbody: %s", r.status, r.header.Get("Content-Type"), r.body)
	}
	return s
}

// tryStream asks for a stream. When the server opens it, the stream is
// returned once its opening comment has arrived; otherwise the answer is.
func (e *env) tryStream(t *testing.T, query, token string) (*sse, result) {
	t.Helper()
	ctx, cancel := context.WithCancel(t.Context())
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, e.srv.URL+"/api/v1/events"+query, nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+token)
	resp, err := e.client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != http.StatusOK || resp.Header.Get("Content-Type") != "text/event-stream" {
		defer cancel()
		defer resp.Body.Close()
		body, err := io.ReadAll(resp.Body)
		if err != nil {
			t.Fatalf("read answer: %v", err)
		}
		return nil, result{status: resp.StatusCode, header: resp.Header, body: body}
	}
	s := &sse{t: t, resp: resp, lines: bufio.NewReader(resp.Body), cancel: cancel}
	t.Cleanup(s.close)
	if line := s.line(); !strings.HasPrefix(line, ":") {
		t.Fatalf("first line = %q, want the opening comment", line)
	}
	return s, result{status: resp.StatusCode, header: resp.Header}
}

// waitStreamClients waits until the server counts n open streams, as its
// metrics report them. A closed stream is noticed by the server a moment
// after the client goes, so its place is free only then.
func (e *env) waitStreamClients(t *testing.T, n int) {
	t.Helper()
	want := fmt.Sprintf("mailroom_event_stream_clients %d\n", n)
	for {
		r := e.get("/metrics", "")
		if r.status != http.StatusOK {
			t.Fatalf("GET /metrics = %d, want 200", r.status)
		}
		if strings.Contains(string(r.body), want) {
			return
		}
		select {
		case <-t.Context().Done():
			t.Fatalf("the server never counted %d open streams", n)
		case <-time.After(10 * time.Millisecond):
		}
	}
}

func (s *sse) close() {
	s.cancel()
	s.resp.Body.Close()
}

func (s *sse) line() string {
	s.t.Helper()
	l, err := s.lines.ReadString('\n')
	if err != nil {
		s.t.Fatalf("read event stream: %v", err)
	}
	return strings.TrimSuffix(l, "\n")
}

// next returns the next event, skipping comments.
func (s *sse) next() sseEvent {
	s.t.Helper()
	var ev sseEvent
	for {
		l := s.line()
		switch {
		case l == "" && ev.typ != "":
			return ev
		case strings.HasPrefix(l, "event: "):
			ev.typ = strings.TrimPrefix(l, "event: ")
		case strings.HasPrefix(l, "data: "):
			if err := json.Unmarshal([]byte(strings.TrimPrefix(l, "data: ")), &ev.data); err != nil {
				s.t.Fatalf("event data %q: %v", l, err)
			}
		}
	}
}

// nextOf returns the next event of type typ.
func (s *sse) nextOf(typ string) sseEvent {
	s.t.Helper()
	for {
		if ev := s.next(); ev.typ == typ {
			return ev
		}
	}
}

type letter struct{ ID, Sender, Recipient, Body string }

func (ev sseEvent) letter(t *testing.T) letter {
	t.Helper()
	var m letter
	if err := json.Unmarshal(ev.data.Data, &m); err != nil {
		t.Fatalf("message event data %s: %v", ev.data.Data, err)
	}
	return m
}

func TestEvents(t *testing.T) {
	e := newEnv(t)
	a := e.newTeam("alpha", nil)
	b := e.newTeam("beta", nil)

	t.Run("OK/admin sees a message", func(t *testing.T) {
		s := e.openStream(t, "", adminToken)
		want(t, e.send(a, "lead", "reader", "hello"), http.StatusCreated, "")
		ev := s.nextOf("message")
		if ev.data.Type != "message" || ev.data.Team != "alpha" {
			t.Fatalf("event = %+v", ev.data)
		}
		if m := ev.letter(t); m.ID != "reader-1" || m.Sender != "lead" || m.Body != "hello" {
			t.Fatalf("letter = %+v", m)
		}
	})

	t.Run("OK/team filter", func(t *testing.T) {
		s := e.openStream(t, "?team=beta", adminToken)
		want(t, e.send(a, "lead", "reviewer", "for alpha"), http.StatusCreated, "")
		want(t, e.send(b, "lead", "reviewer", "for beta"), http.StatusCreated, "")
		// Events arrive in order, so the alpha letter would come first.
		ev := s.nextOf("message")
		if ev.data.Team != "beta" || ev.letter(t).Body != "for beta" {
			t.Fatalf("event = %+v, want beta's letter", ev.data)
		}
	})

	t.Run("OK/member sees its own team and its own letters", func(t *testing.T) {
		s := e.openStream(t, "", b.tokens["reader"])
		want(t, e.send(a, "lead", "reader", "alpha's reader"), http.StatusCreated, "")
		want(t, e.send(b, "lead", "reviewer", "not reader's"), http.StatusCreated, "")
		want(t, e.open(b, "reviewer", "plan", "lead", "a plan"), http.StatusCreated, "")
		want(t, e.send(b, "lead", "reader", "reader's"), http.StatusCreated, "")
		sawPlan := false
		for {
			ev := s.next()
			if ev.data.Team != "beta" {
				t.Fatalf("event of another team: %+v", ev.data)
			}
			if ev.typ == "request" {
				sawPlan = true // requests are team state every member reads
			}
			if ev.typ != "message" {
				continue
			}
			if m := ev.letter(t); m.Sender != "reader" && m.Recipient != "reader" {
				t.Fatalf("reader saw another member's letter: %+v", m)
			} else if m.Body == "reader's" {
				break
			}
		}
		if !sawPlan {
			t.Error("the request event was not delivered")
		}
	})

	t.Run("OK/member with its own team filter", func(t *testing.T) {
		s := e.openStream(t, "?team=alpha", a.tokens["lead"])
		want(t, e.send(a, "reviewer", "lead", "to lead"), http.StatusCreated, "")
		if ev := s.nextOf("message"); ev.letter(t).Body != "to lead" {
			t.Fatalf("event = %+v", ev.data)
		}
	})

	tests := []struct {
		name, query, token string
		status             int
		code               string
	}{
		{"ErrMemberAsksOtherTeam", "?team=alpha", b.tokens["lead"], http.StatusForbidden, "forbidden"},
		{"ErrUnknownTeam", "?team=nope", adminToken, http.StatusNotFound, "not_found"},
		{"ErrNoToken", "", "", http.StatusUnauthorized, "unauthorized"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			want(t, e.get("/api/v1/events"+tt.query, tt.token), tt.status, tt.code)
		})
	}
}

func TestEventStreamLimits(t *testing.T) {
	e := newEnv(t)
	a := e.newTeam("alpha", nil)

	t.Run("ErrNinthStreamOfOneToken", func(t *testing.T) {
		var mine []*sse
		for range httpapi.DefaultStreamsPerToken {
			mine = append(mine, e.openStream(t, "", a.tokens["reader"]))
		}
		_, r := e.tryStream(t, "", a.tokens["reader"])
		want(t, r, http.StatusTooManyRequests, "too_many_streams")
		// Another token is not held back by reader's streams.
		e.openStream(t, "", a.tokens["lead"])
		e.waitStreamClients(t, httpapi.DefaultStreamsPerToken+1)

		// Closing one of reader's streams frees its place.
		mine[0].close()
		e.waitStreamClients(t, httpapi.DefaultStreamsPerToken)
		e.openStream(t, "", a.tokens["reader"])
	})
	e.waitStreamClients(t, 0)

	t.Run("ErrNinthStreamOfTheAdmin", func(t *testing.T) {
		for range httpapi.DefaultStreamsPerToken {
			e.openStream(t, "", adminToken)
		}
		_, r := e.tryStream(t, "?team=alpha", adminToken)
		want(t, r, http.StatusTooManyRequests, "too_many_streams")
	})
}

func TestEventStreamGlobalLimit(t *testing.T) {
	const total = 3
	e := newEnv(t, func(o *httpapi.Options) { o.MaxStreams = total })
	a := e.newTeam("alpha", nil)
	e.openStream(t, "", adminToken)
	e.openStream(t, "", a.tokens["lead"])
	last := e.openStream(t, "", a.tokens["reader"])
	_, r := e.tryStream(t, "", a.tokens["reviewer"])
	want(t, r, http.StatusTooManyRequests, "too_many_streams")

	last.close()
	e.waitStreamClients(t, total-1)
	e.openStream(t, "", a.tokens["reviewer"])
}

type turnData struct{ Member, Status, Text string }

// nextTurnEnd skips a stream's turn events of running turns (their steps)
// up to the next turn's end.
func nextTurnEnd(t *testing.T, s *sse) turnData {
	t.Helper()
	for {
		var d turnData
		ev := s.nextOf("turn")
		if err := json.Unmarshal(ev.data.Data, &d); err != nil {
			t.Fatalf("turn event data %s: %v", ev.data.Data, err)
		}
		if d.Status != "running" {
			return d
		}
	}
}

// TestMemberStreamCarriesOwnTurnsOnly: a turn's final text belongs to the
// member that took it, so a teammate's stream must not carry it.
func TestMemberStreamCarriesOwnTurnsOnly(t *testing.T) {
	e := newEnv(t)
	a := e.newTeam("alpha", nil)
	s := e.openStream(t, "", a.tokens["reader"])
	admin := e.openStream(t, "", adminToken)

	want(t, e.turn(a, "lead", "plan", textStep("lead's private conclusion")), http.StatusOK, "")
	want(t, e.turn(a, "reader", "read", textStep("reader's own conclusion")), http.StatusOK, "")

	// The admin sees both turns, in order (each as it runs and as it ends).
	for _, member := range []string{"lead", "reader"} {
		d := nextTurnEnd(t, admin)
		if d.Member != member {
			t.Fatalf("admin's turn event is %s's, want %s's", d.Member, member)
		}
	}
	// Events arrive in order, so lead's turn would come before reader's.
	var d turnData
	ev := s.nextOf("turn")
	if err := json.Unmarshal(ev.data.Data, &d); err != nil {
		t.Fatalf("turn event data %s: %v", ev.data.Data, err)
	}
	if d.Member != "reader" {
		t.Fatalf("reader's stream carried a turn event of %s, want only reader's own", d.Member)
	}
	d = nextTurnEnd(t, s)
	if d.Member != "reader" || d.Text != "reader's own conclusion" {
		t.Fatalf("reader's stream carried the turn %+v, want only reader's own", d)
	}
}
