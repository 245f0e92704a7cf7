package httpapi

import (
	"errors"
	"maps"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/getkin/kin-openapi/routers/gorillamux"
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
