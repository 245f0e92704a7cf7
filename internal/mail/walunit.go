package mail

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"syscall"

	"mailroom/internal/core"
)

// How the teams' files follow the write-ahead log (wal.go): drain writes
// durable letters into their inbox files, checkpoint writes the rest and
// removes the log segments it covers, replay brings the files up to the
// log at start.

// drain appends to their inbox files the team's letters whose records
// are durable, in log order. Called with the team's lock held. A file
// that refuses its letter (changed from outside since it was checked)
// makes the team damaged: the letter is in the log, and the file is not
// the store's to repair.
func (s *Store) drain(e *teamEntry) {
	s.settleUndo(e)
	if len(e.pending) == 0 {
		return
	}
	durable := s.wal.durableSeq()
	n := 0
	for i := range e.pending {
		p := &e.pending[i]
		if p.seq > durable {
			break
		}
		if e.deleted || e.damaged != nil {
			n++
			continue
		}
		if err := s.applyLetter(e.st.Name, p.rules, p.msg, p.line); err != nil {
			var ce *core.Error
			if errors.As(err, &ce) && ce.Code == core.CodeInboxCorrupt {
				e.damaged = fmt.Errorf("inbox %s: letter %s is in the log but its inbox refused it: %w", p.msg.Recipient, p.msg.ID, err)
				s.log.Error("an inbox file changed from outside refused a logged letter; serving the team read-only", "team", e.st.Name, "letter", p.msg.ID, "err", err)
				n++
				continue
			}
			// An I/O failure: the letter stays first in line, tried
			// again by the team's next unit of work (and by checkpoints).
			p.err = err
			s.log.Warn("writing a logged letter into its inbox failed; it is retried", "team", e.st.Name, "letter", p.msg.ID, "err", err)
			break
		}
		n++
		e.drained.Store(p.seq)
		if !slices.Contains(e.inboxDirty, p.msg.Recipient) {
			e.inboxDirty = append(e.inboxDirty, p.msg.Recipient)
		}
	}
	e.pending = e.pending[n:]
	if len(e.pending) == 0 {
		e.pending, e.overlay = nil, nil
	}
}

// settleUndo settles the team's records against the log: the first that
// failed is rolled back with every later one (memory becomes what it was
// before it), and those known durable are forgotten. Called with the
// team's lock held.
func (s *Store) settleUndo(e *teamEntry) {
	if len(e.undo) == 0 {
		return
	}
	durable, failed := s.wal.outcome()
	for i, u := range e.undo {
		if !failed(u.seq) {
			continue
		}
		e.st, e.turns, e.tasks, e.lastSeq, e.stateUnlogged, e.cursors = u.st, u.turns, u.tasks, u.lastSeq, u.unlogged, u.cursors
		for _, r := range slices.Backward(e.undo[i:]) {
			for _, iu := range slices.Backward(r.idem) {
				if iu.existed {
					e.idem.live[iu.ref] = iu.prev
				} else {
					delete(e.idem.live, iu.ref)
				}
			}
		}
		e.pending = slices.DeleteFunc(e.pending, func(p pendingLetter) bool { return p.seq >= u.seq })
		e.overlay = nil
		e.undo = e.undo[:i]
		break
	}
	k := 0
	for k < len(e.undo) && e.undo[k].seq <= durable {
		k++
	}
	e.undo = e.undo[k:]
	if len(e.undo) == 0 {
		e.undo = nil
	}
}

// markDirty puts e in the list the next checkpoint writes. It is called
// before the team's record is queued, so a checkpoint that retires the
// segment holding the record finds the team in its list.
func (s *Store) markDirty(e *teamEntry) {
	u := &s.units
	u.dirtyMu.Lock()
	if !e.dirty {
		e.dirty = true
		u.dirty = append(u.dirty, e)
	}
	u.dirtyMu.Unlock()
}

func (s *Store) takeDirty() []*teamEntry {
	u := &s.units
	u.dirtyMu.Lock()
	defer u.dirtyMu.Unlock()
	list := u.dirty
	u.dirty = nil
	for _, e := range list {
		e.dirty = false
	}
	return list
}

