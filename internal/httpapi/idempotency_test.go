package httpapi_test

import (
	"bytes"
	"net/http"
	"testing"

	"mailroom/internal/httpapi"
)

func TestIdempotencyKey(t *testing.T) {
	e := newEnv(t)
	a := e.newTeam("alpha", nil)
	key := func(k string) map[string]string { return map[string]string{"Idempotency-Key": k} }

	t.Run("send", func(t *testing.T) {
		c := call{method: http.MethodPost, path: "/api/v1/teams/alpha/messages", token: a.tokens["lead"], json: map[string]string{"to": "reader", "body": "once"}, header: key("k-send")}
		first := e.do(c)
		want(t, first, http.StatusCreated, "")
		again := e.do(c)
		want(t, again, http.StatusCreated, "")
		if !bytes.Equal(first.body, again.body) {
			t.Fatalf("retry answered %s, want the first answer %s", again.body, first.body)
		}
		if msgs := e.inbox(a, "reader"); len(msgs) != 1 {
			t.Fatalf("inbox = %+v, want one letter", msgs)
		}

		c.json = map[string]string{"to": "reader", "body": "another body"}
		want(t, e.do(c), http.StatusConflict, "idempotency_conflict")

		// Keys belong to the member that used them.
		c.token = a.tokens["reviewer"]
		want(t, e.do(c), http.StatusCreated, "")
		if msgs := e.inbox(a, "reader"); len(msgs) != 2 {
			t.Fatalf("inbox = %+v, want the reviewer's letter too", msgs)
		}
	})

	t.Run("open", func(t *testing.T) {
		c := call{method: http.MethodPost, path: "/api/v1/teams/alpha/requests", token: a.tokens["reader"], json: map[string]string{"kind": "plan", "target": "lead", "payload": "p"}, header: key("k-open")}
		first := e.do(c)
		want(t, first, http.StatusCreated, "")
		// Without the key the repeat would be request_pending.
		again := e.do(c)
		want(t, again, http.StatusCreated, "")
		if !bytes.Equal(first.body, again.body) {
			t.Fatalf("retry answered %s, want %s", again.body, first.body)
		}
		c.json = map[string]string{"kind": "plan", "target": "lead", "payload": "other"}
		want(t, e.do(c), http.StatusConflict, "idempotency_conflict")
		reqs := decode[httpapi.RequestList](t, e.get("/api/v1/teams/alpha/requests", adminToken)).Requests
		if len(reqs) != 1 {
			t.Fatalf("requests = %+v, want one", reqs)
		}
	})

	t.Run("reply", func(t *testing.T) {
		c := call{method: http.MethodPost, path: "/api/v1/teams/alpha/requests/req-1/reply", token: a.tokens["lead"], json: map[string]any{"approve": true, "feedback": "yes"}, header: key("k-reply")}
		first := e.do(c)
		want(t, first, http.StatusOK, "")
		again := e.do(c)
		want(t, again, http.StatusOK, "")
		// The replay is the first answer (queued with its receipt), not
		// the already_sent a plain repeat would get.
		if !bytes.Equal(first.body, again.body) {
			t.Fatalf("retry answered %s, want %s", again.body, first.body)
		}
		c.json = map[string]any{"approve": false, "feedback": "yes"}
		want(t, e.do(c), http.StatusConflict, "idempotency_conflict")
		if msgs := e.inbox(a, "reader"); len(msgs) != 3 {
			t.Fatalf("reader has %d letters, want 3 (two sends and one reply)", len(msgs))
		}
	})
}
