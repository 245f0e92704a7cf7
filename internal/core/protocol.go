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
	teamName, target, kind, payload, idemKey := in.Team, in.Target, in.Kind, in.Payload, in.IdempotencyKey
	t, err := s.lockTeam(teamName)
	if err != nil {
		return OpenResult{}, err
	}
	defer t.mu.Unlock()
	var out OpenResult
	fp := fingerprint("open", target, kind, payload)
	if found, err := t.replay(sender, idemKey, fp, s.now(), &out); found || err != nil {
		return out, err
	}
	if err := t.checkMember(sender); err != nil {
		return OpenResult{}, err
	}
	if err := t.checkMember(target); err != nil {
		return OpenResult{}, err
	}
	switch {
	case kind == KindPlan && sender != LeadName && target == LeadName:
	case kind == KindShutdown && sender == LeadName && target != LeadName:
	default:
		return OpenResult{}, Errorf(CodeWrongDirection, "Plans go from a teammate to lead; shutdowns from lead to a teammate.")
	}
	trimmed := Trim(payload)
	if n := Length(trimmed); !utf8.ValidString(payload) || n < 1 || n > t.st.Limits.PayloadChars {
		return OpenResult{}, Errorf(CodeBodyLength, "The payload must be 1 to %d characters after trimming.", t.st.Limits.PayloadChars)
	}
	// Quota first, then same-kind pending (SPEC §13.4, defects D7, D8).
	if len(t.st.Requests) >= t.st.Limits.Requests {
		return OpenResult{}, Errorf(CodeRequestLimit, "The team's request quota of %d is used up.", t.st.Limits.Requests)
	}
	for _, r := range t.st.Requests {
		if r.Status == RequestPending && r.Kind == kind && r.Sender == sender && r.Target == target {
			return OpenResult{}, Errorf(CodeRequestPending, "A request of the same kind, sender and target is still pending.")
		}
	}
	subject := sender
	if kind == KindShutdown {
		subject = target
	}
	if t.member(subject).Status == StatusClosed {
		return OpenResult{}, Errorf(CodeMemberClosed, "The member has been shut down.")
	}
	id := "req-" + itoa(len(t.st.Requests)+1)
	record := Request{ID: id, Kind: kind, Sender: sender, Target: target, Payload: trimmed, Status: RequestPending}
	var idem *IdempotencyRecord
	out = OpenResult{RequestID: id, Status: RequestPending}
	if idemKey != "" {
		idem = &IdempotencyRecord{Member: sender, Key: idemKey, Fingerprint: fp, Result: mustJSON(out), At: s.now().UTC()}
	}
	letter, err := s.sendLocked(ctx, t, sender, target, EncodeRequestLetter(kind, id, trimmed), true, func(m Message) *Intent {
		r := record
		r.Receipt = m.ID
		return &Intent{Op: IntentOpen, Letter: m, Request: &r, Idempotency: idem}
	})
	if err != nil {
		return OpenResult{}, err
	}
	record.Receipt = letter.ID
	t.st.Intent = nil
	t.st.Requests = append(t.st.Requests, record)
	if idem != nil {
		t.remember(*idem)
	}
	s.saveAfterLetter(ctx, t)
	s.emit("request", t.st.Name, copyRequest(record))
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

// Reply answers a request as the caller (reply_request, SPEC §4.10). Only the
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
	teamName, requestID, actor, approve, feedback, idemKey := in.Team, in.RequestID, me, in.Approve, in.Feedback, in.IdempotencyKey
	t, err := s.lockTeam(teamName)
	if err != nil {
		return ReplyResult{}, err
	}
	defer t.mu.Unlock()
	var out ReplyResult
	fp := fingerprint("reply", requestID, boolWord(approve), feedback)
	if found, err := t.replay(actor, idemKey, fp, s.now(), &out); found || err != nil {
		return out, err
	}
	if err := t.checkMember(actor); err != nil {
		return ReplyResult{}, err
	}
	if !utf8.ValidString(feedback) || Length(feedback) > t.st.Limits.FeedbackChars {
		return ReplyResult{}, Errorf(CodeBodyLength, "The feedback must be at most %d characters.", t.st.Limits.FeedbackChars)
	}
	record := t.request(requestID)
	if record == nil {
		return ReplyResult{}, Errorf(CodeNotFound, "No such request.")
	}
	if record.Target != actor {
		return ReplyResult{}, Errorf(CodeForbidden, "Only the request's target may reply to it.")
	}
	response := Reply{Type: record.Kind + "_response", RequestID: requestID, Approve: approve, Feedback: feedback}
	if record.Reply != nil {
		if *record.Reply == response {
			return ReplyResult{RequestID: requestID, Status: "already_sent"}, nil
		}
		return ReplyResult{}, Errorf(CodeReplyConflict, "A different decision was already sent for this request.")
	}
	if record.Status != RequestPending {
		return ReplyResult{}, Errorf(CodeNotPending, "The request no longer waits for a reply.")
	}
	closing := record.Kind == KindShutdown && approve
	if closing && t.active[actor] {
		return ReplyResult{RequestID: requestID, Status: "deferred"}, nil
	}
	var idem *IdempotencyRecord
	letter, err := s.sendLocked(ctx, t, actor, record.Sender, EncodeReplyLetter(response), true, func(m Message) *Intent {
		out = ReplyResult{RequestID: requestID, Status: "queued", Receipt: m.ID}
		if idemKey != "" {
			idem = &IdempotencyRecord{Member: actor, Key: idemKey, Fingerprint: fp, Result: mustJSON(out), At: s.now().UTC()}
		}
		in := &Intent{Op: IntentReply, Letter: m, RequestID: requestID, Reply: &response, Idempotency: idem}
		if closing {
			in.Close = actor
		}
		return in
	})
	if err != nil {
		return ReplyResult{}, err
	}
	t.st.Intent = nil
	record.Reply = &response
	if closing {
		t.member(actor).Status = StatusClosed
	}
	if idem != nil {
		t.remember(*idem)
	}
	s.saveAfterLetter(ctx, t)
	s.emit("reply", t.st.Name, copyRequest(*record))
	if closing {
		s.emit("member", t.st.Name, s.memberViewLocked(ctx, t, t.member(actor)))
	}
	return ReplyResult{RequestID: requestID, Status: "queued", Receipt: letter.ID}, nil
}

