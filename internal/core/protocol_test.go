package core_test

import (
	"errors"
	"strings"
	"sync"
	"testing"

	"mailroom/internal/core"
)

const (
	planText     = "读取预期，再运行main.py。"
	planFeedback = "仅批准本次计划，权限另行判断。"
	shutdownText = "本次工作结束，请在空闲边界关闭。"
	shutdownOK   = "空闲边界确认本次关闭。"
)

// TestOpenRequest covers the open_request teaching area of docs/spec.md §9.2.
func TestOpenRequest(t *testing.T) {
	t.Run("OKPlan", func(t *testing.T) {
		f := newFixture(t, nil)
		got := f.open("reader", "lead", "plan", "  "+planText+" ")
		if got != (core.OpenResult{RequestID: "req-1", Status: "pending"}) {
			t.Fatalf("%+v", got)
		}
		want := `{"id": "lead-1", "sender": "reader", "recipient": "lead", "body": "[team-protocol] {\"payload\": \"` + planText + `\", \"request_id\": \"req-1\", \"type\": \"plan_request\"}"}` + "\n"
		if b := f.inboxBytes("lead"); b != want {
			t.Fatalf("lead inbox:\n%q\nwant\n%q", b, want)
		}
		r := f.request("req-1")
		if r.Receipt != "lead-1" || r.Reply != nil || r.Status != "pending" || r.Payload != planText || r.Kind != "plan" || r.Sender != "reader" || r.Target != "lead" {
			t.Fatalf("%+v", r)
		}
	})
	t.Run("OKShutdown", func(t *testing.T) {
		f := newFixture(t, nil)
		f.open("lead", "reader", "shutdown", shutdownText)
		if r := f.request("req-1"); r.Receipt != "reader-1" || r.Kind != "shutdown" {
			t.Fatalf("%+v", r)
		}
	})
	t.Run("OKReviewerMayPlan", func(t *testing.T) {
		f := newFixture(t, nil)
		f.open("reviewer", "lead", "plan", planText)
	})
	for _, tc := range []struct{ name, sender, target, kind string }{
		{"ErrDirectionPlanFromLead", "lead", "reader", "plan"},
		{"ErrDirectionPlanToTeammate", "reader", "reviewer", "plan"},
		{"ErrDirectionShutdownFromTeammate", "reader", "lead", "shutdown"},
		{"ErrDirectionShutdownToLead", "lead", "lead", "shutdown"},
		{"ErrDirectionUnknownKind", "reader", "lead", "vacation"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t, nil)
			_, err := f.svc.OpenRequest(core.AsMember(t.Context(), "demo", tc.sender), core.OpenInput{Team: "demo", Target: tc.target, Kind: tc.kind, Payload: planText})
			wantCode(t, err, core.CodeWrongDirection)
			if reqs, _ := f.svc.Requests(t.Context(), "demo"); len(reqs) != 0 {
				t.Fatal("state not empty")
			}
			if f.inboxBytes("reader") != "<missing>" || f.inboxBytes("lead") != "<missing>" {
				t.Fatal("a letter was written")
			}
		})
	}
	t.Run("ErrPending", func(t *testing.T) {
		f := newFixture(t, nil)
		f.open("reader", "lead", "plan", planText)
		_, err := f.svc.OpenRequest(core.AsMember(t.Context(), "demo", "reader"), core.OpenInput{Team: "demo", Target: "lead", Kind: "plan", Payload: planText})
		wantCode(t, err, core.CodeRequestPending)
		if strings.Count(f.inboxBytes("lead"), "\n") != 1 {
			t.Fatal("a second letter was written")
		}
	})
	t.Run("ErrPendingUntilMatched", func(t *testing.T) {
		// D7: a reply sent but not yet matched still blocks a repeat.
		f := newFixture(t, nil)
		f.open("reader", "lead", "plan", planText)
		f.reply("req-1", "lead", true, planFeedback)
		_, err := f.svc.OpenRequest(core.AsMember(t.Context(), "demo", "reader"), core.OpenInput{Team: "demo", Target: "lead", Kind: "plan", Payload: "again"})
		wantCode(t, err, core.CodeRequestPending)
		if _, err := f.svc.Consume(core.AsMember(t.Context(), "demo", "reader"), "demo"); err != nil {
			t.Fatal(err)
		}
		f.open("reader", "lead", "plan", "again")
	})
	t.Run("ErrLimit", func(t *testing.T) {
		f := newFixture(t, nil)
		f.open("reader", "lead", "plan", "p1")
		f.open("reviewer", "lead", "plan", "p2")
		f.open("lead", "reader", "shutdown", "s1")
		f.open("lead", "reviewer", "shutdown", "s2")
		_, err := f.svc.OpenRequest(core.AsMember(t.Context(), "demo", "reader"), core.OpenInput{Team: "demo", Target: "lead", Kind: "plan", Payload: "p5"})
		wantCode(t, err, core.CodeRequestLimit)
	})
	t.Run("ErrLimitBeforePending", func(t *testing.T) {
		limits := core.DefaultLimits()
		limits.Requests = 1
		f := newFixture(t, &limits)
		f.open("reader", "lead", "plan", "p1")
		_, err := f.svc.OpenRequest(core.AsMember(t.Context(), "demo", "reader"), core.OpenInput{Team: "demo", Target: "lead", Kind: "plan", Payload: "p1"})
		wantCode(t, err, core.CodeRequestLimit)
	})
	t.Run("ErrClosed", func(t *testing.T) {
		f := newFixture(t, nil)
		f.open("lead", "reader", "shutdown", shutdownText)
		f.reply("req-1", "reader", true, shutdownOK)
		_, err := f.svc.OpenRequest(core.AsMember(t.Context(), "demo", "reader"), core.OpenInput{Team: "demo", Target: "lead", Kind: "plan", Payload: planText})
		wantCode(t, err, core.CodeMemberClosed)
	})
	t.Run("ErrQuotaBeforeClosed", func(t *testing.T) {
		// D8: a closed member with an exhausted quota sees the quota error.
		limits := core.DefaultLimits()
		limits.Requests = 1
		f := newFixture(t, &limits)
		f.open("lead", "reader", "shutdown", shutdownText)
		f.reply("req-1", "reader", true, shutdownOK)
		_, err := f.svc.OpenRequest(core.AsMember(t.Context(), "demo", "reader"), core.OpenInput{Team: "demo", Target: "lead", Kind: "plan", Payload: planText})
		wantCode(t, err, core.CodeRequestLimit)
	})
	t.Run("ErrPayload", func(t *testing.T) {
		f := newFixture(t, nil)
		for _, p := range []string{"", "   ", strings.Repeat("字", 181)} {
			_, err := f.svc.OpenRequest(core.AsMember(t.Context(), "demo", "reader"), core.OpenInput{Team: "demo", Target: "lead", Kind: "plan", Payload: p})
			wantCode(t, err, core.CodeBodyLength)
		}
	})
	t.Run("ErrEncodedLetterTooLong", func(t *testing.T) {
		// D2: 180 control characters become 1080 characters of escapes.
		f := newFixture(t, nil)
		_, err := f.svc.OpenRequest(core.AsMember(t.Context(), "demo", "reader"), core.OpenInput{Team: "demo", Target: "lead", Kind: "plan", Payload: "a" + strings.Repeat("\x01", 178) + "z"})
		wantCode(t, err, core.CodeBodyLength)
		if !strings.Contains(core.ErrorMessage(err), "encoded") {
			t.Fatalf("message %q does not say the encoded letter is too long", core.ErrorMessage(err))
		}
		if reqs, _ := f.svc.Requests(t.Context(), "demo"); len(reqs) != 0 || f.inboxBytes("lead") != "<missing>" {
			t.Fatal("something was stored")
		}
	})
	t.Run("ErrSaveError", func(t *testing.T) {
		f := newFixture(t, nil)
		f.fs.setFailSave(failLog)
		_, err := f.svc.OpenRequest(core.AsMember(t.Context(), "demo", "reader"), core.OpenInput{Team: "demo", Target: "lead", Kind: "plan", Payload: planText})
		wantCode(t, err, core.CodeStorageFailed)
		if reqs, _ := f.svc.Requests(t.Context(), "demo"); len(reqs) != 0 {
			t.Fatal("phantom pending record")
		}
		if f.inboxBytes("lead") != "<missing>" {
			t.Fatal("letter written")
		}
		f.assertNoTemp()
		f.fs.setFailSave(nil)
		if got := f.open("reader", "lead", "plan", planText); got.RequestID != "req-1" {
			t.Fatalf("%+v", got)
		}
		// After a restart nothing of the failed attempt reappears.
		svc := f.reopen()
		if reqs, _ := svc.Requests(t.Context(), "demo"); len(reqs) != 1 {
			t.Fatalf("%d requests after restart", len(reqs))
		}
	})
	t.Run("ErrIntentSaveError", func(t *testing.T) {
		f := newFixture(t, nil)
		f.fs.setFailSave(failLog)
		_, err := f.svc.OpenRequest(core.AsMember(t.Context(), "demo", "reader"), core.OpenInput{Team: "demo", Target: "lead", Kind: "plan", Payload: planText})
		wantCode(t, err, core.CodeStorageFailed)
		if reqs, _ := f.svc.Requests(t.Context(), "demo"); len(reqs) != 0 || f.inboxBytes("lead") != "<missing>" {
			t.Fatal("stored something")
		}
	})
}

