package app

import (
	"context"
	"net/http"
	"strings"
	"sync"
	"time"
)

// streamEndTimeout bounds the last bytes of a stream ended by stopping (the
// end of its chunked body). A client that reads gets them at once and sees
// the stream end cleanly; one that stopped reading cannot hold shutdown
// longer than this. It is a few seconds, not one, because the handler must
// first be scheduled to notice the stop, which on a busy machine can take
// a while; it stays well inside the shutdown grace period. A write already
// blocked on a client that does not read is cut at once instead.
const streamEndTimeout = 3 * time.Second

// streamCutGrace bounds a write already under way when the stream is ended.
// A client that reads takes it in microseconds and then gets the end of the
// body, so it sees the stream end cleanly (a write cut mid-way would leave
// it a broken chunk); a write blocked on a client that stopped reading is
// cut once this short grace is over.
const streamCutGrace = 250 * time.Millisecond

// endStreamsOnShutdown lets http.Server.Shutdown finish promptly while event
// streams are open. Shutdown waits for every request to end, and an event
// stream never ends by itself; so once a response declares itself a stream
// (Content-Type text/event-stream), stopping also cancels its request
// context, and a write the stream is blocked in is cut by moving its write
// deadline to a moment later (streamCutGrace): a client that stopped reading
// leaves its handler inside a write, where no context reaches it, and would
// otherwise hold Shutdown for the whole grace period. Ordinary requests are
// left to complete.
func endStreamsOnShutdown(next http.Handler, stopping context.Context) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ctx, cancel := context.WithCancel(r.Context())
		defer cancel()
		sw := &streamWatcher{ResponseWriter: w, stopping: stopping, cancel: cancel}
		defer sw.stop()
		next.ServeHTTP(sw, r.WithContext(ctx))
	})
}

// streamWatcher notices the start of an event stream when the header is
// written, and which of its writes are under way. It implements Flush,
// FlushError, SetWriteDeadline and Unwrap, so handlers reach the connection
// through it, directly or through http.ResponseController, and a deadline a
// handler sets can never undo the one stopping set.
type streamWatcher struct {
	http.ResponseWriter
	stopping    context.Context
	cancel      context.CancelFunc
	wroteHeader bool
	stopWatch   func() bool

	// mu orders the handler's writes and deadlines against stopping.
	mu sync.Mutex
	// writing counts the handler's writes and flushes under way.
	writing int
	// ended is set by stopping: every write from then on fails at once.
	ended bool
	// done is set when the handler returns; the connection may then serve
	// another request and must not be touched.
	done bool
}

func (sw *streamWatcher) WriteHeader(code int) {
	if !sw.wroteHeader {
		sw.wroteHeader = true
		ct := sw.Header().Get("Content-Type")
		if strings.HasPrefix(ct, "text/event-stream") {
			sw.stopWatch = context.AfterFunc(sw.stopping, sw.end)
		}
	}
	sw.ResponseWriter.WriteHeader(code)
}

// end stops the stream: its context is cancelled for a handler waiting for
// events, and a write under way, which may be blocked on a client that does
// not read, is cut after streamCutGrace. Otherwise the handler returns by
// itself and only the end of the body remains to be written, within
// streamEndTimeout.
func (sw *streamWatcher) end() {
	sw.mu.Lock()
	defer sw.mu.Unlock()
	if sw.done {
		return
	}
	sw.ended = true
	sw.cancel()
	deadline := time.Now().Add(streamEndTimeout)
	if sw.writing > 0 {
		deadline = time.Now().Add(streamCutGrace)
	}
	_ = http.NewResponseController(sw.ResponseWriter).SetWriteDeadline(deadline)
}

// begin marks a write as under way; once the stream is ended, the write's
// deadline is already past.
func (sw *streamWatcher) begin() {
	sw.mu.Lock()
	defer sw.mu.Unlock()
	if sw.ended {
		_ = http.NewResponseController(sw.ResponseWriter).SetWriteDeadline(time.Now())
	}
	sw.writing++
}

func (sw *streamWatcher) finish() {
	sw.mu.Lock()
	sw.writing--
	sw.mu.Unlock()
}

func (sw *streamWatcher) Write(p []byte) (int, error) {
	if !sw.wroteHeader {
		sw.WriteHeader(http.StatusOK)
	}
	sw.begin()
	defer sw.finish()
	return sw.ResponseWriter.Write(p)
}

// Flush sends buffered data to the client, as http.Flusher requires.
func (sw *streamWatcher) Flush() { _ = sw.FlushError() }

// FlushError is Flush with its error, which http.ResponseController prefers:
// a stream learns from it that its client is gone.
func (sw *streamWatcher) FlushError() error {
	if !sw.wroteHeader {
		sw.WriteHeader(http.StatusOK)
	}
	sw.begin()
	defer sw.finish()
	return http.NewResponseController(sw.ResponseWriter).Flush()
}

// SetWriteDeadline passes the handler's deadline on, unless the stream has
// been ended: then the deadline stays in the past.
func (sw *streamWatcher) SetWriteDeadline(deadline time.Time) error {
	sw.mu.Lock()
	defer sw.mu.Unlock()
	if sw.ended {
		deadline = time.Now()
	}
	return http.NewResponseController(sw.ResponseWriter).SetWriteDeadline(deadline)
}

// Unwrap gives http.ResponseController access to the underlying writer.
func (sw *streamWatcher) Unwrap() http.ResponseWriter { return sw.ResponseWriter }

// stop runs as the handler returns: a stop that has not begun will not, and
// one under way is waited for.
func (sw *streamWatcher) stop() {
	if sw.stopWatch != nil {
		sw.stopWatch()
	}
	sw.mu.Lock()
	sw.done = true
	sw.mu.Unlock()
}
