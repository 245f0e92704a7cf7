package httpapi

// Reads held for mail (GET inbox?wait=N).
//
// A held read must be cheap: a thousand agents may each keep one open all
// the time. Measured on the server binary with 1,000 reads held, what a
// read costs while net/http holds it is almost all net/http's, not the
// wait's: the connection goroutine's stack (16 KiB, grown by routing,
// authentication and schema validation above the wait, and shrunk only by
// a garbage collection that an idle server does not run), the connection's
// 4 KiB read and 4 KiB write buffers, the response's 2 KiB chunking
// buffer, the goroutine net/http runs to notice a client that leaves, and
// the request itself: about 34 KiB per read. Waiting at a shallow stack
// depth would save part of the stack only (and only after a collection),
// and the buffers are fixed by net/http; that leaves more than 16 KiB.
//
// So a read that finds nothing to answer takes its connection over
// (http.Hijacker) once every check has passed (token, schema, rights,
// team, member, after), and net/http lets go of its goroutine and buffers.
// What remains while it waits is the connection, this small record and one
// goroutine with a small stack, blocked in a one-byte read of the
// connection: the network poller holds it, not a timer or a polling loop.
// The read returns when the client leaves (the wait is released at once,
// as before), at the wait's deadline (the read deadline), or when it is
// rung: the events that drive the event stream reach HeldReads.letter
// right after core has closed the inbox's channel, and the server's stop
// reaches every held read the same way; ringing moves the read deadline to
// now. A second goroutine per read, selecting on core's channels, would
// have cost another stack (4 KiB measured) for nothing.
//
// The answer is then written by hand as a complete HTTP/1.1 response
// (status, the headers the middlewares set, Content-Type, Content-Length,
// Date) with "Connection: close": a taken-over connection cannot be handed
// back to net/http, so the client opens a new one for its next request,
// which HTTP/1.1 clients do by themselves on that header. Where the
// connection cannot be taken over (HTTP/2, a wrapping writer without
// Hijack), the read waits in place on core's channels as before. The
// request metrics count a held read when it is taken over, with status 200.

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"os"
	"strconv"
	"sync"
	"time"

	"mailroom/internal/core"
)

// heldWriteTimeout bounds the writing of a held read's answer, so that a
// client that stopped reading cannot keep its goroutine (and a shutdown
// waiting for it) forever.
const heldWriteTimeout = 10 * time.Second

// HeldReads keeps the reads for mail that wait on a connection taken
// over from net/http. It rings them when a letter comes to their inbox or
// the server stops waiting, and counts them: http.Server.Shutdown does not
// wait for such connections, so the server waits for them itself before
// it closes the store their last look reads from. The zero value is ready
// to use.
type HeldReads struct {
	mu sync.Mutex
	// n counts the reads taken off net/http and not yet answered; zero,
	// when set, is closed as n comes back to 0. (Not a sync.WaitGroup: a
	// read may begin after a Wait has returned, which a WaitGroup forbids
	// unless the new Add happens after that Wait in the program's order,
	// and a request arriving over the network is not ordered so.)
	n       int
	zero    chan struct{}
	inboxes map[heldKey]map[*heldRead]struct{}
	// stopped is set when core stops waiting; later reads are rung at once.
	stopped bool
	// watchStop starts the one goroutine that rings every read at stop.
	watchStop sync.Once
}

// heldKey names one inbox.
type heldKey struct{ team, member string }