func boolWord(b bool) string {
	if b {
		return "true"
	}
	return "false"
}

// Match reasons for ignored letters (SPEC §4.11, §13.6).
const (
	ReasonOrdinary        = "ordinary_message"
	ReasonInvalidResponse = "invalid_response"
	ReasonIDOrType        = "id_or_type"
	ReasonRoleOrRecipient = "role_or_recipient"
	ReasonNotSavedReply   = "not_saved_reply"
	ReasonInvalidProtocol = "invalid_protocol"
)

// matchLocked is match_response (SPEC §4.11) for one letter consumed by
// recipient, with read_protocol's failures reported as invalid_protocol
// (SPEC §13.6). It reports whether a request changed status.
func (t *team) matchLocked(recipient string, msg Message) (MatchResult, bool) {
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
	if !exactKeys(data, "type", "request_id", "approve", "feedback") || !okApprove || !okFeedback || Length(feedback) > t.st.Limits.FeedbackChars {
		return ignored(ReasonInvalidResponse)
	}
	record := t.request(requestID)
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
// request table (match_response, SPEC §4.11).
func (s *Service) MatchResponse(ctx context.Context, teamName, recipient string, msg Message) (MatchResult, error) {
	t, err := s.lockTeam(teamName)
	if err != nil {
		return MatchResult{}, err
	}
	defer t.mu.Unlock()
	results, err := s.matchAllLocked(ctx, t, recipient, []Message{msg})
	if err != nil {
		return MatchResult{}, err
	}
	return results[0], nil
}

// Consume matches every letter of member's inbox, in order, against the
// request table (consume_responses, SPEC §4.12). It deletes nothing;
// re-consuming yields duplicate or ignored, both harmless.
//
// The member is the caller (the principal in the context): only a member
// consumes, and only its own inbox.
func (s *Service) Consume(ctx context.Context, teamName string) ([]MatchResult, error) {
	member, err := actor(ctx, teamName)
	if err != nil {
		return nil, err
	}
	t, err := s.lockTeam(teamName)
	if err != nil {
		return nil, err
	}
	defer t.mu.Unlock()
	return s.consumeLocked(ctx, t, member)
}

func (s *Service) consumeLocked(ctx context.Context, t *team, member string) ([]MatchResult, error) {
	if !t.isMember(member) {
		return nil, Errorf(CodeNotFound, "No such member.")
	}
	items, err := s.store.LoadInbox(ctx, t.st.Name, t.rules(member))
	if err != nil {
		return nil, asStoreError(err)
	}
	return s.matchAllLocked(ctx, t, member, items)
}

// matchAllLocked matches letters and persists the statuses that changed;
// if that write fails the statuses are restored and nothing is reported.
func (s *Service) matchAllLocked(ctx context.Context, t *team, recipient string, items []Message) ([]MatchResult, error) {
	results := make([]MatchResult, 0, len(items))
	var changed []*Request
	for _, m := range items {
		r, ok := t.matchLocked(recipient, m)
		results = append(results, r)
		if ok {
			changed = append(changed, t.request(r.RequestID))
		}
	}
	if len(changed) == 0 {
		return results, nil
	}
	if err := s.store.SaveTeam(ctx, t.st); err != nil {
		for _, r := range changed {
			r.Status = RequestPending
		}
		return nil, StorageError(err)
	}
	for _, r := range changed {
		s.emit("match", t.st.Name, copyRequest(*r))
	}
	return results, nil
}

// Requests lists a team's requests in id order.
func (s *Service) Requests(ctx context.Context, teamName string) ([]Request, error) {
	if err := CheckReader(ctx, teamName); err != nil {
		return nil, err
	}
	t, err := s.lookup(teamName)
	if err != nil {
		return nil, err
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	out := make([]Request, 0, len(t.st.Requests))
	for _, r := range t.st.Requests {
		out = append(out, copyRequest(r))
	}
	return out, nil
}

// Request returns one request of a team.
func (s *Service) Request(ctx context.Context, teamName, id string) (Request, error) {
	if err := CheckReader(ctx, teamName); err != nil {
		return Request{}, err
	}
	t, err := s.lookup(teamName)
	if err != nil {
		return Request{}, err
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	r := t.request(id)
	if r == nil {
		return Request{}, Errorf(CodeNotFound, "No such request.")
	}
	return copyRequest(*r), nil
}
