package httpapi

import (
	"context"
	"encoding/json"
	"errors"
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

// The bounds of the event streams: every open stream holds a goroutine, a
// queue and the kernel's socket buffers, so their number is capped per token
// and in all, and a client that stops reading is cut off rather than left
// to pin its buffers.
const (
	// DefaultStreamsPerToken is how many streams one token (the admin token
	// included) may hold open at once.
	DefaultStreamsPerToken = 8
	// DefaultMaxStreams is how many streams the server holds open at once.
	DefaultMaxStreams = 1024
	// DefaultStreamWriteTimeout is how long one event may take to reach a
	// client before its stream is closed.
	DefaultStreamWriteTimeout = 10 * time.Second
)

// streamLimits are the stream bounds a broker enforces.
type streamLimits struct {
	perToken     int
	total        int
	writeTimeout time.Duration
}

// streamLimitsOf takes the bounds from opts; zero or negative means the
// default.
func streamLimitsOf(opts Options) streamLimits {
	l := streamLimits{perToken: opts.StreamsPerToken, total: opts.MaxStreams, writeTimeout: opts.StreamWriteTimeout}
	if l.perToken <= 0 {
		l.perToken = DefaultStreamsPerToken
	}
	if l.total <= 0 {
		l.total = DefaultMaxStreams
	}
	if l.writeTimeout <= 0 {
		l.writeTimeout = DefaultStreamWriteTimeout
	}
	return l
}

// broker fans core events out to event-stream clients. publish is core's
// Observer: core calls it with a team lock held, so it never blocks and never
// does I/O; a client that falls behind loses its queue and is told to resync.
type broker struct {
	mu      sync.Mutex
	clients map[*subscriber]struct{}
	// perToken counts the open streams of each token key (see tokenKey).
	perToken map[string]int
	buffer   int
	limits   streamLimits
	// onCount reports the number of clients after each change (a metric).
	onCount func(n int)
}

func newBroker(buffer int, limits streamLimits, onCount func(int)) *broker {
	if onCount == nil {
		onCount = func(int) {}
	}
	return &broker{
		clients:  map[*subscriber]struct{}{},
		perToken: map[string]int{},
		buffer:   buffer,
		limits:   limits,
		onCount:  onCount,
	}
}

// subscriber is one client's bounded queue. ready has room for one signal:
// a publish that finds it full knows the writer will look anyway.
type subscriber struct {
	team string // "" means every team
	// member, when set, is a member client: it sees letters it sent or
	// received only, as its inbox rights allow.
	member string
	// token names the token the stream counts against.
	token string
	ready chan struct{}

	mu     sync.Mutex
	queue  []core.Event
	resync bool
	limit  int
}

// subscribe opens a client's queue, or refuses it with too_many_streams when
// token already holds its share of streams or the server holds its maximum.
// Every subscriber must be unsubscribed exactly once to free its place.
func (b *broker) subscribe(team, member, token string) (*subscriber, error) {
	b.mu.Lock()
	switch {
	case b.perToken[token] >= b.limits.perToken:
		b.mu.Unlock()
		return nil, core.Errorf(core.CodeTooManyStreams, "This token already holds %d open event streams; close one first.", b.limits.perToken)
	case len(b.clients) >= b.limits.total:
		b.mu.Unlock()
		return nil, core.Errorf(core.CodeTooManyStreams, "The server holds its maximum of %d open event streams; try again later.", b.limits.total)
	}
	s := &subscriber{team: team, member: member, token: token, ready: make(chan struct{}, 1), limit: b.buffer}
	b.clients[s] = struct{}{}
	b.perToken[token]++
	n := len(b.clients)
	b.mu.Unlock()
	b.onCount(n)
	return s, nil
}

func (b *broker) unsubscribe(s *subscriber) {
	b.mu.Lock()
	if _, ok := b.clients[s]; !ok {
		b.mu.Unlock()
		return
	}
	delete(b.clients, s)
	if b.perToken[s.token]--; b.perToken[s.token] <= 0 {
		delete(b.perToken, s.token)
	}
	n := len(b.clients)
	b.mu.Unlock()
	b.onCount(n)
}

// tokenKey names the token of p for the per-token bound. A member holds
// exactly one token, so the member's name stands for it; the key never
// holds the token itself.
func tokenKey(p core.Principal) string {
	if p.Admin {
		return "admin"
	}
	return "member\x00" + p.Team + "\x00" + p.Member
}

func (b *broker) publish(ev core.Event) {
	if ev.Type == core.EventTeamDeleted {
		// Not an event of the stream: the streams tied to the team end
		// by their team's life (StreamEvents).
		return
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if ev.Type == core.EventResync {
		// This process may have missed other replicas' events (its
		// listener reconnected): every client is told to reload, as
		// one that fell behind is.
		for s := range b.clients {
			s.markResync()
		}
		return
	}
	for s := range b.clients {
		if s.wants(ev) {
			s.push(ev)
		}
	}
}

// wants says whether the client may see ev. A member sees its own team's
// shared state (members, requests and their replies, runs), the letters it
// sent or received, and its own turns only: a turn's text is as private as
// the member's history. An event whose owner cannot be told is not sent to
// a member.
func (s *subscriber) wants(ev core.Event) bool {
	if s.team != "" && s.team != ev.Team {
		return false
	}
	if s.member == "" {
		return true
	}
	switch ev.Type {
	case "message":
		m, ok := ev.Data.(core.Message)
		return ok && (m.Sender == s.member || m.Recipient == s.member)
	case core.EventAck:
		a, ok := ev.Data.(core.AckEvent)
		return ok && (a.From == s.member || a.To == s.member)
	case "turn":
		member, ok := turnMember(ev.Data)
		return ok && member == s.member
	}
	return true
}

// turnMember is the member whose turn a turn event reports.
func turnMember(data any) (string, bool) {
	switch r := data.(type) {
	case core.TurnEvent:
		return r.Member, true
	case core.TurnResult:
		return r.Member, true
	case *core.TurnResult:
		if r != nil {
			return r.Member, true
		}
	}
	return "", false
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

// markResync makes the client's next write begin with a resync event.
// The queued events stay: they are still true, and the client reloads
// anyway.
func (s *subscriber) markResync() {
	s.mu.Lock()
	s.resync = true
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
	if !p.Admin {
		member = p.Member
	}
	switch {
	case !p.Admin && team == "":
		team = p.Team
	case !p.Admin:
		if err := core.CheckReader(ctx, team); err != nil {
			return nil, err
		}
	case team != "":
		// lead exists in every team, so this asks only whether the team does.
		if err := s.svc.HasMember(ctx, team, core.LeadName); err != nil {
			return nil, err
		}
	}
	// A stream of one team ends when that team is deleted, and never
	// shows a new team of the same name: it follows the team's life from
	// before it subscribes.
	var life *core.TeamLife
	if team != "" {
		if life, err = s.svc.FollowTeam(ctx, team); err != nil {
			return nil, err
		}
	}
	// Subscribe before the response starts, so that nothing published after
	// the client sees the stream open is missed.
	sub, err := s.events.subscribe(team, member, tokenKey(p))
	if err != nil {
		if life != nil {
			life.Release()
		}
		return nil, err
	}
	return eventStream{
		ctx: ctx, broker: s.events, sub: sub, log: s.log, life: life,
		heartbeat: heartbeatInterval, writeTimeout: s.events.limits.writeTimeout,
	}, nil
}

// eventStream writes Server-Sent Events until the client goes away. It keeps
// the request's context because the generated Visit method receives only the
// ResponseWriter.
type eventStream struct {
	ctx    context.Context
	broker *broker
	sub    *subscriber
	log    *slog.Logger
	// life is the life of the stream's team; nil for the admin's stream
	// of every team.
	life      *core.TeamLife
	heartbeat time.Duration
	// writeTimeout bounds each write and flush: a client that does not take
	// an event within it loses its stream, which frees its buffers and its
	// place.
	writeTimeout time.Duration
}

// VisitStreamEventsResponse implements StreamEventsResponseObject. Every
// write and flush gets its own deadline, which also replaces any write
// timeout the server sets for ordinary calls: a stream lives as long as its
// client keeps reading.
func (e eventStream) VisitStreamEventsResponse(w http.ResponseWriter) error {
	defer e.broker.unsubscribe(e.sub)
	var gone <-chan struct{} // nil: the admin's stream of every team never ends so
	if e.life != nil {
		defer e.life.Release()
		gone = e.life.Gone()
	}
	rc := http.NewResponseController(w)

	h := w.Header()
	h.Set("Content-Type", "text/event-stream")
	h.Set("Cache-Control", "no-store")
	h.Set("X-Accel-Buffering", "no")
	w.WriteHeader(http.StatusOK)
	if err := e.send(w, rc, ": stream open\n\n"); err != nil {
		return nil // client gone
	}
	if err := e.flush(rc); err != nil {
		if errors.Is(err, http.ErrNotSupported) {
			// A wiring bug. Headers are out, so no problem document can
			// follow.
			e.log.Error("event stream cannot flush", "err", err)
		}
		return nil
	}

	tick := time.NewTicker(e.heartbeat)
	defer tick.Stop()
	for {
		select {
		case <-e.ctx.Done():
			return nil
		case <-gone:
			return nil // the team was deleted: the stream ends
		case <-tick.C:
			if err := e.send(w, rc, ": heartbeat\n\n"); err != nil {
				return nil
			}
		case <-e.sub.ready:
			resync, events := e.sub.take()
			if e.life != nil && e.life.Ended() {
				// What was taken may be a new team's of the same name:
				// the deletion was published before it, so it is seen
				// here, after the take.
				return nil
			}
			if resync {
				events = append([]core.Event{{Type: core.EventResync, Team: e.sub.team}}, events...)
			}
			for _, ev := range events {
				if err := e.write(w, rc, ev); err != nil {
					return nil // client gone, too slow, or shutting down
				}
			}
		}
		if err := e.flush(rc); err != nil {
			return nil
		}
	}
}

// errStreamDone ends a stream whose request is over (client gone or the
// server stopping) before it writes again.
var errStreamDone = errors.New("event stream done")

// arm sets the deadline of the next write. A writer that cannot take
// deadlines (not a network connection) is written without one.
func (e eventStream) arm(rc *http.ResponseController) error {
	if e.ctx.Err() != nil {
		return errStreamDone
	}
	err := rc.SetWriteDeadline(time.Now().Add(e.writeTimeout))
	if err != nil && !errors.Is(err, http.ErrNotSupported) {
		return err
	}
	return nil
}

// send writes s under a fresh deadline.
func (e eventStream) send(w http.ResponseWriter, rc *http.ResponseController, s string) error {
	if err := e.arm(rc); err != nil {
		return err
	}
	_, err := fmt.Fprint(w, s)
	return err
}

// flush pushes what is buffered to the client under a fresh deadline.
func (e eventStream) flush(rc *http.ResponseController) error {
	if err := e.arm(rc); err != nil {
		return err
	}
	return rc.Flush()
}

// write sends one event as `event: <type>` and `data: <json>`; the JSON has
// no raw newline, so it fits one data line.
func (e eventStream) write(w http.ResponseWriter, rc *http.ResponseController, ev core.Event) error {
	data, err := json.Marshal(ev)
	if err != nil {
		// An event that cannot be encoded is a bug; skip it rather than
		// end the stream.
		e.log.Error("event not encodable", "type", ev.Type, "err", err)
		return nil
	}
	return e.send(w, rc, fmt.Sprintf("event: %s\ndata: %s\n\n", ev.Type, data))
}
