package httpapi_test

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"mailroom/internal/httpapi"
)

// sendMail sends body from → to as a reply to inReplyTo, asking for an ack
// when ack is set.
func (e *env) sendMail(tm team, from, to, body, inReplyTo string, ack bool) result {
	e.t.Helper()
	in := map[string]any{"to": to, "body": body}
	if inReplyTo != "" {
		in["in_reply_to"] = inReplyTo
	}
	if ack {
		in["ack_required"] = true
	}
	return e.post("/api/v1/teams/"+tm.name+"/messages", tm.tokens[from], in)
}

// TestThreadRoutes: replies carry in_reply_to and thread_id, the thread
// route answers a thread in sending order with what the caller may see,
// and bad replies are refused with nothing stored, on both stores and
// after a restart.
func TestThreadRoutes(t *testing.T) {
	e := openEnv(t, nil, 0)
	tm := e.newTeam("threads", nil)
	want(t, e.send(tm, "lead", "reader", "how far?"), http.StatusCreated, "")                             // reader-1
	want(t, e.send(tm, "reviewer", "reader", "unrelated"), http.StatusCreated, "")                        // reader-2
	want(t, e.sendMail(tm, "reader", "lead", "half way", "reader-1", false), http.StatusCreated, "")      // lead-1
	want(t, e.sendMail(tm, "lead", "reviewer", "check it", "lead-1", false), http.StatusCreated, "")      // reviewer-1
	want(t, e.sendMail(tm, "reviewer", "reader", "checked", "reviewer-1", false), http.StatusCreated, "") // reader-3

	for _, tt := range []struct {
		name, body string
		status     int
		code       string
	}{
		{"ErrNotSeen", `{"to": "reader", "body": "x", "in_reply_to": "reader-2"}`, 422, "unknown_letter"},
		{"ErrNoSuchLetter", `{"to": "reader", "body": "x", "in_reply_to": "reader-9"}`, 422, "unknown_letter"},
		{"ErrNoSuchMember", `{"to": "reader", "body": "x", "in_reply_to": "ghost-1"}`, 422, "unknown_letter"},
		{"ErrMalformed", `{"to": "reader", "body": "x", "in_reply_to": "reader-01"}`, 400, "validation_failed"},
		{"ErrNotString", `{"to": "reader", "body": "x", "in_reply_to": 1}`, 400, "validation_failed"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			r := e.do(call{method: http.MethodPost, path: "/api/v1/teams/threads/messages", token: tm.tokens["lead"], body: tt.body})
			want(t, r, tt.status, tt.code)
		})
	}
	if n := len(e.inbox(tm, "reader")); n != 3 {
		t.Fatalf("reader's inbox holds %d letters after the refusals, want 3", n)
	}

	letters := e.inbox(tm, "lead")
	if l := letters[0]; l.ThreadID != "reader-1" || l.InReplyTo == nil || *l.InReplyTo != "reader-1" || l.AckRequired != nil {
		t.Fatalf("lead-1 = %+v, want in reply to reader-1 in thread reader-1", l)
	}
	if l := e.inbox(tm, "reader")[1]; l.ThreadID != "reader-2" || l.InReplyTo != nil {
		t.Fatalf("reader-2 = %+v, want its own thread and no in_reply_to", l)
	}
	thread := func(e *env, token, id string) result {
		return e.get("/api/v1/teams/threads/threads/"+id, token)
	}
	for round, env := range []*env{e, openEnv(t, e.place, 0)} {
		for _, tt := range []struct{ who, want string }{
			{"", "reader-1,lead-1,reviewer-1,reader-3"},
			{"lead", "reader-1,lead-1,reviewer-1"},
			{"reader", "reader-1,lead-1,reader-3"},
			{"reviewer", "reviewer-1,reader-3"},
		} {
			token := adminToken
			if tt.who != "" {
				token = tm.tokens[tt.who]
			}
			r := thread(env, token, "reader-1")
			want(t, r, http.StatusOK, "")
			if got := ids(decode[httpapi.Thread](t, r).Letters); got != tt.want {
				t.Errorf("round %d: thread as %q = %s, want %s", round, tt.who, got, tt.want)
			}
		}
	}
	want(t, thread(e, tm.tokens["lead"], "reader-2"), http.StatusNotFound, "not_found")
	want(t, thread(e, tm.tokens["lead"], "lead-1"), http.StatusNotFound, "not_found")
	want(t, thread(e, adminToken, "reader-01"), http.StatusBadRequest, "validation_failed")
	other := e.newTeam("elsewhere", nil)
	want(t, thread(e, other.tokens["lead"], "reader-1"), http.StatusForbidden, "forbidden")
}

