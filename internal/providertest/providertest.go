// Package providertest holds fake model providers for tests: a Messages
// API server and a Chat Completions server (httptest), written from the
// providers' public API references. Each plays a queue of canned replies,
// records every request it receives and checks what it was sent the way
// the real API would: the credential header, the model, max_tokens, tool
// schemas that compile, roles in order and every tool call answered by a
// result with the same id in the next message. A request the real API
// would refuse is answered 400 invalid_request_error and fails the test.
//
// The fakes know nothing of Mailroom's agent package, so any package's
// tests can drive an adapter through them and play a scenario's script by
// queueing replies computed from each request (Reply.Func).
package providertest

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strings"
	"sync"
	"testing"

	"github.com/santhosh-tekuri/jsonschema/v6"
)

// Reply is one canned answer of a fake server.
type Reply struct {
	// Status is the HTTP status; 0 is 200.
	Status int
	// Header is added to the answer, e.g. retry-after.
	Header map[string]string
	// Body is the JSON body, in the provider's wire format.
	Body []byte
	// Stall holds the answer until the request is abandoned, standing in
	// for a provider that does not answer in time.
	Stall bool
	// Func, when set, computes the reply from the request it answers, the
	// way a scripted model reads its tool results.
	Func func(Request) Reply
}

// Request is one request a fake server received.
type Request struct {
	Method string
	Path   string
	Header http.Header
	Body   []byte
}

// kind tells the two wire formats apart.
type kind int

const (
	anthropicKind kind = iota
	openaiKind
)

// Server is a fake provider. Its methods are safe for concurrent use.
type Server struct {
	t    testing.TB
	kind kind
	key  string
	srv  *httptest.Server

	mu       sync.Mutex
	queue    []Reply
	requests []Request
	problems []string
}

// NewAnthropic starts a fake Messages API that expects key in x-api-key.
// Point an adapter at URL().
func NewAnthropic(t testing.TB, key string) *Server { return start(t, anthropicKind, key) }

// NewOpenAI starts a fake Chat Completions API that expects key as a
// bearer token ("" expects no Authorization header, as a local server).
// Point an adapter at URL(), which ends in /v1 like OpenAI's own.
func NewOpenAI(t testing.TB, key string) *Server { return start(t, openaiKind, key) }

func start(t testing.TB, k kind, key string) *Server {
	t.Helper()
	s := &Server{t: t, kind: k, key: key}
	s.srv = httptest.NewServer(http.HandlerFunc(s.serve))
	t.Cleanup(s.srv.Close)
	return s
}

// URL is the base URL to configure the adapter with.
func (s *Server) URL() string {
	if s.kind == openaiKind {
		return s.srv.URL + "/v1"
	}
	return s.srv.URL
}

// Client is an HTTP client for the fake server.
func (s *Server) Client() *http.Client { return s.srv.Client() }

// Push queues replies; each request takes the next one.
func (s *Server) Push(replies ...Reply) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.queue = append(s.queue, replies...)
}

// Requests returns a copy of every request received so far, in order.
func (s *Server) Requests() []Request {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]Request(nil), s.requests...)
}

// Problems returns what the server refused so far: requests the real API
// would refuse, a wrong credential, a request with no reply queued.
func (s *Server) Problems() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]string(nil), s.problems...)
}

// Pending is the number of queued replies not yet taken.
func (s *Server) Pending() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.queue)
}

func (s *Server) name() string {
	if s.kind == openaiKind {
		return "fake chat completions"
	}
	return "fake messages api"
}

func (s *Server) serve(w http.ResponseWriter, r *http.Request) {
	body, err := io.ReadAll(io.LimitReader(r.Body, 32<<20))
	if err != nil {
		return
	}
	req := Request{Method: r.Method, Path: r.URL.Path, Header: r.Header.Clone(), Body: body}
	s.mu.Lock()
	s.requests = append(s.requests, req)
	s.mu.Unlock()

	if status, typ, msg := s.authenticate(req); status != 0 {
		s.refuse(w, status, typ, msg, false)
		return
	}
	var problem string
	if s.kind == openaiKind {
		problem = checkOpenAI(req)
	} else {
		problem = checkAnthropic(req)
	}
	if problem != "" {
		s.refuse(w, http.StatusBadRequest, "invalid_request_error", problem, true)
		return
	}
	s.mu.Lock()
	if len(s.queue) == 0 {
		s.mu.Unlock()
		s.refuse(w, http.StatusBadRequest, "invalid_request_error", "no reply queued for this request", true)
		return
	}
	reply := s.queue[0]
	s.queue = s.queue[1:]
	s.mu.Unlock()
	if reply.Func != nil {
		reply = reply.Func(req)
	}
	if reply.Stall {
		<-r.Context().Done()
		return
	}
	for k, v := range reply.Header {
		w.Header().Set(k, v)
	}
	w.Header().Set("Content-Type", "application/json")
	status := reply.Status
	if status == 0 {
		status = http.StatusOK
	}
	w.WriteHeader(status)
	_, _ = w.Write(reply.Body)
}

