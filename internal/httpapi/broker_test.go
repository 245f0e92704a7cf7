package httpapi

import (
	"bufio"
	"context"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"mailroom/internal/core"
)

func letterEvent(team, id, sender, recipient string) core.Event {
	return core.Event{Type: "message", Team: team, Data: core.Message{ID: id, Sender: sender, Recipient: recipient, Body: "b"}}
}

func turnEvent(team, member, text string) core.Event {
	return core.Event{Type: "turn", Team: team, Data: core.TurnResult{Member: member, Status: "answered", Text: text}}
}

// defaultLimits are the stream bounds of a handler built without options.
var defaultLimits = streamLimitsOf(Options{})

// subscribe opens a subscriber that must be admitted.
func subscribe(t *testing.T, b *broker, team, member, token string) *subscriber {
	t.Helper()
	s, err := b.subscribe(team, member, token)
	if err != nil {
		t.Fatalf("subscribe(%q, %q, %q) = %v, want a subscriber", team, member, token, err)
	}
	return s
}

// clientCount is the number of subscribers the broker holds.
func (b *broker) clientCount() int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return len(b.clients)
}

func TestBrokerOverflowDropsAndResyncs(t *testing.T) {
	var counts []int
	b := newBroker(2, defaultLimits, func(n int) { counts = append(counts, n) })
	s := subscribe(t, b, "", "", "admin")

	// Nobody reads: publish must still return at once, whatever the backlog.
	for i := range 1000 {
		b.publish(core.Event{Type: "request", Team: "t", Data: i})
	}
	resync, events := s.take()
	if !resync {
		t.Fatal("no resync after an overflow")
	}
	if len(events) > 2 {
		t.Fatalf("queue holds %d events, want at most the buffer of 2", len(events))
	}

	b.publish(core.Event{Type: "request", Team: "t", Data: "after"})
	resync, events = s.take()
	if resync || len(events) != 1 || events[0].Data != "after" {
		t.Fatalf("after the resync: resync=%v events=%v, want the one new event", resync, events)
	}
	b.unsubscribe(s)
	if len(counts) != 2 || counts[0] != 1 || counts[1] != 0 {
		t.Fatalf("client counts = %v, want [1 0]", counts)
	}
}

func TestBrokerFilters(t *testing.T) {
	b := newBroker(16, defaultLimits, nil)
	all := subscribe(t, b, "", "", "admin")
	team := subscribe(t, b, "alpha", "", "admin")
	reader := subscribe(t, b, "alpha", "reader", "member\x00alpha\x00reader")

	published := []core.Event{
		letterEvent("alpha", "lead-1", "reviewer", "lead"),
		letterEvent("alpha", "reader-1", "lead", "reader"),
		letterEvent("beta", "reader-1", "lead", "reader"),
		letterEvent("alpha", "lead-2", "reader", "lead"),
		{Type: "request", Team: "alpha", Data: core.Request{ID: "req-1"}},
		turnEvent("alpha", "lead", "lead's final text"),
		turnEvent("alpha", "reader", "reader's final text"),
		{Type: "turn", Team: "alpha", Data: "a turn whose member cannot be told"},
	}
	for _, ev := range published {
		b.publish(ev)
	}
	tests := []struct {
		name string
		sub  *subscriber
		want []int // indexes into published
	}{
		{"admin, every team", all, []int{0, 1, 2, 3, 4, 5, 6, 7}},
		{"admin, one team", team, []int{0, 1, 3, 4, 5, 6, 7}},
		{"member: own letters, own turns and team state", reader, []int{1, 3, 4, 6}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, got := tt.sub.take()
			if len(got) != len(tt.want) {
				t.Fatalf("got %d events %v, want %v", len(got), got, tt.want)
			}
			for i, j := range tt.want {
				if got[i].Team != published[j].Team || got[i].Data != published[j].Data {
					t.Errorf("event %d = %+v, want %+v", i, got[i], published[j])
				}
			}
		})
	}
}

