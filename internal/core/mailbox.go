package core

import (
	"context"
	"errors"
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"
)

// ErrHistoryLimit is the cause when a prepared history would exceed the
// team's history limit (E-HISTORY, docs/spec.md §4.5).
var ErrHistoryLimit = errors.New("prepared history exceeds the history limit")

// memberError is E-NAME: a name that is malformed or not in the team. The
// lesson's sentence comes first; then the name given and the team's
// members, so that a person or a model can correct the call at once
// (docs/spec.md §6).
func memberError(name string, st *TeamState) *Error {
	names := make([]string, 0, len(st.Members))
	for _, m := range st.Members {
		names = append(names, m.Name)
	}
	return Errorf(CodeUnknownMember, "Only registered member names may be used: %s is not a member of team %s, whose members are %s.",
		quoteShort(name), st.Name, strings.Join(names, ", "))
}

// quoteShort quotes a name as given, cut to 64 characters: an error
// message repeats what the caller sent, never unbounded text.
func quoteShort(s string) string {
	const most = 64
	if utf8.RuneCountInString(s) > most {
		r := []rune(s)
		return strconv.Quote(string(r[:most])) + "…"
	}
	return strconv.Quote(s)
}

// checkMember applies member_name (docs/spec.md §4.1).
func (u *unit) checkMember(name string) error {
	if !ValidName(name) || !u.isMember(name) {
		return memberError(name, u.st)
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
	// InReplyTo, when not empty, is the id of the letter this one
	// answers: a letter of the team the sender sent or received
	// (threads.go).
	InReplyTo string
	// AckRequired asks the recipient for an acknowledgement (acks.go).
	AckRequired bool
}

// fingerprint is what an idempotent send is recognised by: a letter
// without in_reply_to or ack_required keeps the fingerprint sends had
// before they existed, so that records stored then still match.
func (in SendInput) fingerprint() string {
	if in.InReplyTo == "" && !in.AckRequired {
		return fingerprint("send", in.To, in.Body)
	}
	ack := "0"
	if in.AckRequired {
		ack = "1"
	}
	return fingerprint("send", in.To, in.Body, in.InReplyTo, ack)
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
	if in.InReplyTo != "" {
		if _, _, ok := ParseLetterID(in.InReplyTo); !ok {
			return SendResult{}, Errorf(CodeValidation, "in_reply_to must be a letter id, <member>-<n> with n a decimal number without sign or leading zero.")
		}
	}
	var out SendResult
	fp := in.fingerprint()
	err = s.update(ctx, in.Team, func(u *unit) error {
		if found, err := u.replay(sender, in.IdempotencyKey, fp, &out); found || err != nil {
			return err
		}
		msg, err := u.sendLetter(Message{Sender: sender, Recipient: in.To, Body: in.Body, InReplyTo: in.InReplyTo, AckRequired: in.AckRequired}, false)
		if err != nil {
			return err
		}
		out = SendResult{ID: msg.ID, Status: "queued"}
		return u.remember(sender, in.IdempotencyKey, fp, out)
	})
	if err != nil {
		return SendResult{}, err
	}
	return out, nil
}

// send is send_message inside a unit of work: the letter is appended to
// the recipient's inbox and commits with whatever else the unit does.
// protocol changes only the wording of a body_length error (docs/spec.md §13.5).
func (u *unit) send(sender, recipient, body string, protocol bool) (Message, error) {
	return u.sendLetter(Message{Sender: sender, Recipient: recipient, Body: body}, protocol)
}

// sendLetter is send with the letter's own fields: in.Sender, Recipient
// and Body as send takes them, and InReplyTo and AckRequired as a send
// over REST, MCP or a tool asks (the id, ThreadID and Seq are given
// here).
func (u *unit) sendLetter(in Message, protocol bool) (Message, error) {
	sender, recipient, body := in.Sender, in.Recipient, in.Body
	if err := u.checkMember(sender); err != nil {
		return Message{}, err
	}
	if err := u.checkMember(recipient); err != nil {
		return Message{}, err
	}
	limits := u.st.Limits
	trimmed := Trim(body)
	if n := Length(trimmed); !utf8.ValidString(body) || n < 1 || n > limits.BodyChars {
		if protocol {
			return Message{}, Errorf(CodeBodyLength, "The encoded protocol letter is longer than the body limit of %d characters.", limits.BodyChars)
		}
		return Message{}, Errorf(CodeBodyLength, "The body must be 1 to %d characters after trimming.", limits.BodyChars)
	}
	n, err := inboxLen(u.tx, recipient)
	if err != nil {
		return Message{}, asStoreError(err)
	}
	if n >= limits.InboxMessages {
		return Message{}, inboxFull("inbox_messages", limits.InboxMessages)
	}
	msg := Message{ID: letterID(recipient, n+1), Sender: sender, Recipient: recipient, Body: trimmed, AckRequired: in.AckRequired}
	if in.InReplyTo != "" {
		if err := u.threadLetter(&msg, in.InReplyTo); err != nil {
			return Message{}, err
		}
	}
	if err := u.tx.AppendLetter(msg); err != nil {
		if errors.Is(err, ErrInboxTooLarge) {
			return Message{}, inboxFull("inbox_bytes", limits.InboxBytes)
		}
		return Message{}, asStoreError(err)
	}
	u.emit(EventMessage, msg)
	return msg, nil
}

// asStoreError keeps domain errors (inbox_corrupt) and wraps anything else
// as storage_failed.
func asStoreError(err error) error {
	if err == nil {
		return nil
	}
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
	var out []Message
	err := s.view(ctx, teamName, true, func(u *unit) error {
		var err error
		out, err = inboxOf(u, member)
		return err
	})
	return out, err
}

// inboxOf returns a copy of member's letters as u sees them: the store may
// share its cached slice, and callers get their own.
func inboxOf(u *unit, member string) ([]Message, error) {
	if !u.isMember(member) {
		return nil, u.noSuchMember()
	}
	items, err := u.tx.LoadInbox(member)
	if err != nil {
		return nil, asStoreError(err)
	}
	return slices.Clone(items), nil
}

// InboxBytes returns member's inbox in the lesson's file bytes (one line
// per letter, docs/spec.md §4.3), as its store holds them; an empty inbox is no
// bytes. The caller must be the admin or member itself.
func (s *Service) InboxBytes(ctx context.Context, teamName, member string) ([]byte, error) {
	if err := CheckSelfOrAdmin(ctx, teamName, member); err != nil {
		return nil, err
	}
	var out []byte
	err := s.view(ctx, teamName, true, func(u *unit) error {
		if !u.isMember(member) {
			return u.noSuchMember()
		}
		data, err := u.tx.InboxBytes(member)
		if err != nil {
			return asStoreError(err)
		}
		out = slices.Clone(data)
		return nil
	})
	return out, err
}

// PrepareInbox returns a copy of history with every letter of member's
// inbox appended as a [team-message] user entry, then every task assigned
// to member that it could claim now (ClaimableTasks) as a [team-task]
// entry, unless an identical entry is already there (prepare_inbox,
// docs/spec.md §4.5). Delivery is at-least-once and idempotent by exact
// text; history itself is never modified. A team with no task assigned
// to member gets exactly the lesson's prepare_inbox.
func (s *Service) PrepareInbox(ctx context.Context, teamName, member string, history []Entry) ([]Entry, error) {
	if err := CheckSelfOrAdmin(ctx, teamName, member); err != nil {
		return nil, err
	}
	if tr := TurnFrom(ctx); tr != nil {
		// The loop prepares each model request here, the first one too.
		tr.requestStarts(s.now())
	}
	var texts, kept []string
	var limit int
	err := s.view(ctx, teamName, true, func(u *unit) error {
		if err := u.checkMember(member); err != nil {
			return err
		}
		var skills []string
		if m := u.member(member); m != nil {
			kept, skills = m.Attended, m.Skills
		}
		items, err := u.tx.LoadInbox(member)
		if err != nil {
			return asStoreError(err)
		}
		tasks, err := u.tx.Tasks()
		if err != nil {
			return asStoreError(err)
		}
		limit = u.st.Limits.HistoryEntries
		texts = make([]string, 0, len(items))
		for _, m := range items {
			texts = append(texts, HistoryText(m))
		}
		for _, t := range ClaimableTasks(tasks, member, skills) {
			texts = append(texts, TaskHistoryText(t))
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	if TurnFrom(ctx) != nil {
		return turnCandidate(history, texts, kept, limit)
	}
	return prepareCandidate(history, texts, limit)
}

// turnCandidate is what a turn's model request is sent (docs/api.md, "No
// member is disabled by its mail"): history with the oldest of texts not
// yet attended (in history, or kept as attended when it was cleared) that
// fit in limit with room left for the answer; the rest stay unattended
// for a later turn. A history with no room for an answer is history_full.
func turnCandidate(history []Entry, texts, kept []string, limit int) ([]Entry, error) {
	if len(history)+1 > limit {
		return nil, historyFull(limit)
	}
	candidate := cloneEntries(history)
	present := attended(candidate)
	for _, line := range kept {
		present[line] = true
	}
	for _, text := range texts {
		if len(candidate)+1 >= limit {
			break
		}
		if !present[text] {
			candidate = append(candidate, UserText(text))
			present[text] = true
		}
	}
	return candidate, nil
}

// historyFull is the refusal of a turn that has no room in the member's
// history.
func historyFull(limit int) error {
	return Errorf(CodeHistoryFull, "The member's history holds limits.history_entries (%d) entries less one answer: no unattended letter fits. Reset the member with {\"history\": \"clear\"} to empty it.", limit)
}

// prepareCandidate appends each of texts not yet a plain user entry of
// history to a copy of it.
func prepareCandidate(history []Entry, texts []string, limit int) ([]Entry, error) {
	candidate := cloneEntries(history)
	present := attended(candidate)
	for _, text := range texts {
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
