package pgstore

import (
	"context"
	"encoding/json"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"mailroom/internal/core"
)

// maxPayload is the most a NOTIFY payload carries inline (PostgreSQL's
// limit is 8000 bytes); a larger event goes through the events table.
const maxPayload = 7000

// envelope is one notification: the process that announced it and the
// event. Ref, instead of Event, names a row of the events table.
type envelope struct {
	Origin string          `json:"o"`
	Event  json.RawMessage `json:"e,omitempty"`
	Ref    int64           `json:"r,omitempty"`
}

// Announce implements core.Notifier: ev is queued and sent with NOTIFY by
// one goroutine, in order, so the unit of work that produced it does not
// wait for the database again. While the database is unreachable the
// events are dropped (logged): waiting reads elsewhere time out instead.
func (s *Store) Announce(ev core.Event) {
	b, err := json.Marshal(ev)
	if err != nil {
		s.log.Warn("event not announced", "type", ev.Type, "err", err)
		return
	}
	select {
	case s.notify <- b:
	default:
		s.log.Warn("event not announced: queue full", "type", ev.Type)
	}
}

// maxNotifyBatch bounds the events sent in one round trip.
const maxNotifyBatch = 64

func (s *Store) sendLoop() {
	defer s.wg.Done()
	lastSweep := time.Now()
	for {
		var queued [][]byte
		select {
		case <-s.stop:
			return
		case b := <-s.notify:
			queued = append(queued, b)
		}
		// What else is queued goes in the same round trip, in order.
	more:
		for len(queued) < maxNotifyBatch {
			select {
			case b := <-s.notify:
				queued = append(queued, b)
			default:
				break more
			}
		}
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		// The notifications are one transaction of their own, committed
		// without waiting for its WAL record to reach the disk: it
		// stores nothing (NOTIFY's queue does not survive a restart,
		// and a listener that lost its connection resyncs, see Listen),
		// and PostgreSQL delivers a transaction's notifications at its
		// commit, whether or not the commit record is flushed. Only
		// this transaction is asynchronous: the units of work, whose
		// letters are acknowledged, commit with synchronous_commit as
		// the server sets it. A synchronous commit here cost a WAL flush
		// per batch, on the same WAL as the sends' commits (with one
		// client, a second flush per send).
		batch := &pgx.Batch{}
		batch.Queue(`BEGIN`)
		batch.Queue(`SELECT set_config('synchronous_commit', 'off', true)`)
		for _, b := range queued {
			env := envelope{Origin: s.origin, Event: b}
			if len(b) > maxPayload {
				env.Event = nil
				if err := s.pool.QueryRow(ctx, `INSERT INTO events (payload) VALUES ($1) RETURNING id`, string(b)).Scan(&env.Ref); err != nil {
					s.log.Warn("event not announced", "err", err)
					continue
				}
			}
			payload, _ := json.Marshal(env)
			batch.Queue(`SELECT pg_notify($1, $2)`, channel, string(payload))
		}
		if n := batch.Len() - 2; n > 0 {
			batch.Queue(`COMMIT`)
			// A failed batch leaves its connection inside the
			// transaction; the pool closes such a connection rather
			// than reuse it.
			if err := s.pool.SendBatch(ctx, batch).Close(); err != nil {
				s.log.Warn("events not announced", "count", n, "err", err)
			}
		}
		if time.Since(lastSweep) > time.Minute {
			lastSweep = time.Now()
			_, _ = s.pool.Exec(ctx, `DELETE FROM events WHERE created_at < now() - interval '1 minute'`)
		}
		cancel()
	}
}

// Listen implements core.Notifier: one connection per process LISTENs on
// the channel and delivers the other processes' events; when it is lost
// it reconnects. Events announced meanwhile are not replayed (NOTIFY keeps
// nothing for a session that is not listening), so once it listens again
// it delivers core.EventResync first: every waiter of this process looks
// at the database again, and event-stream clients reload
// (docs/storage.md).
func (s *Store) Listen(deliver func(core.Event)) (stop func()) {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		backoff := 100 * time.Millisecond
		lost := false
		for ctx.Err() == nil {
			err := s.listenOnce(ctx, deliver, func() {
				backoff = 100 * time.Millisecond
				if lost {
					// Listening again: whatever was announced while
					// no connection listened is to be read afresh.
					s.log.Info("event listener connected again; every waiter looks again")
					deliver(core.Event{Type: core.EventResync})
				}
			})
			if ctx.Err() != nil {
				return
			}
			lost = true
			s.log.Warn("event listener lost the database; reconnecting", "err", err, "in", backoff.String())
			select {
			case <-ctx.Done():
				return
			case <-time.After(backoff):
			}
			if backoff < 5*time.Second {
				backoff *= 2
			}
		}
	}()
	return func() {
		cancel()
		<-done
	}
}

func (s *Store) listenOnce(ctx context.Context, deliver func(core.Event), connected func()) error {
	conn, err := s.pool.Acquire(ctx)
	if err != nil {
		return err
	}
	// The connection leaves the pool for good: a LISTEN must not be
	// handed to a unit of work.
	pc := conn.Hijack()
	defer pc.Close(context.Background())
	if _, err := pc.Exec(ctx, "LISTEN "+pgx.Identifier{channel}.Sanitize()); err != nil {
		return err
	}
	// The token cache is trusted while this connection hears the
	// deletions, and cleared as soon as it may not (tokens.go).
	s.tokens.connected()
	defer s.tokens.lost()
	connected()
	// This process's own notifications come back too, one per event it
	// announced; they are known by the envelope's first bytes (Origin is
	// its first field) without decoding them.
	origin, _ := json.Marshal(s.origin)
	own := `{"o":` + string(origin) + `,`
	for {
		n, err := pc.WaitForNotification(ctx)
		if err != nil {
			return err
		}
		if strings.HasPrefix(n.Payload, own) {
			continue
		}
		var env envelope
		if json.Unmarshal([]byte(n.Payload), &env) != nil || env.Origin == s.origin {
			continue
		}
		raw := []byte(env.Event)
		if env.Ref != 0 {
			var payload string
			if err := pc.QueryRow(ctx, `SELECT payload FROM events WHERE id = $1`, env.Ref).Scan(&payload); err != nil {
				s.log.Warn("event lost", "ref", strconv.FormatInt(env.Ref, 10), "err", err)
				s.tokens.forgetAll() // it may have been a deletion
				continue
			}
			raw = []byte(payload)
		}
		var ev core.Event
		if err := json.Unmarshal(raw, &ev); err != nil {
			s.log.Warn("undecodable event from another replica", "err", strings.TrimSpace(err.Error()))
			s.tokens.forgetAll()
			continue
		}
		if ev.Type == core.EventTeamDeleted {
			s.tokens.forgetTeam(ev.Team)
		}
		deliver(ev)
	}
}
