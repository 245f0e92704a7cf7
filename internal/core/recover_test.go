package core_test

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"mailroom/internal/core"
)

// readState and writeState edit state.json directly to stand for the
// instant of a crash between two writes.
// fileState is state.json as the file store reads it: the team's state
// and, in files an older version wrote, the intent it recorded before a
// protocol letter (docs/spec.md §13.14).
type fileState struct {
	core.TeamState
	Intent *fileIntent `json:"intent,omitempty"`
}

// fileIntent is an intent as older versions wrote it.
type fileIntent struct {
	Op        string        `json:"op"`
	Letter    core.Message  `json:"letter"`
	Request   *core.Request `json:"request,omitempty"`
	RequestID string        `json:"request_id,omitempty"`
	Reply     *core.Reply   `json:"reply,omitempty"`
	Close     string        `json:"close,omitempty"`
}

func (f *fixture) readState() fileState {
	f.t.Helper()
	b, err := os.ReadFile(filepath.Join(f.dir, "teams", f.team, "state.json"))
	if err != nil {
		f.t.Fatal(err)
	}
	var st fileState
	if err := json.Unmarshal(b, &st); err != nil {
		f.t.Fatal(err)
	}
	return st
}

func (f *fixture) writeState(st fileState) {
	f.t.Helper()
	b, err := json.Marshal(st)
	if err != nil {
		f.t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(f.dir, "teams", f.team, "state.json"), b, 0o600); err != nil {
		f.t.Fatal(err)
	}
}

// TestRestartKeepsState: everything acknowledged is served after a restart.
func TestRestartKeepsState(t *testing.T) {
	f := newFixture(t, nil)
	f.open("reader", "lead", "plan", planText)
	f.reply("req-1", "lead", true, planFeedback)
	if _, err := f.svc.Consume(core.AsMember(t.Context(), "demo", "reader"), "demo"); err != nil {
		t.Fatal(err)
	}
	if _, err := f.svc.RunTurn(t.Context(), "demo", "reviewer", answer("x")); err != nil {
		t.Fatal(err)
	}
	f.open("lead", "reviewer", "shutdown", shutdownText)
	f.reply("req-2", "reviewer", true, shutdownOK)

	svc := f.reopen()
	view, err := svc.Team(t.Context(), "demo")
	if err != nil {
		t.Fatal(err)
	}
	if view.Requests[0].Status != "approved" || view.Requests[1].Reply == nil || view.Requests[1].Status != "pending" {
		t.Fatalf("%+v", view.Requests)
	}
	for _, m := range view.Members {
		if m.Name == "reviewer" && (m.Status != "closed" || m.Turns != 1 || m.HistoryLength != 2) {
			t.Fatalf("%+v", m)
		}
	}
}

