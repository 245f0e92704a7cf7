package httpapi

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"sync"
	"time"

	"mailroom/internal/core"
)

const (
	// heartbeatInterval keeps proxies and browsers from closing an idle
	// stream and lets the server notice a client that went away.
	heartbeatInterval = 15 * time.Second
	// clientBuffer bounds the events queued for one slow client.
	clientBuffer = 256
)

// broker fans core events out to event-stream clients. publish is core's
// Observer: core calls it with a team lock held, so it never blocks and never
// does I/O; a client that falls behind loses its queue and is told to resync.
type broker struct {
	mu      sync.Mutex
	clients map[*subscriber]struct{}
	buffer  int
	// onCount reports the number of clients after each change (a metric).
	onCount func(n int)
}

func newBroker(buffer int, onCount func(int)) *broker {
	if onCount == nil {
		onCount = func(int) {}
	}
	return &broker{clients: map[*subscriber]struct{}{}, buffer: buffer, onCount: onCount}
}

// subscriber is one client's bounded queue. ready has room for one signal:
// a publish that finds it full knows the writer will look anyway.
type subscriber struct {
	team string // "" means every team
	// member, when set, is a member client: it sees letters it sent or
	// received only, as its inbox rights allow.
	member string
	ready  chan struct{}

	mu     sync.Mutex
	queue  []core.Event
	resync bool
	limit  int
}

func (b *broker) subscribe(team, member string) *subscriber {
	s := &subscriber{team: team, member: member, ready: make(chan struct{}, 1), limit: b.buffer}
	b.mu.Lock()
	b.clients[s] = struct{}{}
	n := len(b.clients)
	b.mu.Unlock()
	b.onCount(n)
	return s
}

func (b *broker) unsubscribe(s *subscriber) {
	b.mu.Lock()
	delete(b.clients, s)
	n := len(b.clients)
	b.mu.Unlock()
	b.onCount(n)
}

func (b *broker) publish(ev core.Event) {
	b.mu.Lock()
	defer b.mu.Unlock()
	for s := range b.clients {
		if s.wants(ev) {
			s.push(ev)
		}
	}
}

func (s *subscriber) wants(ev core.Event) bool {
	if s.team != "" && s.team != ev.Team {
		return false
	}
	if s.member != "" && ev.Type == "message" {
		m, ok := ev.Data.(core.Message)
		return ok && (m.Sender == s.member || m.Recipient == s.member)
	}
	return true
}

func (s *subscriber) push(ev core.Event) {
	s.mu.Lock()
	if len(s.queue) >= s.limit {
		// Overflow: the client will reload its state, so the queued events
		// and this one are worth nothing to it.
		s.queue = s.queue[:0]
		s.resync = true
	} else {
		s.queue = append(s.queue, ev)
	}
	s.mu.Unlock()
	select {
	case s.ready <- struct{}{}:
	default:
	}
}

// take returns what is queued: whether a resync comes first, then the events.
func (s *subscriber) take() (resync bool, events []core.Event) {
	s.mu.Lock()
	defer s.mu.Unlock()
	resync, events = s.resync, s.queue
	s.resync, s.queue = false, nil
	return resync, events
}

// StreamEvents opens the event stream (admin or a member). A member sees only
// its own team, and of its letters only those it sent or received.
func (s *Server) StreamEvents(ctx context.Context, req StreamEventsRequestObject) (StreamEventsResponseObject, error) {
	p, err := principalFrom(ctx)
	if err != nil {
		return nil, err
	}
	team, member := deref(req.Params.Team), ""
	if !p.admin {
		member = p.member
	}
	switch {
	case !p.admin && team == "":
		team = p.team
	case !p.admin && team != p.team:
		return nil, forbidden("The token belongs to another team.")
	case team != "":
		// lead exists in every team, so this asks only whether the team does.
		if err := s.svc.HasMember(team, core.LeadName); err != nil {
			return nil, err
		}
	}
	// Subscribe before the response starts, so that nothing published after
	// the client sees the stream open is missed.
	return eventStream{ctx: ctx, broker: s.events, sub: s.events.subscribe(team, member), log: s.log, heartbeat: heartbeatInterval}, nil
}

// eventStream writes Server-Sent Events until the client goes away. It keeps
// the request's context because the generated Visit method receives only the
// ResponseWriter.
type eventStream struct {
	ctx       context.Context
	broker    *broker
	sub       *subscriber
	log       *slog.Logger
	heartbeat time.Duration
}

// VisitStreamEventsResponse implements StreamEventsResponseObject.
func (e eventStream) VisitStreamEventsResponse(w http.ResponseWriter) error {
	defer e.broker.unsubscribe(e.sub)
	rc := http.NewResponseController(w)
	// A stream outlives any write timeout the server sets for ordinary calls.
	_ = rc.SetWriteDeadline(time.Time{})

	h := w.Header()
	h.Set("Content-Type", "text/event-stream")
	h.Set("Cache-Control", "no-store")
	h.Set("X-Accel-Buffering", "no")
	w.WriteHeader(http.StatusOK)
	if _, err := fmt.Fprint(w, ": stream open\n\n"); err != nil {
		return nil // client gone
	}
	if err := rc.Flush(); err != nil {
		// Headers are out, so no problem document can follow.
		e.log.Error("event stream cannot flush", "err", err)
		return nil
	}

	tick := time.NewTicker(e.heartbeat)
	defer tick.Stop()
	for {
		select {
		case <-e.ctx.Done():
			return nil
		case <-tick.C:
			if _, err := fmt.Fprint(w, ": heartbeat\n\n"); err != nil {
				return nil
			}
		case <-e.sub.ready:
			resync, events := e.sub.take()
			if resync {
				events = append([]core.Event{{Type: "resync", Team: e.sub.team}}, events...)
			}
			for _, ev := range events {
				if err := e.write(w, ev); err != nil {
					return nil // client gone
				}
			}
		}
		if err := rc.Flush(); err != nil {
			return nil
		}
	}
}

// write sends one event as `event: <type>` and `data: <json>`; the JSON has
// no raw newline, so it fits one data line.
func (e eventStream) write(w http.ResponseWriter, ev core.Event) error {
	data, err := json.Marshal(ev)
	if err != nil {
		// An event that cannot be encoded is a bug; skip it rather than
		// end the stream.
		e.log.Error("event not encodable", "type", ev.Type, "err", err)
		return nil
	}
	_, err = fmt.Fprintf(w, "event: %s\ndata: %s\n\n", ev.Type, data)
	return err
}
