package httpapi

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"regexp"
	"strings"

	"github.com/getkin/kin-openapi/openapi3"
	"github.com/getkin/kin-openapi/openapi3filter"
	"github.com/getkin/kin-openapi/routers"
	"github.com/go-chi/chi/v5"
)

// Request validation against the embedded spec, and routing. A request's
// operation is found once, by comparing path segments against a table
// built once from the spec (where kin-openapi's own router runs one
// regular expression per path of the spec: a tenth of a send's CPU, with
// the security check below, in a profile of the send path;
// BENCHMARKS.md); kin-openapi checks the parameters against it, the body
// decoded by checkRawBody is checked against its schema, and the same
// table entry runs the operation's generated handler, so no second router
// matches the path again.

// specRoutes finds a request's operation as kin-openapi's gorilla/mux
// router does: paths in the spec's matching order (literal segments
// before parameters), the first whose template matches the escaped path
// decides, and a method that path lacks is routers.ErrMethodNotAllowed.
type specRoutes []specPath

// specPath is one path of the spec: its template's segments (a
// parameter's name in braces) and a route per method.
type specPath struct {
	segments []string
	params   []bool
	methods  map[string]*routers.Route
	// pattern is the path as the generated code registers it with a
	// router (the spec's template), and handlers its operations'
	// generated handlers by method (bindHandlers).
	pattern  string
	handlers map[string]http.HandlerFunc
}

var templateParam = regexp.MustCompile(`^\{([^{}]+)\}$`)

// newSpecRoutes builds the table. The operations' security requirements
// are dropped from the routes it hands out: authentication is the
// authenticate middleware's, before validation, and kin-openapi's check would read
// the body once more for nothing.
func newSpecRoutes(spec *openapi3.T) (specRoutes, error) {
	if len(spec.Servers) != 1 || spec.Servers[0].URL != BasePath {
		return nil, fmt.Errorf("httpapi: the spec must have one server, %s", BasePath)
	}
	noSecurity := &openapi3.SecurityRequirements{}
	var out specRoutes
	for _, path := range spec.Paths.InMatchingOrder() {
		item := spec.Paths.Value(path)
		p := specPath{methods: map[string]*routers.Route{}, pattern: path}
		for _, seg := range strings.Split(strings.TrimPrefix(BasePath+path, "/"), "/") {
			if m := templateParam.FindStringSubmatch(seg); m != nil {
				p.segments, p.params = append(p.segments, m[1]), append(p.params, true)
				continue
			}
			if strings.ContainsAny(seg, "{}") {
				return nil, fmt.Errorf("httpapi: spec path %s: a segment mixes text and a parameter", path)
			}
			p.segments, p.params = append(p.segments, seg), append(p.params, false)
		}
		for method, op := range item.Operations() {
			op := *op
			op.Security = noSecurity
			p.methods[method] = &routers.Route{Spec: spec, Server: spec.Servers[0], Path: path, PathItem: item, Method: method, Operation: &op}
		}
		out = append(out, p)
	}
	return out, nil
}

// find returns the route of r and its path parameters, in their escaped
// form as the gorilla/mux router gives them.
func (t specRoutes) find(r *http.Request) (*routers.Route, map[string]string, error) {
	_, route, params, err := t.lookup(r)
	return route, params, err
}

// lookup is find with the path's entry of the table.
func (t specRoutes) lookup(r *http.Request) (*specPath, *routers.Route, map[string]string, error) {
	path, ok := strings.CutPrefix(r.URL.EscapedPath(), "/")
	if !ok {
		return nil, nil, nil, routers.ErrPathNotFound
	}
	n := strings.Count(path, "/") + 1
	for i := range t {
		p := &t[i]
		if len(p.segments) != n {
			continue
		}
		params, ok := p.match(path)
		if !ok {
			continue
		}
		route := p.methods[r.Method]
		if route == nil {
			return nil, nil, nil, routers.ErrMethodNotAllowed
		}
		return p, route, params, nil
	}
	return nil, nil, nil, routers.ErrPathNotFound
}

