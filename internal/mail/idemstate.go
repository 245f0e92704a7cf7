package mail

import (
	"context"
	"time"

	"mailroom/internal/core"
)

// compactMinLines is the smallest log worth compacting: below it a rewrite
// would cost more than the dead lines it removes.
const compactMinLines = 64

// A team's idempotency records travel in the write-ahead log with the
// letter they answer for (one record: one is never durable without the
// other), and checkpoints write the live ones to idempotency.log (idem.go)
// apart from the state. Start-up keeps a record of that file only when
// its exact letter is on disk (restoreIdempotency, docs/durability.md),
// then replays the log's.

// idemRef names one remembered write: the member that made it and its key.
type idemRef struct{ member, key string }

// idemState is a team's remembered writes in memory, with what is needed
// to expire them in order and to know when the log is worth compacting.
type idemState struct {
	live map[idemRef]core.IdempotencyRecord
	// order lists records as they were remembered, oldest first, from
	// head on; an entry whose record was replaced or dropped is skipped.
	order []idemEntry
	head  int
	// lines counts the log's lines, live or dead.
	lines int
}

type idemEntry struct {
	ref idemRef
	at  time.Time
}

// prune forgets expired records from the oldest on; each is looked at once.
func (e *teamEntry) prune(now time.Time) {
	d := &e.idem
	for d.head < len(d.order) {
		en := d.order[d.head]
		if now.Sub(en.at) < core.IdempotencyTTL {
			break
		}
		if r, ok := d.live[en.ref]; ok && r.At.Equal(en.at) {
			delete(d.live, en.ref)
		}
		d.head++
	}
	if d.head > 0 && d.head*2 >= len(d.order) {
		d.order = append(d.order[:0], d.order[d.head:]...)
		d.head = 0
	}
}

// remember makes r live in memory; its line is already in the log.
func (e *teamEntry) remember(r core.IdempotencyRecord) {
	d := &e.idem
	if d.live == nil {
		d.live = map[idemRef]core.IdempotencyRecord{}
	}
	ref := idemRef{r.Member, r.Key}
	d.live[ref] = r
	d.order = append(d.order, idemEntry{ref: ref, at: r.At})
}

// compactIdempotency rewrites the log with only the live records once it
// holds more dead lines than live ones, so the log stays within twice
// what is remembered. A failed rewrite loses nothing: the old log is right.
func (s *Store) compactIdempotency(ctx context.Context, e *teamEntry) {
	d := &e.idem
	e.prune(s.clock())
	if d.lines < compactMinLines || d.lines-len(d.live) <= len(d.live) {
		return
	}
	if err := s.rewriteIdempotency(ctx, e); err != nil {
		s.log.WarnContext(ctx, "compacting the idempotency log failed; it is kept as it is", "team", e.st.Name, "err", err)
	}
}

// rewriteIdempotency replaces the team's idempotency log with its live
// records, oldest first, and makes the memory's order match the new log.
// Called after prune. On an error the log and the memory are as before.
func (s *Store) rewriteIdempotency(ctx context.Context, e *teamEntry) error {
	d := &e.idem
	live := make([]core.IdempotencyRecord, 0, len(d.live))
	order := make([]idemEntry, 0, len(d.live))
	seen := make(map[idemRef]bool, len(d.live))
	for _, en := range d.order[d.head:] {
		if r, ok := d.live[en.ref]; ok && r.At.Equal(en.at) && !seen[en.ref] {
			seen[en.ref] = true
			live = append(live, r)
			order = append(order, en)
		}
	}
	if err := s.RewriteIdempotency(ctx, e.st.Name, live); err != nil {
		return err
	}
	d.order, d.head, d.lines = order, 0, len(live)
	return nil
}

// restoreIdempotency loads the team's idempotency log at start. inboxes
// are the team's validated letters by recipient. A record counts when it
// has not expired, was not cancelled, and its exact letter is on disk.
// Records kept in an older state file are moved into the log; the result
// reports whether the state changed and must be saved.
func (s *Store) restoreIdempotency(ctx context.Context, e *teamEntry, inboxes map[string][]core.Message, legacy []core.IdempotencyRecord) (bool, error) {
	name := e.st.Name
	lines, err := s.LoadIdempotency(ctx, name)
	if err != nil {
		return false, err
	}
	now := s.clock()
	stored := map[string]map[string]core.Message{}
	letterOnDisk := func(l core.Message) bool {
		byID, ok := stored[l.Recipient]
		if !ok {
			byID = map[string]core.Message{}
			for _, m := range inboxes[l.Recipient] {
				byID[m.ID] = m
			}
			if m := e.st.Member(l.Recipient); m != nil && m.Archive.Count() > 0 {
				// A letter archived since is on disk too, in the archive.
				archived, err := s.readArchive(name, e.st.Rules(l.Recipient))
				if err == nil {
					for _, m := range archived {
						byID[m.ID] = m
					}
				}
			}
			stored[l.Recipient] = byID
		}
		m, ok := byID[l.ID]
		return ok && m == l
	}
	e.idem = idemState{live: map[idemRef]core.IdempotencyRecord{}, lines: len(lines)}
	for _, r := range lines {
		ref := idemRef{r.Member, r.Key}
		if r.Cancelled {
			if cur, ok := e.idem.live[ref]; ok && cur.Letter != nil && r.Letter != nil && cur.Letter.ID == r.Letter.ID {
				delete(e.idem.live, ref)
			}
			continue
		}
		if r.Expired(now) || (r.Letter != nil && !letterOnDisk(*r.Letter)) {
			continue
		}
		e.remember(r)
	}
	for _, r := range legacy {
		if r.Expired(now) {
			continue
		}
		if err := s.AppendIdempotency(ctx, name, r); err != nil {
			return false, err
		}
		e.idem.lines++
		e.remember(r)
	}
	s.compactIdempotency(ctx, e)
	return len(legacy) > 0, nil
}
