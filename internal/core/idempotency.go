package core

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"strconv"
	"time"
)

// IdempotencyTTL is how long a remembered response is kept: at least a day,
// so a client may retry after any realistic timeout.
const IdempotencyTTL = 24 * time.Hour

// compactMinLines is the smallest log worth compacting: below it a rewrite
// would cost more than the dead lines it removes.
const compactMinLines = 64

// Idempotency records live in a log of their own per team, apart from the
// team's state: a keyed write appends one line there, so its cost does not
// grow with the number of remembered keys or with the members' histories.
// Each record carries the letter it answers for and is made durable before
// that letter is written, the order in which the team's state once held
// it in an intent: start-up keeps a record only when its exact letter is
// on disk (see restoreIdempotency and docs/durability.md).

// idemRef names one remembered write: the member that made it and its key.
type idemRef struct{ member, key string }

// idemState is a team's remembered writes in memory, with what is needed
// to expire them in order and to know when the log is worth compacting.
type idemState struct {
	live map[idemRef]IdempotencyRecord
	// order lists records as they were remembered, oldest first, from
	// head on; an entry whose record was replaced or dropped is skipped.
	order []idemEntry
	head  int
	// lines counts the log's lines, live or dead.
	lines int
	// pending is the record logged for the letter being written; it
	// becomes live once the letter is stored, or is cancelled.
	pending *IdempotencyRecord
	// unwritten holds cancel lines that could not be appended; they are
	// appended before the team writes its next letter.
	unwritten []IdempotencyRecord
}

type idemEntry struct {
	ref idemRef
	at  time.Time
}

// fingerprint identifies an operation and its arguments: a retry must
// repeat both exactly to be answered with the first response.
func fingerprint(op string, args ...string) string {
	h := sha256.New()
	h.Write([]byte(op))
	for _, a := range args {
		h.Write([]byte{0})
		h.Write([]byte(a))
	}
	return hex.EncodeToString(h.Sum(nil))
}

// replay looks up (member, key). When found with the same fingerprint it
// decodes the remembered response into out and reports true; with another
// fingerprint it fails with idempotency_conflict. Expired records are
// dropped first. An empty key never matches.
func (t *team) replay(member, key, fp string, now time.Time, out any) (bool, error) {
	if key == "" {
		return false, nil
	}
	t.prune(now)
	r, ok := t.idem.live[idemRef{member, key}]
	if !ok || expired(r, now) {
		return false, nil
	}
	if r.Fingerprint != fp {
		return false, Errorf(CodeIdempotencyConflict, "This Idempotency-Key was already used with a different request.")
	}
	if err := json.Unmarshal(r.Result, out); err != nil {
		return false, err
	}
	return true, nil
}

func expired(r IdempotencyRecord, now time.Time) bool { return now.Sub(r.At) >= IdempotencyTTL }

// prune forgets expired records from the oldest on; each is looked at once.
func (t *team) prune(now time.Time) {
	d := &t.idem
	for d.head < len(d.order) {
		e := d.order[d.head]
		if now.Sub(e.at) < IdempotencyTTL {
			break
		}
		if r, ok := d.live[e.ref]; ok && r.At.Equal(e.at) {
			delete(d.live, e.ref)
		}
		d.head++
	}
	if d.head > 0 && d.head*2 >= len(d.order) {
		d.order = append(d.order[:0], d.order[d.head:]...)
		d.head = 0
	}
}

// remember makes r live in memory; its line is already in the log.
func (t *team) remember(r IdempotencyRecord) {
	d := &t.idem
	if d.live == nil {
		d.live = map[idemRef]IdempotencyRecord{}
	}
	d.pending = nil
	ref := idemRef{r.Member, r.Key}
	d.live[ref] = r
	d.order = append(d.order, idemEntry{ref: ref, at: r.At})
}

// recordIntent makes what a letter will mean durable before the letter is
// written (docs/spec.md §13.14). A keyed write's record is appended to the
// idempotency log, carrying the letter. A plain send needs nothing more; a
// protocol letter's intent is saved in the team's state as before, without
// the record, which the log already holds.
func (s *Service) recordIntent(ctx context.Context, t *team, in *Intent) error {
	if rec := in.Idempotency; rec != nil {
		s.compactIdempotency(ctx, t)
		in.Idempotency = nil
		letter := in.Letter
		rec.Letter = &letter
		if err := s.store.AppendIdempotency(ctx, t.st.Name, *rec); err != nil {
			return StorageError(err)
		}
		t.idem.lines++
		t.idem.pending = rec
	}
	if in.Op == IntentSend {
		return nil
	}
	t.st.Intent = in
	if err := s.store.SaveTeam(ctx, t.st); err != nil {
		t.st.Intent = nil
		s.cancelPending(ctx, t)
		return StorageError(err)
	}
	return nil
}

