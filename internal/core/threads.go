package core

import (
	"context"
	"slices"
)

// Threads (docs/api.md, "Mail that stays useful"). A letter sent with
// in_reply_to answers a letter of the team its sender sent or received;
// it carries the id of the letter it answers, the id of its thread's
// first letter and its number among the team's letters sent, which
// orders a thread: letters live in their recipients' inboxes, so nothing
// else tells which of two replies in two inboxes came first. A letter
// sent without in_reply_to carries none of them, so its stored line is
// the lesson's; it begins a thread whose id is its own.

// threadLetter makes msg, a letter of sender msg.Sender being sent, a
// reply to the letter whose id is inReplyTo (canonical, checked before
// the unit began): that letter must be one the sender sent or received,
// else unknown_letter.
func (u *unit) threadLetter(msg *Message, inReplyTo string) error {
	parent, ok, err := u.letter(inReplyTo)
	if err != nil {
		return err
	}
	if !ok || (parent.Sender != msg.Sender && parent.Recipient != msg.Sender) {
		return Errorf(CodeUnknownLetter, "in_reply_to must name a letter of this team that you sent or received.")
	}
	sent, err := u.lettersSent()
	if err != nil {
		return err
	}
	msg.InReplyTo, msg.ThreadID, msg.Seq = parent.ID, parent.Thread(), sent+1
	return nil
}

// letter returns the team's letter with id, if there is one.
func (u *unit) letter(id string) (Message, bool, error) {
	member, pos, ok := ParseLetterID(id)
	if !ok || !u.isMember(member) {
		return Message{}, false, nil
	}
	items, err := u.tx.LoadInbox(member)
	if err != nil {
		return Message{}, false, asStoreError(err)
	}
	if pos > len(items) {
		return Message{}, false, nil
	}
	return items[pos-1], true, nil
}

// lettersSent counts the letters sent in the team so far: the sum over
// its members of the number of the last letter of each inbox. Letter ids
// are never reused, so the count only grows, and a reply's Seq (the
// count after it) orders the replies of a thread as they were sent.
func (u *unit) lettersSent() (int, error) {
	total := 0
	for _, m := range u.st.Members {
		n, err := inboxLen(u.tx, m.Name)
		if err != nil {
			return 0, asStoreError(err)
		}
		total += n
	}
	return total, nil
}

// Thread returns the letters of the thread whose first letter is
// threadID, in the order they were sent: those the caller sent or
// received, all of them for the admin. A thread with none the caller may
// see is not_found, as one that does not exist.
func (s *Service) Thread(ctx context.Context, teamName, threadID string) ([]Message, error) {
	if err := CheckReader(ctx, teamName); err != nil {
		return nil, err
	}
	if _, _, ok := ParseLetterID(threadID); !ok {
		return nil, Errorf(CodeValidation, "The thread id must be a letter id, <member>-<n> with n a decimal number without sign or leading zero.")
	}
	caller := ""
	if p, ok := PrincipalFrom(ctx); ok && !p.Admin {
		caller = p.Member
	}
	var out []Message
	err := s.view(ctx, teamName, true, func(u *unit) error {
		out = nil
		for _, m := range u.st.Members {
			items, err := u.tx.LoadInbox(m.Name)
			if err != nil {
				return asStoreError(err)
			}
			for _, l := range items {
				if l.Thread() == threadID && (caller == "" || l.Sender == caller || l.Recipient == caller) {
					out = append(out, l)
				}
			}
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	if len(out) == 0 {
		return nil, Errorf(CodeNotFound, "No thread with that id has a letter you sent or received.")
	}
	// The first letter has no Seq (0) and comes first; replies follow
	// in the order they were sent.
	slices.SortFunc(out, func(a, b Message) int { return a.Seq - b.Seq })
	return out, nil
}
