package httpapi_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"io/fs"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"testing/fstest"
	"time"

	"github.com/getkin/kin-openapi/openapi3"
	"github.com/getkin/kin-openapi/openapi3filter"
	"github.com/getkin/kin-openapi/routers"
	"github.com/getkin/kin-openapi/routers/gorillamux"

	"mailroom/api"
	"mailroom/internal/app"
	"mailroom/internal/core"
	"mailroom/internal/httpapi"
	"mailroom/internal/mail"
	"mailroom/internal/testkit"
)

const adminToken = "test-admin-token"

const statusPage = "<!doctype html><title>Mailroom</title>"

// backend is the store this run of the package's tests uses: TestMain runs
// every test once on the file store and once on PostgreSQL (a fresh
// database of one cluster per env). MAILROOM_TEST_BACKEND=file|postgres
// narrows it to one. Tests about files on disk skip on PostgreSQL
// (fileOnly).
var backend string

func TestMain(m *testing.M) { os.Exit(testkit.MainBackends(m, &backend)) }

// fileOnly skips t unless it runs on the file store; why says what of the
// file store it tests.
func fileOnly(t *testing.T, why string) {
	t.Helper()
	if backend != testkit.BackendFile {
		t.Skipf("file store only: %s", why)
	}
}

// env is one running server over the real core and a real store: the file
// store in a temporary directory or PostgreSQL (backend). Every response
// its client receives is validated against api/openapi.yaml, so the spec
// and the code cannot drift apart.
type env struct {
	t      *testing.T
	srv    *httptest.Server
	client *http.Client
	app    *app.App
	svc    *core.Service
	store  core.Store
	// place is the env's store and data directory; starting an env on
	// it again is a restart.
	place *testkit.Place
	dir   string // place.Dir
	// faults breaks the file store's writes on demand (nil on PostgreSQL).
	faults *faultFS
}

// faultFS is the real file system; while failing is set, every new
// temporary file fails, and so do the write-ahead log's writes, which is
// how a full or broken disk looks to the store.
type faultFS struct {
	mail.FS
	failing atomic.Bool
}

var errInjected = errors.New("injected write failure")

func (f *faultFS) OpenFile(name string, flag int, perm fs.FileMode) (mail.File, error) {
	file, err := f.FS.OpenFile(name, flag, perm)
	if err != nil {
		return nil, err
	}
	return &faultFile{File: file, fs: f}, nil
}

// faultFile fails the write-ahead log's writes while failing is set.
type faultFile struct {
	mail.File
	fs *faultFS
}

func (f *faultFile) Write(p []byte) (int, error) {
	if f.failsLog() {
		return 0, errInjected
	}
	return f.File.Write(p)
}

// WriteAt fails as Write does: the log writes its records at their offset.
func (f *faultFile) WriteAt(p []byte, off int64) (int, error) {
	if f.failsLog() {
		return 0, errInjected
	}
	return f.File.WriteAt(p, off)
}

func (f *faultFile) failsLog() bool {
	return f.fs.failing.Load() && strings.Contains(f.Name(), string(filepath.Separator)+"wal"+string(filepath.Separator))
}

func (f *faultFS) CreateTemp(dir, pattern string) (mail.File, error) {
	if f.failing.Load() {
		return nil, errInjected
	}
	return f.FS.CreateTemp(dir, pattern)
}

// envOptions are what the tests' servers differ in.
type envOptions struct {
	// place is where the store is: nil for a fresh one, an earlier env's
	// place for a restart over its data.
	place *testkit.Place
	// maxTeams and logger go to core.Options (logger to the handler too;
	// nil discards).
	maxTeams int
	logger   *slog.Logger
	// maxHeldReads goes to core.Options.MaxHeldReadsPerToken, for the
	// tests that hold many reads of one token.
	maxHeldReads int
	// runs enables scenario runs and workspaces (app.Options.DataDir), as
	// the server wires them.
	runs bool
	// stopping, when set, is the REST door's stopping context
	// (Options.Stopping) instead of the server's.
	stopping context.Context
	// configure changes the REST door's options last; configureApp the
	// server's.
	configure    []func(*httpapi.Options)
	configureApp []func(*app.Options)
	// wrap, when set, wraps the client's validating transport.
	wrap func(http.RoundTripper) http.RoundTripper
}