// match reports whether the escaped path (without its leading slash, of
// as many segments as the template) fits the template, literal segments
// equal and parameters non-empty, and returns the parameters' values.
// The parameters are gathered only once the path fits: a request is
// tried against every template of its length, and most do not fit.
func (p *specPath) match(path string) (map[string]string, bool) {
	rest := path
	for k, seg := range p.segments {
		part, after, _ := strings.Cut(rest, "/")
		rest = after
		if (p.params[k] && part == "") || (!p.params[k] && part != seg) {
			return nil, false
		}
	}
	var params map[string]string
	rest = path
	for k, seg := range p.segments {
		part, after, _ := strings.Cut(rest, "/")
		rest = after
		if p.params[k] {
			if params == nil {
				params = make(map[string]string, 2)
			}
			params[seg] = part
		}
	}
	return params, true
}

// bindHandlers gives every operation of the table its handler from
// register, which registers the generated handlers on the router it is
// given (HandlerWithOptions); an operation left without one is an error.
func (t specRoutes) bindHandlers(register func(chi.Router)) error {
	rec := &handlerRecorder{handlers: map[string]http.HandlerFunc{}}
	register(rec)
	for i := range t {
		p := &t[i]
		p.handlers = make(map[string]http.HandlerFunc, len(p.methods))
		for method := range p.methods {
			h := rec.handlers[method+" "+p.pattern]
			if h == nil {
				return fmt.Errorf("httpapi: no handler for %s %s", method, p.pattern)
			}
			p.handlers[method] = h
		}
	}
	return nil
}

// handlerRecorder is the router the generated code registers its
// handlers on, to hand them to the route table. It implements the
// registrations the generated code makes; any other use of it is a bug
// and panics (its embedded Router is nil).
type handlerRecorder struct {
	chi.Router
	handlers map[string]http.HandlerFunc
}

func (h *handlerRecorder) add(method, pattern string, fn http.HandlerFunc) {
	h.handlers[method+" "+pattern] = fn
}

// Group runs fn on the recorder itself: the generated code adds no
// middleware to its groups.
func (h *handlerRecorder) Group(fn func(chi.Router)) chi.Router { fn(h); return h }

// Connect records a handler.
func (h *handlerRecorder) Connect(p string, fn http.HandlerFunc) { h.add(http.MethodConnect, p, fn) }

// Delete records a handler.
func (h *handlerRecorder) Delete(p string, fn http.HandlerFunc) { h.add(http.MethodDelete, p, fn) }

// Get records a handler.
func (h *handlerRecorder) Get(p string, fn http.HandlerFunc) { h.add(http.MethodGet, p, fn) }

// Head records a handler.
func (h *handlerRecorder) Head(p string, fn http.HandlerFunc) { h.add(http.MethodHead, p, fn) }

// Options records a handler.
func (h *handlerRecorder) Options(p string, fn http.HandlerFunc) { h.add(http.MethodOptions, p, fn) }

// Patch records a handler.
func (h *handlerRecorder) Patch(p string, fn http.HandlerFunc) { h.add(http.MethodPatch, p, fn) }

// Post records a handler.
func (h *handlerRecorder) Post(p string, fn http.HandlerFunc) { h.add(http.MethodPost, p, fn) }

// Put records a handler.
func (h *handlerRecorder) Put(p string, fn http.HandlerFunc) { h.add(http.MethodPut, p, fn) }

// Trace records a handler.
func (h *handlerRecorder) Trace(p string, fn http.HandlerFunc) { h.add(http.MethodTrace, p, fn) }

