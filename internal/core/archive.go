package core

import (
	"context"
	"encoding/json"
	"slices"
	"sort"
	"strconv"
	"strings"
	"unicode/utf8"
)

// The archive (docs/api.md, "Mail that stays useful"). A member moves
// letters it has read out of its inbox into its archive: they no longer
// count against the inbox's limits, and stay readable (ListArchive), in
// threads, in receipts and acknowledgements. A protocol letter the
// lesson's rules still need (a request still open, a response not yet
// matched, docs/spec.md §4.11–4.12) stays in the inbox.
//
// Letter ids are never reused: the n-th letter sent to a member is
// "<member>-<n>" whether it is in the inbox or the archive. An inbox is no
// longer numbered from 1 once letters left it, so the member's state
// keeps an ArchiveMark, which says which numbers left; with it the
// position of a letter in the inbox and its number map to each other
// without reading the letters, as before.

// ArchiveMark says which letters of a member's inbox are in its archive:
// every letter numbered Through or less, except those numbered in Kept
// (protocol letters still needed, kept in the inbox), ascending. A nil
// mark is an inbox nothing ever left. A unit of work replaces a member's
// mark, never changes it in place.
type ArchiveMark struct {
	Through int   `json:"through"`
	Kept    []int `json:"kept,omitempty"`
}

// Count is how many letters the archive holds.
func (a *ArchiveMark) Count() int {
	if a == nil {
		return 0
	}
	return a.Through - len(a.Kept)
}

// Number is the number of the letter at position pos (from 1) of the
// inbox.
func (a *ArchiveMark) Number(pos int) int {
	if a == nil {
		return pos
	}
	if pos <= len(a.Kept) {
		return a.Kept[pos-1]
	}
	return a.Through + pos - len(a.Kept)
}

// Next is the number of the letter that follows an inbox of n letters.
func (a *ArchiveMark) Next(n int) int { return a.Number(n + 1) }

// Archived reports whether the letter numbered n is in the archive.
func (a *ArchiveMark) Archived(n int) bool {
	if a == nil || n > a.Through {
		return false
	}
	_, kept := slices.BinarySearch(a.Kept, n)
	return !kept
}

// Position is the position in the inbox of the letter numbered n, 0 when
// it is in the archive.
func (a *ArchiveMark) Position(n int) int {
	if a == nil {
		return n
	}
	if n > a.Through {
		return len(a.Kept) + n - a.Through
	}
	if i, kept := slices.BinarySearch(a.Kept, n); kept {
		return i + 1
	}
	return 0
}

// Sent is how many letters a member whose inbox holds n letters has been
// sent, archived ones included.
func (a *ArchiveMark) Sent(n int) int { return a.Next(n) - 1 }

// LastRead is the number of the last letter read by a member whose
// cursor is at position pos of the inbox, 0 for none: the letter at the
// cursor or the last one archived (every archived letter was read),
// whichever came later.
func (a *ArchiveMark) LastRead(pos int) int {
	n := 0
	if pos > 0 {
		n = a.Number(pos)
	}
	if a == nil {
		return n
	}
	last := a.Through
	for i := len(a.Kept) - 1; i >= 0 && a.Kept[i] == last; i-- {
		last--
	}
	return max(n, last)
}

// Equal reports whether a and b mark the same letters.
func (a *ArchiveMark) Equal(b *ArchiveMark) bool {
	return a.Count() == b.Count() && (a == nil || b == nil || a.Through == b.Through && slices.Equal(a.Kept, b.Kept))
}

// ArchiveResult answers an archive: how many letters moved, and how many
// stay in the inbox.
type ArchiveResult struct {
	Archived    int `json:"archived"`
	InboxLength int `json:"inbox_length"`
}

// MaxArchivePage bounds the letters one archive read returns.
const MaxArchivePage = 1000

// ArchiveInbox moves member's letters through the letter whose id is
// through, all of which it has read, into its archive, but for the
// protocol letters still needed. The member itself or the admin may. An
// id after the read cursor is not_read; one that names no letter of this
// inbox validation_failed. Letters already archived count for nothing.
func (s *Service) ArchiveInbox(ctx context.Context, teamName, member, through string) (ArchiveResult, error) {
	if err := CheckSelfOrAdmin(ctx, teamName, member); err != nil {
		return ArchiveResult{}, err
	}
	who, n, ok := ParseLetterID(through)
	if !ok || who != member {
		return ArchiveResult{}, Errorf(CodeValidation, "through must be the id of a letter of this inbox, <member>-<n>.")
	}
	var out ArchiveResult
	err := s.update(ctx, teamName, func(u *unit) error {
		if !u.isMember(member) {
			return u.noSuchMember()
		}
		mark := u.member(member).Archive
		total, err := inboxLen(u.tx, member)
		if err != nil {
			return asStoreError(err)
		}
		if n > mark.Sent(total) {
			return Errorf(CodeValidation, "through names no letter of this inbox.")
		}
		cur, err := u.tx.ReadThrough(member)
		if err != nil {
			return asStoreError(err)
		}
		if n > mark.LastRead(cur) {
			return Errorf(CodeNotRead, "Only letters already read can be archived: through is after the read cursor. Mark the letters read first.")
		}
		moved, err := u.archive(member, n)
		if err != nil {
			return err
		}
		out = ArchiveResult{Archived: moved, InboxLength: total - moved}
		return nil
	})
	return out, err
}

