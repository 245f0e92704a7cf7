package httpapi

import (
	"fmt"
	"log/slog"
	"net/http"
	"regexp"
	"strings"

	"github.com/getkin/kin-openapi/openapi3"
	"github.com/getkin/kin-openapi/openapi3filter"
	"github.com/getkin/kin-openapi/routers"
)

// Request validation against the embedded spec. kin-openapi checks the
// parameters and the body; finding a request's operation is done here,
// once per request, by comparing path segments against a table built
// once from the spec, where kin-openapi's own router runs one regular
// expression per path of the spec (a tenth of a send's CPU, with the
// security check below, in a profile of the send path; BENCHMARKS.md).

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
}

var templateParam = regexp.MustCompile(`^\{([^{}]+)\}$`)

// newSpecRoutes builds the table. The operations' security requirements
// are dropped from the routes it hands out: authentication is the
// authenticator's, before validation, and kin-openapi's check would read
// the body once more for nothing.
func newSpecRoutes(spec *openapi3.T) (specRoutes, error) {
	if len(spec.Servers) != 1 || spec.Servers[0].URL != BasePath {
		return nil, fmt.Errorf("httpapi: the spec must have one server, %s", BasePath)
	}
	noSecurity := &openapi3.SecurityRequirements{}
	var out specRoutes
	for _, path := range spec.Paths.InMatchingOrder() {
		item := spec.Paths.Value(path)
		p := specPath{methods: map[string]*routers.Route{}}
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
	path, ok := strings.CutPrefix(r.URL.EscapedPath(), "/")
	if !ok {
		return nil, nil, routers.ErrPathNotFound
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
			return nil, nil, routers.ErrMethodNotAllowed
		}
		return route, params, nil
	}
	return nil, nil, routers.ErrPathNotFound
}

// match reports whether the escaped path (without its leading slash, of
// as many segments as the template) fits the template, literal segments
// equal and parameters non-empty, and returns the parameters' values.
func (p *specPath) match(path string) (map[string]string, bool) {
	var params map[string]string
	rest := path
	for k, seg := range p.segments {
		part, after, _ := strings.Cut(rest, "/")
		rest = after
		switch {
		case !p.params[k]:
			if part != seg {
				return nil, false
			}
		case part == "":
			return nil, false
		default:
			if params == nil {
				params = make(map[string]string, 2)
			}
			params[seg] = part
		}
	}
	return params, true
}

// requestValidator checks every /api/v1 request against the embedded spec.
// Authentication is done by our own middleware before it, so the spec's
// security scheme is only documentation to the validator.
func requestValidator(log *slog.Logger) (func(http.Handler) http.Handler, error) {
	spec, err := GetSpec()
	if err != nil {
		return nil, fmt.Errorf("httpapi: load embedded spec: %w", err)
	}
	routes, err := newSpecRoutes(spec)
	if err != nil {
		return nil, err
	}
	opts := &openapi3filter.Options{
		AuthenticationFunc:      openapi3filter.NoopAuthenticationFunc,
		SchemaValidationOptions: []openapi3.SchemaValidationOption{openapi3.DisableSchemaErrorDetails()},
	}
	return func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			route, params, err := routes.find(r)
			if err == nil {
				err = openapi3filter.ValidateRequest(r.Context(), &openapi3filter.RequestValidationInput{
					Request: r, PathParams: params, Route: route, Options: opts,
				})
			}
			if err != nil {
				respondInvalid(log, w, r, err)
				return
			}
			next.ServeHTTP(w, r)
		})
	}, nil
}
