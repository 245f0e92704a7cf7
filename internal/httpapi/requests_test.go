package httpapi_test

import (
	"context"
	"net/http"
	"strings"
	"testing"

	"mailroom/internal/core"
	"mailroom/internal/httpapi"
)

func (e *env) open(tm team, from, kind, target, payload string) result {
	e.t.Helper()
	return e.post("/api/v1/teams/"+tm.name+"/requests", tm.tokens[from], map[string]string{"kind": kind, "target": target, "payload": payload})
}

func (e *env) reply(tm team, actor, id string, approve bool, feedback string) result {
	e.t.Helper()
	return e.post("/api/v1/teams/"+tm.name+"/requests/"+id+"/reply", tm.tokens[actor], map[string]any{"approve": approve, "feedback": feedback})
}

func (e *env) consume(tm team, member string) []httpapi.MatchResult {
	e.t.Helper()
	r := e.post("/api/v1/teams/"+tm.name+"/members/"+member+"/inbox/consume", tm.tokens[member], nil)
	want(e.t, r, http.StatusOK, "")
	return decode[httpapi.ConsumeResult](e.t, r).Results
}

func TestOpenRequest(t *testing.T) {
	e := newEnv(t)
	a := e.newTeam("alpha", nil)
	b := e.newTeam("beta", nil)

	t.Run("OK", func(t *testing.T) {
		r := e.open(a, "reader", "plan", "lead", "  run main.py once ")
		want(t, r, http.StatusCreated, "")
		if got := decode[httpapi.OpenResult](t, r); got.RequestID != "req-1" || got.Status != "pending" {
			t.Fatalf("result = %+v, want req-1 pending", got)
		}
		msgs := e.inbox(a, "lead")
		if len(msgs) != 1 || msgs[0].Sender != "reader" || !strings.HasPrefix(msgs[0].Body, "[team-protocol] ") {
			t.Fatalf("lead's inbox = %+v, want one protocol letter from reader", msgs)
		}
	})

	path := "/api/v1/teams/alpha/requests"
	tests := []struct {
		name   string
		token  string
		body   any
		status int
		code   string
	}{
		{"ErrRequestPending", a.tokens["reader"], map[string]string{"kind": "plan", "target": "lead", "payload": "again"}, http.StatusConflict, "request_pending"},
		{"ErrWrongDirection", a.tokens["reader"], map[string]string{"kind": "plan", "target": "reviewer", "payload": "p"}, http.StatusUnprocessableEntity, "wrong_direction"},
		{"ErrWrongDirectionShutdown", a.tokens["reader"], map[string]string{"kind": "shutdown", "target": "lead", "payload": "p"}, http.StatusUnprocessableEntity, "wrong_direction"},
		{"ErrUnknownTarget", a.tokens["reader"], map[string]string{"kind": "plan", "target": "boss", "payload": "p"}, http.StatusUnprocessableEntity, "unknown_member"},
		{"ErrBlankPayload", a.tokens["reviewer"], map[string]string{"kind": "plan", "target": "lead", "payload": "   "}, http.StatusBadRequest, "body_length"},
		{"ErrLongPayload", a.tokens["reviewer"], map[string]string{"kind": "plan", "target": "lead", "payload": strings.Repeat("p", 181)}, http.StatusBadRequest, "body_length"},
		{"ErrBadKind", a.tokens["reader"], map[string]string{"kind": "merge", "target": "lead", "payload": "p"}, http.StatusBadRequest, "validation_failed"},
		{"ErrSpoofedSender", a.tokens["reader"], map[string]string{"kind": "plan", "target": "lead", "payload": "p", "sender": "reviewer"}, http.StatusBadRequest, "validation_failed"},
		{"ErrMissingPayload", a.tokens["reader"], map[string]string{"kind": "plan", "target": "lead"}, http.StatusBadRequest, "validation_failed"},
		{"ErrAdminIsNotAMember", adminToken, map[string]string{"kind": "plan", "target": "lead", "payload": "p"}, http.StatusForbidden, "forbidden"},
		{"ErrOtherTeam", b.tokens["reader"], map[string]string{"kind": "plan", "target": "lead", "payload": "p"}, http.StatusForbidden, "forbidden"},
		{"ErrNoToken", "", map[string]string{"kind": "plan", "target": "lead", "payload": "p"}, http.StatusUnauthorized, "unauthorized"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			want(t, e.post(path, tt.token, tt.body), tt.status, tt.code)
		})
	}

	t.Run("ErrRequestLimit", func(t *testing.T) {
		one := e.newTeam("one", map[string]int{"requests": 1})
		want(t, e.open(one, "reader", "plan", "lead", "first"), http.StatusCreated, "")
		// The quota is checked before the pending repeat (docs/spec.md §13.4).
		want(t, e.open(one, "reader", "plan", "lead", "first"), http.StatusConflict, "request_limit")
		want(t, e.open(one, "lead", "shutdown", "reviewer", "stop"), http.StatusConflict, "request_limit")
	})

	t.Run("ErrMemberClosed", func(t *testing.T) {
		c := e.newTeam("closing", nil)
		want(t, e.open(c, "lead", "shutdown", "reader", "you are done"), http.StatusCreated, "")
		want(t, e.reply(c, "reader", "req-1", true, ""), http.StatusOK, "")
		// A closed member still sends mail, but opens no new request.
		want(t, e.send(c, "reader", "lead", "bye"), http.StatusCreated, "")
		want(t, e.open(c, "reader", "plan", "lead", "one more"), http.StatusConflict, "member_closed")
	})

	t.Run("ErrInboxFull", func(t *testing.T) {
		full := e.newTeam("full", map[string]int{"inbox_messages": 1})
		want(t, e.send(full, "reviewer", "lead", "fills the inbox"), http.StatusCreated, "")
		want(t, e.open(full, "reader", "plan", "lead", "p"), http.StatusConflict, "inbox_full")
		r := e.get("/api/v1/teams/full/requests", adminToken)
		if got := decode[httpapi.RequestList](t, r).Requests; len(got) != 0 {
			t.Fatalf("requests = %+v, want none registered", got)
		}
	})
}

