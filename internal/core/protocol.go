package core

import (
	"context"
	"encoding/json"
	"strings"
	"unicode/utf8"
)

// OpenInput is one protocol request to open. Its sender is the caller (the
// principal in the context), never a field.
type OpenInput struct {
	Team string
	// Target is the member asked: lead for a plan, a teammate for a
	// shutdown.
	Target string
	// Kind is KindPlan or KindShutdown.
	Kind    string
	Payload string
	// IdempotencyKey, when not empty, makes the call idempotent for its
	// sender.
	IdempotencyKey string
}

// OpenRequest opens a plan request (teammate → lead) or a shutdown request
// (lead → teammate) and mails it to the target (open_request, docs/spec.md
// §4.9). The record is registered as pending only after the letter is
// saved. The caller must be a member of the team; it is the sender.
func (s *Service) OpenRequest(ctx context.Context, in OpenInput) (OpenResult, error) {
	sender, err := actor(ctx, in.Team)
	if err != nil {
		return OpenResult{}, err
	}
	target, kind, payload, idemKey := in.Target, in.Kind, in.Payload, in.IdempotencyKey
	var out OpenResult
	fp := fingerprint("open", target, kind, payload)
	err = s.update(ctx, in.Team, func(u *unit) error {
		if found, err := u.replay(sender, idemKey, fp, &out); found || err != nil {
			return err
		}
		if err := u.checkMember(sender); err != nil {
			return err
		}
		if err := u.checkMember(target); err != nil {
			return err
		}
		switch {
		case kind == KindPlan && sender != LeadName && target == LeadName:
		case kind == KindShutdown && sender == LeadName && target != LeadName:
		default:
			return Errorf(CodeWrongDirection, "Plans go from a teammate to lead; shutdowns from lead to a teammate.")
		}
		limits := u.st.Limits
		trimmed := Trim(payload)
		if n := Length(trimmed); !utf8.ValidString(payload) || n < 1 || n > limits.PayloadChars {
			return Errorf(CodeBodyLength, "The payload must be 1 to %d characters after trimming.", limits.PayloadChars)
		}
		// Quota first, then same-kind pending (docs/spec.md §13.4, defects D7, D8).
		if len(u.st.Requests) >= limits.Requests {
			return Errorf(CodeRequestLimit, "The team's request quota of %d is used up.", limits.Requests)
		}
		for _, r := range u.st.Requests {
			if r.Status == RequestPending && r.Kind == kind && r.Sender == sender && r.Target == target {
				return Errorf(CodeRequestPending, "A request of the same kind, sender and target is still pending.")
			}
		}
		subject := sender
		if kind == KindShutdown {
			subject = target
		}
		if u.member(subject).Status == StatusClosed {
			return Errorf(CodeMemberClosed, "The member has been shut down.")
		}
		id := "req-" + itoa(len(u.st.Requests)+1)
		record := Request{ID: id, Kind: kind, Sender: sender, Target: target, Payload: trimmed, Status: RequestPending}
		letter, err := u.send(sender, target, EncodeRequestLetter(kind, id, trimmed), true)
		if err != nil {
			return err
		}
		// The letter and the request's registration commit together.
		record.Receipt = letter.ID
		u.st.Requests = append(u.st.Requests, record)
		out = OpenResult{RequestID: id, Status: RequestPending}
		if err := u.remember(sender, idemKey, fp, out); err != nil {
			return err
		}
		u.emit(EventRequest, copyRequest(record))
		return nil
	})
	if err != nil {
		return OpenResult{}, err
	}
	return out, nil
}

// ReplyInput is one answer to a request. Its actor is the caller (the
// principal in the context), never a field.
type ReplyInput struct {
	Team      string
	RequestID string
	Approve   bool
	// Feedback is optional; the lesson's default is "".
	Feedback string
	// IdempotencyKey, when not empty, makes the call idempotent for its
	// actor.
	IdempotencyKey string
}

