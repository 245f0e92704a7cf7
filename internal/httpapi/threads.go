package httpapi

import (
	"context"

	"mailroom/internal/core"
)

// Threads and acknowledgements (docs/api.md, "Mail that stays useful").

// messageOf is a letter as the API shows it: its thread always, what it
// answers and whether it asks for an acknowledgement only when it does.
func messageOf(m core.Message) Message {
	out := Message{ID: m.ID, Sender: m.Sender, Recipient: m.Recipient, Body: m.Body, ThreadID: m.Thread()}
	if m.InReplyTo != "" {
		in := m.InReplyTo
		out.InReplyTo = &in
	}
	if m.AckRequired {
		yes := true
		out.AckRequired = &yes
	}
	return out
}

// receiptOf is a receipt as the API shows it.
func receiptOf(r core.Receipt) Receipt {
	out := Receipt{ID: r.ID, To: r.To, Attended: r.Attended, Read: r.Read}
	if a := r.Ack; a != nil {
		out.Ack = &AckState{Outcome: AckStateOutcome(a.Outcome), Note: a.Note, At: a.At}
	}
	return out
}

// GetThread returns the letters of a thread the caller sent or received
// (the admin: all of them).
func (s *Server) GetThread(ctx context.Context, req GetThreadRequestObject) (GetThreadResponseObject, error) {
	letters, err := s.svc.Thread(ctx, req.Team, req.ThreadID)
	if err != nil {
		return nil, err
	}
	return GetThread200JSONResponse{Letters: messagesOf(letters)}, nil
}

// AckLetter records the recipient's acknowledgement of a letter and
// returns the letter's receipt.
func (s *Server) AckLetter(ctx context.Context, req AckLetterRequestObject) (AckLetterResponseObject, error) {
	r, err := s.svc.AckLetter(ctx, core.AckInput{Team: req.Team, Member: req.Member, ID: req.ID, Outcome: string(req.Body.Outcome), Note: deref(req.Body.Note)})
	if err != nil {
		return nil, err
	}
	return AckLetter200JSONResponse(receiptOf(r)), nil
}
