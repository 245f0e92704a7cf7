package httpapi

import (
	"errors"
	"log/slog"
	"net/http"
	"strconv"
	"strings"

	"github.com/getkin/kin-openapi/openapi3"
	"github.com/getkin/kin-openapi/openapi3filter"
	"github.com/getkin/kin-openapi/routers"

	"mailroom/internal/core"
	"mailroom/internal/httpx"
)

// Codes of failures that only the HTTP layer can see; the one table from
// codes to statuses is internal/httpx's, shared with the MCP endpoint.
const (
	codeBodyTooLarge         = httpx.CodeBodyTooLarge
	codeUnsupportedMediaType = httpx.CodeUnsupportedMediaType
	codeMethodNotAllowed     = httpx.CodeMethodNotAllowed
	codeInternal             = httpx.CodeInternal
)

// statusOf is httpx's code → status table, for the tests that hold it
// against the spec's list of codes.
var statusOf = httpx.StatusTable()

const genericInternalDetail = httpx.GenericInternalDetail

// newProblem builds the problem document for code (httpx.NewProblem) as
// the generated Problem type.
func newProblem(code core.Code, detail string) Problem {
	p := httpx.NewProblem(code, detail)
	return Problem{Type: p.Type, Title: p.Title, Status: p.Status, Detail: p.Detail, Code: ProblemCode(p.Code)}
}

// writeProblem sends a problem document through httpx.WriteProblem, the
// only writer of error bodies, so every error has the same media type and
// shape.
func writeProblem(w http.ResponseWriter, p Problem) {
	hp := httpx.Problem{Code: string(p.Code), Detail: p.Detail, Status: p.Status, Title: p.Title, Type: p.Type}
	if p.Conflicts != nil {
		for _, c := range *p.Conflicts {
			hp.Conflicts = append(hp.Conflicts, core.ReservationConflict{ReservationID: c.ReservationID, Member: c.Member, Paths: c.Paths, ExpiresAt: c.ExpiresAt})
		}
	}
	httpx.WriteProblem(w, hp)
}

// problemFor turns any error into its problem document, with a detail safe
// to show: core's user-safe message for a domain error, a generic text for
// anything else.
func problemFor(err error) Problem {
	code := core.ErrorCode(err)
	if code == core.CodeInternal {
		return newProblem(codeInternal, genericInternalDetail)
	}
	p := newProblem(code, core.ErrorMessage(err))
	var rc *core.ReservationConflicts
	if code == core.CodeReservationConflict && errors.As(err, &rc) {
		cs := make([]ReservationConflict, len(rc.Conflicts))
		for i, c := range rc.Conflicts {
			cs[i] = reservationConflictOf(c)
		}
		p.Conflicts = &cs
	}
	return p
}

// respondError writes err as a problem and logs what the operator needs:
// server-side failures with their cause, client errors only by code. Client
// values never reach the log because core's messages never contain them and
// the cause of a 5xx is internal.
func respondError(log *slog.Logger, w http.ResponseWriter, r *http.Request, err error) {
	p := problemFor(err)
	if p.Status >= 500 {
		log.ErrorContext(r.Context(), "request failed", "method", r.Method, "route", routePattern(r), "code", p.Code, "err", err)
	} else {
		log.DebugContext(r.Context(), "request refused", "method", r.Method, "route", routePattern(r), "code", p.Code)
	}
	writeProblem(w, p)
}

// validationProblem maps a kin-openapi validation failure to its problem.
// The detail is built from the schema's words only (pointer, reason), never
// from the request's values.
func validationProblem(err error) Problem {
	var tooBig *http.MaxBytesError
	var reqErr *openapi3filter.RequestError
	switch {
	case errors.Is(err, routers.ErrMethodNotAllowed):
		return newProblem(codeMethodNotAllowed, "The method is not allowed on this path.")
	case errors.Is(err, routers.ErrPathNotFound):
		return newProblem(core.CodeNotFound, "No such path in the API.")
	case errors.As(err, &tooBig):
		return newProblem(codeBodyTooLarge, "The request body is over 1 MiB.")
	case errors.As(err, &reqErr):
		if reqErr.RequestBody != nil && strings.HasPrefix(reqErr.Reason, "header Content-Type has unexpected value") {
			return newProblem(codeUnsupportedMediaType, "The request body must be application/json.")
		}
		return newProblem(core.CodeValidation, requestErrorDetail(reqErr))
	default:
		return newProblem(core.CodeValidation, "The request does not match the API schema.")
	}
}

func requestErrorDetail(re *openapi3filter.RequestError) string {
	var se *openapi3.SchemaError
	hasSchemaErr := errors.As(re.Err, &se)
	switch {
	case re.Parameter != nil:
		where := "parameter " + re.Parameter.Name
		if hasSchemaErr {
			return where + ": " + schemaReason(se)
		}
		if errors.Is(re.Err, openapi3filter.ErrInvalidRequired) {
			return where + ": a value is required"
		}
		return where + ": the value is invalid"
	case errors.Is(re.Err, openapi3filter.ErrInvalidRequired):
		return "A request body is required."
	case hasSchemaErr:
		where := "/" + strings.Join(se.JSONPointer(), "/")
		if name, ok := unknownField(se); ok {
			if where == "/" {
				return name + " is not a field of this body."
			}
			return name + " is not a field of body " + where + "."
		}
		return "body " + where + ": " + schemaReason(se)
	case re.Reason == "failed to decode request body":
		return "The request body is not valid JSON."
	default:
		return "The request does not match the API schema."
	}
}

// unknownField returns the quoted name of the field se refuses as not in
// the schema, so that the detail names the mistake ("from" where the body
// has none). The name is the client's own text: it is re-quoted (control
// characters escaped) and cut to 64 characters, never repeated raw.
func unknownField(se *openapi3.SchemaError) (string, bool) {
	quoted, ok := strings.CutPrefix(se.Reason, "property ")
	if !ok {
		return "", false
	}
	quoted, ok = strings.CutSuffix(quoted, " is unsupported")
	if !ok {
		return "", false
	}
	name, err := strconv.Unquote(quoted)
	if err != nil {
		return "", false
	}
	const most = 64
	if r := []rune(name); len(r) > most {
		return strconv.Quote(string(r[:most])) + "…", true
	}
	return strconv.Quote(name), true
}

// schemaReason returns the schema error's reason unless it would repeat a
// name chosen by the client (an unknown property somewhere unknownField
// does not report it).
func schemaReason(se *openapi3.SchemaError) string {
	if strings.HasSuffix(se.Reason, " is unsupported") {
		return "a field that the schema does not define is present"
	}
	// A name's pattern is said in words (core.NameRule), not as the
	// regular expression.
	if se.SchemaField == "pattern" && se.Schema != nil && se.Schema.Pattern == namePattern {
		return core.NameRule
	}
	return se.Reason
}

// namePattern is the pattern of the spec's Name schema, the one
// core.ValidName checks.
const namePattern = "^[a-z][a-z0-9-]{0,23}$"

// respondInvalid answers a request the validator refused. The validator's
// suggested status is ignored: it reports 405 as 404 (docs/style.md pitfall 3).
func respondInvalid(log *slog.Logger, w http.ResponseWriter, r *http.Request, err error) {
	p := validationProblem(err)
	log.DebugContext(r.Context(), "request rejected by schema", "method", r.Method, "status", p.Status, "code", p.Code)
	writeProblem(w, p)
}