// startEnv starts a server over the real core and the store of this run's
// backend: the one place where the package's tests open a store.
func startEnv(t *testing.T, o envOptions) *env {
	t.Helper()
	place := o.place
	if place == nil {
		place = testkit.NewPlace(t, backend)
	}
	log := o.logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	e := &env{t: t, place: place, dir: place.Dir}
	mopts := []mail.Option{mail.WithLogger(log)}
	if place.Backend == testkit.BackendFile {
		e.faults = &faultFS{FS: mail.OS()}
		mopts = append(mopts, mail.WithFS(e.faults))
	}
	e.store = place.OpenStore(t, mopts...)
	opts := app.Options{
		Core:       core.Options{Logger: log, MaxTeams: o.maxTeams, MaxHeldReadsPerToken: o.maxHeldReads},
		AdminToken: adminToken,
		Logger:     log,
		Static:     fstest.MapFS{"index.html": {Data: []byte(statusPage)}},
		REST: func(ro *httpapi.Options) {
			if o.stopping != nil {
				ro.Stopping = o.stopping
			}
			for _, c := range o.configure {
				c(ro)
			}
		},
	}
	if o.runs {
		opts.DataDir = place.Dir
	}
	for _, c := range o.configureApp {
		c(&opts)
	}
	// The whole server, as cmd/server wires it (internal/app).
	a, err := app.New(t.Context(), e.store, opts)
	if err != nil {
		t.Fatalf("new server: %v", err)
	}
	e.app, e.svc = a, a.Service()
	e.srv = httptest.NewServer(a.Handler())
	// Cleanups run last first: the server stops (its waker and turns
	// end) before the store, opened above, closes.
	t.Cleanup(func() {
		e.srv.Close()
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := a.Shutdown(ctx); err != nil {
			t.Errorf("shutdown: %v", err)
		}
	})
	e.client = e.srv.Client()
	router, problem := specRouter(t)
	var rt http.RoundTripper = &validatingTransport{t: t, base: e.client.Transport, router: router, problem: problem}
	if o.wrap != nil {
		rt = o.wrap(rt)
	}
	e.client.Transport = rt
	return e
}

// newEnv starts the server; configure, when given, changes its options.
func newEnv(t *testing.T, configure ...func(*httpapi.Options)) *env {
	t.Helper()
	return startEnv(t, envOptions{configure: configure})
}

// The inbox in the lesson's file bytes is validated as the string of bytes
// its schema says (format: binary).
func init() { openapi3filter.RegisterBodyDecoder("application/jsonl", openapi3filter.FileBodyDecoder) }

func specRouter(t *testing.T) (routers.Router, *openapi3.Schema) {
	t.Helper()
	doc, err := openapi3.NewLoader().LoadFromData(api.Spec)
	if err != nil {
		t.Fatalf("load spec: %v", err)
	}
	if err := doc.Validate(t.Context()); err != nil {
		t.Fatalf("validate spec: %v", err)
	}
	r, err := gorillamux.NewRouter(doc)
	if err != nil {
		t.Fatalf("spec router: %v", err)
	}
	return r, doc.Components.Schemas["Problem"].Value
}

// validatingTransport checks every /api/v1 response against the operation
// it answers: status declared, media type declared, body matching the schema.
// A response to a path or method the spec does not have must be a Problem.
type validatingTransport struct {
	t       *testing.T
	base    http.RoundTripper
	router  routers.Router
	problem *openapi3.Schema
}

func (v *validatingTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	resp, err := v.base.RoundTrip(req)
	if err != nil || !strings.HasPrefix(req.URL.Path, httpapi.BasePath+"/") {
		return resp, err
	}
	if resp.Header.Get("X-Content-Type-Options") != "nosniff" {
		v.t.Errorf("%s %s: X-Content-Type-Options = %q", req.Method, req.URL.Path, resp.Header.Get("X-Content-Type-Options"))
	}
	stream := strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream")
	var body []byte
	if !stream {
		body, err = io.ReadAll(resp.Body)
		resp.Body.Close()
		if err != nil {
			return nil, err
		}
		resp.Body = io.NopCloser(bytes.NewReader(body))
	}
	route, params, ferr := v.router.FindRoute(specForm(req))
	if ferr != nil {
		v.checkProblem(req, resp, body)
		return resp, nil
	}
	in := &openapi3filter.ResponseValidationInput{
		RequestValidationInput: &openapi3filter.RequestValidationInput{Request: req, PathParams: params, Route: route},
		Status:                 resp.StatusCode,
		Header:                 resp.Header,
		Options:                &openapi3filter.Options{IncludeResponseStatus: true, ExcludeResponseBody: stream},
	}
	in.SetBodyBytes(body)
	if err := openapi3filter.ValidateResponse(req.Context(), in); err != nil {
		v.t.Errorf("%s %s → %d does not match the spec: %v\nbody: %s", req.Method, req.URL.Path, resp.StatusCode, err, body)
	}
	return resp, nil
}

// specForm is req as the spec's router can match it: the literal slashes
// of a workspace file's path (which the server takes, docs/api.md) are
// written %2F, the form of the spec's one-segment {path}.
func specForm(req *http.Request) *http.Request {
	rest, ok := strings.CutPrefix(req.URL.EscapedPath(), httpapi.BasePath+"/teams/")
	if !ok {
		return req
	}
	team, after, _ := strings.Cut(rest, "/")
	file, ok := strings.CutPrefix(after, "workspace/files/")
	if !ok || !strings.Contains(file, "/") {
		return req
	}
	r := req.Clone(req.Context())
	u := *req.URL
	u.RawPath = httpapi.BasePath + "/teams/" + team + "/workspace/files/" + strings.ReplaceAll(file, "/", "%2F")
	r.URL = &u
	return r
}

