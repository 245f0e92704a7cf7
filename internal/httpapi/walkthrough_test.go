package httpapi_test

import (
	"net/http"
	"testing"

	"mailroom/internal/httpapi"
)

// TestWalkthrough is the README's curl session, step by step: the admin
// creates a team, a teammate mails the reader, the reader reads its inbox,
// the reader asks lead to approve a plan, lead approves, the reader consumes
// the reply and the request shows approved.
func TestWalkthrough(t *testing.T) {
	e := newEnv(t)

	// curl -X POST /api/v1/teams -H "Authorization: Bearer $ADMIN"
	//   -d '{"name":"demo","members":[{"name":"reader","role":"reads the source"},{"name":"reviewer","role":"reads the expected value"}]}'
	r := e.post("/api/v1/teams", adminToken, map[string]any{
		"name": "demo",
		"members": []map[string]string{
			{"name": "reader", "role": "reads the source"},
			{"name": "reviewer", "role": "reads the expected value"},
		},
	})
	want(t, r, http.StatusCreated, "")
	tokens := map[string]string{}
	for _, m := range decode[httpapi.CreatedTeam](t, r).Members {
		tokens[m.Name] = m.Token
	}
	lead, reader, reviewer := tokens["lead"], tokens["reader"], tokens["reviewer"]

	// curl -X POST /api/v1/teams/demo/messages -H "Authorization: Bearer $REVIEWER"
	//   -d '{"to":"reader","body":"expected.txt says 42"}'
	r = e.post("/api/v1/teams/demo/messages", reviewer, map[string]string{"to": "reader", "body": "expected.txt says 42"})
	want(t, r, http.StatusCreated, "")
	if got := decode[httpapi.SendResult](t, r); got.ID != "reader-1" || got.Status != "queued" {
		t.Fatalf("send = %+v", got)
	}

	// curl /api/v1/teams/demo/members/reader/inbox -H "Authorization: Bearer $READER"
	r = e.get("/api/v1/teams/demo/members/reader/inbox", reader)
	want(t, r, http.StatusOK, "")
	if got := decode[httpapi.Inbox](t, r).Messages; len(got) != 1 || got[0].Sender != "reviewer" || got[0].Body != "expected.txt says 42" {
		t.Fatalf("inbox = %+v", got)
	}

	// curl -X POST /api/v1/teams/demo/requests -H "Authorization: Bearer $READER"
	//   -d '{"kind":"plan","target":"lead","payload":"run main.py once and compare with 42"}'
	r = e.post("/api/v1/teams/demo/requests", reader, map[string]string{"kind": "plan", "target": "lead", "payload": "run main.py once and compare with 42"})
	want(t, r, http.StatusCreated, "")
	if got := decode[httpapi.OpenResult](t, r); got.RequestID != "req-1" || got.Status != "pending" {
		t.Fatalf("open = %+v", got)
	}

	// curl -X POST /api/v1/teams/demo/requests/req-1/reply -H "Authorization: Bearer $LEAD"
	//   -d '{"approve":true,"feedback":"go ahead"}'
	r = e.post("/api/v1/teams/demo/requests/req-1/reply", lead, map[string]any{"approve": true, "feedback": "go ahead"})
	want(t, r, http.StatusOK, "")
	if got := decode[httpapi.ReplyResult](t, r); got.Status != "queued" || got.Receipt == nil || *got.Receipt != "reader-2" {
		t.Fatalf("reply = %+v", got)
	}

	// The reply is sent but not yet matched: the request still waits.
	r = e.get("/api/v1/teams/demo/requests/req-1", reader)
	if got := decode[httpapi.Request](t, r); got.Status != "pending" || got.Reply == nil || !got.Reply.Approve {
		t.Fatalf("before consume = %+v", got)
	}

	// curl -X POST /api/v1/teams/demo/members/reader/inbox/consume -H "Authorization: Bearer $READER"
	r = e.post("/api/v1/teams/demo/members/reader/inbox/consume", reader, nil)
	want(t, r, http.StatusOK, "")
	results := decode[httpapi.ConsumeResult](t, r).Results
	if len(results) != 2 || results[1].Status != "approved" || *results[1].RequestID != "req-1" {
		t.Fatalf("consume = %+v", results)
	}

	// curl /api/v1/teams/demo/requests/req-1 -H "Authorization: Bearer $ADMIN"
	r = e.get("/api/v1/teams/demo/requests/req-1", adminToken)
	want(t, r, http.StatusOK, "")
	if got := decode[httpapi.Request](t, r); got.Status != "approved" {
		t.Fatalf("request = %+v, want approved", got)
	}
}