// pipeWriter is a ResponseWriter whose body a test reads as it is written.
type pipeWriter struct {
	header http.Header
	w      *io.PipeWriter
}

func (p *pipeWriter) Header() http.Header         { return p.header }
func (p *pipeWriter) Write(b []byte) (int, error) { return p.w.Write(b) }
func (p *pipeWriter) WriteHeader(int)             {}
func (p *pipeWriter) Flush()                      {}

// streamOver runs an event stream for sub and returns a line reader of its
// output and a stop function that ends it and waits.
func streamOver(t *testing.T, b *broker, sub *subscriber, heartbeat time.Duration) (*bufio.Reader, func()) {
	t.Helper()
	ctx, cancel := context.WithCancel(t.Context())
	pr, pw := io.Pipe()
	es := eventStream{ctx: ctx, broker: b, sub: sub, log: slog.New(slog.DiscardHandler), heartbeat: heartbeat, writeTimeout: time.Minute}
	done := make(chan error, 1)
	go func() { done <- es.VisitStreamEventsResponse(&pipeWriter{header: http.Header{}, w: pw}) }()
	stop := func() {
		cancel()
		pr.Close() // unblocks a pending write
		if err := <-done; err != nil {
			t.Errorf("stream ended with %v", err)
		}
	}
	t.Cleanup(func() { cancel(); pr.Close() })
	return bufio.NewReader(pr), stop
}

func readLine(t *testing.T, r *bufio.Reader) string {
	t.Helper()
	l, err := r.ReadString('\n')
	if err != nil {
		t.Fatalf("read stream: %v", err)
	}
	return strings.TrimSuffix(l, "\n")
}

func TestEventStreamSendsResyncAfterOverflow(t *testing.T) {
	b := newBroker(1, defaultLimits, nil)
	sub := subscribe(t, b, "", "", "admin")
	// Overflow before the writer runs: two events dropped, then one kept.
	b.publish(core.Event{Type: "request", Team: "t", Data: 1})
	b.publish(core.Event{Type: "request", Team: "t", Data: 2})
	b.publish(core.Event{Type: "message", Team: "t", Data: 3})

	r, stop := streamOver(t, b, sub, time.Hour)
	if l := readLine(t, r); !strings.HasPrefix(l, ":") {
		t.Fatalf("first line = %q, want the opening comment", l)
	}
	readLine(t, r)
	wantLines := []string{
		"event: resync", `data: {"type":"resync","team":"","data":null}`, "",
		"event: message", `data: {"type":"message","team":"t","data":3}`, "",
	}
	for _, w := range wantLines {
		if got := readLine(t, r); got != w {
			t.Fatalf("line = %q, want %q", got, w)
		}
	}
	stop()
	if n := b.clientCount(); n != 0 {
		t.Fatalf("%d clients left after the stream ended", n)
	}
}

func TestEventStreamHeartbeat(t *testing.T) {
	b := newBroker(4, defaultLimits, nil)
	r, stop := streamOver(t, b, subscribe(t, b, "", "", "admin"), time.Millisecond)
	readLine(t, r) // opening comment
	readLine(t, r)
	if l := readLine(t, r); l != ": heartbeat" {
		t.Fatalf("line = %q, want a heartbeat comment", l)
	}
	stop()
}

func TestBrokerBoundsStreams(t *testing.T) {
	b := newBroker(4, streamLimits{perToken: 2, total: 3, writeTimeout: time.Minute}, nil)
	a1 := subscribe(t, b, "", "", "admin")
	subscribe(t, b, "", "", "admin")
	if _, err := b.subscribe("", "", "admin"); core.ErrorCode(err) != core.CodeTooManyStreams {
		t.Fatalf("third stream of one token: err = %v, want %s", err, core.CodeTooManyStreams)
	}
	subscribe(t, b, "alpha", "lead", "lead")
	if _, err := b.subscribe("alpha", "reader", "reader"); core.ErrorCode(err) != core.CodeTooManyStreams {
		t.Fatalf("stream beyond the total: err = %v, want %s", err, core.CodeTooManyStreams)
	}
	b.unsubscribe(a1)
	b.unsubscribe(a1) // a second unsubscribe must not free another place
	if got := b.perToken["admin"]; got != 1 {
		t.Fatalf("admin streams counted after one of two ended = %d, want 1", got)
	}
	subscribe(t, b, "alpha", "reader", "reader")
}