// TestReplyRequest covers the reply_request teaching area of docs/spec.md §9.2.
func TestReplyRequest(t *testing.T) {
	planned := func(t *testing.T) *fixture {
		f := newFixture(t, nil)
		f.open("reader", "lead", "plan", planText)
		return f
	}
	t.Run("OKApprove", func(t *testing.T) {
		f := planned(t)
		got := f.reply("req-1", "lead", true, planFeedback)
		if got != (core.ReplyResult{RequestID: "req-1", Status: "queued", Receipt: "reader-1"}) {
			t.Fatalf("%+v", got)
		}
		want := `{"id": "reader-1", "sender": "lead", "recipient": "reader", "body": "[team-protocol] {\"approve\": true, \"feedback\": \"` + planFeedback + `\", \"request_id\": \"req-1\", \"type\": \"plan_response\"}"}` + "\n"
		if b := f.inboxBytes("reader"); b != want {
			t.Fatalf("reader inbox:\n%q\nwant\n%q", b, want)
		}
		r := f.request("req-1")
		if r.Status != "pending" || r.Reply == nil || *r.Reply != (core.Reply{Type: "plan_response", RequestID: "req-1", Approve: true, Feedback: planFeedback}) {
			t.Fatalf("%+v", r)
		}
	})
	t.Run("OKReject", func(t *testing.T) {
		f := planned(t)
		f.reply("req-1", "lead", false, "")
		if r := f.request("req-1"); r.Status != "pending" || r.Reply.Approve {
			t.Fatalf("%+v", r)
		}
	})
	t.Run("ErrWrongRole", func(t *testing.T) {
		f := planned(t)
		_, err := f.svc.Reply(core.AsMember(t.Context(), "demo", "reviewer"), core.ReplyInput{Team: "demo", RequestID: "req-1", Approve: true, Feedback: planFeedback})
		wantCode(t, err, core.CodeForbidden)
		if f.inboxBytes("reader") != "<missing>" || f.request("req-1").Reply != nil {
			t.Fatal("reply stored")
		}
	})
	t.Run("ErrNoRequest", func(t *testing.T) {
		f := planned(t)
		_, err := f.svc.Reply(core.AsMember(t.Context(), "demo", "lead"), core.ReplyInput{Team: "demo", RequestID: "req-9", Approve: true, Feedback: ""})
		wantCode(t, err, core.CodeNotFound)
	})
	t.Run("ErrFeedbackBeforeLookup", func(t *testing.T) {
		f := planned(t)
		_, err := f.svc.Reply(core.AsMember(t.Context(), "demo", "lead"), core.ReplyInput{Team: "demo", RequestID: "req-9", Approve: true, Feedback: strings.Repeat("x", 121)})
		wantCode(t, err, core.CodeBodyLength)
	})
	t.Run("OKFeedbackNotTrimmed", func(t *testing.T) {
		f := planned(t)
		f.reply("req-1", "lead", true, "  ")
		if r := f.request("req-1"); r.Reply.Feedback != "  " {
			t.Fatalf("%q", r.Reply.Feedback)
		}
	})
	t.Run("OKBusyDeferred", func(t *testing.T) {
		f := newFixture(t, nil)
		f.open("lead", "reader", "shutdown", shutdownText)
		release, done := holdTurn(t, f, "reader")
		got := f.reply("req-1", "reader", true, shutdownOK)
		if got != (core.ReplyResult{RequestID: "req-1", Status: "deferred"}) {
			t.Fatalf("%+v", got)
		}
		if f.inboxBytes("lead") != "<missing>" || f.member("reader").Status != "running" || f.request("req-1").Reply != nil {
			t.Fatal("deferred reply changed something")
		}
		close(release)
		<-done
		got = f.reply("req-1", "reader", true, shutdownOK)
		if got.Status != "queued" || got.Receipt != "lead-1" {
			t.Fatalf("%+v", got)
		}
		if m := f.member("reader"); m.Status != "closed" {
			t.Fatalf("%+v", m)
		}
		if r := f.request("req-1"); r.Status != "pending" {
			t.Fatalf("request %s, want pending until lead matches", r.Status)
		}
	})
	t.Run("OKRejectWhileBusy", func(t *testing.T) {
		f := newFixture(t, nil)
		f.open("lead", "reader", "shutdown", shutdownText)
		release, done := holdTurn(t, f, "reader")
		if got := f.reply("req-1", "reader", false, "still working"); got.Status != "queued" {
			t.Fatalf("%+v", got)
		}
		close(release)
		<-done
		if f.member("reader").Status != "idle" {
			t.Fatal("a rejected shutdown closed the member")
		}
	})
	t.Run("OKClosed", func(t *testing.T) {
		f := newFixture(t, nil)
		f.open("lead", "reader", "shutdown", shutdownText)
		got := f.reply("req-1", "reader", true, shutdownOK)
		if got.Status != "queued" || got.Receipt != "lead-1" || f.member("reader").Status != "closed" {
			t.Fatalf("%+v", got)
		}
		// docs/spec.md §13.8: a member closed with turns left is not delivered again.
		_, err := f.svc.RunTurn(t.Context(), "demo", "reader", answer("x"))
		wantCode(t, err, core.CodeMemberUnavailable)
		// Closed members still send and receive (docs/api.md).
		f.send("reader", "lead", "bye")
		f.send("lead", "reader", "noted")
	})
	t.Run("OKDuplicate", func(t *testing.T) {
		f := planned(t)
		f.reply("req-1", "lead", true, planFeedback)
		got := f.reply("req-1", "lead", true, planFeedback)
		if got != (core.ReplyResult{RequestID: "req-1", Status: "already_sent"}) {
			t.Fatalf("%+v", got)
		}
		if strings.Count(f.inboxBytes("reader"), "\n") != 1 {
			t.Fatal("second letter stored")
		}
		// Still already_sent after the requester matched.
		if _, err := f.svc.Consume(core.AsMember(t.Context(), "demo", "reader"), "demo"); err != nil {
			t.Fatal(err)
		}
		if got := f.reply("req-1", "lead", true, planFeedback); got.Status != "already_sent" {
			t.Fatalf("%+v", got)
		}
	})
	t.Run("ErrConflict", func(t *testing.T) {
		f := planned(t)
		f.reply("req-1", "lead", true, planFeedback)
		_, err := f.svc.Reply(core.AsMember(t.Context(), "demo", "lead"), core.ReplyInput{Team: "demo", RequestID: "req-1", Approve: false, Feedback: planFeedback})
		wantCode(t, err, core.CodeReplyConflict)
		if r := f.request("req-1"); !r.Reply.Approve {
			t.Fatal("decision rewritten")
		}
	})
	t.Run("ErrSaveError", func(t *testing.T) {
		f := newFixture(t, nil)
		f.open("lead", "reader", "shutdown", shutdownText)
		f.fs.setFailSave(failLog)
		_, err := f.svc.Reply(core.AsMember(t.Context(), "demo", "reader"), core.ReplyInput{Team: "demo", RequestID: "req-1", Approve: true, Feedback: shutdownOK})
		wantCode(t, err, core.CodeStorageFailed)
		r := f.request("req-1")
		if r.Reply != nil || r.Status != "pending" || f.member("reader").Status == "closed" {
			t.Fatalf("%+v / %+v", r, f.member("reader"))
		}
		f.assertNoTemp()
		f.fs.setFailSave(nil)
		svc := f.reopen()
		if r, _ := svc.Request(t.Context(), "demo", "req-1"); r.Reply != nil {
			t.Fatal("reply appeared after restart")
		}
	})
}

