package api_test

import (
	"testing"

	"github.com/getkin/kin-openapi/openapi3"

	"mailroom/api"
)

// TestSpecIsValid loads the embedded document and validates it: kin-openapi's
// loader alone accepts documents that break the OpenAPI rules.
func TestSpecIsValid(t *testing.T) {
	doc, err := openapi3.NewLoader().LoadFromData(api.Spec)
	if err != nil {
		t.Fatalf("load spec: %v", err)
	}
	if err := doc.Validate(t.Context()); err != nil {
		t.Fatalf("validate spec: %v", err)
	}
	if got := doc.OpenAPI; got != "3.0.3" {
		t.Errorf("openapi version = %q, want 3.0.3", got)
	}
	if len(doc.Servers) != 1 || doc.Servers[0].URL != "/api/v1" {
		t.Errorf("servers = %v, want one relative /api/v1", doc.Servers)
	}
}

// TestEveryOperationIsSecured checks that no operation opts out of the bearer
// scheme: every /api/v1 route needs a token.
func TestEveryOperationIsSecured(t *testing.T) {
	doc, err := openapi3.NewLoader().LoadFromData(api.Spec)
	if err != nil {
		t.Fatalf("load spec: %v", err)
	}
	if len(doc.Security) == 0 {
		t.Fatal("the document has no global security requirement")
	}
	for path, item := range doc.Paths.Map() {
		for method, op := range item.Operations() {
			if op.Security != nil && len(*op.Security) == 0 {
				t.Errorf("%s %s opts out of authentication", method, path)
			}
		}
	}
}

// TestErrorResponsesAreProblems checks every 4xx/5xx response is declared as
// application/problem+json with the Problem schema, written inline per status
// so the generator gives every error the same Go shape.
func TestErrorResponsesAreProblems(t *testing.T) {
	doc, err := openapi3.NewLoader().LoadFromData(api.Spec)
	if err != nil {
		t.Fatalf("load spec: %v", err)
	}
	for path, item := range doc.Paths.Map() {
		for method, op := range item.Operations() {
			for status, ref := range op.Responses.Map() {
				if status[0] != '4' && status[0] != '5' {
					continue
				}
				if ref.Ref != "" {
					t.Errorf("%s %s %s: error response is a $ref; write it inline", method, path, status)
					continue
				}
				mt := ref.Value.Content.Get("application/problem+json")
				if mt == nil || mt.Schema == nil || mt.Schema.Ref != "#/components/schemas/Problem" {
					t.Errorf("%s %s %s: not application/problem+json Problem", method, path, status)
				}
			}
		}
	}
}