// TestRecoverIntents covers the start-up repair cases of docs/spec.md §13.14.
func TestRecoverIntents(t *testing.T) {
	t.Run("OpenIntentWithLetterCompletes", func(t *testing.T) {
		f := newFixture(t, nil)
		before := f.readState()
		f.open("reader", "lead", "plan", planText)
		// Crash after the letter, before the registration: the state on
		// disk is the one before, plus the intent.
		r := f.request("req-1")
		before.Intent = &fileIntent{Op: "open", Letter: core.Message{ID: "lead-1", Sender: "reader", Recipient: "lead", Body: core.EncodeRequestLetter("plan", "req-1", planText)}, Request: &r}
		f.writeState(before)
		svc := f.reopen()
		got, err := svc.Request(t.Context(), "demo", "req-1")
		if err != nil || got.Status != "pending" || got.Receipt != "lead-1" {
			t.Fatalf("%+v %v", got, err)
		}
		if f.readState().Intent != nil {
			t.Fatal("intent not cleared")
		}
	})
	t.Run("OpenIntentWithoutLetterDropped", func(t *testing.T) {
		f := newFixture(t, nil)
		st := f.readState()
		r := core.Request{ID: "req-1", Kind: "plan", Sender: "reader", Target: "lead", Payload: planText, Status: "pending", Receipt: "lead-1"}
		st.Intent = &fileIntent{Op: "open", Letter: core.Message{ID: "lead-1", Sender: "reader", Recipient: "lead", Body: core.EncodeRequestLetter("plan", "req-1", planText)}, Request: &r}
		f.writeState(st)
		svc := f.reopen()
		if reqs, _ := svc.Requests(t.Context(), "demo"); len(reqs) != 0 {
			t.Fatalf("%+v", reqs)
		}
		if f.readState().Intent != nil {
			t.Fatal("intent not cleared")
		}
	})
	t.Run("ReplyIntentWithLetterClosesMember", func(t *testing.T) {
		f := newFixture(t, nil)
		f.open("lead", "reader", "shutdown", shutdownText)
		before := f.readState()
		f.reply("req-1", "reader", true, shutdownOK)
		rep := core.Reply{Type: "shutdown_response", RequestID: "req-1", Approve: true, Feedback: shutdownOK}
		before.Intent = &fileIntent{Op: "reply", Letter: core.Message{ID: "lead-1", Sender: "reader", Recipient: "lead", Body: core.EncodeReplyLetter(rep)}, RequestID: "req-1", Reply: &rep, Close: "reader"}
		f.writeState(before)
		svc := f.reopen()
		got, _ := svc.Request(t.Context(), "demo", "req-1")
		view, _ := svc.Team(t.Context(), "demo")
		if got.Reply == nil || *got.Reply != rep || got.Status != "pending" || view.Members[1].Status != "closed" {
			t.Fatalf("%+v %+v", got, view.Members[1])
		}
	})
	t.Run("LookAlikeLetterStaysPlainMail", func(t *testing.T) {
		f := newFixture(t, nil)
		f.open("lead", "reader", "shutdown", shutdownText)
		rep := core.Reply{Type: "shutdown_response", RequestID: "req-1", Approve: true, Feedback: shutdownOK}
		// reader mails lead a body byte-identical to an approval.
		f.send("reader", "lead", core.EncodeReplyLetter(rep))
		svc := f.reopen()
		got, _ := svc.Request(t.Context(), "demo", "req-1")
		view, _ := svc.Team(t.Context(), "demo")
		if got.Reply != nil || view.Members[1].Status == "closed" {
			t.Fatalf("a look-alike letter became a reply: %+v", got)
		}
		res, err := svc.Consume(core.AsMember(t.Context(), "demo", "lead"), "demo")
		if err != nil || res[0].Reason != core.ReasonNotSavedReply {
			t.Fatalf("%+v %v", res, err)
		}
	})
	t.Run("IntentWithDifferentLetterDropped", func(t *testing.T) {
		// The intent's id is on disk but holds another letter (the send
		// after a failed protocol write took the id): not completed.
		f := newFixture(t, nil)
		f.send("reviewer", "lead", "ordinary")
		st := f.readState()
		r := core.Request{ID: "req-1", Kind: "plan", Sender: "reader", Target: "lead", Payload: planText, Status: "pending", Receipt: "lead-1"}
		st.Intent = &fileIntent{Op: "open", Letter: core.Message{ID: "lead-1", Sender: "reader", Recipient: "lead", Body: core.EncodeRequestLetter("plan", "req-1", planText)}, Request: &r}
		f.writeState(st)
		svc := f.reopen()
		if reqs, _ := svc.Requests(t.Context(), "demo"); len(reqs) != 0 {
			t.Fatal("completed against another letter")
		}
	})
	t.Run("RunningMemberStopped", func(t *testing.T) {
		f := newFixture(t, nil)
		st := f.readState()
		st.Members[1].Status = "running"
		st.Members[1].Turns = 1
		f.writeState(st)
		svc := f.reopen()
		view, _ := svc.Team(t.Context(), "demo")
		if m := view.Members[1]; m.Status != "stopped" || m.Active || m.Turns != 1 {
			t.Fatalf("%+v", m)
		}
	})
	t.Run("DamagedTeamServedReadOnly", func(t *testing.T) {
		f := newFixture(t, nil)
		f.send("reviewer", "reader", "x")
		if err := os.WriteFile(f.inboxPath("reader"), []byte("damaged\n"), 0o600); err != nil {
			t.Fatal(err)
		}
		_, _, err := f.svc.CreateTeam(t.Context(), core.TeamSpec{Name: "other"})
		if err != nil {
			t.Fatal(err)
		}
		svc := f.reopen()
		view, err := svc.Team(t.Context(), "demo")
		if err != nil || !view.Damaged {
			t.Fatalf("%+v %v", view, err)
		}
		_, err = svc.Send(core.AsMember(t.Context(), "demo", "lead"), core.SendInput{Team: "demo", To: "reviewer", Body: "x"})
		wantCode(t, err, core.CodeInboxCorrupt)
		if f.inboxBytes("reader") != "damaged\n" || f.inboxBytes("reviewer") != "<missing>" {
			t.Fatal("damaged team written")
		}
		if _, err := svc.Send(core.AsMember(t.Context(), "other", "lead"), core.SendInput{Team: "other", To: "lead", Body: "x"}); err != nil {
			t.Fatalf("other team: %v", err)
		}
	})
}