// TestConcurrentReplies is docs/spec.md §9.2 group 8: of many concurrent replies
// exactly one letter is saved; the others get already_sent or a conflict.
func TestConcurrentReplies(t *testing.T) {
	f := newFixture(t, nil)
	f.open("reader", "lead", "plan", planText)
	var wg sync.WaitGroup
	results := make(chan string, 16)
	for i := range 16 {
		wg.Go(func() {
			r, err := f.svc.Reply(core.AsMember(t.Context(), "demo", "lead"), core.ReplyInput{Team: "demo", RequestID: "req-1", Approve: i%2 == 0, Feedback: planFeedback})
			switch {
			case err == nil:
				results <- r.Status
			case core.ErrorCode(err) == core.CodeReplyConflict:
				results <- "conflict"
			default:
				t.Error(err)
			}
		})
	}
	wg.Wait()
	close(results)
	counts := map[string]int{}
	for s := range results {
		counts[s]++
	}
	if counts["queued"] != 1 || counts["queued"]+counts["already_sent"]+counts["conflict"] != 16 {
		t.Fatalf("%v", counts)
	}
	if strings.Count(f.inboxBytes("reader"), "\n") != 1 {
		t.Fatal("more than one letter")
	}
}

// TestMatchResponse covers the match_response teaching area of docs/spec.md §9.2.
// Forged letters are sent as ordinary mail, as any member could.
func TestMatchResponse(t *testing.T) {
	replied := func(t *testing.T, approve bool) *fixture {
		f := newFixture(t, nil)
		f.open("reader", "lead", "plan", planText)
		f.reply("req-1", "lead", approve, planFeedback)
		return f
	}
	letter := func(typ, id, approve, feedback string) string {
		return `[team-protocol] {"approve": ` + approve + `, "feedback": "` + feedback + `", "request_id": "` + id + `", "type": "` + typ + `"}`
	}
	consume := func(t *testing.T, f *fixture, member string) []core.MatchResult {
		t.Helper()
		got, err := f.svc.Consume(core.AsMember(t.Context(), "demo", member), "demo")
		if err != nil {
			t.Fatal(err)
		}
		return got
	}
	t.Run("OKApproved", func(t *testing.T) {
		f := replied(t, true)
		got := consume(t, f, "reader")
		if len(got) != 1 || got[0] != (core.MatchResult{MessageID: "reader-1", Status: "approved", RequestID: "req-1"}) {
			t.Fatalf("%+v", got)
		}
		if f.request("req-1").Status != "approved" {
			t.Fatal("not approved")
		}
	})
	t.Run("OKRejected", func(t *testing.T) {
		f := replied(t, false)
		if got := consume(t, f, "reader"); got[0].Status != "rejected" || f.request("req-1").Status != "rejected" {
			t.Fatalf("%+v", got)
		}
	})
	t.Run("OKDuplicate", func(t *testing.T) {
		f := replied(t, true)
		consume(t, f, "reader")
		got := consume(t, f, "reader")
		if got[0] != (core.MatchResult{MessageID: "reader-1", Status: "duplicate", RequestID: "req-1"}) {
			t.Fatalf("%+v", got)
		}
	})
	for _, tc := range []struct {
		name, sender, body, reason string
	}{
		{"IgnoredWrongType", "lead", letter("shutdown_response", "req-1", "true", planFeedback), core.ReasonIDOrType},
		{"IgnoredWrongRole", "reviewer", letter("plan_response", "req-1", "true", planFeedback), core.ReasonRoleOrRecipient},
		{"IgnoredUnknown", "lead", letter("plan_response", "req-404", "true", planFeedback), core.ReasonIDOrType},
		{"IgnoredInvalid", "lead", letter("plan_response", "req-1", `"true"`, planFeedback), core.ReasonInvalidResponse},
		{"IgnoredForged", "lead", letter("plan_response", "req-1", "true", "不同的未保存决定"), core.ReasonNotSavedReply},
		{"IgnoredOrdinary", "lead", "plain words", core.ReasonOrdinary},
		{"IgnoredBadJSON", "lead", "[team-protocol] {not json", core.ReasonInvalidProtocol},
		{"IgnoredNoType", "lead", `[team-protocol] {"request_id": "req-1"}`, core.ReasonInvalidProtocol},
		{"IgnoredArray", "lead", `[team-protocol] ["req-1"]`, core.ReasonInvalidProtocol},
		{"IgnoredRequestLetter", "lead", `[team-protocol] {"payload": "x", "request_id": "req-1", "type": "plan_request"}`, core.ReasonInvalidResponse},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t, nil)
			f.open("reader", "lead", "plan", planText)
			f.send(tc.sender, "reader", tc.body)
			got := consume(t, f, "reader")
			if len(got) != 1 || got[0] != (core.MatchResult{MessageID: "reader-1", Status: "ignored", Reason: tc.reason}) {
				t.Fatalf("%+v", got)
			}
			if f.request("req-1").Status != "pending" {
				t.Fatal("request left pending")
			}
		})
	}
	t.Run("IgnoredForgedEarlyReply", func(t *testing.T) {
		// Byte-identical to the reply lead would send, but nothing was saved.
		f := newFixture(t, nil)
		f.open("reader", "lead", "plan", planText)
		f.send("lead", "reader", letter("plan_response", "req-1", "true", planFeedback))
		if got := consume(t, f, "reader"); got[0].Reason != core.ReasonNotSavedReply {
			t.Fatalf("%+v", got)
		}
	})
	t.Run("OKBadLetterDoesNotBlockLater", func(t *testing.T) {
		f := newFixture(t, nil)
		f.open("reader", "lead", "plan", planText)
		f.send("lead", "reader", "[team-protocol] {oops")
		f.reply("req-1", "lead", true, planFeedback)
		got := consume(t, f, "reader")
		if len(got) != 2 || got[0].Reason != core.ReasonInvalidProtocol || got[1].Status != "approved" {
			t.Fatalf("%+v", got)
		}
	})
	t.Run("IgnoredConsumedByOther", func(t *testing.T) {
		f := replied(t, true)
		// lead consuming its own inbox sees the plan_request: invalid_response.
		if got := consume(t, f, "lead"); got[0].Reason != core.ReasonInvalidResponse {
			t.Fatalf("%+v", got)
		}
	})
	t.Run("IgnoredLetterOfAnotherRecipient", func(t *testing.T) {
		// Only match_response on a single letter can be handed an envelope
		// addressed to someone else; consuming an inbox never does that.
		f := replied(t, true)
		items, err := f.svc.Inbox(t.Context(), "demo", "reader")
		if err != nil {
			t.Fatal(err)
		}
		other := items[0]
		other.Recipient = "reviewer"
		got, err := f.svc.MatchResponse(t.Context(), "demo", "reader", other)
		if err != nil || got != (core.MatchResult{MessageID: "reader-1", Status: "ignored", Reason: core.ReasonRoleOrRecipient}) {
			t.Fatalf("%+v %v", got, err)
		}
		got, err = f.svc.MatchResponse(t.Context(), "demo", "reader", items[0])
		if err != nil || got.Status != "approved" || f.request("req-1").Status != "approved" {
			t.Fatalf("%+v %v", got, err)
		}
	})
	t.Run("ErrMatchSaveRestoresPending", func(t *testing.T) {
		f := replied(t, true)
		f.fs.setFailSave(failLog)
		_, err := f.svc.Consume(core.AsMember(t.Context(), "demo", "reader"), "demo")
		wantCode(t, err, core.CodeStorageFailed)
		if !errors.Is(err, errInjected) || f.request("req-1").Status != "pending" {
			t.Fatal("status changed without being saved")
		}
	})
}
