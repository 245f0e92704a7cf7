package core

import (
	"context"
	"encoding/json"
	"slices"
	"time"
)

// Store is durable storage. It owns each unit of work's atomicity and
// holds no rule: core loads a team as a snapshot (Begin), checks every
// rule itself and hands the store one ChangeSet to commit with a version
// check (changeset.go, Update and View). The store serialises or
// version-checks the commits of one team (the file store with a lock per
// team, a database with the team's row version), so two units of work
// never both commit on the same state, whichever process or replica made
// them. See docs/storage.md.
//
// A store may keep a cache only where it can never commit on stale data:
// the file store, the only process on its data directory (it holds a lock
// file), keeps its teams in memory; a store shared by replicas checks the
// team's version inside each commit.
type Store interface {
	// CreateTeam durably creates a team with its first state, its
	// members' token hashes included. It fails with CodeTeamExists when
	// the name is taken (by any process).
	CreateTeam(ctx context.Context, st *TeamState) error
	// DeleteTeam durably removes a team with everything stored for it:
	// state, inboxes, idempotency records, turn documents, tokens. It is
	// all or nothing. A missing team is CodeNotFound.
	DeleteTeam(ctx context.Context, name string) error
	// ListTeams returns every team, in any order.
	ListTeams(ctx context.Context) ([]TeamSummary, error)
	// CountTeams returns how many teams there are: what the team limit
	// is checked against on every creation, so it must not cost a list.
	CountTeams(ctx context.Context) (int, error)
	// LookupToken returns the team and member whose token has SHA-256
	// tokenHash (lower-case hex); CodeNotFound when none has. It must not
	// wait for a team's unit of work.
	LookupToken(ctx context.Context, tokenHash string) (team, member string, err error)

	// Begin loads team name as a snapshot for one unit of work (write)
	// or a view, which lasts until the Unit is committed or closed. A
	// missing team is CodeNotFound. A damaged team is loaded (Damaged
	// says why); core refuses to write it. Reads of the snapshot and its
	// Commit use ctx.
	Begin(ctx context.Context, name string, write bool) (Unit, error)

	RunStore
}

// TeamTx is one team inside a unit of work (Update, View), as core's rules
// see it: the snapshot with the changes made so far. It is valid only
// while the unit's function runs.
type TeamTx interface {
	// State is the team's state, a copy private to this unit of work:
	// fn may change it, and Update stores what changed when fn returns
	// nil.
	State() *TeamState
	// Damaged is the reason a team's stored data failed validation, nil
	// for a sound team. Only View meets a damaged team.
	Damaged() error
	// LoadInbox returns the validated letters of member's inbox (docs/spec.md
	// §4.2), with the letter appended in this unit of work if any. A
	// damaged inbox is CodeInboxCorrupt, never empty.
	LoadInbox(member string) ([]Message, error)
	// InboxBytes returns member's inbox in the lesson's file bytes, with
	// the letter appended in this unit of work if any.
	InboxBytes(member string) ([]byte, error)
	// AppendLetter adds msg at the end of its recipient's inbox. msg.ID
	// must be <recipient>-<n+1> for an inbox of n letters. It refuses
	// with CodeInboxFull when the line would take the inbox over the
	// team's inbox_bytes. A unit of work appends at most one letter.
	AppendLetter(msg Message) error
	// Idempotency returns the live (unexpired) record of member's key.
	Idempotency(member, key string) (IdempotencyRecord, bool, error)
	// PutIdempotency remembers r, for IdempotencyTTL, committed with the
	// unit's letter (r.Letter is set to it).
	PutIdempotency(r IdempotencyRecord) error
	// Turns returns the team's turn documents, oldest first.
	Turns() ([]TurnDoc, error)
	// PutTurn stores doc, replacing the one with the same id.
	PutTurn(doc TurnDoc) error
	// DeleteTurn removes one document; a missing one is no error.
	DeleteTurn(turnID string) error
	// ReadThrough is member's read cursor, with a move made in this unit
	// of work. It does not read the inbox.
	ReadThrough(member string) (int, error)
	// SetReadThrough moves member's read cursor to n letters. Core moves
	// it only forward and never past the inbox's end.
	SetReadThrough(member string, n int) error
	// Tasks returns the team's task board in id order (task-1 first),
	// deleted tasks included, with the tasks put in this unit of work.
	// The caller must not change the slices it returns.
	Tasks() ([]Task, error)
	// PutTask stores t, replacing the task with its id; a new task must
	// be the next, task-<n+1> on a board of n, so that no id is ever
	// given twice.
	PutTask(t Task) error
}

