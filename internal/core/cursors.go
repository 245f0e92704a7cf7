package core

import "context"

// Read cursors and receipts (docs/api.md, "Read cursors and receipts").
//
// A member's read cursor is a position in its inbox: how many of its
// letters it has read, oldest first. Letters are never removed and the
// n-th letter of member's inbox is always "<member>-<n>", so the position
// names the letter (read_through) and the unread count is the inbox's
// length less the position: neither needs the letters themselves, so a
// member document costs the same over a long inbox as over an empty one.
// The position is stored by the store beside the inbox (TeamTx.ReadThrough),
// not in the team's state, so that moving it writes a few bytes rather than
// the whole state.

// MaxReceiptIDs bounds the letters one receipts call asks about.
const MaxReceiptIDs = 100

// ReadState is a member's read cursor as clients see it.
type ReadState struct {
	// ReadThrough is the id of the last letter read, nil before any.
	ReadThrough *string `json:"read_through"`
	// Unread counts the letters after it.
	Unread int `json:"unread"`
}

// Receipt says what became of one letter at its recipient: whether it
// went into one of the recipient's turns (attended), whether the
// recipient has read it, and its acknowledgement (acks.go), nil until
// one is given.
type Receipt struct {
	ID       string   `json:"id"`
	To       string   `json:"to"`
	Attended bool     `json:"attended"`
	Read     bool     `json:"read"`
	Ack      *AckView `json:"ack"`
}

// readState is member's cursor and unread count as u sees them, n being
// the number of letters in its inbox (a damaged inbox counts none, as
// inbox_length does).
func (u *unit) readState(member string, n int) (ReadState, error) {
	pos, err := u.tx.ReadThrough(member)
	if err != nil {
		return ReadState{}, asStoreError(err)
	}
	rs := ReadState{}
	if pos > 0 {
		id := letterID(member, pos)
		rs.ReadThrough = &id
	}
	if n > pos {
		rs.Unread = n - pos
	}
	return rs, nil
}

// moveCursor moves member's cursor forward to pos and announces the
// member; a position at or behind the cursor changes nothing. It returns
// the cursor after the move.
func (u *unit) moveCursor(member string, pos int) (int, error) {
	cur, err := u.tx.ReadThrough(member)
	if err != nil {
		return 0, asStoreError(err)
	}
	if pos <= cur {
		return cur, nil
	}
	if err := u.tx.SetReadThrough(member, pos); err != nil {
		return 0, asStoreError(err)
	}
	if m := u.member(member); m != nil {
		u.emit(EventMember, u.memberView(m))
	}
	return pos, nil
}

// MarkRead moves member's read cursor through the letter whose id is
// through. Only the member itself may move its cursor (the admin and
// other members: forbidden). The cursor never moves back: an id at or
// before it answers the cursor as it is. An id that is no letter of this
// inbox is validation_failed.
func (s *Service) MarkRead(ctx context.Context, teamName, member, through string) (ReadState, error) {
	if err := CheckSelf(ctx, teamName, member); err != nil {
		return ReadState{}, err
	}
	var out ReadState
	err := s.update(ctx, teamName, func(u *unit) error {
		if !u.isMember(member) {
			return u.noSuchMember()
		}
		who, pos, ok := ParseLetterID(through)
		if !ok || who != member {
			return Errorf(CodeValidation, "through names no letter of this inbox.")
		}
		n, err := inboxLen(u.tx, member)
		if err != nil {
			return asStoreError(err)
		}
		if pos > n {
			return Errorf(CodeValidation, "through names no letter of this inbox.")
		}
		cur, err := u.moveCursor(member, pos)
		if err != nil {
			return err
		}
		// Answered from what is known: no second look at the store.
		id := letterID(member, cur)
		out = ReadState{ReadThrough: &id, Unread: n - cur}
		return nil
	})
	return out, err
}

// ReadState returns member's read cursor and unread count; the admin or
// the member itself may ask.
func (s *Service) ReadState(ctx context.Context, teamName, member string) (ReadState, error) {
	if err := CheckSelfOrAdmin(ctx, teamName, member); err != nil {
		return ReadState{}, err
	}
	var out ReadState
	err := s.view(ctx, teamName, true, func(u *unit) error {
		if !u.isMember(member) {
			return u.noSuchMember()
		}
		n, err := inboxLen(u.tx, member)
		if err != nil {
			return asStoreError(err)
		}
		out, err = u.readState(member, n)
		return err
	})
	return out, err
}

