package core

import "context"

// legacyStore is the interface core is being moved off (transitional).
type legacyStore interface {
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


// LoadedTeam is one team found by LoadTeams.
type LoadedTeam struct {
	Name  string
	State *TeamState
	Err   error
}