// checkpoint writes every team changed since the last one into its files
// and removes the log segments closed before it started: those segments
// hold nothing the files do not. With final set (Close), the current
// segment is closed first and goes too. A failure keeps the segments, to
// be replayed at the next start.
func (s *Store) checkpoint(final bool) error {
	w := &s.wal
	w.ckptMu.Lock()
	defer w.ckptMu.Unlock()
	w.mu.Lock()
	retire := w.retire
	w.retire = nil
	w.mu.Unlock()
	if len(retire) == 0 && !final {
		return nil
	}
	ctx := context.Background()
	var errs []error
	for _, e := range s.takeDirty() {
		e.mu.Lock()
		err := w.wait(e.lastSeq)
		if err == nil {
			s.drain(e)
			err = s.checkpointTeam(ctx, e)
		}
		e.mu.Unlock()
		if err != nil {
			s.markDirty(e)
			errs = append(errs, fmt.Errorf("team %s: %w", e.st.Name, err))
		}
	}
	if err := errors.Join(errs...); err != nil {
		w.mu.Lock()
		w.retire = append(retire, w.retire...)
		w.mu.Unlock()
		s.log.Warn("checkpoint failed; the log is kept and replayed at the next start", "err", err)
		return err
	}
	for _, path := range retire {
		if err := s.fs.Remove(path); err != nil && !errors.Is(err, fs.ErrNotExist) {
			errs = append(errs, err)
		}
	}
	if len(retire) > 0 {
		errs = append(errs, s.fs.SyncDir(w.dir))
	}
	return errors.Join(errs...)
}

// Checkpoint writes every team changed since the last checkpoint into its
// files and removes the log written so far, as the store does by itself
// every WithCheckpoint records or bytes and at Close. Tests use it to
// look at the files.
func (s *Store) Checkpoint(ctx context.Context) error {
	if err := s.Start(ctx); err != nil {
		return err
	}
	s.wal.requestRotate()
	return s.checkpoint(true)
}

// checkpointTeam writes what changed of a team since its last checkpoint
// into its files, every write durable: the inboxes that got appends
// without fsync are fsynced, state.json and the idempotency log are
// replaced, the turn documents written or removed. Called with the
// team's lock held, every record of the team durable and drained.
func (s *Store) checkpointTeam(ctx context.Context, e *teamEntry) error {
	if e.deleted || e.damaged != nil {
		e.stateDirty, e.idemDirty, e.turnDirty, e.inboxDirty, e.cursorDirty, e.tasksDirty = false, false, nil, nil, false, false
		return nil
	}
	name := e.st.Name
	for len(e.inboxDirty) > 0 {
		if err := s.syncInbox(name, e.inboxDirty[0]); err != nil {
			return err
		}
		e.inboxDirty = e.inboxDirty[1:]
	}
	e.inboxDirty = nil
	if e.stateDirty {
		if err := s.SaveTeam(ctx, e.st); err != nil {
			return err
		}
		e.stateDirty = false
	}
	if e.cursorDirty {
		if err := s.saveCursors(name, e.cursors); err != nil {
			return err
		}
		e.cursorDirty = false
	}
	if e.tasksDirty {
		if err := s.SaveTasks(ctx, name, e.tasks); err != nil {
			return err
		}
		e.tasksDirty = false
	}
	if e.idemDirty {
		e.prune(s.clock())
		if err := s.rewriteIdempotency(ctx, e); err != nil {
			return err
		}
		e.idemDirty = false
	}
	for id := range e.turnDirty {
		var err error
		if i := slices.IndexFunc(e.turns, func(d core.TurnDoc) bool { return d.TurnID == id }); i >= 0 {
			err = s.SaveTurn(ctx, name, &e.turns[i])
		} else {
			err = s.DeleteTurn(ctx, name, id)
		}
		if err != nil {
			return err
		}
		delete(e.turnDirty, id)
	}
	e.turnDirty = nil
	return nil
}

// flushTurns writes the team's changed turn documents into their files
// (the replace recipe), once every record of the team is durable. Called
// with the team's lock held. A failure is logged: the log holds the
// documents, and the next checkpoint writes them again.
func (s *Store) flushTurns(ctx context.Context, e *teamEntry) {
	if e.deleted || e.damaged != nil || s.wal.wait(e.lastSeq) != nil {
		return
	}
	for id := range e.turnDirty {
		var err error
		if i := slices.IndexFunc(e.turns, func(d core.TurnDoc) bool { return d.TurnID == id }); i >= 0 {
			err = s.SaveTurn(ctx, e.st.Name, &e.turns[i])
		} else {
			err = s.DeleteTurn(ctx, e.st.Name, id)
		}
		if err != nil {
			s.log.WarnContext(ctx, "writing a turn document failed; the log holds it", "team", e.st.Name, "turn", id, "err", err)
			return
		}
		delete(e.turnDirty, id)
	}
}

// syncInbox fsyncs a member's inbox file; a missing one has nothing to
// sync.
func (s *Store) syncInbox(team, member string) error {
	path := filepath.Join(s.teamDir(team), inboxesDir, member+inboxExt)
	f, err := s.fs.OpenFile(path, os.O_RDONLY|syscall.O_NOFOLLOW|syscall.O_NONBLOCK, 0)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("mail: open inbox %s to sync it: %w", path, err)
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return fmt.Errorf("mail: sync inbox %s: %w", path, err)
	}
	return f.Close()
}