// TestPlainLetterUnchanged: over the API too, a letter sent without the
// new fields is stored as the lesson's line (the inbox as JSON lines).
func TestPlainLetterUnchanged(t *testing.T) {
	e := newEnv(t)
	tm := e.newTeam("plain", nil)
	want(t, e.send(tm, "lead", "reader", "hi"), http.StatusCreated, "")
	want(t, e.sendMail(tm, "reader", "lead", "ok", "reader-1", true), http.StatusCreated, "")
	for member, line := range map[string]string{
		"reader": `{"id": "reader-1", "sender": "lead", "recipient": "reader", "body": "hi"}` + "\n",
		"lead":   `{"id": "lead-1", "sender": "reader", "recipient": "lead", "body": "ok", "in_reply_to": "reader-1", "thread_id": "reader-1", "seq": 2, "ack_required": true}` + "\n",
	} {
		r := e.do(call{method: http.MethodGet, path: "/api/v1/teams/plain/members/" + member + "/inbox", token: adminToken, header: map[string]string{"Accept": "application/jsonl"}})
		want(t, r, http.StatusOK, "")
		if string(r.body) != line {
			t.Errorf("%s's inbox = %q, want %q", member, r.body, line)
		}
	}
}

// TestAckRoutes: the recipient acknowledges a letter that asked for it,
// once; the sender's receipts show attended, read and the ack, also
// after a restart; the ack is announced to sender and recipient.
func TestAckRoutes(t *testing.T) {
	e := openEnv(t, nil, 0)
	tm := e.newTeam("acks", nil)
	events := e.openStream(t, "?team=acks", tm.tokens["lead"])
	want(t, e.sendMail(tm, "lead", "reader", "fix the build", "", true), http.StatusCreated, "")
	want(t, e.send(tm, "lead", "reader", "fyi"), http.StatusCreated, "")
	ackPath := func(member, id string) string {
		return "/api/v1/teams/acks/members/" + member + "/inbox/" + id + "/ack"
	}
	done := map[string]string{"outcome": "done", "note": "green again"}
	for _, tt := range []struct {
		name, path, token string
		body              any
		status            int
		code              string
	}{
		{"ErrOtherMember", ackPath("reader", "reader-1"), tm.tokens["lead"], done, 403, "forbidden"},
		{"ErrAdmin", ackPath("reader", "reader-1"), adminToken, done, 403, "forbidden"},
		{"ErrNoToken", ackPath("reader", "reader-1"), "", done, 401, "unauthorized"},
		{"ErrOutcome", ackPath("reader", "reader-1"), tm.tokens["reader"], map[string]string{"outcome": "finished"}, 400, "validation_failed"},
		{"ErrNoOutcome", ackPath("reader", "reader-1"), tm.tokens["reader"], map[string]string{}, 400, "validation_failed"},
		{"ErrLongNote", ackPath("reader", "reader-1"), tm.tokens["reader"], map[string]string{"outcome": "done", "note": strings.Repeat("é", 601)}, 400, "validation_failed"},
		{"ErrMalformedID", ackPath("reader", "reader-01"), tm.tokens["reader"], done, 400, "validation_failed"},
		{"ErrNoSuchLetter", ackPath("reader", "reader-9"), tm.tokens["reader"], done, 404, "not_found"},
		{"ErrNotInThisInbox", ackPath("reader", "lead-1"), tm.tokens["reader"], done, 404, "not_found"},
		{"ErrNotRequired", ackPath("reader", "reader-2"), tm.tokens["reader"], done, 409, "ack_not_required"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			want(t, e.post(tt.path, tt.token, tt.body), tt.status, tt.code)
		})
	}
	receipts := func(e *env) []httpapi.Receipt {
		r := e.get("/api/v1/teams/acks/receipts?ids=reader-1,reader-2", tm.tokens["lead"])
		want(t, r, http.StatusOK, "")
		return decode[httpapi.Receipts](t, r).Receipts
	}
	if rs := receipts(e); rs[0].Ack != nil || rs[0].Read || rs[0].Attended {
		t.Fatalf("receipt before the ack = %+v, want no ack, unread, unattended", rs[0])
	}
	r := e.post(ackPath("reader", "reader-1"), tm.tokens["reader"], done)
	want(t, r, http.StatusOK, "")
	if got := decode[httpapi.Receipt](t, r); got.Ack == nil || got.Ack.Outcome != "done" || got.Ack.Note != "green again" || got.ID != "reader-1" {
		t.Fatalf("ack answer = %s, want reader-1's receipt with done", r.body)
	}
	want(t, e.post(ackPath("reader", "reader-1"), tm.tokens["reader"], map[string]string{"outcome": "blocked"}), http.StatusConflict, "already_acked")

	ev := events.nextOf("ack")
	var data struct{ ID, From, To, Outcome, Note string }
	if err := json.Unmarshal(ev.data.Data, &data); err != nil || data.ID != "reader-1" || data.From != "reader" || data.To != "lead" || data.Outcome != "done" {
		t.Fatalf("ack event = %s (%v), want reader-1 from reader to lead, done", ev.data.Data, err)
	}
	want(t, e.post(readPath(tm, "reader"), tm.tokens["reader"], map[string]string{"through": "reader-1"}), http.StatusOK, "")
	for round, env := range []*env{e, openEnv(t, e.place, 0)} {
		rs := receipts(env)
		if rs[0].Ack == nil || rs[0].Ack.Outcome != "done" || rs[0].Ack.At.IsZero() || !rs[0].Read || rs[1].Ack != nil || rs[1].Read {
			t.Fatalf("round %d: receipts = %+v, want reader-1 read and done, reader-2 unread without ack", round, rs)
		}
	}
	if l := e.inbox(tm, "reader")[0]; l.AckRequired == nil || !*l.AckRequired {
		t.Fatalf("reader-1 = %+v, want ack_required", l)
	}
}