// authenticate checks the credential the way the provider does; a
// mismatch is a 401 authentication error and a recorded problem, not a
// test failure, so that a test can provoke it.
func (s *Server) authenticate(req Request) (int, string, string) {
	if req.Method != http.MethodPost {
		return http.StatusMethodNotAllowed, "invalid_request_error", "method " + req.Method
	}
	switch s.kind {
	case anthropicKind:
		if req.Path != "/v1/messages" {
			return http.StatusNotFound, "not_found_error", "path " + req.Path
		}
		if req.Header.Get("anthropic-version") == "" {
			return http.StatusBadRequest, "invalid_request_error", "anthropic-version header is required"
		}
		if req.Header.Get("x-api-key") != s.key {
			return http.StatusUnauthorized, "authentication_error", "invalid x-api-key"
		}
		if req.Header.Get("Authorization") != "" {
			return http.StatusBadRequest, "invalid_request_error", "send either x-api-key or Authorization, not both"
		}
	case openaiKind:
		if req.Path != "/v1/chat/completions" {
			return http.StatusNotFound, "invalid_request_error", "path " + req.Path
		}
		want := ""
		if s.key != "" {
			want = "Bearer " + s.key
		}
		if req.Header.Get("Authorization") != want {
			return http.StatusUnauthorized, "invalid_request_error", "Incorrect API key provided"
		}
	}
	return 0, "", ""
}

func (s *Server) refuse(w http.ResponseWriter, status int, typ, msg string, fail bool) {
	s.mu.Lock()
	s.problems = append(s.problems, fmt.Sprintf("%d %s: %s", status, typ, msg))
	s.mu.Unlock()
	if fail {
		s.t.Errorf("%s refused a request: %s", s.name(), msg)
	}
	var body []byte
	if s.kind == openaiKind {
		body = OpenAIError(status, typ, msg).Body
	} else {
		body = AnthropicError(status, typ, msg).Body
	}
	w.Header().Set("Content-Type", "application/json")
	// x-should-retry: false keeps the SDK from repeating a request the
	// fake refuses for what it holds.
	w.Header().Set("x-should-retry", "false")
	w.WriteHeader(status)
	_, _ = w.Write(body)
}

// toolName is the tool-name pattern both APIs accept.
var toolName = regexp.MustCompile(`^[a-zA-Z0-9_-]{1,64}$`)

// compileSchema checks that raw is a JSON schema of an object input.
func compileSchema(raw json.RawMessage) error {
	doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(raw))
	if err != nil {
		return fmt.Errorf("not JSON: %v", err)
	}
	obj, ok := doc.(map[string]any)
	if !ok || obj["type"] != "object" {
		return fmt.Errorf("the schema's type must be object")
	}
	c := jsonschema.NewCompiler()
	if err := c.AddResource("tool.json", doc); err != nil {
		return err
	}
	_, err = c.Compile("tool.json")
	return err
}

func mustJSON(v any) []byte {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err)
	}
	return b
}

// blank reports whether a text is empty or only white space, which both
// APIs refuse as a text block.
func blank(s string) bool { return strings.TrimSpace(s) == "" }

// WithUsage returns r, a 200 answer of either fake, with its two token
// counts replaced by the raw JSON texts input and output, as a hostile or
// broken provider may write them: "-5", "1.5", "9223372036854775807".
func (r Reply) WithUsage(input, output string) Reply {
	var body map[string]json.RawMessage
	if err := json.Unmarshal(r.Body, &body); err != nil {
		panic(fmt.Sprintf("providertest: WithUsage needs a JSON object body: %v", err))
	}
	var usage map[string]json.RawMessage
	if err := json.Unmarshal(body["usage"], &usage); err != nil {
		panic(fmt.Sprintf("providertest: WithUsage needs an answer with usage: %v", err))
	}
	if _, ok := usage["prompt_tokens"]; ok {
		usage["prompt_tokens"], usage["completion_tokens"] = json.RawMessage(input), json.RawMessage(output)
	} else {
		usage["input_tokens"], usage["output_tokens"] = json.RawMessage(input), json.RawMessage(output)
	}
	body["usage"] = mustJSON(usage)
	r.Body = mustJSON(body)
	return r
}

// Padded returns r with a field of n bytes of padding added to its JSON
// body, which stays a valid answer of the provider's format: a provider
// that sends an answer of any size.
func (r Reply) Padded(n int) Reply {
	pad := make([]byte, 0, n+len(r.Body)+16)
	pad = append(pad, `{"padding":"`...)
	pad = append(pad, bytes.Repeat([]byte("x"), n)...)
	pad = append(pad, `",`...)
	pad = append(pad, bytes.TrimPrefix(bytes.TrimSpace(r.Body), []byte("{"))...)
	r.Body = pad
	return r
}

// WithoutUsage returns r, a 200 answer of either fake, with no usage at
// all, as many OpenAI-compatible servers answer.
func (r Reply) WithoutUsage() Reply {
	var body map[string]json.RawMessage
	if err := json.Unmarshal(r.Body, &body); err != nil {
		panic(fmt.Sprintf("providertest: WithoutUsage needs a JSON object body: %v", err))
	}
	delete(body, "usage")
	r.Body = mustJSON(body)
	return r
}
