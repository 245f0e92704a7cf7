package core

import (
	"encoding/json"
	"math"
	"time"
)

// Limits are a team's bounds. Every rule of the lessons that names a number
// reads it from here, so a team may raise them; DefaultLimits are the
// lessons' own values.
type Limits struct {
	InboxMessages  int `json:"inbox_messages"`
	InboxBytes     int `json:"inbox_bytes"`
	BodyChars      int `json:"body_chars"`
	Requests       int `json:"requests"`
	PayloadChars   int `json:"payload_chars"`
	FeedbackChars  int `json:"feedback_chars"`
	Turns          int `json:"turns"`
	HistoryEntries int `json:"history_entries"`
	// ModelTokens bounds the input plus output tokens the team's model
	// requests may spend in all; 0 means no bound.
	ModelTokens int64 `json:"model_tokens"`
	// PermissionTimeoutS is how long a permission waits for a person's
	// answer before it expires and counts as a denial.
	PermissionTimeoutS int `json:"permission_timeout_s"`
	// Tasks bounds the tasks of the team's board, deleted ones included
	// (they are kept); see TaskLimit.
	Tasks int `json:"tasks"`
	// ToolCalls bounds the tool calls of one turn, however many model
	// answers ask for them: one answer may ask for hundreds, and each
	// call is work done for the member.
	ToolCalls int `json:"tool_calls"`
	// WakeDelayMS is the window a letter opens before the member it
	// makes wakeable is woken (wake.go): every letter that arrives by
	// its end goes into the same turn. It also separates the end of a
	// member's turn from its next woken turn.
	WakeDelayMS int `json:"wake_delay_ms"`
	// ModelRequests bounds the model requests the team's turns may make
	// in all: a budget that holds whatever a provider reports of usage
	// (docs/api.md, "A budget that holds without usage").
	ModelRequests int `json:"model_requests"`
	// WorkspaceBytes and WorkspaceFiles bound the team's workspace: the
	// bytes of its regular files and the number of its names of any kind
	// (an upload past either is refused, a run past either keeps nothing
	// it added).
	WorkspaceBytes int64 `json:"workspace_bytes"`
	WorkspaceFiles int   `json:"workspace_files"`
	// Reservations bounds the live file reservations of the team
	// (reservations.go); see ReservationLimit.
	Reservations int `json:"reservations"`
}

// Defaults of the limits the lessons do not name.
const (
	DefaultModelTokens        = 1000000
	DefaultPermissionTimeoutS = 300
	DefaultToolCalls          = 32
	DefaultWakeDelayMS        = 250
	DefaultModelRequests      = 2000
	// MaxWakeDelayMS bounds limits.wake_delay_ms.
	MaxWakeDelayMS = 60000
	// DefaultWorkspaceBytes (256 MiB) and DefaultWorkspaceFiles bound a
	// team's workspace.
	DefaultWorkspaceBytes = 256 << 20
	DefaultWorkspaceFiles = 10000
)

// UnmarshalJSON reads limits with every field left out at its default, so
// that a state file written before a limit existed loads with that
// limit's default rather than zero (which would mean "no bound" for
// model_tokens).
func (l *Limits) UnmarshalJSON(data []byte) error {
	type plain Limits
	p := plain(DefaultLimits())
	if err := json.Unmarshal(data, &p); err != nil {
		return err
	}
	*l = Limits(p)
	return nil
}

// DefaultLimits returns the lessons' limits (docs/spec.md §1).
func DefaultLimits() Limits {
	return Limits{
		InboxMessages:  8,
		InboxBytes:     32000,
		BodyChars:      600,
		Requests:       4,
		PayloadChars:   180,
		FeedbackChars:  120,
		Turns:          2,
		HistoryEntries: 80,

		ModelTokens:        DefaultModelTokens,
		PermissionTimeoutS: DefaultPermissionTimeoutS,
		Tasks:              DefaultTaskLimit,
		ToolCalls:          DefaultToolCalls,
		WakeDelayMS:        DefaultWakeDelayMS,
		ModelRequests:      DefaultModelRequests,
		WorkspaceBytes:     DefaultWorkspaceBytes,
		WorkspaceFiles:     DefaultWorkspaceFiles,
		Reservations:       DefaultReservationLimit,
	}
}

