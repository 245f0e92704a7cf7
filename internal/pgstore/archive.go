package pgstore

import (
	"fmt"
	"slices"
	"sync"

	"mailroom/internal/core"
)

// A member's archive only grows, and an archived row never changes: the
// letters its mark (core.ArchiveMark) names are the same rows whoever
// reads them. A replica therefore remembers the archives it read,
// validated (archiveMemo), and a later read under the same mark reads
// nothing, under a later mark only the rows archived since. The file
// store keeps its archives read likewise, until the next move.

// maxMemoLetters bounds the archived letters a replica remembers (tens
// of megabytes at most with the longest bodies).
const maxMemoLetters = 50000

// archiveKey names one member's archive of one incarnation of a team.
type archiveKey struct {
	team        string
	incarnation int64
	member      string
}

// archiveRead is a member's archive as read under mark.
type archiveRead struct {
	mark *core.ArchiveMark
	msgs []core.Message // never changed
}

// archiveMemo is the archives a replica read.
type archiveMemo struct {
	mu      sync.Mutex
	reads   map[archiveKey]archiveRead
	letters int
}

func (m *archiveMemo) get(k archiveKey) (archiveRead, bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	r, ok := m.reads[k]
	return r, ok
}

// put remembers r unless what is remembered is newer, forgetting others
// while the letters remembered would exceed maxMemoLetters.
func (m *archiveMemo) put(k archiveKey, r archiveRead) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.reads == nil {
		m.reads = map[archiveKey]archiveRead{}
	}
	old, had := m.reads[k]
	if had && old.mark.Count() > r.mark.Count() {
		return
	}
	m.letters -= len(old.msgs)
	delete(m.reads, k)
	for other, o := range m.reads {
		if m.letters+len(r.msgs) <= maxMemoLetters {
			break
		}
		m.letters -= len(o.msgs)
		delete(m.reads, other)
	}
	if len(r.msgs) > maxMemoLetters {
		return
	}
	m.reads[k] = r
	m.letters += len(r.msgs)
}

// LoadArchive implements core.Snapshot: the archived rows' lines,
// validated as the file store validates its archive file
// (core.DecodeArchive), and found to be every letter the member's mark
// says left the inbox.
func (t *teamTx) LoadArchive(member string) ([]core.Message, error) {
	msgs, err := t.loadArchive(member)
	return msgs, storeErr(t.ctx, err)
}

// loadArchive reads member's archive, once per unit of work, from what
// this replica remembers and the rows archived since.
func (t *teamTx) loadArchive(member string) ([]core.Message, error) {
	if msgs, ok := t.archives[member]; ok {
		return msgs, nil
	}
	if t.damaged != nil {
		return nil, core.CorruptInbox(t.damaged)
	}
	m := t.st.Member(member)
	if m == nil {
		return nil, fmt.Errorf("pgstore: no member %q", member)
	}
	mark := m.Archive
	msgs := []core.Message{}
	if mark.Count() > 0 {
		var err error
		if msgs, err = t.readArchive(member, mark); err != nil {
			return nil, err
		}
	}
	if t.archives == nil {
		t.archives = map[string][]core.Message{}
	}
	t.archives[member] = msgs
	return msgs, nil
}

// readArchive returns member's archive under mark: remembered, or the
// remembered part and the rows archived after it, validated.
func (t *teamTx) readArchive(member string, mark *core.ArchiveMark) ([]core.Message, error) {
	key := archiveKey{t.name, t.incarnation, member}
	memo := &t.s.archives
	known, _ := memo.get(key)
	if known.mark.Equal(mark) && known.mark != nil {
		return known.msgs, nil
	}
	// A remembered read under another mark helps only if every letter
	// it holds is still archived (marks only grow, but a read of a
	// stale snapshot may be older or newer than this one).
	since, kept := 0, []int{}
	if known.mark != nil && known.mark.Count() < mark.Count() && coveredBy(known.mark, mark) {
		since, kept = known.mark.Through, known.mark.Kept
	} else {
		known = archiveRead{}
	}
	// Rows are read only on the team as stored now (read takes the lock
	// of a unit on what this replica remembered, on condition).
	if err := t.read(); err != nil {
		return nil, err
	}
	data, err := lines(t.ctx, t.tx, `SELECT line FROM letters WHERE team = $1 AND member = $2 AND seq <= $3 AND archived
		AND (seq > $4 OR seq = ANY ($5)) ORDER BY seq`, t.name, member, mark.Through, since, kept)
	if err != nil {
		return nil, err
	}
	added, err := core.DecodeArchive(data, t.st.Rules(member))
	if err != nil {
		return nil, err
	}
	msgs := added
	if len(known.msgs) > 0 {
		msgs = slices.Concat(known.msgs, added)
		slices.SortFunc(msgs, func(a, b core.Message) int { return number(a.ID) - number(b.ID) })
	}
	if len(msgs) != mark.Count() {
		return nil, core.CorruptInbox(core.ErrInboxSequence)
	}
	memo.put(key, archiveRead{mark: mark, msgs: msgs})
	return msgs, nil
}

// rememberArchived remembers, after a unit that moved member's letters
// numbered nums out of its inbox committed, the archive they joined: the
// archive remembered under the member's mark before (old) and the letters
// the unit read in the inbox. So a read of the archive just after an
// archive reads nothing. Without both at hand nothing is remembered.
func (t *teamTx) rememberArchived(member string, old *core.ArchiveMark, nums []int) {
	m := t.st.Member(member)
	inbox, ok := t.inboxes[member]
	if m == nil || !ok {
		return
	}
	key := archiveKey{t.name, t.incarnation, member}
	known, _ := t.s.archives.get(key)
	if old.Count() > 0 && (known.mark == nil || !known.mark.Equal(old)) {
		return
	}
	msgs := slices.Clone(known.msgs)
	for _, l := range inbox {
		if _, moved := slices.BinarySearch(nums, number(l.ID)); moved {
			msgs = append(msgs, l)
		}
	}
	if len(msgs) != m.Archive.Count() {
		return
	}
	slices.SortFunc(msgs, func(a, b core.Message) int { return number(a.ID) - number(b.ID) })
	t.s.archives.put(key, archiveRead{mark: m.Archive, msgs: msgs})
}

// coveredBy reports whether every letter mark a archives, b archives too.
func coveredBy(a, b *core.ArchiveMark) bool {
	if a.Through > b.Through {
		return false
	}
	for _, n := range b.Kept {
		if a.Archived(n) {
			return false
		}
	}
	return true
}

// number is n of a letter id <member>-<n>.
func number(id string) int {
	_, n, _ := core.ParseLetterID(id)
	return n
}