// Wait returns when every held read has been answered (or its client has
// left), or with ctx's error when ctx ends first. Shutting down calls
// core.Service.StopWaiting first, which makes them answer at once.
func (h *HeldReads) Wait(ctx context.Context) error {
	h.mu.Lock()
	if h.n == 0 {
		h.mu.Unlock()
		return nil
	}
	if h.zero == nil {
		h.zero = make(chan struct{})
	}
	zero := h.zero
	h.mu.Unlock()
	select {
	case <-zero:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// begin counts a read about to leave net/http.
func (h *HeldReads) begin() {
	h.mu.Lock()
	h.n++
	h.mu.Unlock()
}

// end counts a read answered (or left by its client), and releases the
// Waits when it was the last.
func (h *HeldReads) end() {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.n--; h.n == 0 && h.zero != nil {
		close(h.zero)
		h.zero = nil
	}
}

// add registers r to be rung; stop is core's stop channel, watched by one
// goroutine for all reads.
func (h *HeldReads) add(r *heldRead, stop <-chan struct{}) {
	h.watchStop.Do(func() {
		go func() {
			<-stop
			h.mu.Lock()
			defer h.mu.Unlock()
			h.stopped = true
			for _, rs := range h.inboxes {
				for r := range rs {
					r.ring()
				}
			}
		}()
	})
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.inboxes == nil {
		h.inboxes = map[heldKey]map[*heldRead]struct{}{}
	}
	k := heldKey{r.team, r.member}
	if h.inboxes[k] == nil {
		h.inboxes[k] = map[*heldRead]struct{}{}
	}
	h.inboxes[k][r] = struct{}{}
	if h.stopped {
		r.ring()
	}
}

// Held reports how many reads for member of team are held off net/http
// right now: the moment a read stops being an ordinary request. Tests use
// it to send a letter only once a read is really held.
func (h *HeldReads) Held(team, member string) int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return len(h.inboxes[heldKey{team, member}])
}

func (h *HeldReads) remove(r *heldRead) {
	h.mu.Lock()
	defer h.mu.Unlock()
	k := heldKey{r.team, r.member}
	delete(h.inboxes[k], r)
	if len(h.inboxes[k]) == 0 {
		delete(h.inboxes, k)
	}
}

// letter rings the reads held on the inbox of a stored letter, and every
// held read on a resync (core has woken every waiter: other replicas'
// letters may have been missed). It is fed the events that drive the
// event stream, right after core has closed the inboxes' channels, and
// never blocks: core calls it with a team lock held.
func (h *HeldReads) letter(ev core.Event) {
	if ev.Type == core.EventTeamDeleted {
		// Core has closed the team's life: its reads answer now.
		h.mu.Lock()
		defer h.mu.Unlock()
		for k, rs := range h.inboxes {
			if k.team == ev.Team {
				for r := range rs {
					r.ring()
				}
			}
		}
		return
	}
	if ev.Type == core.EventResync {
		h.mu.Lock()
		defer h.mu.Unlock()
		for _, rs := range h.inboxes {
			for r := range rs {
				r.ring()
			}
		}
		return
	}
	if ev.Type != "message" {
		return
	}
	m, ok := ev.Data.(core.Message)
	if !ok {
		return
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	for r := range h.inboxes[heldKey{ev.Team, m.Recipient}] {
		r.ring()
	}
}

// waitOf turns the inbox read's `wait` parameter (whole seconds, 0–60 by
// the schema) into the duration core waits for a letter.
func waitOf(seconds *int) time.Duration {
	if seconds == nil || *seconds <= 0 {
		return 0
	}
	return time.Duration(*seconds) * time.Second
}

// errClientGone ends a held read whose client closed its connection:
// there is no one to answer.
var errClientGone = errors.New("client closed the connection")

// heldRead is a read that found nothing to answer yet. It is also the
// strict handler's response object, whose Visit method takes the
// connection over once every check has passed.
type heldRead struct {
	s                   *Server
	team, member, after string
	deadline            time.Time
	// reqCtx is the request's own context, for the read that waits in
	// place; ctx carries only the caller's identity, for the looks taken
	// after the request's context has ended with the handler.
	reqCtx, ctx context.Context
	// changed is closed at the inbox's next letter and stop when the
	// server stops waiting; release gives the watch back.
	changed, stop <-chan struct{}
	release       func()
	// life is the life of the read's team: once it is deleted the read
	// answers 200 with no letters, and never with a letter of a new team
	// of the same name. unhold gives back the token's place among its
	// waiting reads (core.Service.HoldRead).
	life   *core.TeamLife
	unhold func()

	// conn is the taken-over connection; mu orders ring's deadline
	// against the one the waiting goroutine sets (see waitConn).
	mu   sync.Mutex
	conn net.Conn
}

// holdInbox answers a read with a positive wait: at once when there are
// letters after `after` or a check refuses it, else with a heldRead.
func (s *Server) holdInbox(ctx context.Context, team, member, after string, wait time.Duration) (GetInboxResponseObject, error) {
	p, _ := core.PrincipalFrom(ctx)
	h := &heldRead{
		s: s, team: team, member: member, after: after,
		deadline: time.Now().Add(min(wait, core.MaxWait)),
		reqCtx:   ctx,
		ctx:      core.WithPrincipal(context.Background(), p),
	}
	// The looks use h.ctx, not the request's context: a client that
	// half-closes its connection after the request has the request's
	// context cancelled by net/http, and is still answered.
	//
	// A read that may wait takes one of its token's places first, before
	// its watch makes it count as waiting; refused one (429
	// too_many_streams), it still answers the letters there are, since a
	// read that finds some never waits. It follows its team's life from
	// before its look.
	var err error
	if h.unhold, err = s.svc.HoldRead(h.ctx); err != nil {
		msgs, lerr := s.svc.WaitInbox(h.ctx, team, member, after, 0)
		if lerr != nil {
			return nil, lerr
		}
		if len(msgs) > 0 {
			return GetInbox200JSONResponse{Messages: messagesOf(msgs)}, nil
		}
		return nil, err
	}
	if h.life, err = s.svc.FollowTeam(h.ctx, team); err != nil {
		h.unhold()
		return nil, err
	}
	msgs, err := h.look(h.ctx)
	if h.deleted(err) {
		if err == nil && len(msgs) == 0 {
			h.release() // look left a watch
		}
		h.finish()
		return GetInbox200JSONResponse{Messages: []Message{}}, nil
	}
	if err != nil || len(msgs) > 0 {
		h.finish()
		if err != nil {
			return nil, err
		}
		return GetInbox200JSONResponse{Messages: messagesOf(msgs)}, nil
	}
	return h, nil
}

// finish gives back what a waiting read held besides its watch: its
// team's life and its token's place.
func (h *heldRead) finish() {
	h.life.Release()
	h.unhold()
}

// deleted reports whether the read's team was deleted, given err, the
// error of the look just taken (nil before any). It is asked after every
// look: a look that saw a new team of the same name came after the
// deletion, which it then reports. A look that found no team found it
// deleted too (the team existed when the read began to follow it), even
// before the deletion's announcement arrives, which on this process
// follows the store's deletion and on another replica travels through the
// database.
func (h *heldRead) deleted(err error) bool {
	if h.life.Ended() {
		return true
	}
	switch core.ErrorCode(err) {
	case core.CodeUnauthorized:
		// Core refuses a member's token once its team is gone, even if
		// a team of the same name was created again since.
		return true
	case core.CodeNotFound:
		return core.ErrorCode(h.s.svc.HasMember(h.ctx, h.team, core.LeadName)) == core.CodeNotFound
	}
	return false
}

// look reads the letters after h.after. When there are none it keeps the
// inbox watched: the watch is taken before the read, so a letter stored
// between the two still closes h.changed.
func (h *heldRead) look(ctx context.Context) ([]core.Message, error) {
	_, changed, stop, release, err := h.s.svc.WatchInbox(ctx, h.team, h.member)
	if err != nil {
		return nil, err
	}
	msgs, err := h.s.svc.WaitInbox(ctx, h.team, h.member, h.after, 0)
	if err != nil || len(msgs) > 0 {
		release()
		return msgs, err
	}
	h.changed, h.stop, h.release = changed, stop, release
	return msgs, nil
}

// wait waits on the watch look left until a letter, the deadline, the
// server's stop or gone, and returns what to answer; errClientGone when
// gone came first.
func (h *heldRead) wait(ctx context.Context, gone <-chan struct{}) ([]core.Message, error) {
	defer h.finish()
	return h.waitOn(ctx, gone)
}

// waitOn is wait without the finish; a nil gone never comes.
func (h *heldRead) waitOn(ctx context.Context, gone <-chan struct{}) ([]core.Message, error) {
	timer := time.NewTimer(time.Until(h.deadline))
	defer timer.Stop()
	for {
		if h.deleted(nil) {
			h.release()
			return nil, nil
		}
		select {
		case <-h.changed:
			h.release()
			msgs, err := h.look(ctx)
			if h.deleted(err) {
				if err == nil && len(msgs) == 0 {
					h.release() // look left a watch
				}
				return nil, nil
			}
			if err != nil || len(msgs) > 0 {
				return msgs, err
			}
			// The letter went again (matched by a consume): watch on.
			continue
		case <-h.life.Gone():
			continue // answered above
		case <-gone:
			h.release()
			return nil, errClientGone
		case <-timer.C:
		case <-h.stop:
		}
		h.release()
		// One last look: a letter may have come with the deadline.
		msgs, err := h.s.svc.WaitInbox(ctx, h.team, h.member, h.after, 0)
		if h.deleted(err) {
			return nil, nil
		}
		return msgs, err
	}
}

// VisitGetInboxResponse takes the connection over and answers from a
// goroutine of its own (see the top of this file); where that cannot be
// done it waits in place.
func (h *heldRead) VisitGetInboxResponse(w http.ResponseWriter) error {
	header := w.Header().Clone() // what the middlewares set, e.g. nosniff
	h.s.held.begin()             // before the connection leaves net/http's count
	conn, _, err := http.NewResponseController(w).Hijack()
	if err != nil {
		h.s.held.end()
		msgs, err := h.wait(h.reqCtx, h.reqCtx.Done())
		if errors.Is(err, errClientGone) {
			return nil
		}
		if err != nil {
			return err // answered by the strict handler's error function
		}
		return GetInbox200JSONResponse{Messages: messagesOf(msgs)}.VisitGetInboxResponse(w)
	}
	// The buffered reader and writer Hijack returned are dropped: nothing
	// more is read from this connection, and the answer is one write. The
	// request's context, which holds the request, is let go as well.
	h.reqCtx = nil
	h.conn = conn
	go h.answerLater(header)
	return nil
}

// answerLater waits for the held read on its taken-over connection and
// writes the answer. It is the read's only goroutine.
func (h *heldRead) answerLater(header http.Header) {
	defer h.s.held.end()
	h.s.held.add(h, h.stop)
	msgs, err := h.waitConn()
	h.s.held.remove(h)
	// The place is given back before the answer goes out: a client that
	// has its answer may wait again at once.
	h.finish()
	if !errors.Is(err, errClientGone) {
		h.writeAnswer(header, msgs, err)
	}
	_ = h.conn.Close()
}

// ring interrupts the goroutine's read of its connection, so that it
// looks at its inbox again. It costs no goroutine: the wait is a read
// blocked in the network poller, and ring moves its deadline to now.
func (h *heldRead) ring() {
	h.mu.Lock()
	defer h.mu.Unlock()
	_ = h.conn.SetReadDeadline(time.Now())
}

// waitConn waits in a one-byte read of the connection, which returns when
// the client closes it (errClientGone), at the read's deadline (set to
// the wait's end), or when ring moves the deadline to now after a letter
// or the server's stop. Core closed h.changed or h.stop before the ring,
// so the channels say which; they are looked at under mu, with the
// deadline set in the same hold, so that no ring falls between the look
// and the deadline.
func (h *heldRead) waitConn() ([]core.Message, error) {
	var b [1]byte
	for {
		if h.deleted(nil) {
			h.release()
			return nil, nil
		}
		h.mu.Lock()
		select {
		case <-h.life.Gone():
			h.mu.Unlock()
			continue // answered above
		case <-h.changed:
			h.mu.Unlock()
			h.release()
			msgs, err := h.look(h.ctx)
			if h.deleted(err) {
				if err == nil && len(msgs) == 0 {
					h.release() // look left a watch
				}
				return nil, nil
			}
			if err != nil || len(msgs) > 0 {
				return msgs, err
			}
			continue // the letter went again (matched by a consume): wait on
		case <-h.stop:
			h.mu.Unlock()
			return h.lastLook()
		default:
		}
		_ = h.conn.SetReadDeadline(h.deadline)
		h.mu.Unlock()
		_, err := h.conn.Read(b[:])
		switch {
		case errors.Is(err, os.ErrDeadlineExceeded):
			if !time.Now().Before(h.deadline) {
				return h.lastLook()
			}
			// Rung: look at the channels again.
		case errors.Is(err, io.EOF):
			// The client closed its side for writing after its request
			// (a half-close), or left altogether; no read can tell which.
			// net/http answers such a client's ordinary requests, so this
			// one is answered too: it waits on without reading, and a
			// client that left makes the answer's write fail, nothing
			// more.
			return h.waitOn(h.ctx, nil)
		case err != nil:
			h.release()
			return nil, errClientGone
		default:
			// An HTTP/1.1 client sends nothing before its answer; one
			// that does (a pipelined request) is answered now, and the
			// connection's close tells it to send the rest again.
			return h.lastLook()
		}
	}
}

// lastLook ends the wait with what the inbox holds now: a letter may have
// come with the deadline.
func (h *heldRead) lastLook() ([]core.Message, error) {
	h.release()
	msgs, err := h.s.svc.WaitInbox(h.ctx, h.team, h.member, h.after, 0)
	if h.deleted(err) {
		return nil, nil // the team was deleted: nothing of a new one
	}
	return msgs, err
}

// writeAnswer writes the held read's answer, a complete HTTP/1.1 response,
// to its connection.
func (h *heldRead) writeAnswer(header http.Header, msgs []core.Message, err error) {
	a := &heldAnswer{header: header}
	if err != nil {
		p := problemFor(err)
		if p.Status >= 500 {
			h.s.log.ErrorContext(h.ctx, "request failed", "method", http.MethodGet, "route", BasePath+"/teams/{team}/members/{member}/inbox", "code", p.Code, "err", err)
		}
		writeProblem(a, p)
	} else if err := (GetInbox200JSONResponse{Messages: messagesOf(msgs)}).VisitGetInboxResponse(a); err != nil {
		h.s.log.ErrorContext(h.ctx, "encoding a held read's answer failed", "err", err)
		a = &heldAnswer{header: header}
		writeProblem(a, newProblem(codeInternal, genericInternalDetail))
	}
	_ = h.conn.SetWriteDeadline(time.Now().Add(heldWriteTimeout))
	_, _ = h.conn.Write(a.bytes()) // the client may be gone; nothing to do then
}

// heldAnswer collects the response of a taken-over connection, which is
// then written in one piece.
type heldAnswer struct {
	header http.Header
	status int
	body   bytes.Buffer
}

func (a *heldAnswer) Header() http.Header { return a.header }

func (a *heldAnswer) WriteHeader(code int) {
	if a.status == 0 {
		a.status = code
	}
}

func (a *heldAnswer) Write(p []byte) (int, error) {
	if a.status == 0 {
		a.status = http.StatusOK
	}
	return a.body.Write(p)
}

// bytes is the whole HTTP/1.1 response. It always closes the connection,
// which net/http no longer serves.
func (a *heldAnswer) bytes() []byte {
	status := a.status
	if status == 0 {
		status = http.StatusOK
	}
	h := a.header
	h.Del("Transfer-Encoding")
	h.Set("Content-Length", strconv.Itoa(a.body.Len()))
	h.Set("Connection", "close")
	h.Set("Date", time.Now().UTC().Format(http.TimeFormat))
	var out bytes.Buffer
	out.WriteString("HTTP/1.1 " + strconv.Itoa(status) + " " + http.StatusText(status) + "\r\n")
	_ = h.Write(&out)
	out.WriteString("\r\n")
	out.Write(a.body.Bytes())
	return out.Bytes()
}