// archive moves member's letters numbered n or less, which it has read,
// into its archive, but for the protocol letters still needed, moves its
// read cursor back by as many, and returns how many moved.
func (u *unit) archive(member string, n int) (int, error) {
	m := u.member(member)
	items, err := u.tx.LoadInbox(member)
	if err != nil {
		return 0, asStoreError(err)
	}
	old := m.Archive
	next := &ArchiveMark{Through: n}
	if old != nil {
		next.Through = max(old.Through, n)
	}
	var moved []int
	for i, l := range items {
		switch num := old.Number(i + 1); {
		case num > next.Through:
			// After the mark: stays, as every later letter.
		case num > n || u.stillNeeded(member, l):
			// Kept before and after through, or still needed.
			next.Kept = append(next.Kept, num)
		default:
			moved = append(moved, num)
		}
	}
	if len(moved) == 0 {
		return 0, nil
	}
	if len(next.Kept) == 0 {
		next.Kept = nil
	}
	cur, err := u.tx.ReadThrough(member)
	if err != nil {
		return 0, asStoreError(err)
	}
	if err := u.tx.ArchiveLetters(member, next, moved); err != nil {
		return 0, asStoreError(err)
	}
	m = u.member(member)
	if err := u.tx.SetReadThrough(member, cur-len(moved)); err != nil {
		return 0, asStoreError(err)
	}
	u.emit(EventMember, u.memberView(m))
	return len(moved), nil
}

// stillNeeded reports whether letter l of member's inbox is a protocol
// letter the lesson's rules still need: a request its target has yet to
// answer, or a response to a request still pending (consume_responses
// has yet to match it).
func (u *unit) stillNeeded(member string, l Message) bool {
	rest, ok := strings.CutPrefix(l.Body, ProtocolPrefix)
	if !ok {
		return false
	}
	var data map[string]json.RawMessage
	if json.Unmarshal([]byte(rest), &data) != nil {
		return false
	}
	typ, ok1 := jsonString(data["type"])
	id, ok2 := jsonString(data["request_id"])
	if !ok1 || !ok2 {
		return false
	}
	r := u.request(id)
	if r == nil || r.Status != RequestPending {
		return false
	}
	return typ == r.Kind+"_request" && member == r.Target && r.Reply == nil || typ == r.Kind+"_response" && member == r.Sender
}

// autoArchive archives, when the team's limits ask for it, the letters
// recipient has read: what a send that finds its inbox full does first.
// It reports whether any letter moved.
func (u *unit) autoArchive(recipient string) (bool, error) {
	if !u.st.Limits.AutoArchive {
		return false, nil
	}
	cur, err := u.tx.ReadThrough(recipient)
	if err != nil || cur == 0 {
		return false, asStoreError(err)
	}
	moved, err := u.archive(recipient, u.member(recipient).Archive.LastRead(cur))
	return moved > 0, err
}

// ListArchive returns member's archived letters after the letter whose id
// is after ("": from the first), at most limit (1..MaxArchivePage), in
// the order they were sent. The member itself or the admin may read it.
func (s *Service) ListArchive(ctx context.Context, teamName, member, after string, limit int) ([]Message, error) {
	if err := CheckSelfOrAdmin(ctx, teamName, member); err != nil {
		return nil, err
	}
	if limit < 1 || limit > MaxArchivePage {
		return nil, Errorf(CodeValidation, "limit must be 1 to %d.", MaxArchivePage)
	}
	from := 0
	if after != "" {
		who, n, ok := ParseLetterID(after)
		if !ok || who != member {
			return nil, Errorf(CodeValidation, "after must be the id of a letter of this inbox, <member>-<n>.")
		}
		from = n
	}
	var out []Message
	err := s.view(ctx, teamName, true, func(u *unit) error {
		if !u.isMember(member) {
			return u.noSuchMember()
		}
		page, err := archivePage(u.tx, member, from, limit)
		out = slices.Clone(page)
		return asStoreError(err)
	})
	return out, err
}

