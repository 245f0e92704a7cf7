package httpapi

import (
	"bufio"
	"context"
	"io"
	"log/slog"
	"net/http"
	"strings"
	"testing"
	"time"

	"mailroom/internal/core"
)

func letterEvent(team, id, sender, recipient string) core.Event {
	return core.Event{Type: "message", Team: team, Data: core.Message{ID: id, Sender: sender, Recipient: recipient, Body: "b"}}
}

func TestBrokerOverflowDropsAndResyncs(t *testing.T) {
	var counts []int
	b := newBroker(2, func(n int) { counts = append(counts, n) })
	s := b.subscribe("", "")

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
	b := newBroker(16, nil)
	all := b.subscribe("", "")
	team := b.subscribe("alpha", "")
	reader := b.subscribe("alpha", "reader")

	published := []core.Event{
		letterEvent("alpha", "lead-1", "reviewer", "lead"),
		letterEvent("alpha", "reader-1", "lead", "reader"),
		letterEvent("beta", "reader-1", "lead", "reader"),
		letterEvent("alpha", "lead-2", "reader", "lead"),
		{Type: "request", Team: "alpha", Data: core.Request{ID: "req-1"}},
	}
	for _, ev := range published {
		b.publish(ev)
	}
	tests := []struct {
		name string
		sub  *subscriber
		want []int // indexes into published
	}{
		{"admin, every team", all, []int{0, 1, 2, 3, 4}},
		{"admin, one team", team, []int{0, 1, 3, 4}},
		{"member: own letters and team state", reader, []int{1, 3, 4}},
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
	es := eventStream{ctx: ctx, broker: b, sub: sub, log: slog.New(slog.DiscardHandler), heartbeat: heartbeat}
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
	b := newBroker(1, nil)
	sub := b.subscribe("", "")
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
	b.mu.Lock()
	n := len(b.clients)
	b.mu.Unlock()
	if n != 0 {
		t.Fatalf("%d clients left after the stream ended", n)
	}
}

func TestEventStreamHeartbeat(t *testing.T) {
	b := newBroker(4, nil)
	r, stop := streamOver(t, b, b.subscribe("", ""), time.Millisecond)
	readLine(t, r) // opening comment
	readLine(t, r)
	if l := readLine(t, r); l != ": heartbeat" {
		t.Fatalf("line = %q, want a heartbeat comment", l)
	}
	stop()
}