// replay applies the log's records, oldest first, to the teams loaded
// from their files, and writes every team it touched (a checkpoint), so
// that the old segments can go. Each record is applied idempotently: its
// state is the team's whole state after it, a letter already in its
// inbox at its position is recognised by id and bytes, an idempotency
// record or a turn document is set again. A record of a team that is no
// longer there, or of an earlier team of the same name, is skipped. It
// returns the seq of the next record.
//
// A team whose files cannot be written is served from memory and stays
// in the next checkpoint's list; written reports whether every team was
// written, so that the old segments can go now.
func (s *Store) replay(ctx context.Context, records []walRecord, teams map[string]*teamEntry) (next uint64, written bool) {
	next = 1
	var touched []*teamEntry
	now := s.clock()
	for _, r := range records {
		next = r.Seq + 1
		e := teams[r.Team]
		if e == nil || e.damaged != nil || !e.st.CreatedAt.Equal(r.Created) {
			continue
		}
		if !slices.Contains(touched, e) {
			touched = append(touched, e)
		}
		if r.State != nil && r.State.Name == e.st.Name || r.State == nil && len(r.Leases) > 0 {
			e.st = r.NewState(e.st)
			if e.st.Requests == nil {
				e.st.Requests = []core.Request{}
			}
			e.stateDirty = true
		}
		if l := r.Letter; l != nil {
			// The file may already hold letters that a later record's
			// limits allow (loggedLimits).
			rules := e.st.Rules(l.Recipient)
			rules.Limits = s.logged.of(e.st)
			if err := s.applyLetter(e.st.Name, rules, *l, nil); err != nil {
				e.damaged = fmt.Errorf("inbox %s: replaying letter %s: %w", l.Recipient, l.ID, err)
				continue
			}
			if !slices.Contains(e.inboxDirty, l.Recipient) {
				e.inboxDirty = append(e.inboxDirty, l.Recipient)
			}
		}
		if len(r.Cursors) > 0 {
			e.cursors = withCursors(e.cursors, r.Cursors)
			e.cursorDirty = true
		}
		if len(r.Tasks) > 0 {
			tasks, err := core.ApplyTasks(e.tasks, r.Tasks)
			if err != nil {
				e.damaged = fmt.Errorf("tasks: replaying record %d: %w", r.Seq, err)
				continue
			}
			e.tasks, e.tasksDirty = tasks, true
		}
		for _, ir := range r.Idempotency {
			if !ir.Expired(now) {
				e.idem.lines++
				e.remember(ir)
			}
			e.idemDirty = true
		}
		if len(r.PutTurns) > 0 || len(r.DeleteTurns) > 0 {
			if e.turnDirty == nil {
				e.turnDirty = map[string]bool{}
			}
			for _, id := range r.DeleteTurns {
				e.turns = slices.DeleteFunc(e.turns, func(d core.TurnDoc) bool { return d.TurnID == id })
				e.turnDirty[id] = true
			}
			for _, d := range r.PutTurns {
				if d.Steps == nil {
					d.Steps = []core.TurnStep{}
				}
				if i := slices.IndexFunc(e.turns, func(x core.TurnDoc) bool { return x.TurnID == d.TurnID }); i >= 0 {
					e.turns[i] = d
				} else {
					e.turns = append(e.turns, d)
				}
				e.turnDirty[d.TurnID] = true
			}
		}
	}
	var errs []error
	for _, e := range touched {
		if e.damaged != nil {
			s.log.Error("replaying the log into a team failed", "team", e.st.Name, "err", e.damaged)
			continue
		}
		// As after any crash: the process that held the leases is gone.
		core.ReleaseAtStart(e.st, now)
		e.stateDirty = true
		for i := range e.turns {
			if core.InterruptTurnDoc(&e.turns[i], now) {
				if e.turnDirty == nil {
					e.turnDirty = map[string]bool{}
				}
				e.turnDirty[e.turns[i].TurnID] = true
			}
		}
		if err := s.checkpointTeam(ctx, e); err != nil {
			s.markDirty(e)
			errs = append(errs, fmt.Errorf("team %s: %w", e.st.Name, err))
		}
	}
	if len(touched) > 0 {
		s.log.Info("replayed the write-ahead log", "records", len(records), "teams", len(touched))
	}
	if err := errors.Join(errs...); err != nil {
		// Served from memory; the log is kept until a checkpoint writes
		// these teams.
		s.log.Warn("writing the replayed log into the files failed; the log is kept", "err", err)
		return next, false
	}
	return next, true
}

// closeLog stops the log and writes everything it holds into the files
// (a final checkpoint), leaving the log empty.
func (s *Store) closeLog() error {
	if !s.wal.started {
		return nil
	}
	if err := s.wal.stop(); err != nil {
		return err
	}
	return s.checkpoint(true)
}