// apiRouter serves /api/v1 behind its middleware: it finds a request's
// operation in the route table, has kin-openapi check the parameters,
// checks the body's decoded value against the schema and runs the
// operation's generated handler, which binds that value.
type apiRouter struct {
	log    *slog.Logger
	routes specRoutes
	// params validates the parameters only; body validates, as before
	// the one decode, a body validateBody leaves to kin-openapi.
	params, body *openapi3filter.Options
	// rawUnions are the operations whose body has a oneOf or anyOf: its
	// generated type keeps each such part as the client's raw bytes, which
	// a value bound from the decoded one would re-encode (members sorted);
	// their handlers decode the bytes, so that those stay the client's
	// (a scripted step's tool input, recorded as the model wrote it).
	rawUnions map[*openapi3.Operation]bool
	// schemaOpts are the options of a body's schema check, as
	// kin-openapi's ValidateRequestBody builds them from body.
	schemaOpts []openapi3.SchemaValidationOption
}

// newAPIRouter builds the route table from the embedded spec and binds
// the generated handlers that register registers.
func newAPIRouter(log *slog.Logger, register func(chi.Router)) (*apiRouter, error) {
	spec, err := GetSpec()
	if err != nil {
		return nil, fmt.Errorf("httpapi: load embedded spec: %w", err)
	}
	routes, err := newSpecRoutes(spec)
	if err != nil {
		return nil, err
	}
	if err := routes.bindHandlers(register); err != nil {
		return nil, err
	}
	schemaErrors := []openapi3.SchemaValidationOption{openapi3.DisableSchemaErrorDetails()}
	a := &apiRouter{
		log:    log,
		routes: routes,
		params: &openapi3filter.Options{
			ExcludeRequestBody:      true,
			AuthenticationFunc:      openapi3filter.NoopAuthenticationFunc,
			SchemaValidationOptions: schemaErrors,
		},
		body: &openapi3filter.Options{
			AuthenticationFunc:      openapi3filter.NoopAuthenticationFunc,
			SchemaValidationOptions: schemaErrors,
		},
		rawUnions:  map[*openapi3.Operation]bool{},
		schemaOpts: append([]openapi3.SchemaValidationOption{openapi3.VisitAsRequest()}, schemaErrors...),
	}
	if spec.IsOpenAPI31OrLater() {
		a.schemaOpts = append(a.schemaOpts, openapi3.EnableJSONSchema2020())
	}
	for _, p := range routes {
		for _, route := range p.methods {
			if rb := route.Operation.RequestBody; rb != nil && rb.Value != nil {
				for _, mt := range rb.Value.Content {
					if hasUnion(mt.Schema, map[*openapi3.Schema]bool{}) {
						a.rawUnions[route.Operation] = true
					}
				}
			}
		}
	}
	return a, nil
}

// ServeHTTP implements http.Handler.
func (a *apiRouter) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	p, route, params, err := a.routes.lookup(r)
	if err == nil {
		err = a.validate(r, route, params)
	}
	if err != nil {
		respondInvalid(a.log, w, r, err)
		return
	}
	p.handlers[r.Method](w, routed(r, p.pattern, params))
}

// routed records the match in the request's chi context as a sub-router
// would (the generated handlers read their path parameters from it, the
// metrics and logs the route's pattern): the parameters as chi gives them
// (unescaped unless the request's path has a raw form) and the pattern.
func routed(r *http.Request, pattern string, params map[string]string) *http.Request {
	rctx := chi.RouteContext(r.Context())
	if rctx == nil { // served outside a chi router (mounted elsewhere)
		rctx = chi.NewRouteContext()
		r = r.WithContext(context.WithValue(r.Context(), chi.RouteCtxKey, rctx))
	}
	for name, value := range params {
		if r.URL.RawPath == "" {
			if v, err := url.PathUnescape(value); err == nil {
				value = v
			}
		}
		rctx.URLParams.Add(name, value)
	}
	rctx.RoutePatterns = append(rctx.RoutePatterns, pattern)
	for i, key := range rctx.URLParams.Keys {
		r.SetPathValue(key, rctx.URLParams.Values[i])
	}
	r.Pattern = rctx.RoutePattern()
	return r
}

