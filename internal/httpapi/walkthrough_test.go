package httpapi_test

import (
	"net/http"
	"testing"

	"mailroom/internal/httpapi"
)

// TestWalkthrough is the README's curl session, step by step: the admin
// creates a team, the lead mails the reader, the reader reads its inbox and
// asks lead to approve a plan, lead approves, the reader consumes its inbox
// and the request shows approved.
func TestWalkthrough(t *testing.T) {
	e := newEnv(t)

	// curl -X POST "$BASE/teams" -H "Authorization: Bearer $ADMIN"
	//   -d '{"name": "demo", "members": [{"name": "reader", "role": "reads the source"}]}'
	r := e.post("/api/v1/teams", adminToken, map[string]any{
		"name":    "demo",
		"members": []map[string]string{{"name": "reader", "role": "reads the source"}},
	})
	want(t, r, http.StatusCreated, "")
	tokens := map[string]string{}
	for _, m := range decode[httpapi.CreatedTeam](t, r).Members {
		tokens[m.Name] = m.Token
	}
	lead, reader := tokens["lead"], tokens["reader"]

	// curl -X POST "$BASE/teams/demo/messages" -H "Authorization: Bearer $LEAD"
	//   -d '{"to": "reader", "body": "Please read main.go and report the counter."}'
	r = e.post("/api/v1/teams/demo/messages", lead, map[string]string{"to": "reader", "body": "Please read main.go and report the counter."})
	want(t, r, http.StatusCreated, "")
	if got := decode[httpapi.SendResult](t, r); got.ID != "reader-1" || got.Status != "queued" {
		t.Fatalf("send = %+v", got)
	}

	// curl "$BASE/teams/demo/members/reader/inbox" -H "Authorization: Bearer $READER"
	r = e.get("/api/v1/teams/demo/members/reader/inbox", reader)
	want(t, r, http.StatusOK, "")
	if got := decode[httpapi.Inbox](t, r).Messages; len(got) != 1 || got[0].Sender != "lead" || got[0].Body != "Please read main.go and report the counter." {
		t.Fatalf("inbox = %+v", got)
	}

	// curl -X POST "$BASE/teams/demo/requests" -H "Authorization: Bearer $READER"
	//   -d '{"kind": "plan", "target": "lead", "payload": "Run the program once and compare its output with 42."}'
	r = e.post("/api/v1/teams/demo/requests", reader, map[string]string{"kind": "plan", "target": "lead", "payload": "Run the program once and compare its output with 42."})
	want(t, r, http.StatusCreated, "")
	if got := decode[httpapi.OpenResult](t, r); got.RequestID != "req-1" || got.Status != "pending" {
		t.Fatalf("open = %+v", got)
	}

	// curl -X POST "$BASE/teams/demo/requests/$REQ/reply" -H "Authorization: Bearer $LEAD"
	//   -d '{"approve": true, "feedback": "Go ahead, run it once."}'
	r = e.post("/api/v1/teams/demo/requests/req-1/reply", lead, map[string]any{"approve": true, "feedback": "Go ahead, run it once."})
	want(t, r, http.StatusOK, "")
	if got := decode[httpapi.ReplyResult](t, r); got.RequestID != "req-1" || got.Status != "queued" || got.Receipt == nil || *got.Receipt != "reader-2" {
		t.Fatalf("reply = %+v", got)
	}

	// The reply is sent but not yet matched: the request still waits.
	r = e.get("/api/v1/teams/demo/requests/req-1", reader)
	if got := decode[httpapi.Request](t, r); got.Status != "pending" || got.Reply == nil || !got.Reply.Approve {
		t.Fatalf("before consume = %+v", got)
	}

	// curl -X POST "$BASE/teams/demo/members/reader/inbox/consume" -H "Authorization: Bearer $READER"
	r = e.post("/api/v1/teams/demo/members/reader/inbox/consume", reader, nil)
	want(t, r, http.StatusOK, "")
	results := decode[httpapi.ConsumeResult](t, r).Results
	if len(results) != 2 || results[0].Status != "ignored" || results[1].Status != "approved" || *results[1].RequestID != "req-1" {
		t.Fatalf("consume = %+v, want the letter ignored and the reply approved", results)
	}

	// curl "$BASE/teams/demo/requests/$REQ" -H "Authorization: Bearer $READER"
	r = e.get("/api/v1/teams/demo/requests/req-1", reader)
	want(t, r, http.StatusOK, "")
	if got := decode[httpapi.Request](t, r); got.Status != "approved" || got.Reply == nil || got.Reply.Feedback != "Go ahead, run it once." {
		t.Fatalf("request = %+v, want approved with the reply", got)
	}
}