// InboxCounter is implemented by core's TeamTx: how many letters member's
// inbox holds, from the store's count where it keeps one (a database),
// so that a send does not load the recipient's inbox. The letter
// appended in this unit of work, if any, is counted.
type InboxCounter interface {
	InboxLen(member string) (int, error)
}

// inboxLen is the number of letters in member's inbox.
func inboxLen(tx TeamTx, member string) (int, error) {
	if c, ok := tx.(InboxCounter); ok {
		return c.InboxLen(member)
	}
	items, err := tx.LoadInbox(member)
	return len(items), err
}

// RunStore keeps scenario run documents. A run is claimed (Result nil)
// when it starts, with the lease of the process that runs it, and gets its
// result when it ends. The holder renews the lease (RenewRun) while the
// run goes on, so that every replica tells a run in progress (a live
// lease) from one whose process died (no lease, or an expired one); see
// docs/storage.md.
type RunStore interface {
	// PutRun stores run, replacing the one with the same id. A run with
	// a result holds no lease: its Lease is not stored.
	PutRun(ctx context.Context, run RunDoc) error
	// GetRun returns one run, with its lease while it has no result;
	// CodeNotFound when there is none.
	GetRun(ctx context.Context, id string) (RunDoc, error)
	// ListRuns returns the ids of every run, in any order.
	ListRuns(ctx context.Context) ([]string, error)
	// DeleteRun removes a run; a missing one is no error.
	DeleteRun(ctx context.Context, id string) error
	// RenewRun replaces the lease of run id by lease when the run has no
	// result yet and its lease is held by lease.Holder. It reports false,
	// changing nothing, for a run that is missing, finished, unleased or
	// leased by another holder. A store used by one process only may
	// keep leases in memory, so that they do not outlive it.
	RenewRun(ctx context.Context, id string, lease Lease) (bool, error)
}

// RunDoc is one scenario run as stored: its id, its result document as
// JSON (nil while the run has not finished) and, while it runs, the lease
// of the process that runs it.
type RunDoc struct {
	ID     string          `json:"run_id"`
	Result json.RawMessage `json:"result,omitempty"`
	Lease  *Lease          `json:"lease,omitempty"`
}

// Lease is a member's running turn, or a scenario run in progress: who
// runs it and until when it holds unless renewed. A member whose lease is
// held and unexpired is busy on every replica, and a run so held is in
// progress on every replica; the holder renews it every LeaseDuration/3
// while the turn or run goes on and removes it when it ends.
type Lease struct {
	Holder  string    `json:"holder"`
	Expires time.Time `json:"expires"`
}

// DefaultLeaseDuration is how long a turn's lease holds without renewal
// when Options.LeaseDuration is 0: after a replica dies, its members are
// available again at most this long after its last renewal.
const DefaultLeaseDuration = 30 * time.Second

// Live reports whether the lease still holds at now.
func (l *Lease) Live(now time.Time) bool { return l != nil && now.Before(l.Expires) }

// InboxRules are what a loader needs to validate one inbox.
type InboxRules struct {
	Recipient string
	Limits    Limits
	// IsMember reports whether a sender name is registered in the team.
	IsMember func(name string) bool
}

// Rules returns the rules of recipient's inbox in st.
func (st *TeamState) Rules(recipient string) InboxRules {
	return InboxRules{Recipient: recipient, Limits: st.Limits, IsMember: st.IsMember}
}

// IsMember reports whether name is a member of the team.
func (st *TeamState) IsMember(name string) bool { return st.Member(name) != nil }

// Member returns the member called name, or nil.
func (st *TeamState) Member(name string) *MemberState {
	for i := range st.Members {
		if st.Members[i].Name == name {
			return &st.Members[i]
		}
	}
	return nil
}

// Clone returns a deep copy of st, as a store hands to a unit of work.
func (st *TeamState) Clone() *TeamState {
	data, err := json.Marshal(st)
	if err != nil {
		panic(err) // a state always encodes
	}
	out := &TeamState{}
	if err := json.Unmarshal(data, out); err != nil {
		panic(err)
	}
	if out.Requests == nil {
		out.Requests = []Request{}
	}
	return out
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
	// Permissions are the host gate's questions to a person, pending and
	// decided, oldest first (permissions.go).
	Permissions []Permission `json:"permissions,omitempty"`
	// Reservations are the team's file reservations, live and closed,
	// oldest first (reservations.go); a unit of work replaces the slice,
	// never changes it in place. ReservationSeq is the number of the
	// last one granted, so that an id is never given twice.
	Reservations   []Reservation `json:"reservations,omitempty"`
	ReservationSeq int           `json:"reservation_seq,omitempty"`
	// Acks are the acknowledgements given to letters that asked for one,
	// in the order given (acks.go). A unit replaces the slice, never
	// changes it in place.
	Acks []Ack `json:"acks,omitempty"`
}