// ArchivePager is implemented by a snapshot that reads a page of an
// archive without the rest of it (a database): at most limit letters of
// member's archive numbered after after, in number order.
type ArchivePager interface {
	ArchivePage(member string, after, limit int) ([]Message, error)
}

// archivePage is a page of member's archive: the store's own when it
// reads pages, else cut from the whole archive.
func archivePage(tx TeamTx, member string, after, limit int) ([]Message, error) {
	if p, ok := tx.(ArchivePager); ok {
		return p.ArchivePage(member, after, limit)
	}
	items, err := tx.LoadArchive(member)
	if err != nil {
		return nil, err
	}
	return PageOf(items, after, limit), nil
}

// PageOf is at most limit of items (letters of one member, in number
// order) numbered after after.
func PageOf(items []Message, after, limit int) []Message {
	i := sort.Search(len(items), func(i int) bool { return letterNumberOf(items[i]) > after })
	return items[i:min(len(items), i+limit)]
}

// letterNumberOf is n of a stored letter's id, <recipient>-<n>.
func letterNumberOf(m Message) int {
	n, _ := strconv.Atoi(m.ID[len(m.Recipient)+1:])
	return n
}

// DecodeArchive parses and validates the bytes of a member's archive file:
// lines as an inbox's (DecodeInbox), each a letter the member's mark says
// is archived, none twice, in any order (a letter kept for the rules is
// archived after later ones). It returns them in the order they were
// sent. Any failure is inbox_corrupt.
func DecodeArchive(data []byte, rules InboxRules) ([]Message, error) {
	if !utf8.Valid(data) {
		return nil, corrupt(ErrInboxEncoding)
	}
	var out []Message
	if len(data) == 0 {
		return out, nil
	}
	seen := map[int]bool{}
	for _, line := range strings.Split(strings.TrimSuffix(string(data), "\n"), "\n") {
		var obj map[string]json.RawMessage
		if len(line) == 0 || line[0] != '{' || json.Unmarshal([]byte(line), &obj) != nil || !letterKeys(obj) {
			return nil, corrupt(ErrInboxFields)
		}
		msg, err := decodeLetter(obj, rules)
		if err != nil {
			return nil, err
		}
		n := letterNumberOf(msg)
		if !rules.Archive.Archived(n) || seen[n] {
			return nil, corrupt(ErrInboxSequence)
		}
		seen[n] = true
		out = append(out, msg)
	}
	slices.SortFunc(out, func(a, b Message) int { return letterNumberOf(a) - letterNumberOf(b) })
	return out, nil
}

// findLetter returns the letter of the team whose id is id, from its
// recipient's inbox or archive, with its position in the inbox (0: in the
// archive, which only letters already read reach).
func (u *unit) findLetter(id string) (Message, int, bool, error) {
	member, n, ok := ParseLetterID(id)
	if !ok || !u.isMember(member) {
		return Message{}, 0, false, nil
	}
	mark := u.member(member).Archive
	if mark.Archived(n) {
		items, err := u.tx.LoadArchive(member)
		if err != nil {
			return Message{}, 0, false, asStoreError(err)
		}
		i, found := slices.BinarySearchFunc(items, n, func(m Message, n int) int { return letterNumberOf(m) - n })
		if !found {
			return Message{}, 0, false, nil
		}
		return items[i], 0, true, nil
	}
	items, err := u.tx.LoadInbox(member)
	if err != nil {
		return Message{}, 0, false, asStoreError(err)
	}
	pos := mark.Position(n)
	if pos < 1 || pos > len(items) {
		return Message{}, 0, false, nil
	}
	return items[pos-1], pos, true, nil
}

// autoArchiveWanted, inside an inbox_full error, asks update to archive
// what member has read and run the unit again (limits.auto_archive).
// It wraps the refusal's cause, so errors.Is still finds it.
type autoArchiveWanted struct {
	member string
	cause  error
}

func (w autoArchiveWanted) Error() string {
	return "core: the recipient's inbox is full; auto_archive asks for an archive first: " + w.cause.Error()
}

func (w autoArchiveWanted) Unwrap() error { return w.cause }

// fullInbox is the refusal of a letter that does not fit recipient's
// inbox (inboxFull); when the team auto-archives, the recipient has read
// letters and this run did not follow an auto-archive already, it also
// asks update for one. Anything that swallows it still reads inbox_full.
func (u *unit) fullInbox(recipient, limit string, value int) error {
	err := inboxFull(limit, value)
	if !u.st.Limits.AutoArchive || u.autoArchived {
		return err
	}
	if cur, rerr := u.tx.ReadThrough(recipient); rerr != nil || cur == 0 {
		return err
	}
	err.Err = autoArchiveWanted{member: recipient, cause: err.Err}
	return err
}
