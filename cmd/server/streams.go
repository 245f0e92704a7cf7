package main

import (
	"context"
	"net/http"
	"strings"
)

// endStreamsOnShutdown lets http.Server.Shutdown finish promptly while the
// status page is open. Shutdown waits for every request to end, and an
// event stream never ends by itself; so once a response declares itself a
// stream (Content-Type text/event-stream), its request context is also
// cancelled when stopping is. Ordinary requests are left to complete.
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
// written. It implements Flush and Unwrap so handlers can still flush,
// directly or through http.ResponseController.
type streamWatcher struct {
	http.ResponseWriter
	stopping    context.Context
	cancel      context.CancelFunc
	wroteHeader bool
	stopWatch   func() bool
}

func (sw *streamWatcher) WriteHeader(code int) {
	if !sw.wroteHeader {
		sw.wroteHeader = true
		ct := sw.Header().Get("Content-Type")
		if strings.HasPrefix(ct, "text/event-stream") {
			sw.stopWatch = context.AfterFunc(sw.stopping, sw.cancel)
		}
	}
	sw.ResponseWriter.WriteHeader(code)
}

func (sw *streamWatcher) Write(p []byte) (int, error) {
	if !sw.wroteHeader {
		sw.WriteHeader(http.StatusOK)
	}
	return sw.ResponseWriter.Write(p)
}

// Flush sends buffered data to the client, as http.Flusher requires.
func (sw *streamWatcher) Flush() {
	if !sw.wroteHeader {
		sw.WriteHeader(http.StatusOK)
	}
	_ = http.NewResponseController(sw.ResponseWriter).Flush()
}

// Unwrap gives http.ResponseController access to the underlying writer.
func (sw *streamWatcher) Unwrap() http.ResponseWriter { return sw.ResponseWriter }

func (sw *streamWatcher) stop() {
	if sw.stopWatch != nil {
		sw.stopWatch()
	}
}