// UnreadAfter returns the id of the last letter member has read, "" when
// it has read none: the `after` of a read of its unread letters. The
// admin or the member itself may ask.
func (s *Service) UnreadAfter(ctx context.Context, teamName, member string) (string, error) {
	rs, err := s.ReadState(ctx, teamName, member)
	if err != nil || rs.ReadThrough == nil {
		return "", err
	}
	return *rs.ReadThrough, nil
}

// Receipts says, for each letter id in the order asked, whether its
// recipient has read it. The ids are checked in order and the first that
// fails decides: no letter of the team is not_found, a letter the caller
// (a member) did not send is forbidden; the admin may ask about any
// letter. 1 to MaxReceiptIDs ids, else validation_failed.
func (s *Service) Receipts(ctx context.Context, teamName string, ids []string) ([]Receipt, error) {
	if err := CheckReader(ctx, teamName); err != nil {
		return nil, err
	}
	if len(ids) < 1 || len(ids) > MaxReceiptIDs {
		return nil, Errorf(CodeValidation, "ids must name 1 to %d letters.", MaxReceiptIDs)
	}
	p, _ := PrincipalFrom(ctx)
	caller := ""
	if !p.Admin {
		caller = p.Member
	}
	for _, id := range ids {
		if _, _, ok := ParseLetterID(id); !ok {
			return nil, Errorf(CodeValidation, "Each id must be a letter id, <member>-<n> with n a decimal number without sign or leading zero.")
		}
	}
	out := make([]Receipt, 0, len(ids))
	err := s.view(ctx, teamName, true, func(u *unit) error {
		inboxes := map[string][]Message{}
		attended := map[string]map[string]bool{}
		for _, id := range ids {
			member, pos, _ := ParseLetterID(id)
			if !u.isMember(member) {
				return Errorf(CodeNotFound, "No letter of this team has that id.")
			}
			items, seen := inboxes[member]
			if !seen {
				var err error
				if items, err = u.tx.LoadInbox(member); err != nil {
					return asStoreError(err)
				}
				inboxes[member] = items
			}
			if pos > len(items) {
				return Errorf(CodeNotFound, "No letter of this team has that id.")
			}
			if caller != "" && items[pos-1].Sender != caller {
				return Errorf(CodeForbidden, "A member may only ask about the letters it sent.")
			}
			r, err := u.receipt(items[pos-1], pos, attended)
			if err != nil {
				return err
			}
			out = append(out, r)
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// markAttended moves member's cursor through the last letter of its inbox
// that history holds (attached by a turn, docs/spec.md §4.5): a turn whose
// outcome commits has read what it was shown.
func (u *unit) markAttended(member string, history []Entry) error {
	items, err := u.tx.LoadInbox(member)
	if err != nil || len(items) == 0 {
		return nil // a damaged inbox moves no cursor; the outcome still commits
	}
	present := map[string]bool{}
	for _, e := range history {
		if e.Role == "user" && e.Blocks == nil {
			present[e.Text] = true
		}
	}
	for i := len(items) - 1; i >= 0; i-- {
		if !present[HistoryText(items[i])] {
			continue
		}
		// The turn's end announces the member (commitEnd).
		if cur, err := u.tx.ReadThrough(member); err != nil || cur >= i+1 {
			return asStoreError(err)
		}
		return asStoreError(u.tx.SetReadThrough(member, i+1))
	}
	return nil
}

// Identity is who a token is: the admin, or a member with its role.
type Identity struct {
	Admin  bool   `json:"admin,omitempty"`
	Team   string `json:"team,omitempty"`
	Member string `json:"member,omitempty"`
	Role   string `json:"role,omitempty"`
}

// Me returns the caller's identity (GET /me): the admin, or its team,
// member and role.
func (s *Service) Me(ctx context.Context) (Identity, error) {
	p, ok := PrincipalFrom(ctx)
	if !ok {
		return Identity{}, Errorf(CodeUnauthorized, "A token is required.")
	}
	if p.Admin {
		return Identity{Admin: true}, nil
	}
	out := Identity{Team: p.Team, Member: p.Member}
	err := s.view(ctx, p.Team, false, func(u *unit) error {
		m := u.member(p.Member)
		if m == nil {
			return u.noSuchMember()
		}
		out.Role = m.Role
		return nil
	})
	return out, err
}
