package httpapi

import (
	"context"
	"errors"
	"io/fs"
	"log/slog"
	"net/http"
	"time"

	"github.com/go-chi/chi/v5"
	"github.com/prometheus/client_golang/prometheus"

	"mailroom/api"
	"mailroom/internal/bearer"
	"mailroom/internal/core"
	"mailroom/internal/host"
	"mailroom/internal/httpx"
)

// BasePath is the prefix of the versioned API; it equals the spec's
// `servers: [{url: /api/v1}]`.
const BasePath = "/api/v1"

// MaxBodyBytes bounds every request body; larger ones are 413 body_too_large.
const MaxBodyBytes = httpx.MaxBodyBytes

// contentSecurityPolicy is sent with the status page and its assets: only
// same-origin scripts, styles and connections, no plugins, no framing.
const contentSecurityPolicy = "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; connect-src 'self'; object-src 'none'; base-uri 'none'; frame-ancestors 'none'"

// Options configure NewHandler.
type Options struct {
	// AdminToken is the token that creates teams and reads everything. It
	// must not be empty.
	AdminToken string
	// Logger receives request failures; nil discards them.
	Logger *slog.Logger
	// Static, when not nil, is served at / (the status page and its assets).
	Static fs.FS
	// StreamsPerToken bounds the event streams one token (the admin token
	// included) holds open at once; 0 means DefaultStreamsPerToken.
	StreamsPerToken int
	// MaxStreams bounds the event streams open at once in all; 0 means
	// DefaultMaxStreams.
	MaxStreams int
	// StreamWriteTimeout is how long one event may take to reach a client
	// before its stream is closed; 0 means DefaultStreamWriteTimeout.
	StreamWriteTimeout time.Duration
	// Host builds the turns and keeps the teams' workspaces and
	// scenario runs; nil means a host with neither workspaces nor runs,
	// whose turns use only the scripted model.
	Host *host.Host
	// Metrics, when not nil, is the registry /metrics serves, where the
	// door registers its own metrics beside those of whoever made it
	// (the waker's); nil means a registry of the door's own.
	Metrics *prometheus.Registry
	// Stopping, when not nil, is cancelled when the server begins to stop:
	// from then on new turns and scenario runs are refused (503
	// shutting_down) and the running ones are cancelled, so that they end
	// at their next boundary and record how far they got.
	Stopping context.Context
	// HeldReads, when not nil, counts the reads held for mail, which
	// http.Server.Shutdown does not wait for; the server waits on it
	// before closing the store. Nil keeps an uncounted one.
	HeldReads *HeldReads
}