// Message is one mailbox letter, the envelope of docs/spec.md §2.2. The sender is
// always bound by the host, never taken from a model or a request body.
type Message struct {
	ID        string `json:"id"`
	Sender    string `json:"sender"`
	Recipient string `json:"recipient"`
	Body      string `json:"body"`
	// InReplyTo is the letter this one answers, ThreadID the first
	// letter of its thread and Seq its number among the team's letters
	// sent, which orders a thread (threads.go); all three are set on a
	// reply only. A letter that begins a thread has none of them: its
	// line is the lesson's (EncodeInboxLine) and its thread is its own id
	// (Thread).
	InReplyTo string `json:"in_reply_to,omitempty"`
	ThreadID  string `json:"thread_id,omitempty"`
	Seq       int    `json:"seq,omitempty"`
	// AckRequired asks the recipient for an acknowledgement with an
	// outcome (acks.go).
	AckRequired bool `json:"ack_required,omitempty"`
}

// UnmarshalJSON reads a letter, and a letter document of the API too: a
// letter that begins its own thread is shown with its own id as
// thread_id, and is read back as the letter it is, with ThreadID empty,
// so that it compares equal to the stored one.
func (m *Message) UnmarshalJSON(data []byte) error {
	type plain Message
	if err := json.Unmarshal(data, (*plain)(m)); err != nil {
		return err
	}
	if m.InReplyTo == "" && m.ThreadID == m.ID {
		m.ThreadID = ""
	}
	return nil
}

// Thread is the id of the first letter of m's thread: ThreadID for a
// reply, else m's own id.
func (m Message) Thread() string {
	if m.ThreadID != "" {
		return m.ThreadID
	}
	return m.ID
}

// Member statuses (docs/spec.md §5).
const (
	StatusIdle    = "idle"
	StatusRunning = "running"
	StatusStopped = "stopped"
	StatusFailed  = "failed"
	StatusClosed  = "closed"
)

// Request statuses (docs/spec.md §5).
const (
	RequestPending  = "pending"
	RequestApproved = "approved"
	RequestRejected = "rejected"
)

// Request kinds.
const (
	KindPlan     = "plan"
	KindShutdown = "shutdown"
)

// LeadName is the member that always exists in a team and answers plans.
const LeadName = "lead"

// Turn outcome statuses (docs/spec.md §13.7), and the statuses only a turn
// document reaches: running while it runs, cancelled when the admin
// stopped it, budget_exhausted when the team's model tokens ran out.
const (
	TurnAnswered        = "answered"
	TurnCallLimit       = "call_limit"
	TurnFailed          = "failed"
	TurnRunning         = "running"
	TurnCancelled       = "cancelled"
	TurnBudgetExhausted = "budget_exhausted"
)

// How run_main's host gate is answered for a team (HostPermission).
const (
	HostAsk   = "ask"
	HostAllow = "allow"
	HostDeny  = "deny"
)

// ModelSettings name a team's model: the provider ("anthropic", "openai"
// or "scripted"), the provider's model name and the bound on one answer.
// They never hold a credential. The agent package validates them.
type ModelSettings struct {
	Provider  string `json:"provider"`
	Name      string `json:"name,omitempty"`
	MaxTokens int64  `json:"max_tokens,omitempty"`
}

// ScriptedModel is the model of a team that names none on a server
// without a default: the scripted one, which answers only with the
// responses a turn request brings.
func ScriptedModel() ModelSettings { return ModelSettings{Provider: "scripted"} }

// Usage counts model tokens: the prompts read and the answers written.
type Usage struct {
	InputTokens  int64 `json:"input_tokens"`
	OutputTokens int64 `json:"output_tokens"`
}

// MaxUsageCount is the largest token count a model answer may report:
// 2^53, the largest integer every JSON reader holds exactly. A provider's
// answer beyond it (or below 0) is refused before anything is counted.
const MaxUsageCount = 1 << 53

