package httpapi_test

import (
	"encoding/json"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"mailroom/internal/core"
	"mailroom/internal/httpapi"
	"mailroom/internal/mail"
	"mailroom/internal/testkit"
)

// BenchmarkSendHandler is one durable send through the whole handler
// (middleware, validation, core, the file store with its fsyncs) without
// a network connection: the server's own work per send, for profiles
// (go test -run '^$' -bench SendHandler -benchmem -cpuprofile cpu.out).
// Its ns/op is mostly the wait for fsync; cpu-ns/op is the process's CPU
// time (user and system) per send, the work a change to the request path
// moves.
func BenchmarkSendHandler(b *testing.B) {
	serve, token := benchHandler(b)
	body := `{"to":"lead","body":"the build passed; the report is in report.txt. the build passed; the report is in re"}`
	b.ReportAllocs()
	before := testkit.ProcessCPU(b)
	for b.Loop() {
		if rec := serve(http.MethodPost, "/api/v1/teams/bench/messages", token, body); rec.Code != http.StatusCreated {
			b.Fatalf("send: status = %d, want 201\n%s", rec.Code, rec.Body)
		}
	}
	b.ReportMetric(float64(testkit.ProcessCPU(b)-before)/float64(b.N), "cpu-ns/op")
}

// BenchmarkSendRequestPath is a send's way through the handler up to
// core's rules, without the commit: the same send to a member the team
// does not have, which core refuses (422 unknown_member) after the body was read,
// checked, validated and bound, the route found and the token resolved.
// Without fsyncs to wait for, its ns/op is the request path's own cost.
func BenchmarkSendRequestPath(b *testing.B) {
	serve, token := benchHandler(b)
	body := `{"to":"nobody","body":"the build passed; the report is in report.txt. the build passed; the report is in re"}`
	b.ReportAllocs()
	for b.Loop() {
		if rec := serve(http.MethodPost, "/api/v1/teams/bench/messages", token, body); rec.Code != http.StatusUnprocessableEntity {
			b.Fatalf("send: status = %d, want 422\n%s", rec.Code, rec.Body)
		}
	}
}

// benchHandler is the whole handler over a file store in a temporary
// directory, with the team "bench" (lead and m1), and m1's token.
func benchHandler(b *testing.B) (serve func(method, path, token, body string) *httptest.ResponseRecorder, token string) {
	store, err := mail.Open(b.TempDir(), mail.WithLogger(slog.New(slog.DiscardHandler)))
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = store.Close() })
	svc := testkit.Serve(b, store, core.Options{Logger: slog.New(slog.DiscardHandler)})
	h, err := httpapi.NewHandler(svc, httpapi.Options{AdminToken: adminToken, Live: testkit.Hub(svc)})
	if err != nil {
		b.Fatal(err)
	}
	serve = func(method, path, token, body string) *httptest.ResponseRecorder {
		req := httptest.NewRequest(method, path, strings.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Authorization", "Bearer "+token)
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		return rec
	}
	rec := serve(http.MethodPost, "/api/v1/teams", adminToken,
		`{"name":"bench","members":[{"name":"m1","role":"sends"}],"limits":{"inbox_messages":100000000,"inbox_bytes":1073741824}}`)
	if rec.Code != http.StatusCreated {
		b.Fatalf("create team: status = %d, want 201\n%s", rec.Code, rec.Body)
	}
	var created struct {
		Members []struct{ Name, Token string }
	}
	if err := json.Unmarshal(rec.Body.Bytes(), &created); err != nil {
		b.Fatal(err)
	}
	return serve, created.Members[len(created.Members)-1].Token
}