// UnitCopy copies st as deeply as a unit of work may change it: the slices
// core appends to or assigns into, and the leases and replies it changes
// through pointers. Histories and the other values a unit of work only
// ever replaces, never changes in place, are shared; that is what lets a
// store hand each unit of work its own copy of the team it keeps in
// memory at the cost of a few slices.
func (st *TeamState) UnitCopy() *TeamState {
	c := *st
	c.Members = slices.Clone(st.Members)
	for i := range c.Members {
		if l := c.Members[i].Lease; l != nil {
			x := *l
			c.Members[i].Lease = &x
		}
	}
	c.Requests = slices.Clone(st.Requests)
	for i := range c.Requests {
		if r := c.Requests[i].Reply; r != nil {
			x := *r
			c.Requests[i].Reply = &x
		}
	}
	c.Permissions = slices.Clone(st.Permissions)
	return &c
}

// MemberState is the durable part of a member.
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
	// ModelRequests counts the model requests this member's turns made,
	// what limits.model_requests bounds for the team.
	ModelRequests int `json:"model_requests,omitempty"`
	// Lease is the member's running turn, nil when none runs.
	Lease *Lease `json:"lease,omitempty"`
	// Model is the member's own model, which wins over the team's; nil
	// means the team's.
	Model *ModelSettings `json:"model,omitempty"`
	// Wake makes the server start a turn of the member by itself when
	// mail waits for it (wake.go). WakeHeld stops that after a turn that
	// did not end answered, until a reset or a PATCH setting wake.
	Wake     bool `json:"wake,omitempty"`
	WakeHeld bool `json:"wake_held,omitempty"`
	// WakeHeldReason says why the wake is held: the status of the turn
	// that held it, or WakeHeldHistoryFull; "" for a hold stored before
	// reasons were.
	WakeHeldReason string `json:"wake_held_reason,omitempty"`
	// Attended are the [team-message] and [team-task] lines the member
	// had attended when its history was cleared (ResetOptions): they
	// stay attended, so that a cleared member is not shown its old mail
	// again.
	Attended []string `json:"attended,omitempty"`
	// Skills are the labels of what the member can do (skills.go); a
	// member stored before skills existed has none.
	Skills []string `json:"skills,omitempty"`
}

// MemberModel is the model member m's turns use: its own, else the
// team's, else the scripted one.
func (st *TeamState) MemberModel(m *MemberState) ModelSettings {
	if m != nil && m.Model != nil {
		return *m.Model
	}
	return st.ModelOf()
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

// IdempotencyRecord remembers the first successful response to a write
// made with an Idempotency-Key, scoped to the member that made it.
type IdempotencyRecord struct {
	Member      string    `json:"member"`
	Key         string    `json:"key"`
	Fingerprint string    `json:"fingerprint"`
	Result      []byte    `json:"result,omitempty"`
	At          time.Time `json:"at"`
	// Letter is the letter the write stored. The file store logs the
	// record before the letter is written, so start-up keeps it only
	// when this exact letter is in its recipient's inbox. Nil only for
	// records moved from an older state file.
	Letter *Message `json:"letter,omitempty"`
	// Cancelled marks a line that withdraws the earlier record of the same
	// member, key and letter id: that letter could not be written.
	Cancelled bool `json:"cancelled,omitempty"`
}

// Expired reports whether r is past IdempotencyTTL at now.
func (r IdempotencyRecord) Expired(now time.Time) bool { return now.Sub(r.At) >= IdempotencyTTL }

// LoadedTeam is one team a store found at start. Err is set when its
// state could not be read; such a team is served as damaged.
type LoadedTeam struct {
	Name  string
	State *TeamState
	Err   error
}

// Starter is implemented by a store with work to do before it serves
// (the file store loads and repairs its teams). Service.Open calls it.
type Starter interface {
	Start(ctx context.Context) error
}

// DamagedError is the error of a write to, or an inbox read of, a team
// whose stored data failed validation (cause).
func DamagedError(cause error) error {
	return &Error{Code: CodeInboxCorrupt, Message: "The team's stored state failed validation at start; it is served read-only.", Err: cause}
}
