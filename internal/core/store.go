package core

import (
	"context"
	"time"
)

// Store is what core needs of durable storage. Core calls every method of
// one team with that team's lock held, so a backend needs no per-team lock
// of its own; it must be safe for concurrent calls on different teams.
//
// The interface is deliberately narrow so that another backend (a database)
// can implement each call as one transaction, and so that tests can inject
// faults without special cases in production code.
type Store interface {
	// CreateTeam durably creates a team with its first state. It fails
	// with CodeTeamExists when the name is taken.
	CreateTeam(ctx context.Context, st *TeamState) error
	// SaveTeam durably replaces a team's state; on error the previous
	// state is kept.
	SaveTeam(ctx context.Context, st *TeamState) error
	// LoadTeams returns every stored team (used once, at start).
	LoadTeams(ctx context.Context) ([]LoadedTeam, error)
	// LoadInbox returns the validated letters of one inbox (SPEC §4.2). A
	// missing file is an empty inbox; a damaged one is CodeInboxCorrupt
	// and is never treated as empty.
	LoadInbox(ctx context.Context, team string, rules InboxRules) ([]Message, error)
	// AppendInbox durably stores msg after prev, which is what LoadInbox
	// returned under the same lock. It refuses with CodeInboxFull, before
	// touching the disk, when the new line would take the file over
	// rules.Limits.InboxBytes. On error the inbox is byte-for-byte what it
	// was and no temporary file is left.
	AppendInbox(ctx context.Context, team string, rules InboxRules, prev []Message, msg Message) error
	// LoadIdempotency returns the lines of the team's idempotency log in
	// the order written; a team without one has none. A torn last line
	// (an append cut short, never acknowledged) is removed first; any
	// other damage is an error.
	LoadIdempotency(ctx context.Context, team string) ([]IdempotencyRecord, error)
	// AppendIdempotency durably adds one line at the end of the team's
	// idempotency log. Its cost does not depend on what the log or the
	// team already holds. On error the log is what it was.
	AppendIdempotency(ctx context.Context, team string, r IdempotencyRecord) error
	// RewriteIdempotency durably replaces the team's idempotency log with
	// records (compaction). On error the old log is kept.
	RewriteIdempotency(ctx context.Context, team string, records []IdempotencyRecord) error
	// DeleteTeam durably removes a team with everything stored for it. It
	// is all or nothing: after a crash the team is either whole or gone.
	DeleteTeam(ctx context.Context, team string) error
}

// InboxRules are what a loader needs to validate one inbox.
type InboxRules struct {
	Recipient string
	Limits    Limits
	// IsMember reports whether a sender name is registered in the team.
	IsMember func(name string) bool
}

// LoadedTeam is one team found by LoadTeams. Err is set when its state could
// not be read; such a team is served as damaged and never rewritten.
type LoadedTeam struct {
	Name  string
	State *TeamState
	Err   error
}

// TeamState is everything of a team that survives a restart.
type TeamState struct {
	Name      string        `json:"name"`
	CreatedAt time.Time     `json:"created_at"`
	Limits    Limits        `json:"limits"`
	Members   []MemberState `json:"members"`
	Requests  []Request     `json:"requests"`
	// Purpose, Model, Workspace and HostPermission are the team's
	// settings (TeamSpec). A state file written before they existed loads
	// with none: no purpose, the scripted model, no workspace, and ask.
	Purpose        string         `json:"purpose,omitempty"`
	Model          *ModelSettings `json:"model,omitempty"`
	Workspace      bool           `json:"workspace,omitempty"`
	HostPermission string         `json:"host_permission,omitempty"`
	// Intent is the protocol letter being written, recorded before the
	// letter so that start-up can complete or drop it (SPEC §13.14).
	Intent *Intent `json:"intent,omitempty"`
	// Idempotency is only read: state files written before the team had
	// an idempotency log kept the records here. Start-up moves them into
	// the log, and the state is saved without them.
	Idempotency []IdempotencyRecord `json:"idempotency,omitempty"`
	// Permissions are the host gate's questions to a person, pending and
	// decided, oldest first (permissions.go).
	Permissions []Permission `json:"permissions,omitempty"`
}

// MemberState is the durable part of a member. Occupancy (active) is not
// kept: after a restart no turn is running.
type MemberState struct {
	Name      string  `json:"name"`
	Role      string  `json:"role"`
	Status    string  `json:"status"`
	Turns     int     `json:"turns"`
	History   []Entry `json:"history"`
	TokenHash string  `json:"token_hash"`
	// Usage is every model token this member's turns spent, failed and
	// cancelled turns included: the tokens were billed all the same.
	Usage Usage `json:"usage"`
}

// ModelOf is the team's model, the scripted one when it names none.
func (st *TeamState) ModelOf() ModelSettings {
	if st.Model == nil {
		return ScriptedModel()
	}
	return *st.Model
}

// HostPermissionOf is how the team answers run_main's host gate, ask
// when it says nothing.
func (st *TeamState) HostPermissionOf() string {
	if st.HostPermission == "" {
		return HostAsk
	}
	return st.HostPermission
}

// Intent operations.
const (
	IntentOpen  = "open"
	IntentReply = "reply"
	IntentSend  = "send"
)

// Intent records, before a letter is written, what the letter will mean
// once stored: a request to register, a reply to record (and a member to
// close), or an idempotent send to remember. Start-up completes an intent
// whose exact letter is on disk and drops one whose letter is missing.
type Intent struct {
	Op          string             `json:"op"`
	Letter      Message            `json:"letter"`
	Request     *Request           `json:"request,omitempty"`
	RequestID   string             `json:"request_id,omitempty"`
	Reply       *Reply             `json:"reply,omitempty"`
	Close       string             `json:"close,omitempty"`
	Idempotency *IdempotencyRecord `json:"idempotency_record,omitempty"`
}

// IdempotencyRecord remembers the first successful response to a write
// made with an Idempotency-Key, scoped to the member that made it. It is
// one line of the team's idempotency log.
type IdempotencyRecord struct {
	Member      string    `json:"member"`
	Key         string    `json:"key"`
	Fingerprint string    `json:"fingerprint"`
	Result      []byte    `json:"result,omitempty"`
	At          time.Time `json:"at"`
	// Letter is the letter the write stored. The record is logged before
	// the letter is written, so start-up keeps it only when this exact
	// letter is in its recipient's inbox. Nil only for records moved from
	// an older state file, which were written after their letter.
	Letter *Message `json:"letter,omitempty"`
	// Cancelled marks a line that withdraws the earlier record of the same
	// member, key and letter id: that letter could not be written.
	Cancelled bool `json:"cancelled,omitempty"`
}