// validate checks r's parameters and body against its operation, in
// kin-openapi's order (parameters, then the body).
func (a *apiRouter) validate(r *http.Request, route *routers.Route, params map[string]string) error {
	in := &openapi3filter.RequestValidationInput{Request: r, PathParams: params, Route: route, Options: a.params}
	if err := openapi3filter.ValidateRequest(r.Context(), in); err != nil {
		return err
	}
	if route.Operation.RequestBody == nil {
		return nil
	}
	in.Options = a.body
	return a.validateBody(r, in, route.Operation.RequestBody.Value)
}

// validateBody is kin-openapi's ValidateRequestBody for a body
// checkRawBody decoded: the same checks, errors and defaults, on that
// value. Any other body (none, another media type, a schema with an
// encoding) goes to ValidateRequestBody itself, which reads the bytes.
func (a *apiRouter) validateBody(r *http.Request, in *openapi3filter.RequestValidationInput, rb *openapi3.RequestBody) error {
	body, ok := r.Body.(*parsedBody)
	if !ok || len(rb.Content) == 0 {
		return openapi3filter.ValidateRequestBody(r.Context(), in, rb)
	}
	contentType := r.Header.Get("Content-Type")
	mt := rb.Content.Get(contentType)
	if mt == nil || mt.Schema == nil || mt.Schema.Value == nil || len(mt.Encoding) > 0 || !plainJSON(contentType) ||
		(mt.Schema.Value.Type.Is("string") && mt.Schema.Value.Format == "binary") {
		return openapi3filter.ValidateRequestBody(r.Context(), in, rb)
	}
	defaulted := false
	opts := append(a.schemaOpts[:len(a.schemaOpts):len(a.schemaOpts)], openapi3.DefaultsSet(func() { defaulted = true }))
	if err := mt.Schema.Value.VisitJSON(body.value, opts...); err != nil {
		reason := "doesn't match schema"
		if id := schemaID(mt.Schema); id != "" {
			reason += " " + id
		}
		return &openapi3filter.RequestError{Input: in, RequestBody: rb, Reason: reason, Err: err}
	}
	data := body.data
	if defaulted {
		// The value now holds the schema's defaults; the bytes say them
		// too, as kin-openapi rewrites a body it gave defaults.
		var err error
		if data, err = json.Marshal(body.value); err != nil {
			return &openapi3filter.RequestError{Input: in, RequestBody: rb, Reason: "rewriting failed", Err: err}
		}
		r.ContentLength = int64(len(data))
	}
	if a.rawUnions[in.Route.Operation] {
		r.Body = io.NopCloser(bytes.NewReader(data))
		return nil
	}
	r.Body = validatedBody{ReadCloser: io.NopCloser(bytes.NewReader(data)), value: body.value}
	return nil
}

// hasUnion reports whether a schema has a oneOf or anyOf anywhere in it.
func hasUnion(ref *openapi3.SchemaRef, seen map[*openapi3.Schema]bool) bool {
	if ref == nil || ref.Value == nil || seen[ref.Value] {
		return false
	}
	s := ref.Value
	seen[s] = true
	if len(s.OneOf) > 0 || len(s.AnyOf) > 0 {
		return true
	}
	children := append(openapi3.SchemaRefs{s.Items, s.Not, s.AdditionalProperties.Schema}, s.AllOf...)
	for _, p := range s.Properties {
		children = append(children, p)
	}
	for _, c := range children {
		if hasUnion(c, seen) {
			return true
		}
	}
	return false
}

// plainJSON reports whether a Content-Type is application/json, as
// kin-openapi reads it to choose a body decoder (parameters and case
// ignored): the media type whose decoder strictjson.Parse stands in for.
func plainJSON(contentType string) bool {
	mt, _, _ := strings.Cut(contentType, ";")
	return strings.EqualFold(strings.TrimSpace(mt), "application/json")
}

// schemaID names a body's schema in a validation error's reason, as
// kin-openapi does: its reference, else its title.
func schemaID(s *openapi3.SchemaRef) string {
	if id := strings.TrimSpace(s.Ref); id != "" {
		return id
	}
	if s.Value != nil {
		return strings.TrimSpace(s.Value.Title)
	}
	return ""
}
