package httpapi

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/getkin/kin-openapi/openapi3"

	"mailroom/api"
	"mailroom/internal/core"
)

func TestProblemFor(t *testing.T) {
	tests := []struct {
		name   string
		err    error
		status int
		code   ProblemCode
		detail string
	}{
		{"domain error keeps its safe message", core.Errorf(core.CodeInboxFull, "Full."), http.StatusConflict, "inbox_full", "Full."},
		{"wrapped domain error", fmt.Errorf("send: %w", core.Errorf(core.CodeUnknownMember, "Unknown.")), http.StatusUnprocessableEntity, "unknown_member", "Unknown."},
		{"internal error is generic", errors.New("open /data/teams/x: permission denied"), http.StatusInternalServerError, "internal_error", genericInternalDetail},
		{"unmapped code is internal", core.Errorf(core.Code("brand_new"), "?"), http.StatusInternalServerError, "internal_error", genericInternalDetail},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := problemFor(tt.err)
			if p.Status != tt.status || p.Code != tt.code || p.Detail != tt.detail || p.Type != "about:blank" || p.Title != http.StatusText(tt.status) {
				t.Fatalf("problem = %+v, want %d %s %q", p, tt.status, tt.code, tt.detail)
			}
		})
	}
}

// TestEveryCoreCodeHasAStatus keeps the one mapping table complete and the
// spec's code enum in step with it.
func TestEveryCoreCodeHasAStatus(t *testing.T) {
	codes := []core.Code{
		core.CodeValidation, core.CodeBodyLength, core.CodeUnauthorized, core.CodeForbidden, core.CodeNotFound,
		core.CodeTeamExists, core.CodeInboxFull, core.CodeRequestLimit, core.CodeRequestPending, core.CodeMemberClosed,
		core.CodeReplyConflict, core.CodeNotPending, core.CodeIdempotencyConflict, core.CodeMemberUnavailable, core.CodeModelUnavailable,
		core.CodeUnknownMember, core.CodeWrongDirection, core.CodeInboxCorrupt, core.CodeStorageFailed,
		core.CodeStorageUnavailable,
	}
	spec, err := GetSpec()
	if err != nil {
		t.Fatal(err)
	}
	enum := map[string]bool{}
	for _, v := range spec.Components.Schemas["Problem"].Value.Properties["code"].Value.Enum {
		enum[v.(string)] = true
	}
	for c := range statusOf {
		if !enum[string(c)] {
			t.Errorf("code %q is not in the spec's Problem.code enum", c)
		}
	}
	for _, c := range codes {
		if _, ok := statusOf[c]; !ok {
			t.Errorf("core code %q has no HTTP status", c)
		}
	}
	if len(enum) != len(statusOf) {
		t.Errorf("the spec lists %d codes, the mapping %d", len(enum), len(statusOf))
	}
}

// TestEmbeddedSpecMatchesYAML guards against a stale api.gen.go: the
// validator uses the generated copy, /api/openapi.yaml serves the YAML.
func TestEmbeddedSpecMatchesYAML(t *testing.T) {
	gen, err := GetSpec()
	if err != nil {
		t.Fatal(err)
	}
	yaml, err := openapi3.NewLoader().LoadFromData(api.Spec)
	if err != nil {
		t.Fatal(err)
	}
	// The generator capitalises operation ids in its copy; nothing else
	// may differ.
	for _, doc := range []*openapi3.T{gen, yaml} {
		for _, item := range doc.Paths.Map() {
			for _, op := range item.Operations() {
				op.OperationID = ""
			}
		}
	}
	a, _ := json.Marshal(gen)
	b, _ := json.Marshal(yaml)
	if string(a) != string(b) {
		t.Fatal("api.gen.go embeds another spec than api/openapi.yaml; run go generate ./...")
	}
}

// TestStorageUnavailableSaysWhenToRetry: a store that cannot be reached is
// 503 with Retry-After, so clients and load balancers wait and try again.
func TestStorageUnavailableSaysWhenToRetry(t *testing.T) {
	rec := httptest.NewRecorder()
	writeProblem(rec, problemFor(core.Errorf(core.CodeStorageUnavailable, "The store cannot be reached; try again shortly.")))
	if rec.Code != http.StatusServiceUnavailable || rec.Header().Get("Retry-After") == "" {
		t.Fatalf("status %d, Retry-After %q; want 503 with a Retry-After", rec.Code, rec.Header().Get("Retry-After"))
	}
}