// TestEventStreamClosesSlowReader runs a stream over a real connection whose
// client sends its request and never reads. Once the kernel's buffers are
// full a write blocks; the write deadline must end the stream and free its
// place instead of pinning the buffers for as long as the client stays.
func TestEventStreamClosesSlowReader(t *testing.T) {
	b := newBroker(clientBuffer, defaultLimits, nil)
	ended := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		defer close(ended)
		sub, err := b.subscribe("", "", "admin")
		if err != nil {
			t.Errorf("subscribe: %v", err)
			return
		}
		es := eventStream{ctx: r.Context(), broker: b, sub: sub, log: slog.New(slog.DiscardHandler), heartbeat: time.Hour, writeTimeout: 50 * time.Millisecond}
		_ = es.VisitStreamEventsResponse(w)
	}))
	defer srv.Close()

	conn, err := net.Dial("tcp", srv.Listener.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	if _, err := io.WriteString(conn, "GET /events HTTP/1.1\r\nHost: mailroom\r\n\r\n"); err != nil {
		t.Fatal(err)
	}

	// Far more than any socket buffers hold; the pace only keeps the
	// publisher from spinning.
	const maxEvents = 20000
	ev := core.Event{Type: "message", Team: "t", Data: strings.Repeat("x", 64<<10)}
	tick := time.NewTicker(time.Millisecond)
	defer tick.Stop()
	for n := 0; ; n++ {
		if n == maxEvents {
			t.Fatalf("the stream is still open after %d events of 64 KiB that its client never read, want it closed", n)
		}
		select {
		case <-ended:
		case <-tick.C:
			b.publish(ev)
			continue
		}
		break
	}
	if n := b.clientCount(); n != 0 {
		t.Fatalf("%d clients left after the slow reader's stream ended, want 0", n)
	}
	if _, err := b.subscribe("", "", "admin"); err != nil {
		t.Fatalf("subscribe after the slow reader's stream ended: %v", err)
	}
}

// TestBrokerResyncReachesEveryClient: core's resync (this replica may have
// missed other replicas' events) tells every client to reload, whatever
// team or member it watches, and keeps what was queued; the stream writes
// the resync event first.
func TestBrokerResyncReachesEveryClient(t *testing.T) {
	b := newBroker(clientBuffer, defaultLimits, nil)
	all := subscribe(t, b, "", "", "admin")
	team := subscribe(t, b, "demo", "", "admin")
	member := subscribe(t, b, "demo", "reader", "member\x00demo\x00reader")
	b.publish(letterEvent("demo", "reader-1", "lead", "reader"))
	b.publish(core.Event{Type: core.EventResync})
	for name, s := range map[string]*subscriber{"all teams": all, "one team": team, "a member": member} {
		resync, events := s.take()
		if !resync {
			t.Errorf("%s: no resync after core's resync", name)
		}
		if len(events) != 1 || events[0].Type != core.EventMessage {
			t.Errorf("%s: queued %+v, want the letter queued before the resync", name, events)
		}
	}

	sub := subscribe(t, b, "demo", "", "admin")
	b.publish(core.Event{Type: core.EventResync})
	r, stop := streamOver(t, b, sub, time.Hour)
	defer stop()
	if l := readLine(t, r); !strings.HasPrefix(l, ":") {
		t.Fatalf("first line = %q, want the opening comment", l)
	}
	readLine(t, r)
	for _, w := range []string{"event: resync", `data: {"type":"resync","team":"demo","data":null}`, ""} {
		if got := readLine(t, r); got != w {
			t.Fatalf("line = %q, want %q", got, w)
		}
	}
}
