package httpapi

import (
	"encoding/json"
	"errors"
	"log/slog"
	"net/http"
	"strconv"
	"strings"

	"github.com/getkin/kin-openapi/openapi3"
	"github.com/getkin/kin-openapi/openapi3filter"
	"github.com/getkin/kin-openapi/routers"

	"mailroom/internal/core"
)

// Codes of failures that only the HTTP layer can see. They share core's Code
// type so that one table below maps every code to its status.
const (
	codeBodyTooLarge         core.Code = "body_too_large"
	codeUnsupportedMediaType core.Code = "unsupported_media_type"
	codeMethodNotAllowed     core.Code = "method_not_allowed"
	codeInternal             core.Code = "internal_error"
)

// statusOf is the one mapping from error codes to HTTP statuses (the error
// table of the REST contract). A code missing here is a bug and answers 500.
var statusOf = map[core.Code]int{
	core.CodeValidation:          http.StatusBadRequest,
	core.CodeBodyLength:          http.StatusBadRequest,
	codeBodyTooLarge:             http.StatusRequestEntityTooLarge,
	codeUnsupportedMediaType:     http.StatusUnsupportedMediaType,
	codeMethodNotAllowed:         http.StatusMethodNotAllowed,
	core.CodeUnauthorized:        http.StatusUnauthorized,
	core.CodeForbidden:           http.StatusForbidden,
	core.CodeNotFound:            http.StatusNotFound,
	core.CodeTeamExists:          http.StatusConflict,
	core.CodeTeamLimit:           http.StatusConflict,
	core.CodeInboxFull:           http.StatusConflict,
	core.CodeRequestLimit:        http.StatusConflict,
	core.CodeRequestPending:      http.StatusConflict,
	core.CodeMemberClosed:        http.StatusConflict,
	core.CodeReplyConflict:       http.StatusConflict,
	core.CodeNotPending:          http.StatusConflict,
	core.CodeIdempotencyConflict: http.StatusConflict,
	core.CodeMemberUnavailable:   http.StatusConflict,
	core.CodeModelUnavailable:    http.StatusConflict,
	core.CodeBudgetExhausted:     http.StatusConflict,
	core.CodeUnknownMember:       http.StatusUnprocessableEntity,
	core.CodeUnknownTask:         http.StatusUnprocessableEntity,
	core.CodeTaskLimit:           http.StatusConflict,
	core.CodeTaskClosed:          http.StatusConflict,
	core.CodeTaskCycle:           http.StatusConflict,
	core.CodeTaskAssigned:        http.StatusConflict,
	core.CodeTaskClaimed:         http.StatusConflict,
	core.CodeTaskBlocked:         http.StatusConflict,
	core.CodeTaskNotClaimed:      http.StatusConflict,
	core.CodeWrongDirection:      http.StatusUnprocessableEntity,
	core.CodeInboxCorrupt:        http.StatusInternalServerError,
	core.CodeStorageFailed:       http.StatusInternalServerError,
	core.CodeShuttingDown:        http.StatusServiceUnavailable,
	core.CodeTooManyStreams:      http.StatusTooManyRequests,
	core.CodeStorageUnavailable:  http.StatusServiceUnavailable,
	codeInternal:                 http.StatusInternalServerError,
}

const genericInternalDetail = "An internal error occurred."

// shuttingDownRetryAfter is the Retry-After, in seconds, of a shutting_down
// answer.
const shuttingDownRetryAfter = "5"

// storageUnavailableRetryAfter is the Retry-After, in seconds, of a
// storage_unavailable answer: a database restart or failover.
const storageUnavailableRetryAfter = "2"

// newProblem builds the problem document for code. The title is the status
// phrase because the type is about:blank (RFC 9457 §4.2.1); clients branch on
// code.
func newProblem(code core.Code, detail string) Problem {
	status, ok := statusOf[code]
	if !ok {
		code, status, detail = codeInternal, http.StatusInternalServerError, genericInternalDetail
	}
	return Problem{
		Type:   "about:blank",
		Title:  http.StatusText(status),
		Status: status,
		Detail: detail,
		Code:   ProblemCode(code),
	}
}

// writeProblem sends a problem document. It is the only writer of error
// bodies, so every error has the same media type and shape.
func writeProblem(w http.ResponseWriter, p Problem) {
	h := w.Header()
	h.Set("Content-Type", "application/problem+json")
	h.Del("Content-Length")
	if p.Status == http.StatusUnauthorized {
		h.Set("WWW-Authenticate", `Bearer realm="mailroom"`)
	}
	if p.Code == ProblemCode(core.CodeShuttingDown) {
		// A restart takes a few seconds; the client may try again then.
		h.Set("Retry-After", shuttingDownRetryAfter)
	}
	if p.Code == ProblemCode(core.CodeStorageUnavailable) {
		h.Set("Retry-After", storageUnavailableRetryAfter)
	}
	w.WriteHeader(p.Status)
	_ = json.NewEncoder(w).Encode(p) // the client may be gone; nothing to do then
}

// problemFor turns any error into its problem document, with a detail safe
// to show: core's user-safe message for a domain error, a generic text for
// anything else.
func problemFor(err error) Problem {
	code := core.ErrorCode(err)
	if code == core.CodeInternal {
		return newProblem(codeInternal, genericInternalDetail)
	}
	return newProblem(code, core.ErrorMessage(err))
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
	return se.Reason
}

// respondInvalid answers a request the validator refused. The validator's
// suggested status is ignored: it reports 405 as 404 (docs/style.md pitfall 3).
func respondInvalid(log *slog.Logger, w http.ResponseWriter, r *http.Request, err error) {
	p := validationProblem(err)
	log.DebugContext(r.Context(), "request rejected by schema", "method", r.Method, "status", p.Status, "code", p.Code)
	writeProblem(w, p)
}
