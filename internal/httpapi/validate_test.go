package httpapi

import (
	"errors"
	"maps"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/getkin/kin-openapi/routers/gorillamux"
	"github.com/go-chi/chi/v5"
)

// TestSpecRoutesAgreeWithGorillaMux: the validator's route table finds,
// for every path of the spec filled in several ways and for paths near
// them, the same operation, parameters and error as kin-openapi's
// gorilla/mux router, whose answers the error details were written for.
func TestSpecRoutesAgreeWithGorillaMux(t *testing.T) {
	spec, err := GetSpec()
	if err != nil {
		t.Fatal(err)
	}
	ref, err := gorillamux.NewRouter(spec)
	if err != nil {
		t.Fatal(err)
	}
	table, err := newSpecRoutes(spec)
	if err != nil {
		t.Fatal(err)
	}
	var paths []string
	for _, template := range spec.Paths.InMatchingOrder() {
		for _, fill := range []string{"alpha", "me", "claim-next", "a%2Fb", "x.y", "%20"} {
			p := template
			for strings.Contains(p, "{") {
				i, j := strings.Index(p, "{"), strings.Index(p, "}")
				p = p[:i] + fill + p[j+1:]
			}
			paths = append(paths, BasePath+p, BasePath+p+"/", BasePath+p+"/extra", BasePath+strings.TrimSuffix(p, "/"+fill))
		}
	}
	paths = append(paths, "/", BasePath, BasePath+"/", "/api/v2/teams", BasePath+"//teams", BasePath+"/teams//messages")
	compared := 0
	for _, path := range paths {
		for _, method := range []string{"GET", "POST", "PUT", "PATCH", "DELETE", "HEAD", "OPTIONS", "BREW"} {
			req := httptest.NewRequest(method, "http://example.test"+path, nil)
			wantRoute, wantParams, wantErr := ref.FindRoute(req)
			gotRoute, gotParams, gotErr := table.find(req)
			if !errors.Is(gotErr, wantErr) && (gotErr == nil || wantErr == nil || gotErr.Error() != wantErr.Error()) {
				t.Errorf("%s %s: error = %v, want %v", method, path, gotErr, wantErr)
				continue
			}
			if wantRoute == nil {
				if gotRoute != nil {
					t.Errorf("%s %s: route = %s, want none", method, path, gotRoute.Path)
				}
				continue
			}
			compared++
			if gotRoute == nil || gotRoute.Path != wantRoute.Path || gotRoute.Method != wantRoute.Method || gotRoute.Operation.OperationID != wantRoute.Operation.OperationID {
				t.Errorf("%s %s: route = %+v, want %s %s", method, path, gotRoute, wantRoute.Method, wantRoute.Path)
				continue
			}
			if !maps.Equal(gotParams, wantParams) {
				t.Errorf("%s %s: params = %v, want %v", method, path, gotParams, wantParams)
			}
		}
	}
	if compared < 50 {
		t.Errorf("only %d requests found a route; the comparison covers too little", compared)
	}
}

// TestRoutedAsChiRoutes: the route table hands a handler the path
// parameters and pattern that chi, which routed these requests before it,
// gives: parameters unescaped unless the path has a raw form, the mount's
// pattern joined with the route's.
func TestRoutedAsChiRoutes(t *testing.T) {
	spec, err := GetSpec()
	if err != nil {
		t.Fatal(err)
	}
	table, err := newSpecRoutes(spec)
	if err != nil {
		t.Fatal(err)
	}
	type seen struct{ team, member, path, pattern, chiPattern string }
	var last seen
	capture := func(_ http.ResponseWriter, r *http.Request) {
		last = seen{chi.URLParam(r, "team"), chi.URLParam(r, "member"), chi.URLParam(r, "path"), r.Pattern, chi.RouteContext(r.Context()).RoutePattern()}
	}
	viaChi := chi.NewRouter()
	viaChi.Route(BasePath, func(r chi.Router) {
		r.Get("/teams/{team}/members/{member}/inbox", capture)
		r.Get("/teams/{team}/workspace/files/{path}", capture)
	})
	viaTable := chi.NewRouter()
	viaTable.Mount(BasePath, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		p, _, params, err := table.lookup(r)
		if err != nil {
			t.Fatalf("%s: %v", r.URL, err)
		}
		capture(w, routed(r, p.pattern, params))
	}))
	for _, path := range []string{
		"/teams/alpha/members/dev/inbox", "/teams/a%20b/members/d%C3%A9v/inbox", "/teams/alpha/workspace/files/notes%2Ftodo.txt",
		"/teams/alpha/workspace/files/my%20file.txt", "/teams/alpha/workspace/files/a+b%3F.txt", "/teams/x.y/workspace/files/%25",
	} {
		last = seen{}
		viaChi.ServeHTTP(httptest.NewRecorder(), httptest.NewRequest("GET", "http://example.test"+BasePath+path, nil))
		want := last
		if want.team == "" {
			t.Fatalf("GET %s: chi routed nowhere", path)
		}
		last = seen{}
		viaTable.ServeHTTP(httptest.NewRecorder(), httptest.NewRequest("GET", "http://example.test"+BasePath+path, nil))
		if last != want {
			t.Errorf("GET %s: the table gives %+v, chi %+v", path, last, want)
		}
	}
}

// TestBodiesBoundFromTheirValue: every operation's body is bound from the
// value it was validated as, but those with a oneOf, whose generated
// types keep that part as the client's bytes (a scripted turn's steps).
func TestBodiesBoundFromTheirValue(t *testing.T) {
	a, err := newAPIRouter(nil, func(r chi.Router) { HandlerWithOptions(Unimplemented{}, ChiServerOptions{BaseRouter: r}) })
	if err != nil {
		t.Fatal(err)
	}
	var raw []string
	for op := range a.rawUnions {
		raw = append(raw, op.OperationID)
	}
	if len(raw) != 1 || raw[0] != "RunTurn" {
		t.Errorf("operations whose bodies are decoded from their bytes: %v, want [RunTurn]", raw)
	}
}
