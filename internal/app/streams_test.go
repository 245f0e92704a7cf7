package app

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"mailroom/internal/core"
	"mailroom/internal/httpapi"
	"mailroom/internal/testkit"
)

// countingListener gives each accepted connection a small send buffer, so
// that a client that does not read blocks the server's writes after a few
// letters, and counts the writes under way on all of them.
type countingListener struct {
	net.Listener
	writing *atomic.Int32
}

func (l countingListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	if tc, ok := c.(*net.TCPConn); ok {
		_ = tc.SetWriteBuffer(8 << 10)
	}
	return countingConn{Conn: c, writing: l.writing}, nil
}

type countingConn struct {
	net.Conn
	writing *atomic.Int32
}

func (c countingConn) Write(p []byte) (int, error) {
	c.writing.Add(1)
	defer c.writing.Add(-1)
	return c.Conn.Write(p)
}

// TestShutdownDoesNotWaitForStalledStream: a client that opened an event
// stream and stopped reading leaves the server blocked in a write, where no
// context reaches. Shutdown must still end that stream at once instead of
// waiting out its grace period, here over the real handler with a write
// timeout far longer than the grace period.
func TestShutdownDoesNotWaitForStalledStream(t *testing.T) {
	const grace = 20 * time.Second
	svc := testkit.OpenService(t, t.TempDir())
	limits := core.DefaultLimits()
	limits.BodyChars, limits.InboxMessages, limits.InboxBytes = 32<<10, 1000, 64<<20
	if _, _, err := svc.CreateTeam(t.Context(), core.TeamSpec{
		Name:    "alpha",
		Members: []core.MemberSpec{{Name: "reader", Role: "reads"}},
		Limits:  &limits,
	}); err != nil {
		t.Fatalf("create team: %v", err)
	}
	const admin = "shutdown-admin-token"
	h, err := httpapi.NewHandler(svc, httpapi.Options{
		AdminToken:         admin,
		Logger:             slog.New(slog.DiscardHandler),
		StreamWriteTimeout: time.Hour,
	})
	if err != nil {
		t.Fatal(err)
	}
	stopping, stopStreams := context.WithCancel(context.Background())
	defer stopStreams()
	srv := &http.Server{Handler: endStreamsOnShutdown(h, stopping), ReadHeaderTimeout: 5 * time.Second}
	srv.RegisterOnShutdown(stopStreams)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var writing atomic.Int32
	served := make(chan error, 1)
	go func() { served <- srv.Serve(countingListener{Listener: ln, writing: &writing}) }()
	defer srv.Close()

	conn, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	if tc, ok := conn.(*net.TCPConn); ok {
		_ = tc.SetReadBuffer(4 << 10)
	}
	fmt.Fprintf(conn, "GET /api/v1/events HTTP/1.1\r\nHost: mailroom\r\nAuthorization: Bearer %s\r\n\r\n", admin)
	// Read up to the opening comment, so the stream is subscribed; then
	// never read again.
	r := bufio.NewReaderSize(conn, 16)
	for {
		line, err := r.ReadString('\n')
		if err != nil {
			t.Fatalf("read the stream's start: %v", err)
		}
		if strings.HasPrefix(line, "HTTP/1.1 ") && !strings.HasPrefix(line, "HTTP/1.1 200") {
			t.Fatalf("GET events answered %q, want 200", strings.TrimSpace(line))
		}
		if strings.Contains(line, ": stream open") {
			break
		}
	}

	// Far more than the socket buffers of both ends hold.
	body := strings.Repeat("x", limits.BodyChars)
	for i := range 64 {
		if _, err := svc.Send(core.AsMember(t.Context(), "alpha", core.LeadName), core.SendInput{Team: "alpha", To: "reader", Body: body}); err != nil {
			t.Fatalf("send letter %d: %v", i, err)
		}
	}
	// Wait for the server to sit in a write the client does not take.
	for writing.Load() == 0 {
		select {
		case <-t.Context().Done():
			t.Fatal("the server never blocked writing to the stalled client")
		case <-time.After(time.Millisecond):
		}
	}

	sctx, cancel := context.WithTimeout(context.Background(), grace)
	defer cancel()
	if err := srv.Shutdown(sctx); err != nil {
		t.Fatalf("Shutdown = %v, want nil: it waited for the stalled stream", err)
	}
	if err := <-served; !errors.Is(err, http.ErrServerClosed) {
		t.Fatalf("Serve = %v, want %v", err, http.ErrServerClosed)
	}
}

// TestEndStreamsOnShutdown checks that shutdown cancels event streams and
// leaves ordinary requests running.
func TestEndStreamsOnShutdown(t *testing.T) {
	stopping, stop := context.WithCancel(context.Background())
	defer stop()
	started := make(chan string, 2)
	release := make(chan struct{})
	ended := make(chan string, 2)
	h := endStreamsOnShutdown(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/events" {
			w.Header().Set("Content-Type", "text/event-stream")
			w.WriteHeader(http.StatusOK)
			http.NewResponseController(w).Flush()
			started <- "events"
			<-r.Context().Done()
			ended <- "events"
			return
		}
		started <- "slow"
		<-release
		if err := r.Context().Err(); err != nil {
			t.Errorf("ordinary request cancelled by shutdown: %v", err)
		}
		fmt.Fprint(w, "done")
		ended <- "slow"
	}), stopping)
	srv := httptest.NewServer(h)
	defer srv.Close()

	var wg sync.WaitGroup
	for _, path := range []string{"/events", "/slow"} {
		wg.Go(func() {
			resp, err := http.Get(srv.URL + path)
			if err != nil {
				t.Error(err)
				return
			}
			io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
		})
	}
	<-started
	<-started
	stop()
	if got := <-ended; got != "events" {
		t.Fatalf("first to end = %q, want the event stream", got)
	}
	close(release)
	if got := <-ended; got != "slow" {
		t.Fatalf("second to end = %q, want the ordinary request", got)
	}
	wg.Wait()
}