func TestListAndGetRequests(t *testing.T) {
	e := newEnv(t)
	a := e.newTeam("alpha", nil)
	b := e.newTeam("beta", nil)
	want(t, e.open(a, "reader", "plan", "lead", "plan one"), http.StatusCreated, "")
	want(t, e.open(a, "lead", "shutdown", "reviewer", "stop"), http.StatusCreated, "")

	t.Run("OK/list in id order", func(t *testing.T) {
		for _, tok := range []string{adminToken, a.tokens["reviewer"]} {
			r := e.get("/api/v1/teams/alpha/requests", tok)
			want(t, r, http.StatusOK, "")
			got := decode[httpapi.RequestList](t, r).Requests
			if len(got) != 2 || got[0].RequestID != "req-1" || got[1].RequestID != "req-2" {
				t.Fatalf("requests = %+v", got)
			}
			if got[0].Kind != "plan" || got[0].Sender != "reader" || got[0].Target != "lead" || got[0].Payload != "plan one" ||
				got[0].Status != "pending" || got[0].Reply != nil || got[0].Receipt != "lead-1" {
				t.Errorf("req-1 = %+v", got[0])
			}
		}
	})
	t.Run("OK/empty list is an array", func(t *testing.T) {
		r := e.get("/api/v1/teams/beta/requests", adminToken)
		want(t, r, http.StatusOK, "")
		if got := strings.TrimSpace(string(r.body)); got != `{"requests":[]}` {
			t.Errorf("body = %s", got)
		}
	})
	t.Run("OK/one", func(t *testing.T) {
		r := e.get("/api/v1/teams/alpha/requests/req-2", a.tokens["reader"])
		want(t, r, http.StatusOK, "")
		if got := decode[httpapi.Request](t, r); got.Kind != "shutdown" || got.Target != "reviewer" {
			t.Fatalf("req-2 = %+v", got)
		}
	})

	tests := []struct {
		name, path, token string
		status            int
		code              string
	}{
		{"ErrListOtherTeam", "/api/v1/teams/alpha/requests", b.tokens["lead"], http.StatusForbidden, "forbidden"},
		{"ErrGetOtherTeam", "/api/v1/teams/alpha/requests/req-1", b.tokens["lead"], http.StatusForbidden, "forbidden"},
		{"ErrListUnknownTeam", "/api/v1/teams/nope/requests", adminToken, http.StatusNotFound, "not_found"},
		{"ErrGetUnknownRequest", "/api/v1/teams/alpha/requests/req-9", adminToken, http.StatusNotFound, "not_found"},
		{"ErrBadRequestID", "/api/v1/teams/alpha/requests/req-0", adminToken, http.StatusBadRequest, "validation_failed"},
		{"ErrNoToken", "/api/v1/teams/alpha/requests", "", http.StatusUnauthorized, "unauthorized"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			want(t, e.get(tt.path, tt.token), tt.status, tt.code)
		})
	}
}