// TestLimitsBelowUsage: every limit may be raised after creation; one of
// what the team holds may not be lowered below it; inbox_full names the
// limit and the PATCH that raises it.
func TestLimitsBelowUsage(t *testing.T) {
	e := openEnv(t, nil, 0)
	tm := e.newTeam("limits", map[string]int{"inbox_messages": 2})
	want(t, e.send(tm, "lead", "reader", "one"), http.StatusCreated, "")
	want(t, e.send(tm, "lead", "reader", "two"), http.StatusCreated, "")
	r := e.send(tm, "lead", "reader", "three")
	want(t, r, http.StatusConflict, "inbox_full")
	if p := decode[httpapi.Problem](t, r); !strings.Contains(p.Detail, "inbox_messages") || !strings.Contains(p.Detail, "PATCH") {
		t.Fatalf("inbox_full detail = %q, want the limit and the PATCH", p.Detail)
	}
	path := "/api/v1/teams/limits"
	r = e.patch(path, adminToken, `{"limits": {"inbox_messages": 20, "inbox_bytes": 64000, "body_chars": 1000, "payload_chars": 300, "feedback_chars": 200, "history_entries": 120}}`)
	want(t, r, http.StatusOK, "")
	if l := decode[httpapi.Team](t, r).Limits; l.InboxMessages != 20 || l.InboxBytes != 64000 || l.BodyChars != 1000 || l.PayloadChars != 300 || l.FeedbackChars != 200 || l.HistoryEntries != 120 {
		t.Fatalf("limits = %+v, want every one raised", l)
	}
	want(t, e.send(tm, "lead", "reader", "three, and "+strings.Repeat("long ", 150)), http.StatusCreated, "")
	for _, tt := range []struct{ body, limit string }{
		{`{"limits": {"inbox_messages": 2}}`, "inbox_messages"},
		{`{"limits": {"inbox_bytes": 200}}`, "inbox_bytes"},
		{`{"limits": {"body_chars": 600}}`, "body_chars"},
	} {
		r := e.patch(path, adminToken, tt.body)
		want(t, r, http.StatusConflict, "limit_below_usage")
		if p := decode[httpapi.Problem](t, r); !strings.Contains(p.Detail, tt.limit) {
			t.Errorf("%s: detail %q does not name %s", tt.body, p.Detail, tt.limit)
		}
	}
	want(t, e.patch(path, adminToken, `{"limits": {"inbox_messages": 3}}`), http.StatusOK, "")
	e = openEnv(t, e.place, 0)
	r = e.get(path, adminToken)
	want(t, r, http.StatusOK, "")
	if got := decode[httpapi.Team](t, r); got.Damaged || got.Limits.InboxMessages != 3 || got.Limits.BodyChars != 1000 {
		t.Fatalf("after a restart: damaged %v, limits %+v; want inbox_messages 3, body_chars 1000", got.Damaged, got.Limits)
	}
	if n := len(e.inbox(tm, "reader")); n != 3 {
		t.Fatalf("after a restart: %d letters, want 3", n)
	}
}
