package mcpserver_test

import (
	"testing"

	"mailroom/internal/core"
)

// TestAckAndReplyTools: send_message takes in_reply_to and ack_required,
// ack_letter acknowledges once, with the codes REST answers.
func TestAckAndReplyTools(t *testing.T) {
	e := newEnv(t)
	lead, reader := e.member("demo", "lead"), e.member("demo", "reader")

	var sent core.SendResult
	mustCall(t, lead, "send_message", map[string]any{"to": "reader", "body": "run the tests", "ack_required": true}, &sent)
	mustCall(t, reader, "send_message", map[string]any{"to": "lead", "body": "on it", "in_reply_to": sent.ID}, nil)
	wantRefusal(t, reader, "send_message", map[string]any{"to": "lead", "body": "x", "in_reply_to": "reviewer-1"}, "unknown_letter")

	var inbox struct {
		Messages []core.Message `json:"messages"`
	}
	mustCall(t, lead, "read_inbox", map[string]any{}, &inbox)
	if len(inbox.Messages) != 1 || inbox.Messages[0].InReplyTo != sent.ID || inbox.Messages[0].Thread() != sent.ID {
		t.Fatalf("lead's inbox = %+v, want one reply to %s", inbox.Messages, sent.ID)
	}

	wantRefusal(t, reader, "ack_letter", map[string]any{"id": sent.ID, "outcome": "finished"}, "validation_failed")
	wantRefusal(t, reader, "ack_letter", map[string]any{"id": sent.ID}, "validation_failed")
	wantRefusal(t, lead, "ack_letter", map[string]any{"id": "lead-1", "outcome": "done"}, "ack_not_required")
	var rec core.Receipt
	mustCall(t, reader, "ack_letter", map[string]any{"id": sent.ID, "outcome": "rejected", "note": "no test suite here"}, &rec)
	if rec.Ack == nil || rec.Ack.Outcome != "rejected" || rec.Ack.Note != "no test suite here" {
		t.Fatalf("ack_letter = %+v, want rejected with the note", rec)
	}
	wantRefusal(t, reader, "ack_letter", map[string]any{"id": sent.ID, "outcome": "done"}, "already_acked")
}
