package httpapi_test

import (
	"bufio"
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"testing"
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
	s := &sse{t: t, resp: resp, lines: bufio.NewReader(resp.Body), cancel: cancel}
	t.Cleanup(s.close)
	if resp.StatusCode != http.StatusOK || resp.Header.Get("Content-Type") != "text/event-stream" {
		t.Fatalf("GET events = %d %q", resp.StatusCode, resp.Header.Get("Content-Type"))
	}
	if line := s.line(); !strings.HasPrefix(line, ":") {
		t.Fatalf("first line = %q, want the opening comment", line)
	}
	return s
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