// dropIntent undoes recordIntent when the letter could not be written. If
// the state's intent cannot be cleared the team remembers it as stale; if
// the record's cancel line cannot be appended it is kept to be appended
// before the next letter. Either way no later letter can take the same id
// while the disk still says the failed one was meant.
func (s *Service) dropIntent(ctx context.Context, t *team) {
	s.cancelPending(ctx, t)
	if t.st.Intent != nil {
		t.st.Intent = nil
		if err := s.store.SaveTeam(ctx, t.st); err != nil {
			t.staleIntent = true
		}
	}
}

func (s *Service) cancelPending(ctx context.Context, t *team) {
	rec := t.idem.pending
	if rec == nil {
		return
	}
	t.idem.pending = nil
	c := IdempotencyRecord{Member: rec.Member, Key: rec.Key, Fingerprint: rec.Fingerprint, At: rec.At, Letter: rec.Letter, Cancelled: true}
	t.idem.unwritten = append(t.idem.unwritten, c)
	if err := s.flushCancels(ctx, t); err != nil {
		s.log.ErrorContext(ctx, "cancelling an idempotency record failed; retried before the next letter", "team", t.st.Name, "err", err)
	}
}

// flushCancels appends the cancel lines that could not be appended when
// their letter failed. Until they are on disk the team writes no letter,
// since a later letter could take the failed one's id.
func (s *Service) flushCancels(ctx context.Context, t *team) error {
	for len(t.idem.unwritten) > 0 {
		if err := s.store.AppendIdempotency(ctx, t.st.Name, t.idem.unwritten[0]); err != nil {
			return err
		}
		t.idem.lines++
		t.idem.unwritten = t.idem.unwritten[1:]
	}
	return nil
}

// compactIdempotency rewrites the log with only the live records once it
// holds more dead lines than live ones, so the log stays within twice
// what is remembered. A rewrite writes fewer lines than it removes, and
// each line is removed once, so rewrites cost at most one line per line
// ever appended. A failed rewrite loses nothing: the old log is right.
func (s *Service) compactIdempotency(ctx context.Context, t *team) {
	d := &t.idem
	t.prune(s.now())
	if d.lines < compactMinLines || d.lines-len(d.live) <= len(d.live) || len(d.unwritten) > 0 {
		return
	}
	live := make([]IdempotencyRecord, 0, len(d.live))
	order := make([]idemEntry, 0, len(d.live))
	seen := make(map[idemRef]bool, len(d.live))
	for _, e := range d.order[d.head:] {
		if r, ok := d.live[e.ref]; ok && r.At.Equal(e.at) && !seen[e.ref] {
			seen[e.ref] = true
			live = append(live, r)
			order = append(order, e)
		}
	}
	if err := s.store.RewriteIdempotency(ctx, t.st.Name, live); err != nil {
		s.log.WarnContext(ctx, "compacting the idempotency log failed; it is kept as it is", "team", t.st.Name, "err", err)
		return
	}
	d.order, d.head, d.lines = order, 0, len(live)
}

// restoreIdempotency loads the team's idempotency log at start. inboxes
// are the team's validated letters by recipient. A record counts when it
// has not expired, was not cancelled, and its exact letter is on disk; a
// record whose letter is missing was logged for a write cut short before
// its letter, which was never acknowledged. Records kept in an older state
// file are moved into the log; the result reports whether the state
// changed and must be saved.
func (s *Service) restoreIdempotency(ctx context.Context, t *team, inboxes map[string][]Message) (bool, error) {
	lines, err := s.store.LoadIdempotency(ctx, t.st.Name)
	if err != nil {
		return false, err
	}
	now := s.now()
	stored := map[string]map[string]Message{}
	letterOnDisk := func(l Message) bool {
		byID, ok := stored[l.Recipient]
		if !ok {
			byID = map[string]Message{}
			for _, m := range inboxes[l.Recipient] {
				byID[m.ID] = m
			}
			stored[l.Recipient] = byID
		}
		m, ok := byID[l.ID]
		return ok && m == l
	}
	t.idem = idemState{live: map[idemRef]IdempotencyRecord{}, lines: len(lines)}
	for _, r := range lines {
		ref := idemRef{r.Member, r.Key}
		if r.Cancelled {
			if cur, ok := t.idem.live[ref]; ok && cur.Letter != nil && r.Letter != nil && cur.Letter.ID == r.Letter.ID {
				delete(t.idem.live, ref)
			}
			continue
		}
		if expired(r, now) || (r.Letter != nil && !letterOnDisk(*r.Letter)) {
			continue
		}
		t.remember(r)
	}
	legacy := t.st.Idempotency
	for _, r := range legacy {
		if expired(r, now) {
			continue
		}
		if err := s.store.AppendIdempotency(ctx, t.st.Name, r); err != nil {
			return false, err
		}
		t.idem.lines++
		t.remember(r)
	}
	t.st.Idempotency = nil
	s.compactIdempotency(ctx, t)
	return len(legacy) > 0, nil
}

func mustJSON(v any) []byte {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err) // only called on plain result structs
	}
	return b
}

func itoa(n int) string { return strconv.Itoa(n) }