func (v *validatingTransport) checkProblem(req *http.Request, resp *http.Response, body []byte) {
	if ct := resp.Header.Get("Content-Type"); ct != "application/problem+json" {
		v.t.Errorf("%s %s → %d: Content-Type %q, want application/problem+json", req.Method, req.URL.Path, resp.StatusCode, ct)
	}
	var doc any
	if err := json.Unmarshal(body, &doc); err != nil {
		v.t.Errorf("%s %s: problem is not JSON: %v", req.Method, req.URL.Path, err)
		return
	}
	if err := v.problem.VisitJSON(doc); err != nil {
		v.t.Errorf("%s %s: body is not a Problem: %v", req.Method, req.URL.Path, err)
	}
}

// result is one answered call.
type result struct {
	status int
	header http.Header
	body   []byte
}

// call is every option a request in these tests needs.
type call struct {
	method, path string
	token        string
	body         string            // sent as is when not empty
	json         any               // encoded when body is empty and json is not nil
	header       map[string]string // extra headers
}

func (e *env) do(c call) result {
	e.t.Helper()
	var rd io.Reader
	switch {
	case c.body != "":
		rd = strings.NewReader(c.body)
	case c.json != nil:
		b, err := json.Marshal(c.json)
		if err != nil {
			e.t.Fatalf("encode request: %v", err)
		}
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(e.t.Context(), c.method, e.srv.URL+c.path, rd)
	if err != nil {
		e.t.Fatalf("new request: %v", err)
	}
	if rd != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	if c.token != "" {
		req.Header.Set("Authorization", "Bearer "+c.token)
	}
	for k, v := range c.header {
		req.Header.Set(k, v)
	}
	resp, err := e.client.Do(req)
	if err != nil {
		e.t.Fatalf("%s %s: %v", c.method, c.path, err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		e.t.Fatalf("read body: %v", err)
	}
	return result{status: resp.StatusCode, header: resp.Header, body: body}
}

func (e *env) get(path, token string) result {
	e.t.Helper()
	return e.do(call{method: http.MethodGet, path: path, token: token})
}

func (e *env) post(path, token string, body any) result {
	e.t.Helper()
	return e.do(call{method: http.MethodPost, path: path, token: token, json: body})
}

// decode unmarshals the body into a value of type T.
func decode[T any](t *testing.T, r result) T {
	t.Helper()
	var v T
	if err := json.Unmarshal(r.body, &v); err != nil {
		t.Fatalf("decode %T: %v\nbody: %s", v, err, r.body)
	}
	return v
}

// want checks the status, and for an error the problem's code.
func want(t *testing.T, r result, status int, code string) {
	t.Helper()
	if r.status != status {
		t.Fatalf("status = %d, want %d\nbody: %s", r.status, status, r.body)
	}
	if code == "" {
		return
	}
	p := decode[httpapi.Problem](t, r)
	if string(p.Code) != code || p.Status != status {
		t.Fatalf("problem = %+v, want code %q status %d", p, code, status)
	}
	if ct := r.header.Get("Content-Type"); ct != "application/problem+json" {
		t.Fatalf("Content-Type = %q, want application/problem+json", ct)
	}
}

// team is a created team: its name and each member's token.
type team struct {
	name   string
	tokens map[string]string
}

// newTeam creates a team with lead, reader and reviewer (and limits, when
// given) through the API.
func (e *env) newTeam(name string, limits map[string]int) team {
	e.t.Helper()
	body := map[string]any{
		"name": name,
		"members": []map[string]string{
			{"name": "reader", "role": "reads the source"},
			{"name": "reviewer", "role": "reads the expected value"},
		},
	}
	if limits != nil {
		body["limits"] = limits
	}
	r := e.post("/api/v1/teams", adminToken, body)
	want(e.t, r, http.StatusCreated, "")
	created := decode[httpapi.CreatedTeam](e.t, r)
	tm := team{name: name, tokens: map[string]string{}}
	for _, m := range created.Members {
		tm.tokens[m.Name] = m.Token
	}
	return tm
}

func (e *env) send(tm team, from, to, body string) result {
	e.t.Helper()
	return e.post("/api/v1/teams/"+tm.name+"/messages", tm.tokens[from], map[string]string{"to": to, "body": body})
}

func (e *env) inbox(tm team, member string) []httpapi.Message {
	e.t.Helper()
	r := e.get("/api/v1/teams/"+tm.name+"/members/"+member+"/inbox", adminToken)
	want(e.t, r, http.StatusOK, "")
	return decode[httpapi.Inbox](e.t, r).Messages
}
