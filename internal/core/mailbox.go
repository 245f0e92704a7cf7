package core

import (
	"context"
	"errors"
	"slices"
	"unicode/utf8"
)

// ErrHistoryLimit is the cause when a prepared history would exceed the
// team's history limit (E-HISTORY, SPEC §4.5).
var ErrHistoryLimit = errors.New("prepared history exceeds the history limit")

// memberError is E-NAME: a name that is malformed or not in the team.
func memberError() *Error {
	return Errorf(CodeUnknownMember, "Only registered member names may be used.")
}

// checkMember applies member_name (SPEC §4.1).
func (t *team) checkMember(name string) error {
	if !ValidName(name) || !t.isMember(name) {
		return memberError()
	}
	return nil
}

// SendInput is one letter to send. Its sender is the caller (the principal
// in the context), never a field: no door can send as someone else.
type SendInput struct {
	Team string
	// To names the recipient.
	To   string
	Body string
	// IdempotencyKey, when not empty, makes the call idempotent for its
	// sender (see Idempotency in the README).
	IdempotencyKey string
}

// Send stores in.Body, trimmed, as the next letter of the recipient's inbox
// and returns its id with status "queued" (send_message, docs/spec.md
// §4.4). Queued does not mean the recipient has read it. The caller must be
// a member of the team; it is the letter's sender.
func (s *Service) Send(ctx context.Context, in SendInput) (SendResult, error) {
	sender, err := actor(ctx, in.Team)
	if err != nil {
		return SendResult{}, err
	}
	teamName, recipient, body, idemKey := in.Team, in.To, in.Body, in.IdempotencyKey
	t, err := s.lockTeam(teamName)
	if err != nil {
		return SendResult{}, err
	}
	defer t.mu.Unlock()
	var out SendResult
	fp := fingerprint("send", recipient, body)
	if found, err := t.replay(sender, idemKey, fp, s.now(), &out); found || err != nil {
		return out, err
	}
	var idem *IdempotencyRecord
	if idemKey != "" {
		idem = &IdempotencyRecord{Member: sender, Key: idemKey, Fingerprint: fp}
	}
	msg, err := s.sendLocked(ctx, t, sender, recipient, body, false, func(m Message) *Intent {
		if idem == nil {
			return nil
		}
		idem.At = s.now().UTC()
		idem.Result = mustJSON(SendResult{ID: m.ID, Status: "queued"})
		return &Intent{Op: IntentSend, Letter: m, Idempotency: idem}
	})
	if err != nil {
		return SendResult{}, err
	}
	out = SendResult{ID: msg.ID, Status: "queued"}
	if idem != nil {
		// The record was logged before the letter; the team's state is
		// not written at all (idempotency.go).
		t.remember(*idem)
	}
	return out, nil
}

// sendLocked is send_message under the team lock. When intent is non-nil
// and returns an intent for the letter about to be written, that intent is
// made durable first (SPEC §13.14); the caller completes and clears it.
// protocol changes only the wording of a body_length error (SPEC §13.5).
func (s *Service) sendLocked(ctx context.Context, t *team, sender, recipient, body string, protocol bool, intent func(Message) *Intent) (Message, error) {
	if err := t.checkMember(sender); err != nil {
		return Message{}, err
	}
	if err := t.checkMember(recipient); err != nil {
		return Message{}, err
	}
	trimmed := Trim(body)
	if n := Length(trimmed); !utf8.ValidString(body) || n < 1 || n > t.st.Limits.BodyChars {
		if protocol {
			return Message{}, Errorf(CodeBodyLength, "The encoded protocol letter is longer than the body limit of %d characters.", t.st.Limits.BodyChars)
		}
		return Message{}, Errorf(CodeBodyLength, "The body must be 1 to %d characters after trimming.", t.st.Limits.BodyChars)
	}
	if err := s.clearStaleIntent(ctx, t); err != nil {
		return Message{}, err
	}
	rules := t.rules(recipient)
	items, err := s.store.LoadInbox(ctx, t.st.Name, rules)
	if err != nil {
		return Message{}, asStoreError(err)
	}
	if len(items) >= t.st.Limits.InboxMessages {
		return Message{}, Errorf(CodeInboxFull, "The recipient's inbox is full; old messages are not overwritten.")
	}
	msg := Message{ID: letterID(recipient, len(items)+1), Sender: sender, Recipient: recipient, Body: trimmed}
	if intent != nil {
		if in := intent(msg); in != nil {
			if err := s.recordIntent(ctx, t, in); err != nil {
				return Message{}, err
			}
		}
	}
	if err := s.store.AppendInbox(ctx, t.st.Name, rules, items, msg); err != nil {
		s.dropIntent(ctx, t)
		return Message{}, asStoreError(err)
	}
	s.emit("message", t.st.Name, msg)
	return msg, nil
}