// Reply answers a request as the caller (reply_request, docs/spec.md §4.10). Only the
// target may reply; the same decision again is "already_sent" and stores
// nothing; a different one is refused; approving a shutdown while the
// member's turn runs is "deferred". The request stays pending until its
// sender matches the reply.
//
// The actor is the caller (the principal in the context), never a field.
func (s *Service) Reply(ctx context.Context, in ReplyInput) (ReplyResult, error) {
	me, err := actor(ctx, in.Team)
	if err != nil {
		return ReplyResult{}, err
	}
	requestID, actor, approve, feedback, idemKey := in.RequestID, me, in.Approve, in.Feedback, in.IdempotencyKey
	var out ReplyResult
	fp := fingerprint("reply", requestID, boolWord(approve), feedback)
	err = s.update(ctx, in.Team, func(u *unit) error {
		if found, err := u.replay(actor, idemKey, fp, &out); found || err != nil {
			return err
		}
		if err := u.checkMember(actor); err != nil {
			return err
		}
		if !utf8.ValidString(feedback) || Length(feedback) > u.st.Limits.FeedbackChars {
			return Errorf(CodeBodyLength, "The feedback must be at most %d characters.", u.st.Limits.FeedbackChars)
		}
		record := u.request(requestID)
		if record == nil {
			return Errorf(CodeNotFound, "No such request.")
		}
		if record.Target != actor {
			return Errorf(CodeForbidden, "Only the request's target may reply to it.")
		}
		response := Reply{Type: record.Kind + "_response", RequestID: requestID, Approve: approve, Feedback: feedback}
		if record.Reply != nil {
			if *record.Reply == response {
				out = ReplyResult{RequestID: requestID, Status: "already_sent"}
				return nil
			}
			return Errorf(CodeReplyConflict, "A different decision was already sent for this request.")
		}
		if record.Status != RequestPending {
			return Errorf(CodeNotPending, "The request no longer waits for a reply.")
		}
		closing := record.Kind == KindShutdown && approve
		if closing && u.s.busy(u.st.Name, u.member(actor), u.now) {
			out = ReplyResult{RequestID: requestID, Status: "deferred"}
			return nil
		}
		letter, err := u.send(actor, record.Sender, EncodeReplyLetter(response), true)
		if err != nil {
			return err
		}
		// The letter, the reply's record and the member's close commit
		// together.
		record.Reply = &response
		if closing {
			u.member(actor).Status = StatusClosed
			u.releaseReservationsOf(actor)
		}
		out = ReplyResult{RequestID: requestID, Status: "queued", Receipt: letter.ID}
		if err := u.remember(actor, idemKey, fp, out); err != nil {
			return err
		}
		u.emit(EventReply, copyRequest(*record))
		if closing {
			u.emit(EventMember, u.memberView(u.member(actor)))
		}
		return nil
	})
	if err != nil {
		return ReplyResult{}, err
	}
	return out, nil
}

func boolWord(b bool) string {
	if b {
		return "true"
	}
	return "false"
}

// Match reasons for ignored letters (docs/spec.md §4.11, §13.6).
const (
	ReasonOrdinary        = "ordinary_message"
	ReasonInvalidResponse = "invalid_response"
	ReasonIDOrType        = "id_or_type"
	ReasonRoleOrRecipient = "role_or_recipient"
	ReasonNotSavedReply   = "not_saved_reply"
	ReasonInvalidProtocol = "invalid_protocol"
)