// TestIdempotency: a retry with the same key and arguments returns the
// first response and stores nothing new; other arguments conflict.
func TestIdempotency(t *testing.T) {
	f := newFixture(t, nil)
	ctx := t.Context()
	first, err := f.svc.Send(core.AsMember(ctx, "demo", "reviewer"), core.SendInput{Team: "demo", To: "reader", Body: "hello", IdempotencyKey: "k1"})
	if err != nil {
		t.Fatal(err)
	}
	again, err := f.svc.Send(core.AsMember(ctx, "demo", "reviewer"), core.SendInput{Team: "demo", To: "reader", Body: "hello", IdempotencyKey: "k1"})
	if err != nil || again != first {
		t.Fatalf("%+v %v", again, err)
	}
	_, err = f.svc.Send(core.AsMember(ctx, "demo", "reviewer"), core.SendInput{Team: "demo", To: "reader", Body: "other", IdempotencyKey: "k1"})
	wantCode(t, err, core.CodeIdempotencyConflict)
	// Keys are per member: the same key from lead is a new write.
	if r, err := f.svc.Send(core.AsMember(ctx, "demo", "lead"), core.SendInput{Team: "demo", To: "reader", Body: "hello", IdempotencyKey: "k1"}); err != nil || r.ID != "reader-2" {
		t.Fatalf("%+v %v", r, err)
	}
	open1, _ := f.svc.OpenRequest(core.AsMember(ctx, "demo", "reader"), core.OpenInput{Team: "demo", Target: "lead", Kind: "plan", Payload: planText, IdempotencyKey: "k2"})
	open2, err := f.svc.OpenRequest(core.AsMember(ctx, "demo", "reader"), core.OpenInput{Team: "demo", Target: "lead", Kind: "plan", Payload: planText, IdempotencyKey: "k2"})
	if err != nil || open1 != open2 {
		t.Fatalf("%+v %+v %v", open1, open2, err)
	}
	rep1, _ := f.svc.Reply(core.AsMember(ctx, "demo", "lead"), core.ReplyInput{Team: "demo", RequestID: "req-1", Approve: true, Feedback: "", IdempotencyKey: "k3"})
	rep2, err := f.svc.Reply(core.AsMember(ctx, "demo", "lead"), core.ReplyInput{Team: "demo", RequestID: "req-1", Approve: true, Feedback: "", IdempotencyKey: "k3"})
	if err != nil || rep1 != rep2 || rep2.Status != "queued" {
		t.Fatalf("%+v %+v %v", rep1, rep2, err)
	}
	// Remembered across a restart.
	svc := f.reopen()
	if r, err := svc.Send(core.AsMember(context.Background(), "demo", "reviewer"), core.SendInput{Team: "demo", To: "reader", Body: "hello", IdempotencyKey: "k1"}); err != nil || r != first {
		t.Fatalf("%+v %v", r, err)
	}
	items, _ := svc.Inbox(ctx, "demo", "reader")
	if len(items) != 3 {
		t.Fatalf("%d letters, want 3 (hello, hello from lead, plan reply)", len(items))
	}
}

