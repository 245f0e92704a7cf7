package pgstore

import (
	"mailroom/internal/core"
)

// ArchivePage implements core.ArchivePager: at most limit of member's
// archived letters numbered after after, in number order, read from the
// database alone rather than the whole archive, so that a page of a long
// archive costs what the page holds. Each letter is validated as
// LoadArchive validates them.
func (t *teamTx) ArchivePage(member string, after, limit int) ([]core.Message, error) {
	if msgs, ok := t.archives[member]; ok {
		return core.PageOf(msgs, after, limit), nil
	}
	if t.damaged != nil {
		return nil, core.CorruptInbox(t.damaged)
	}
	m := t.st.Member(member)
	if m == nil || m.Archive.Count() == 0 {
		return []core.Message{}, nil
	}
	// This replica's memory of the archive under this mark, if it has
	// one (archive.go): no read at all.
	if known, ok := t.s.archives.get(archiveKey{t.name, t.incarnation, member}); ok && known.mark.Equal(m.Archive) {
		return core.PageOf(known.msgs, after, limit), nil
	}
	if err := t.read(); err != nil {
		return nil, storeErr(t.ctx, err)
	}
	data, err := lines(t.ctx, t.tx, `SELECT line FROM letters WHERE team = $1 AND member = $2 AND seq > $3 AND seq <= $4 AND archived ORDER BY seq LIMIT $5`,
		t.name, member, after, m.Archive.Through, limit)
	if err != nil {
		return nil, storeErr(t.ctx, err)
	}
	return core.DecodeArchive(data, t.st.Rules(member))
}