func TestReplyRequest(t *testing.T) {
	e := newEnv(t)
	a := e.newTeam("alpha", nil)
	b := e.newTeam("beta", nil)
	want(t, e.open(a, "reader", "plan", "lead", "plan one"), http.StatusCreated, "")

	t.Run("OK/queued", func(t *testing.T) {
		r := e.reply(a, "lead", "req-1", true, "go ahead")
		want(t, r, http.StatusOK, "")
		got := decode[httpapi.ReplyResult](t, r)
		if got.RequestID != "req-1" || got.Status != "queued" || got.Receipt == nil || *got.Receipt != "reader-1" {
			t.Fatalf("result = %+v, want queued with receipt reader-1", got)
		}
	})
	t.Run("OK/already sent", func(t *testing.T) {
		r := e.reply(a, "lead", "req-1", true, "go ahead")
		want(t, r, http.StatusOK, "")
		if got := decode[httpapi.ReplyResult](t, r); got.Status != "already_sent" || got.Receipt != nil {
			t.Fatalf("result = %+v, want already_sent without receipt", got)
		}
		if n := len(e.inbox(a, "reader")); n != 1 {
			t.Fatalf("reader has %d letters, want 1", n)
		}
	})
	t.Run("OK/feedback defaults to empty", func(t *testing.T) {
		c := e.newTeam("quiet", nil)
		want(t, e.open(c, "reader", "plan", "lead", "p"), http.StatusCreated, "")
		r := e.post("/api/v1/teams/quiet/requests/req-1/reply", c.tokens["lead"], map[string]bool{"approve": false})
		want(t, r, http.StatusOK, "")
		got := decode[httpapi.Request](t, e.get("/api/v1/teams/quiet/requests/req-1", adminToken))
		if got.Reply == nil || got.Reply.Feedback != "" || got.Reply.Approve || got.Reply.Type != "plan_response" {
			t.Fatalf("reply = %+v, want a rejection with empty feedback", got.Reply)
		}
	})

	replyPath := "/api/v1/teams/alpha/requests/req-1/reply"
	tests := []struct {
		name   string
		path   string
		token  string
		body   any
		status int
		code   string
	}{
		{"ErrReplyConflict", replyPath, a.tokens["lead"], map[string]any{"approve": false, "feedback": "no"}, http.StatusConflict, "reply_conflict"},
		{"ErrNotTheTarget", replyPath, a.tokens["reviewer"], map[string]any{"approve": true}, http.StatusForbidden, "forbidden"},
		{"ErrUnknownRequest", "/api/v1/teams/alpha/requests/req-7/reply", a.tokens["lead"], map[string]any{"approve": true}, http.StatusNotFound, "not_found"},
		// The feedback bound is checked before the request is looked up.
		{"ErrLongFeedback", "/api/v1/teams/alpha/requests/req-7/reply", a.tokens["lead"], map[string]any{"approve": true, "feedback": strings.Repeat("f", 121)}, http.StatusBadRequest, "body_length"},
		{"ErrApproveString", replyPath, a.tokens["lead"], map[string]any{"approve": "true"}, http.StatusBadRequest, "validation_failed"},
		{"ErrApproveNumber", replyPath, a.tokens["lead"], map[string]any{"approve": 1}, http.StatusBadRequest, "validation_failed"},
		{"ErrMissingApprove", replyPath, a.tokens["lead"], map[string]any{"feedback": "x"}, http.StatusBadRequest, "validation_failed"},
		{"ErrSpoofedActor", replyPath, a.tokens["reviewer"], map[string]any{"approve": true, "actor": "lead"}, http.StatusBadRequest, "validation_failed"},
		{"ErrAdminIsNotAMember", replyPath, adminToken, map[string]any{"approve": true}, http.StatusForbidden, "forbidden"},
		{"ErrOtherTeam", replyPath, b.tokens["lead"], map[string]any{"approve": true}, http.StatusForbidden, "forbidden"},
		{"ErrNoToken", replyPath, "", map[string]any{"approve": true}, http.StatusUnauthorized, "unauthorized"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			want(t, e.post(tt.path, tt.token, tt.body), tt.status, tt.code)
		})
	}

	t.Run("OK/deferred while the member is in a turn", func(t *testing.T) {
		d := e.newTeam("busy", nil)
		want(t, e.open(d, "lead", "shutdown", "reader", "stop"), http.StatusCreated, "")
		started, release := make(chan struct{}), make(chan struct{})
		done := make(chan error, 1)
		go func() {
			_, err := e.svc.RunTurn(context.Background(), "busy", "reader", func(_ context.Context, h []core.Entry) (core.TurnOutcome, error) {
				close(started)
				<-release
				return core.TurnOutcome{Messages: append(h, core.UserText("hi"), core.Entry{Role: "assistant", Text: "done"}), Status: core.TurnAnswered, Text: "done"}, nil
			})
			done <- err
		}()
		<-started
		r := e.reply(d, "reader", "req-1", true, "")
		close(release)
		if err := <-done; err != nil {
			t.Fatalf("turn: %v", err)
		}
		want(t, r, http.StatusOK, "")
		if got := decode[httpapi.ReplyResult](t, r); got.Status != "deferred" {
			t.Fatalf("result = %+v, want deferred", got)
		}
		// Once the turn is over the same reply goes through.
		want(t, e.reply(d, "reader", "req-1", true, ""), http.StatusOK, "")
	})
}