// Valid reports whether both counts are within 0..MaxUsageCount.
func (u Usage) Valid() bool {
	return u.InputTokens >= 0 && u.InputTokens <= MaxUsageCount && u.OutputTokens >= 0 && u.OutputTokens <= MaxUsageCount
}

// Add returns the sum of u and v, each count held at math.MaxInt64
// rather than wrapping negative: a total that wrapped would stop the
// budget from applying.
func (u Usage) Add(v Usage) Usage {
	return Usage{InputTokens: addCount(u.InputTokens, v.InputTokens), OutputTokens: addCount(u.OutputTokens, v.OutputTokens)}
}

// Total is input plus output tokens, what limits.model_tokens bounds.
func (u Usage) Total() int64 { return addCount(u.InputTokens, u.OutputTokens) }

// addCount adds two token counts, saturating at the int64 bounds.
func addCount(a, b int64) int64 {
	s := a + b
	switch {
	case a > 0 && b > 0 && s < 0:
		return math.MaxInt64
	case a < 0 && b < 0 && s >= 0:
		return math.MinInt64
	}
	return s
}

// Block is one content block of a chat message, in the Anthropic Messages
// shape: text, tool_use or tool_result.
type Block struct {
	Type      string          `json:"type"`
	Text      string          `json:"text,omitempty"`
	ID        string          `json:"id,omitempty"`
	Name      string          `json:"name,omitempty"`
	Input     json.RawMessage `json:"input,omitempty"`
	ToolUseID string          `json:"tool_use_id,omitempty"`
	Content   string          `json:"content,omitempty"`
	IsError   bool            `json:"is_error,omitempty"`
}

// Entry is one chat message of a member's history. Its content is either
// plain text (Blocks nil) or a list of blocks, as in the Messages API.
type Entry struct {
	Role   string
	Text   string
	Blocks []Block
}

type entryJSON struct {
	Role    string          `json:"role"`
	Content json.RawMessage `json:"content"`
}

// MarshalJSON writes {"role", "content"} with content a string or a list.
func (e Entry) MarshalJSON() ([]byte, error) {
	var content []byte
	var err error
	if e.Blocks != nil {
		content, err = json.Marshal(e.Blocks)
	} else {
		content, err = json.Marshal(e.Text)
	}
	if err != nil {
		return nil, err
	}
	return json.Marshal(entryJSON{Role: e.Role, Content: content})
}

// UnmarshalJSON reads the shape MarshalJSON writes.
func (e *Entry) UnmarshalJSON(data []byte) error {
	var raw entryJSON
	if err := json.Unmarshal(data, &raw); err != nil {
		return err
	}
	*e = Entry{Role: raw.Role}
	if len(raw.Content) > 0 && raw.Content[0] == '[' {
		e.Blocks = []Block{}
		return json.Unmarshal(raw.Content, &e.Blocks)
	}
	return json.Unmarshal(raw.Content, &e.Text)
}

// UserText returns a plain-text user message.
func UserText(text string) Entry { return Entry{Role: "user", Text: text} }

// Reply is a response letter's data (docs/spec.md §2.4), kept on the request once
// the letter is saved: it is the decision that was sent.
type Reply struct {
	Type      string `json:"type"`
	RequestID string `json:"request_id"`
	Approve   bool   `json:"approve"`
	Feedback  string `json:"feedback"`
}

// Request is one record of a team's request table (docs/spec.md §2.5).
type Request struct {
	ID      string `json:"request_id"`
	Kind    string `json:"kind"`
	Sender  string `json:"sender"`
	Target  string `json:"target"`
	Payload string `json:"payload"`
	Status  string `json:"status"`
	Reply   *Reply `json:"reply"`
	Receipt string `json:"receipt"`
}

