package agent

import (
	"context"
	"encoding/json"
	"fmt"

	"mailroom/internal/core"
)

// The tools of mail that stays useful (core/threads.go and core/acks.go
// hold every rule): the same for a model's turn and an MCP client.

// ToolAckLetter acknowledges a letter that asked for it.
const ToolAckLetter = "ack_letter"

// The inputs send_message takes beside to and body: a reply's letter and
// the request for an acknowledgement.
var (
	inReplyToProp   = prop{name: "in_reply_to", typ: "string", desc: "Optional: the id of the letter you answer (one you sent or received, e.g. reader-1); your letter joins its thread."}
	ackRequiredProp = prop{name: "ack_required", typ: "boolean", desc: "Optional (default false): ask the recipient to acknowledge the letter with done, blocked or rejected (ack_letter)."}
)

// mailTools are the registry's tools of threads and acknowledgements.
func (r registry) mailTools() []Tool {
	return []Tool{
		{
			Name: ToolAckLetter, Doors: DoorAgent | DoorMCP, Offer: Offer{Lead: true, Teammates: true}, Handler: r.ackLetter,
			Description: fmt.Sprintf("Acknowledge a letter of your inbox that asked for it (ack_required), once: done, blocked or rejected, with an optional note (at most %d characters). Its sender sees it in its receipts.", core.MaxAckNoteChars),
			InputSchema: object(
				prop{name: "id", typ: "string", desc: "The id of the letter, e.g. reader-3.", required: true},
				prop{name: "outcome", typ: "string", desc: "done, blocked or rejected.", required: true},
				prop{name: "note", typ: "string", desc: fmt.Sprintf("Optional: what happened, at most %d characters.", core.MaxAckNoteChars)}),
		},
	}
}

func (r registry) ackLetter(ctx context.Context, input json.RawMessage) (Result, error) {
	var in struct {
		ID      *string `json:"id"`
		Outcome *string `json:"outcome"`
		Note    string  `json:"note"`
	}
	if err := decode(ToolAckLetter, input, &in); err != nil {
		return Result{}, err
	}
	if in.ID == nil || in.Outcome == nil {
		return Result{}, toolErr(core.CodeValidation, "ack_letter: id and outcome are required")
	}
	team, member, err := callerOf(ctx)
	if err != nil {
		return Result{}, err
	}
	rec, err := r.env.Svc.AckLetter(ctx, core.AckInput{Team: team, Member: member, ID: *in.ID, Outcome: *in.Outcome, Note: in.Note})
	if err != nil {
		return Result{}, err
	}
	return Result{Value: rec, Text: fmt.Sprintf("Acknowledged %s: %s.", rec.ID, *in.Outcome)}, nil
}