// matchLocked is match_response (docs/spec.md §4.11) for one letter consumed by
// recipient, with read_protocol's failures reported as invalid_protocol
// (docs/spec.md §13.6). It reports whether a request changed status.
func (u *unit) matchLocked(recipient string, msg Message) (MatchResult, bool) {
	ignored := func(reason string) (MatchResult, bool) {
		return MatchResult{MessageID: msg.ID, Status: "ignored", Reason: reason}, false
	}
	if !strings.HasPrefix(msg.Body, ProtocolPrefix) {
		return ignored(ReasonOrdinary)
	}
	var raw json.RawMessage
	if err := json.Unmarshal([]byte(msg.Body[len(ProtocolPrefix):]), &raw); err != nil || len(raw) == 0 || raw[0] != '{' {
		return ignored(ReasonInvalidProtocol)
	}
	var data map[string]json.RawMessage
	if err := json.Unmarshal(raw, &data); err != nil {
		return ignored(ReasonInvalidProtocol)
	}
	typ, okType := jsonString(data["type"])
	requestID, okID := jsonString(data["request_id"])
	if !okType || !okID {
		return ignored(ReasonInvalidProtocol)
	}
	approve, okApprove := jsonBool(data["approve"])
	feedback, okFeedback := jsonString(data["feedback"])
	if !exactKeys(data, "type", "request_id", "approve", "feedback") || !okApprove || !okFeedback || Length(feedback) > u.st.Limits.FeedbackChars {
		return ignored(ReasonInvalidResponse)
	}
	record := u.request(requestID)
	if record == nil || typ != record.Kind+"_response" {
		return ignored(ReasonIDOrType)
	}
	if recipient != record.Sender || msg.Recipient != recipient || msg.Sender != record.Target {
		return ignored(ReasonRoleOrRecipient)
	}
	if record.Reply == nil || *record.Reply != (Reply{Type: typ, RequestID: requestID, Approve: approve, Feedback: feedback}) {
		return ignored(ReasonNotSavedReply)
	}
	if record.Status != RequestPending {
		return MatchResult{MessageID: msg.ID, Status: "duplicate", RequestID: requestID}, false
	}
	record.Status = RequestRejected
	if approve {
		record.Status = RequestApproved
	}
	return MatchResult{MessageID: msg.ID, Status: record.Status, RequestID: requestID}, true
}

// MatchResponse matches one letter received by recipient against the
// request table (match_response, docs/spec.md §4.11).
func (s *Service) MatchResponse(ctx context.Context, teamName, recipient string, msg Message) (MatchResult, error) {
	var out MatchResult
	err := s.update(ctx, teamName, func(u *unit) error {
		results := u.matchAll(recipient, []Message{msg})
		out = results[0]
		return nil
	})
	return out, err
}

// Consume matches every letter of member's inbox, in order, against the
// request table (consume_responses, docs/spec.md §4.12). It deletes nothing;
// re-consuming yields duplicate or ignored, both harmless.
//
// The member is the caller (the principal in the context): only a member
// consumes, and only its own inbox.
func (s *Service) Consume(ctx context.Context, teamName string) ([]MatchResult, error) {
	member, err := actor(ctx, teamName)
	if err != nil {
		return nil, err
	}
	var out []MatchResult
	err = s.update(ctx, teamName, func(u *unit) error {
		if !u.isMember(member) {
			return u.noSuchMember()
		}
		items, err := u.tx.LoadInbox(member)
		if err != nil {
			return asStoreError(err)
		}
		out = u.matchAll(member, items)
		return nil
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// matchAll matches letters; the statuses that changed commit with the
// unit of work, or not at all (then nothing is reported).
func (u *unit) matchAll(recipient string, items []Message) []MatchResult {
	results := make([]MatchResult, 0, len(items))
	for _, m := range items {
		r, ok := u.matchLocked(recipient, m)
		results = append(results, r)
		if ok {
			u.emit(EventMatch, copyRequest(*u.request(r.RequestID)))
		}
	}
	return results
}

// Requests lists a team's requests in id order.
func (s *Service) Requests(ctx context.Context, teamName string) ([]Request, error) {
	if err := CheckReader(ctx, teamName); err != nil {
		return nil, err
	}
	var out []Request
	err := s.view(ctx, teamName, false, func(u *unit) error {
		out = make([]Request, 0, len(u.st.Requests))
		for _, r := range u.st.Requests {
			out = append(out, copyRequest(r))
		}
		return nil
	})
	return out, err
}

// Request returns one request of a team.
func (s *Service) Request(ctx context.Context, teamName, id string) (Request, error) {
	if err := CheckReader(ctx, teamName); err != nil {
		return Request{}, err
	}
	var out Request
	err := s.view(ctx, teamName, false, func(u *unit) error {
		r := u.request(id)
		if r == nil {
			return Errorf(CodeNotFound, "No such request.")
		}
		out = copyRequest(*r)
		return nil
	})
	return out, err
}
