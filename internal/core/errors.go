package core

import (
	"errors"
	"fmt"
)

// Code is a stable, machine-readable error word. Clients branch on it; the
// words are exactly the `code` values of the REST contract's error table.
type Code string

// The error codes. Each has one meaning across every operation.
const (
	CodeValidation          Code = "validation_failed"
	CodeBodyLength          Code = "body_length"
	CodeUnauthorized        Code = "unauthorized"
	CodeForbidden           Code = "forbidden"
	CodeNotFound            Code = "not_found"
	CodeTeamExists          Code = "team_exists"
	CodeTeamLimit           Code = "team_limit"
	CodeInboxFull           Code = "inbox_full"
	CodeRequestLimit        Code = "request_limit"
	CodeRequestPending      Code = "request_pending"
	CodeMemberClosed        Code = "member_closed"
	CodeReplyConflict       Code = "reply_conflict"
	CodeNotPending          Code = "not_pending"
	CodeIdempotencyConflict Code = "idempotency_conflict"
	CodeMemberUnavailable   Code = "member_unavailable"
	CodeUnknownMember       Code = "unknown_member"
	CodeWrongDirection      Code = "wrong_direction"
	CodeInboxCorrupt        Code = "inbox_corrupt"
	CodeStorageFailed       Code = "storage_failed"
	// CodeModelUnavailable refuses a turn whose model cannot be asked: its
	// provider has no credentials on this server, or it is the scripted
	// model and the request brought no responses.
	CodeModelUnavailable Code = "model_unavailable"
	// CodeBudgetExhausted refuses a turn of a team whose model tokens
	// (limits.model_tokens) are spent.
	CodeBudgetExhausted Code = "budget_exhausted"
	// CodeHistoryFull refuses a turn of a member with unattended letters
	// none of which fits in its history (limits.history_entries).
	CodeHistoryFull Code = "history_full"
	// CodeShuttingDown refuses new work (a turn, a scenario run) once the
	// server has begun to stop; the same request succeeds after a restart.
	CodeShuttingDown Code = "shutting_down"
	// CodeTooManyStreams refuses an event stream beyond the per-token or
	// the server-wide bound, which keep idle streams from exhausting memory.
	CodeTooManyStreams Code = "too_many_streams"
	// CodeStorageUnavailable refuses a request while the store cannot be
	// reached (a database that is down or restarting): nothing was
	// stored, and the same request may be tried again later.
	CodeStorageUnavailable Code = "storage_unavailable"
	// The task board's refusals (tasks.go).
	CodeUnknownTask  Code = "unknown_task"
	CodeTaskLimit    Code = "task_limit"
	CodeTaskClosed   Code = "task_closed"
	CodeTaskCycle    Code = "task_cycle"
	CodeTaskAssigned Code = "task_assigned"
	CodeTaskClaimed  Code = "task_claimed"
	// CodeTaskNeeds refuses a claim by a member that lacks a skill the
	// task needs (skills.go).
	CodeTaskNeeds      Code = "task_needs"
	CodeTaskBlocked    Code = "task_blocked"
	CodeTaskNotClaimed Code = "task_not_claimed"
	// CodeWorkspaceFull refuses an upload that would take a team's
	// workspace past limits.workspace_bytes or limits.workspace_files
	// (nothing is stored), and ends a run that went past either (what it
	// added is not kept).
	CodeWorkspaceFull Code = "workspace_full"
	// The refusals of threads, acknowledgements and limits after
	// creation (threads.go, acks.go, limits.go): a reply to a letter the
	// sender never sent or received; an ack given twice, or to a letter
	// that asked for none; a limit lowered below what the team holds.
	CodeUnknownLetter   Code = "unknown_letter"
	CodeAlreadyAcked    Code = "already_acked"
	CodeAckNotRequired  Code = "ack_not_required"
	CodeLimitBelowUsage Code = "limit_below_usage"
	// CodeInternal is never sent as such: it marks an error that is not a
	// domain error and must be answered with a generic message.
	CodeInternal Code = "internal"
)

// Error is the one domain error type. Message is safe to show to a client:
// it never contains client input or internal error text. Err, when set, is
// the cause, kept for logs and errors.Is; it never reaches a client.
type Error struct {
	Code    Code
	Message string
	Err     error
}

// Error implements error for logs; it includes the cause.
func (e *Error) Error() string {
	if e.Err != nil {
		return fmt.Sprintf("%s: %s: %v", e.Code, e.Message, e.Err)
	}
	return fmt.Sprintf("%s: %s", e.Code, e.Message)
}

// Unwrap exposes the cause to errors.Is and errors.As.
func (e *Error) Unwrap() error { return e.Err }

// Errorf builds a domain error with a user-safe message.
func Errorf(code Code, format string, args ...any) *Error {
	return &Error{Code: code, Message: fmt.Sprintf(format, args...)}
}

// ErrorCode returns the code of the first domain error in err's chain, or
// CodeInternal when there is none.
func ErrorCode(err error) Code {
	var e *Error
	if errors.As(err, &e) {
		return e.Code
	}
	return CodeInternal
}

// ErrorMessage returns the user-safe message of err, or a generic text when
// err is not a domain error (internal details are never shown).
func ErrorMessage(err error) string {
	var e *Error
	if errors.As(err, &e) {
		return e.Message
	}
	return "An internal error occurred."
}

// The causes of an inbox_corrupt error, one per check of the lesson's loader
// (docs/spec.md §4.2), so tests and logs can tell them apart with errors.Is.
var (
	ErrInboxSymlink  = errors.New("mailbox is a symbolic link")
	ErrInboxTooLarge = errors.New("mailbox file exceeds the byte limit")
	ErrInboxEncoding = errors.New("mailbox is not valid UTF-8")
	ErrInboxJSON     = errors.New("mailbox line is not valid JSON")
	ErrInboxCount    = errors.New("mailbox holds more messages than the limit")
	ErrInboxFields   = errors.New("mailbox record fields do not match")
	ErrInboxSequence = errors.New("mailbox sequence id or recipient does not match")
	ErrInboxSender   = errors.New("mailbox record names an unregistered sender")
	ErrInboxBody     = errors.New("mailbox record body length is out of range")
)

func corrupt(cause error) *Error {
	return &Error{Code: CodeInboxCorrupt, Message: "The stored inbox failed validation; it was left untouched.", Err: cause}
}

// StorageError wraps a failed write or read of the storage layer so that
// the caller learns "the previous state is kept" and nothing more.
func StorageError(err error) *Error {
	return &Error{Code: CodeStorageFailed, Message: "A write to storage failed; the previous state is kept.", Err: err}
}

// CorruptInbox wraps one of the ErrInbox causes as an inbox_corrupt error.
// Storage backends use it for the file-level checks (symlink, size).
func CorruptInbox(cause error) *Error { return corrupt(cause) }
