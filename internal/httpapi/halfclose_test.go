package httpapi_test

import (
	"bufio"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"net/url"
	"runtime"
	"testing"
	"time"

	"mailroom/internal/httpapi"
)

// TestHeldReadAfterHalfClose: a client that closes its side for writing
// right after its request (shutdown(SHUT_WR)) still gets the held read's
// answer, as it gets any other answer.
func TestHeldReadAfterHalfClose(t *testing.T) {
	e := newEnv(t)
	a := e.newTeam("alpha", nil)
	u, err := url.Parse(e.srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	conn, err := net.Dial("tcp", u.Host)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	req := "GET /api/v1/teams/alpha/members/reader/inbox?wait=60 HTTP/1.1\r\nHost: " + u.Host +
		"\r\nAuthorization: Bearer " + a.tokens["reader"] + "\r\n\r\n"
	if _, err := io.WriteString(conn, req); err != nil {
		t.Fatal(err)
	}
	if err := conn.(*net.TCPConn).CloseWrite(); err != nil {
		t.Fatal(err)
	}
	// Until the read waits; the bound only keeps a read that never waits
	// (or was dropped) from hanging the test.
	for start := time.Now(); e.app.Live().Waiting("alpha", "reader") < 1; runtime.Gosched() {
		if time.Since(start) > 30*time.Second {
			t.Fatal("the half-closed client's read never waited")
		}
	}
	want(t, e.send(a, "lead", "reader", "after the half-close"), http.StatusCreated, "")

	resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
	if err != nil {
		t.Fatalf("reading the held read's answer: %v; want a 200 with the letter", err)
	}
	defer resp.Body.Close()
	var box httpapi.Inbox
	if err := json.NewDecoder(resp.Body).Decode(&box); err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != http.StatusOK || len(box.Messages) != 1 || box.Messages[0].Body != "after the half-close" {
		t.Fatalf("answer = %d %+v, want 200 with the letter", resp.StatusCode, box.Messages)
	}
}