// TestRecoverSaveFailureIsNotDamage: when start-up must save its repair
// (a member left running, an intent whose letter was never stored) and the
// save fails, as on a full disk, the repaired state is served, not a
// damaged team: reads work, and the team's first write carries the whole
// repaired state in its write-ahead log record, so a later restart
// replays the repair before any letter that took the dropped intent's id.
func TestRecoverSaveFailureIsNotDamage(t *testing.T) {
	f := newFixture(t, nil)
	st := f.readState()
	st.Members[1].Status = core.StatusRunning // reader's turn was cut by a crash
	r := core.Request{ID: "req-1", Kind: "plan", Sender: "reader", Target: "lead", Payload: planText, Status: "pending", Receipt: "lead-1"}
	st.Intent = &fileIntent{Op: "open", Letter: core.Message{ID: "lead-1", Sender: "reader", Recipient: "lead", Body: core.EncodeRequestLetter("plan", "req-1", planText)}, Request: &r}
	f.writeState(st)

	f.fs.setFailSave(failState)
	svc := f.reopen()
	view, err := svc.Team(t.Context(), "demo")
	if err != nil || view.Damaged {
		t.Fatalf("team = %+v, %v; want served, not damaged", view, err)
	}
	if got := view.Members[1].Status; got != core.StatusStopped {
		t.Fatalf("reader = %q, want stopped (the repair is served)", got)
	}
	if reqs, err := svc.Requests(t.Context(), "demo"); err != nil || len(reqs) != 0 {
		t.Fatalf("requests = %+v, %v; want none (the intent was dropped)", reqs, err)
	}
	if _, err := svc.Inbox(t.Context(), "demo", "lead"); err != nil {
		t.Fatalf("reading an inbox: %v, want no error", err)
	}
	if _, err := svc.Consume(core.AsMember(t.Context(), "demo", "lead"), "demo"); err != nil {
		t.Fatalf("consuming an empty inbox: %v, want no error", err)
	}
	// The dropped intent is still in state.json. A letter that takes its
	// id is logged together with the repaired state, so that a restart
	// never completes the dropped intent from the look-alike letter.
	if _, err := svc.Send(core.AsMember(t.Context(), "demo", "reviewer"), core.SendInput{Team: "demo", To: "lead", Body: core.EncodeRequestLetter("plan", "req-1", planText)}); err != nil {
		t.Fatalf("send while state.json cannot be saved: %v", err)
	}
	f.fs.setFailSave(nil)
	// A crash here (the store is left as it is) and a restart: the log
	// is replayed over the files.
	svc = f.reopen()
	if reqs, _ := svc.Requests(t.Context(), "demo"); len(reqs) != 0 {
		t.Fatalf("requests after restart = %+v, want none (the look-alike letter stays plain mail)", reqs)
	}
	if st := f.readState(); st.Intent != nil || st.Members[1].Status != core.StatusStopped {
		t.Fatalf("state.json: intent %+v, reader %q; want the repair saved", st.Intent, st.Members[1].Status)
	}
	if got := f.inboxBytes("lead"); !strings.Contains(got, "req-1") {
		t.Fatalf("lead's inbox = %q, want the look-alike letter", got)
	}
	// The look-alike letter stays ordinary mail after another restart.
	if reqs, _ := f.reopen().Requests(t.Context(), "demo"); len(reqs) != 0 {
		t.Fatalf("requests after restart = %+v, want none", reqs)
	}
}
