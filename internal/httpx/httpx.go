// Package httpx is what the HTTP doors share: the one table from error
// codes to HTTP statuses, the problem document every door answers errors
// with (RFC 9457, application/problem+json) and the bound on request
// bodies. The REST API (internal/httpapi) and the MCP endpoint
// (internal/mcpserver) both import it and neither imports the other.
package httpx

import (
	"encoding/json"
	"net/http"

	"mailroom/internal/core"
)

// MaxBodyBytes bounds every request body; larger ones are 413
// body_too_large.
const MaxBodyBytes = 1 << 20

// Codes of failures that only the HTTP layer can see. They share core's
// Code type so that one table maps every code to its status.
const (
	CodeBodyTooLarge         core.Code = "body_too_large"
	CodeUnsupportedMediaType core.Code = "unsupported_media_type"
	CodeMethodNotAllowed     core.Code = "method_not_allowed"
	CodeInternal             core.Code = "internal_error"
)

// GenericInternalDetail is the detail of every internal error: its cause
// stays in the log.
const GenericInternalDetail = "An internal error occurred."

// statusOf is the one mapping from error codes to HTTP statuses (the error
// table of the REST contract). A code missing here is a bug and answers
// 500.
var statusOf = map[core.Code]int{
	core.CodeValidation:          http.StatusBadRequest,
	core.CodeBodyLength:          http.StatusBadRequest,
	CodeBodyTooLarge:             http.StatusRequestEntityTooLarge,
	CodeUnsupportedMediaType:     http.StatusUnsupportedMediaType,
	CodeMethodNotAllowed:         http.StatusMethodNotAllowed,
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
	core.CodeHistoryFull:         http.StatusConflict,
	core.CodeUnknownMember:       http.StatusUnprocessableEntity,
	core.CodeUnknownTask:         http.StatusUnprocessableEntity,
	core.CodeTaskLimit:           http.StatusConflict,
	core.CodeTaskClosed:          http.StatusConflict,
	core.CodeTaskCycle:           http.StatusConflict,
	core.CodeTaskAssigned:        http.StatusConflict,
	core.CodeTaskClaimed:         http.StatusConflict,
	core.CodeTaskNeeds:           http.StatusConflict,
	core.CodeTaskBlocked:         http.StatusConflict,
	core.CodeTaskNotClaimed:      http.StatusConflict,
	core.CodeWorkspaceFull:       http.StatusConflict,
	core.CodeReservationConflict: http.StatusConflict,
	core.CodeReservationLimit:    http.StatusConflict,
	core.CodeReservationClosed:   http.StatusConflict,
	core.CodeUnknownLetter:       http.StatusUnprocessableEntity,
	core.CodeAlreadyAcked:        http.StatusConflict,
	core.CodeAckNotRequired:      http.StatusConflict,
	core.CodeLimitBelowUsage:     http.StatusConflict,
	core.CodeWrongDirection:      http.StatusUnprocessableEntity,
	core.CodeInboxCorrupt:        http.StatusInternalServerError,
	core.CodeStorageFailed:       http.StatusInternalServerError,
	core.CodeShuttingDown:        http.StatusServiceUnavailable,
	core.CodeTooManyStreams:      http.StatusTooManyRequests,
	core.CodeStorageUnavailable:  http.StatusServiceUnavailable,
	CodeInternal:                 http.StatusInternalServerError,
}

// StatusTable returns a copy of the code → status table, for the tests
// that hold it against the API's list of codes.
func StatusTable() map[core.Code]int {
	out := make(map[core.Code]int, len(statusOf))
	for c, s := range statusOf {
		out[c] = s
	}
	return out
}

// Retry-After values, in seconds: a restart takes a few seconds, a
// database restart or failover about two.
const (
	shuttingDownRetryAfter       = "5"
	storageUnavailableRetryAfter = "2"
)

// Problem is the problem document. Its fields and their order are those of
// the API's Problem schema, so both doors send the same bytes.
type Problem struct {
	Code string `json:"code"`
	// Conflicts is set with reservation_conflict only: the live
	// reservations the refused grant clashed with.
	Conflicts []core.ReservationConflict `json:"conflicts,omitempty"`
	Detail    string                     `json:"detail"`
	Status    int                        `json:"status"`
	Title     string                     `json:"title"`
	Type      string                     `json:"type"`
}

// NewProblem builds the problem document for code. The title is the status
// phrase because the type is about:blank (RFC 9457 §4.2.1); clients branch
// on code. A code the table lacks becomes a generic internal error.
func NewProblem(code core.Code, detail string) Problem {
	status, ok := statusOf[code]
	if !ok {
		code, status, detail = CodeInternal, http.StatusInternalServerError, GenericInternalDetail
	}
	return Problem{Type: "about:blank", Title: http.StatusText(status), Status: status, Detail: detail, Code: string(code)}
}

// WriteProblem sends a problem document. It is the only writer of error
// bodies, so every error of every door has the same media type and shape.
func WriteProblem(w http.ResponseWriter, p Problem) {
	h := w.Header()
	h.Set("Content-Type", "application/problem+json")
	h.Del("Content-Length")
	if p.Status == http.StatusUnauthorized {
		h.Set("WWW-Authenticate", `Bearer realm="mailroom"`)
	}
	switch core.Code(p.Code) {
	case core.CodeShuttingDown:
		h.Set("Retry-After", shuttingDownRetryAfter)
	case core.CodeStorageUnavailable:
		h.Set("Retry-After", storageUnavailableRetryAfter)
	}
	w.WriteHeader(p.Status)
	_ = json.NewEncoder(w).Encode(p) // the client may be gone; nothing to do then
}

// Write answers code and detail as a problem document.
func Write(w http.ResponseWriter, code core.Code, detail string) {
	WriteProblem(w, NewProblem(code, detail))
}
