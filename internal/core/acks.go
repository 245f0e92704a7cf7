package core

import (
	"context"
	"slices"
	"time"
	"unicode/utf8"
)

// Acknowledgements (docs/api.md, "Mail that stays useful"). A letter sent
// with ack_required asks its recipient to say, once, what became of the
// work it asked for: done, blocked or rejected, with a note. The letter
// itself is never rewritten (an inbox is append-only); the acks are the
// team's, kept in its state (TeamState.Acks), and receipts show them to
// the sender beside attended and read.

// The outcomes of an acknowledgement.
const (
	AckDone     = "done"
	AckBlocked  = "blocked"
	AckRejected = "rejected"
)

// MaxAckNoteChars bounds an acknowledgement's note.
const MaxAckNoteChars = 600

// Ack is one acknowledgement as the team's state keeps it: the letter's
// id, the outcome, the note and when it was given.
type Ack struct {
	ID      string    `json:"id"`
	Outcome string    `json:"outcome"`
	Note    string    `json:"note"`
	At      time.Time `json:"at"`
}

// AckView is an acknowledgement as a receipt shows it.
type AckView struct {
	Outcome string    `json:"outcome"`
	Note    string    `json:"note"`
	At      time.Time `json:"at"`
}

// AckEvent is the payload of an ack event: the letter, who acknowledged
// it (its recipient) and who asked (its sender), and the answer.
type AckEvent struct {
	ID      string    `json:"id"`
	From    string    `json:"from"`
	To      string    `json:"to"`
	Outcome string    `json:"outcome"`
	Note    string    `json:"note"`
	At      time.Time `json:"at"`
}

// AckInput is one acknowledgement: Member, the letter's recipient, acks
// the letter ID of its inbox.
type AckInput struct {
	Team, Member, ID string
	Outcome          string
	Note             string
}

// ackOf returns the acknowledgement of the letter id, nil when none.
func (st *TeamState) ackOf(id string) *Ack {
	for i := range st.Acks {
		if st.Acks[i].ID == id {
			return &st.Acks[i]
		}
	}
	return nil
}

// AckLetter records in.Member's acknowledgement of a letter of its own
// inbox that asked for one, and returns the letter's receipt. Only the
// recipient may ack (others and the admin: forbidden); a letter that
// asked for none is ack_not_required, a second ack already_acked.
func (s *Service) AckLetter(ctx context.Context, in AckInput) (Receipt, error) {
	if err := CheckSelf(ctx, in.Team, in.Member); err != nil {
		return Receipt{}, err
	}
	switch in.Outcome {
	case AckDone, AckBlocked, AckRejected:
	default:
		return Receipt{}, Errorf(CodeValidation, "outcome must be done, blocked or rejected.")
	}
	note := Trim(in.Note)
	if !utf8.ValidString(in.Note) || Length(note) > MaxAckNoteChars {
		return Receipt{}, Errorf(CodeValidation, "The note must be at most %d characters.", MaxAckNoteChars)
	}
	who, pos, ok := ParseLetterID(in.ID)
	if !ok {
		return Receipt{}, Errorf(CodeValidation, "The id must be a letter id, <member>-<n> with n a decimal number without sign or leading zero.")
	}
	var out Receipt
	err := s.update(ctx, in.Team, func(u *unit) error {
		if !u.isMember(in.Member) {
			return u.noSuchMember()
		}
		items, err := u.tx.LoadInbox(in.Member)
		if err != nil {
			return asStoreError(err)
		}
		if who != in.Member || pos > len(items) {
			return Errorf(CodeNotFound, "No letter of this inbox has that id.")
		}
		letter := items[pos-1]
		if !letter.AckRequired {
			return Errorf(CodeAckNotRequired, "This letter did not ask for an acknowledgement.")
		}
		if u.st.ackOf(letter.ID) != nil {
			return Errorf(CodeAlreadyAcked, "This letter is already acknowledged; an acknowledgement cannot change.")
		}
		a := Ack{ID: letter.ID, Outcome: in.Outcome, Note: note, At: u.now.UTC()}
		// A new slice: the state a unit copies shares its slices it
		// only replaces (TeamState.UnitCopy).
		u.st.Acks = append(slices.Clip(u.st.Acks), a)
		u.emit(EventAck, AckEvent{ID: a.ID, From: letter.Recipient, To: letter.Sender, Outcome: a.Outcome, Note: a.Note, At: a.At})
		out, err = u.receipt(letter, pos, map[string]map[string]bool{})
		return err
	})
	return out, err
}

// receipt is the receipt of letter, the pos-th of its recipient's inbox.
// attended caches, by member, the texts its turns have attended.
func (u *unit) receipt(letter Message, pos int, attended map[string]map[string]bool) (Receipt, error) {
	member := letter.Recipient
	cur, err := u.tx.ReadThrough(member)
	if err != nil {
		return Receipt{}, asStoreError(err)
	}
	seen, ok := attended[member]
	if !ok {
		seen = map[string]bool{}
		if m := u.member(member); m != nil {
			for _, e := range m.History {
				if e.Role == "user" && e.Blocks == nil {
					seen[e.Text] = true
				}
			}
			for _, t := range m.Attended {
				seen[t] = true
			}
		}
		attended[member] = seen
	}
	r := Receipt{ID: letter.ID, To: member, Attended: seen[HistoryText(letter)], Read: pos <= cur}
	if a := u.st.ackOf(letter.ID); a != nil {
		r.Ack = &AckView{Outcome: a.Outcome, Note: a.Note, At: a.At}
	}
	return r, nil
}