// NewHandler returns the REST door: the validated API under /api/v1,
// /healthz, /api/openapi.yaml, /metrics and the static files. It makes
// itself svc's observer and the host's run observer, to feed the event
// stream and the metrics. It starts nothing: the composition root
// (internal/app) wires the waker, the host and the MCP door beside it.
func NewHandler(svc *core.Service, opts Options) (http.Handler, error) {
	if svc == nil {
		return nil, errors.New("httpapi: nil service")
	}
	if opts.AdminToken == "" {
		return nil, errors.New("httpapi: empty admin token")
	}
	log := opts.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	m := newMetrics(opts.Metrics)
	srv := &Server{
		svc:      svc,
		log:      log,
		stopping: opts.Stopping,
		host:     opts.Host,
		held:     opts.HeldReads,
		events:   newBroker(clientBuffer, streamLimitsOf(opts), func(n int) { m.sseClients.Set(float64(n)) }),
	}
	if srv.host == nil {
		srv.host = host.New(svc, host.Options{Logger: log})
	}
	if srv.held == nil {
		srv.held = &HeldReads{}
	}
	srv.notify = func(ev core.Event) {
		m.observe(ev)
		srv.events.publish(ev)
		srv.held.letter(ev) // rings the reads held for mail (inboxwait.go)
	}
	svc.SetObserver(srv.notify)
	srv.host.SubscribeRuns(srv.notify)

	r := chi.NewRouter()
	r.Use(securityHeaders, recoverer(log), m.instrument, negotiate)
	r.NotFound(func(w http.ResponseWriter, _ *http.Request) {
		writeProblem(w, newProblem(core.CodeNotFound, "No such path."))
	})
	r.MethodNotAllowed(func(w http.ResponseWriter, _ *http.Request) {
		writeProblem(w, newProblem(codeMethodNotAllowed, "The method is not allowed on this path."))
	})

	r.Get("/healthz", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(`{"status":"ok"}` + "\n"))
	})
	r.Get("/api/openapi.yaml", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/yaml")
		_, _ = w.Write(api.Spec)
	})
	r.Handle("/metrics", m.handler())

	strict := NewStrictHandlerWithOptions(srv, nil, StrictHTTPServerOptions{
		RequestErrorHandlerFunc: func(w http.ResponseWriter, r *http.Request, _ error) {
			// The validator has already checked the body, so this is a body
			// it let through that does not decode; its text may quote input.
			writeProblem(w, newProblem(core.CodeValidation, "The request body does not match the API schema."))
		},
		ResponseErrorHandlerFunc: func(w http.ResponseWriter, r *http.Request, err error) {
			respondError(log, w, r, err)
		},
	})
	api, err := newAPIRouter(log, func(r chi.Router) {
		HandlerWithOptions(strict, ChiServerOptions{
			BaseRouter: r,
			ErrorHandlerFunc: func(w http.ResponseWriter, _ *http.Request, err error) {
				writeProblem(w, newProblem(core.CodeValidation, paramErrorDetail(err)))
			},
		})
	})
	if err != nil {
		return nil, err
	}
	// Order: body limit, then identity (401 before anything else), then
	// the raw bytes of a JSON body (decoded there, once), then the route
	// and the schema, then the handler's rights check and core.
	r.Mount(BasePath, chi.Chain(limitBody, workspaceFilePaths, authenticate(bearer.NewResolver(opts.AdminToken, svc)), checkRawBody).Handler(api))

	if opts.Static != nil {
		files := http.FileServerFS(opts.Static)
		r.Handle("/*", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Security-Policy", contentSecurityPolicy)
			files.ServeHTTP(w, r)
		}))
	}
	return r, nil
}

// limitBody caps request bodies; the validator reads the body whole, so the
// cap must come first. The overflow surfaces as *http.MaxBytesError.
func limitBody(next http.Handler) http.Handler {
	return http.MaxBytesHandler(next, MaxBodyBytes)
}

func securityHeaders(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("X-Content-Type-Options", "nosniff")
		next.ServeHTTP(w, r)
	})
}

// recoverer turns a panic into a logged 500 problem instead of a dropped
// connection. http.ErrAbortHandler keeps its meaning.
func recoverer(log *slog.Logger) func(http.Handler) http.Handler {
	return func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			defer func() {
				v := recover()
				if v == nil {
					return
				}
				if v == http.ErrAbortHandler {
					panic(v)
				}
				log.ErrorContext(r.Context(), "handler panicked", "method", r.Method, "route", routePattern(r), "panic", v)
				writeProblem(w, newProblem(codeInternal, genericInternalDetail))
			}()
			next.ServeHTTP(w, r)
		})
	}
}

// paramErrorDetail names the parameter that failed to bind, without its value.
func paramErrorDetail(err error) string {
	var (
		invalid  *InvalidParamFormatError
		required *RequiredParamError
		header   *RequiredHeaderError
		many     *TooManyValuesForParamError
	)
	switch {
	case errors.As(err, &invalid):
		return "parameter " + invalid.ParamName + ": the value is invalid"
	case errors.As(err, &required):
		return "parameter " + required.ParamName + ": a value is required"
	case errors.As(err, &header):
		return "header " + header.ParamName + ": a value is required"
	case errors.As(err, &many):
		return "parameter " + many.ParamName + ": only one value is allowed"
	default:
		return "A parameter does not match the API schema."
	}
}