func TestConsumeInbox(t *testing.T) {
	e := newEnv(t)
	a := e.newTeam("alpha", nil)
	b := e.newTeam("beta", nil)
	want(t, e.send(a, "reviewer", "reader", "expected is 42"), http.StatusCreated, "")
	want(t, e.open(a, "reader", "plan", "lead", "run it"), http.StatusCreated, "")
	want(t, e.reply(a, "lead", "req-1", true, "ok"), http.StatusOK, "")

	t.Run("OK", func(t *testing.T) {
		got := e.consume(a, "reader")
		if len(got) != 2 {
			t.Fatalf("results = %+v, want one per letter", got)
		}
		if got[0].MessageID != "reader-1" || got[0].Status != "ignored" || got[0].Reason == nil || *got[0].Reason != "ordinary_message" || got[0].RequestID != nil {
			t.Errorf("letter 1 = %+v, want ignored ordinary_message", got[0])
		}
		if got[1].MessageID != "reader-2" || got[1].Status != "approved" || got[1].RequestID == nil || *got[1].RequestID != "req-1" || got[1].Reason != nil {
			t.Errorf("letter 2 = %+v, want approved req-1", got[1])
		}
	})
	t.Run("OK/again is duplicate", func(t *testing.T) {
		got := e.consume(a, "reader")
		if len(got) != 2 || got[1].Status != "duplicate" {
			t.Fatalf("results = %+v, want duplicate", got)
		}
	})
	t.Run("OK/empty inbox is an array", func(t *testing.T) {
		r := e.post("/api/v1/teams/alpha/members/reviewer/inbox/consume", a.tokens["reviewer"], nil)
		want(t, r, http.StatusOK, "")
		if got := strings.TrimSpace(string(r.body)); got != `{"results":[]}` {
			t.Errorf("body = %s", got)
		}
	})

	path := "/api/v1/teams/alpha/members/reader/inbox/consume"
	tests := []struct {
		name, path, token string
		status            int
		code              string
	}{
		{"ErrAnotherMember", path, a.tokens["lead"], http.StatusForbidden, "forbidden"},
		{"ErrAdminIsNotAMember", path, adminToken, http.StatusForbidden, "forbidden"},
		{"ErrOtherTeam", path, b.tokens["reader"], http.StatusForbidden, "forbidden"},
		{"ErrNoToken", path, "", http.StatusUnauthorized, "unauthorized"},
		{"ErrBadName", "/api/v1/teams/alpha/members/Reader/inbox/consume", a.tokens["reader"], http.StatusBadRequest, "validation_failed"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			want(t, e.post(tt.path, tt.token, nil), tt.status, tt.code)
		})
	}
}