// MemberView is what clients see of a member.
type MemberView struct {
	Name          string `json:"name"`
	Role          string `json:"role"`
	Status        string `json:"status"`
	Active        bool   `json:"active"`
	Turns         int    `json:"turns"`
	HistoryLength int    `json:"history_length"`
	InboxLength   int    `json:"inbox_length"`
	Usage         Usage  `json:"usage"`
	// MCPSessions is how many MCP sessions of this member this process
	// holds (sessions.go); other replicas' sessions are not counted.
	MCPSessions int `json:"mcp_sessions"`
	// MCPLastSeen is when the member last made an MCP request, as this
	// process knows it (mcpseen.go); nil when it knows of none.
	MCPLastSeen *time.Time `json:"mcp_last_seen"`
	// ReadThrough and Unread are the member's read cursor (cursors.go).
	ReadThrough *string `json:"read_through"`
	Unread      int     `json:"unread"`
	// Model is the member's own model (nil: the team's); Wake and
	// WakeHeld are as stored (wake.go).
	Model    *ModelSettings `json:"model"`
	Wake     bool           `json:"wake"`
	WakeHeld bool           `json:"wake_held"`
	// WakeHeldReason is why the wake is held (nil when it is not).
	WakeHeldReason *string `json:"wake_held_reason"`
	// Skills are the member's labels (skills.go), never nil.
	Skills []string `json:"skills"`
}

// TeamView is a team as clients see it: members in creation order (lead
// first) and requests in id order.
type TeamView struct {
	Name      string       `json:"name"`
	CreatedAt time.Time    `json:"created_at"`
	Limits    Limits       `json:"limits"`
	Members   []MemberView `json:"members"`
	Requests  []Request    `json:"requests"`
	// Purpose, Model, Workspace and HostPermission are as created
	// (TeamSpec); Usage is the sum of the members' usage.
	Purpose        string        `json:"purpose"`
	Model          ModelSettings `json:"model"`
	Workspace      bool          `json:"workspace"`
	HostPermission string        `json:"host_permission"`
	Usage          Usage         `json:"usage"`
	// Damaged is set when the team's stored state failed validation at
	// start; such a team is served read-only with errors, never rewritten.
	Damaged bool `json:"damaged"`
}

// TeamSummary is one row of the team list.
type TeamSummary struct {
	Name      string    `json:"name"`
	Members   int       `json:"members"`
	CreatedAt time.Time `json:"created_at"`
}

// MemberSpec names a member and its role at team creation, with its own
// model (nil: the team's) and whether mail wakes it.
type MemberSpec struct {
	Name  string
	Role  string
	Model *ModelSettings
	Wake  bool
	// Skills are the member's labels (CheckLabels).
	Skills []string
}

// TeamSpec is what CreateTeam needs. Limits nil means the lesson limits;
// Model nil the scripted model; HostPermission "" means HostAsk.
type TeamSpec struct {
	Name    string
	Members []MemberSpec
	Limits  *Limits
	// Purpose is what the team is for, told to every member's model.
	Purpose string
	Model   *ModelSettings
	// Workspace gives the team a directory its members' tools work in.
	Workspace      bool
	HostPermission string
}

// MaxPurposeChars bounds a team's purpose.
const MaxPurposeChars = 2000

// CreatedMember is a member as returned once at creation, with its token.
type CreatedMember struct {
	MemberView
	Token string `json:"token"`
}

// SendResult is send_message's return: the stored id and "queued".
type SendResult struct {
	ID     string `json:"id"`
	Status string `json:"status"`
}

// OpenResult is open_request's return: the new id and "pending".
type OpenResult struct {
	RequestID string `json:"request_id"`
	Status    string `json:"status"`
}

// ReplyResult is reply_request's return: "queued" with the receipt, or
// "already_sent" or "deferred" without one.
type ReplyResult struct {
	RequestID string `json:"request_id"`
	Status    string `json:"status"`
	Receipt   string `json:"receipt,omitempty"`
}

// MatchResult is match_response's return for one letter. RequestID is set
// only for approved, rejected and duplicate; Reason only for ignored.
type MatchResult struct {
	MessageID string `json:"message_id"`
	Status    string `json:"status"`
	RequestID string `json:"request_id,omitempty"`
	Reason    string `json:"reason,omitempty"`
}

// TurnOutcome is what a turn function returns (docs/spec.md §2.6): the member's
// full new history, the outcome status and a final text.
type TurnOutcome struct {
	Messages []Entry
	Status   string
	Text     string
}

// TurnResult is run_teammate's return.
type TurnResult struct {
	Member string `json:"member"`
	Status string `json:"status"`
	Text   string `json:"text"`
}
