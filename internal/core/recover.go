package core

import (
	"context"
	"fmt"
	"runtime"
	"sync"
	"sync/atomic"
)

// recover brings one loaded team to a consistent state at start (docs/spec.md
// §13.14). A turn that was running when the process died is stopped, as
// the lesson's finally clause stops an interrupted turn. A recorded intent
// is completed only when its exact letter (id, sender, recipient, body) is
// on disk, and dropped otherwise: letters alone never create requests,
// replies or closes, because any member can mail a look-alike body. Every
// inbox is validated; a failure marks the team damaged (the error
// returned). Failing to save the repair does not: see below.
func (s *Service) recover(ctx context.Context, t *team) error {
	changed := false
	for i := range t.st.Members {
		if t.st.Members[i].Status == StatusRunning {
			t.st.Members[i].Status = StatusStopped
			changed = true
		}
	}
	if t.st.Requests == nil {
		t.st.Requests = []Request{}
	}
	inboxes := map[string][]Message{}
	for _, m := range t.st.Members {
		items, err := s.store.LoadInbox(ctx, t.st.Name, t.rules(m.Name))
		if err != nil {
			return fmt.Errorf("inbox %s: %w", m.Name, err)
		}
		inboxes[m.Name] = items
	}
	if in := t.st.Intent; in != nil {
		if letterStored(inboxes[in.Letter.Recipient], in.Letter) {
			s.completeIntent(t, in)
			s.log.Info("completed a recorded intent", "team", t.st.Name, "op", in.Op, "letter", in.Letter.ID)
		} else {
			s.log.Info("dropped a recorded intent whose letter was never stored", "team", t.st.Name, "op", in.Op, "letter", in.Letter.ID)
		}
		t.st.Intent = nil
		changed = true
	}
	if s.expireStalePermissions(t) {
		changed = true
	}
	migrated, err := s.restoreIdempotency(ctx, t, inboxes)
	if err != nil {
		return fmt.Errorf("idempotency log: %w", err)
	}
	changed = changed || migrated
	if changed {
		// A failed save is a storage problem (a full disk, say), not a
		// damaged team: the recovered state is served, and the next write
		// saves it before anything else, or fails with storage_failed.
		// Until then the disk holds the state this repair started from,
		// which a restart repairs the same way.
		if err := s.store.SaveTeam(ctx, t.st); err != nil {
			t.staleIntent = true
			s.log.Warn("saving the recovered state failed; serving it and saving it with the next write", "team", t.st.Name, "err", err)
		}
	}
	return nil
}

func letterStored(items []Message, letter Message) bool {
	for _, m := range items {
		if m == letter {
			return true
		}
	}
	return false
}

func (s *Service) completeIntent(t *team, in *Intent) {
	switch in.Op {
	case IntentOpen:
		if in.Request != nil && t.request(in.Request.ID) == nil {
			t.st.Requests = append(t.st.Requests, *in.Request)
		}
	case IntentReply:
		if r := t.request(in.RequestID); r != nil && r.Reply == nil && in.Reply != nil {
			rep := *in.Reply
			r.Reply = &rep
		}
		if m := t.member(in.Close); m != nil {
			m.Status = StatusClosed
		}
	}
	if in.Idempotency != nil {
		// Written by an older version; restoreIdempotency moves it into
		// the log.
		t.st.Idempotency = append(t.st.Idempotency, *in.Idempotency)
	}
}

// ForEach calls f(0) … f(n-1) from a bounded pool of goroutines and
// returns when all calls have. Start-up is many small system calls per
// team, one team after another; a few teams at once keep every CPU busy,
// and more would only queue. Open uses it to recover teams, and storage
// backends to load them.
func ForEach(n int, f func(i int)) {
	workers := min(n, 2*runtime.GOMAXPROCS(0))
	var next atomic.Int64
	var wg sync.WaitGroup
	for range workers {
		wg.Go(func() {
			for {
				i := int(next.Add(1)) - 1
				if i >= n {
					return
				}
				f(i)
			}
		})
	}
	wg.Wait()
}