// clearStaleIntent makes sure no intent for an unwritten letter is left
// on disk before a new letter could take its id.
func (s *Service) clearStaleIntent(ctx context.Context, t *team) error {
	if err := s.flushCancels(ctx, t); err != nil {
		return StorageError(err)
	}
	if !t.staleIntent {
		return nil
	}
	if err := s.store.SaveTeam(ctx, t.st); err != nil {
		return StorageError(err)
	}
	t.staleIntent = false
	return nil
}

// saveAfterLetter persists state once a letter and its registration are
// done. The letter is already durable together with its intent, so a
// failure here loses nothing: start-up completes the intent. The failure
// is logged and the next write persists the state.
func (s *Service) saveAfterLetter(ctx context.Context, t *team) {
	if err := s.store.SaveTeam(ctx, t.st); err != nil {
		s.log.ErrorContext(ctx, "saving team state after a letter failed; the recorded intent covers it", "team", t.st.Name, "err", err)
	}
}

// asStoreError keeps domain errors (inbox_corrupt) and wraps anything else
// as storage_failed.
func asStoreError(err error) error {
	var e *Error
	if errors.As(err, &e) {
		return err
	}
	return StorageError(err)
}

func letterID(recipient string, n int) string {
	return recipient + "-" + itoa(n)
}

// Inbox returns member's letters in order. Reading deletes nothing. The
// caller must be the admin or member itself.
func (s *Service) Inbox(ctx context.Context, teamName, member string) ([]Message, error) {
	if err := CheckSelfOrAdmin(ctx, teamName, member); err != nil {
		return nil, err
	}
	t, err := s.lockTeam(teamName)
	if err != nil {
		return nil, err
	}
	defer t.mu.Unlock()
	if !t.isMember(member) {
		return nil, Errorf(CodeNotFound, "No such member.")
	}
	items, err := s.store.LoadInbox(ctx, t.st.Name, t.rules(member))
	if err != nil {
		return nil, asStoreError(err)
	}
	// The store may share its cached slice; callers get their own copy.
	return slices.Clone(items), nil
}

// PrepareInbox returns a copy of history with every letter of member's
// inbox appended as a [team-message] user entry, unless an identical entry
// is already there (prepare_inbox, SPEC §4.5). Delivery is at-least-once
// and idempotent by exact text; history itself is never modified.
func (s *Service) PrepareInbox(ctx context.Context, teamName, member string, history []Entry) ([]Entry, error) {
	if err := CheckSelfOrAdmin(ctx, teamName, member); err != nil {
		return nil, err
	}
	t, err := s.lockTeam(teamName)
	if err != nil {
		return nil, err
	}
	if err := t.checkMember(member); err != nil {
		t.mu.Unlock()
		return nil, err
	}
	items, err := s.store.LoadInbox(ctx, t.st.Name, t.rules(member))
	limit := t.st.Limits.HistoryEntries
	t.mu.Unlock()
	if err != nil {
		return nil, asStoreError(err)
	}
	return prepareCandidate(history, items, limit)
}

func prepareCandidate(history []Entry, items []Message, limit int) ([]Entry, error) {
	candidate := cloneEntries(history)
	present := map[string]bool{}
	for _, e := range candidate {
		if e.Role == "user" && e.Blocks == nil {
			present[e.Text] = true
		}
	}
	for _, m := range items {
		text := HistoryText(m)
		if !present[text] {
			candidate = append(candidate, UserText(text))
			present[text] = true
		}
	}
	if len(candidate) > limit {
		return nil, &Error{Code: CodeValidation, Message: "The prepared history exceeds the team's history limit; it is handed back to the host.", Err: ErrHistoryLimit}
	}
	return candidate, nil
}

func cloneEntries(in []Entry) []Entry {
	out := make([]Entry, len(in))
	for i, e := range in {
		out[i] = Entry{Role: e.Role, Text: e.Text}
		if e.Blocks != nil {
			out[i].Blocks = make([]Block, len(e.Blocks))
			for j, b := range e.Blocks {
				if b.Input != nil {
					b.Input = append([]byte(nil), b.Input...)
				}
				out[i].Blocks[j] = b
			}
		}
	}
	return out
}
