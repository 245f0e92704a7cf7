package agent

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"mailroom/internal/core"
	"mailroom/internal/strictjson"
	"mailroom/internal/workspace"
)

// The tool registry. Every door that offers tools to an agent, the agent
// loop of a turn and the MCP endpoint, takes the names, descriptions,
// schemas and handlers of its tools from Registry, so that a tool is
// written once, states the team's own limits and acts through core as the
// caller in its context: core checks every right (docs/spec.md §4).

// Door is a way in that offers tools.
type Door uint8

// The doors.
const (
	// DoorAgent is the agent loop of a turn run by Mailroom.
	DoorAgent Door = 1 << iota
	// DoorMCP is the MCP endpoint, for agents running elsewhere.
	DoorMCP
)

// MCP-only tool names (the lesson's tools are the Tool* constants of
// tools.go). reply_request is the act of review_plan under the name the
// MCP contract gives it.
const (
	ToolReadInbox       = "read_inbox"
	ToolWaitForMail     = "wait_for_mail"
	ToolRequestShutdown = "request_shutdown"
	ToolReplyRequest    = "reply_request"
	ToolCheckReplies    = "check_replies"
	ToolListRequests    = "list_requests"
	ToolTeam            = "team"
	ToolMarkRead        = "mark_read"
)

// DefaultWait is wait_for_mail's wait when the call names none; MaxWait
// (core's bound of one read) is the longest it may ask for.
const DefaultWait = 30 * time.Second

// shutdownReason is the payload of a shutdown request opened without one:
// a request's payload may not be empty (docs/spec.md §4.9).
const shutdownReason = "Please finish and shut down."

// Codes of tool refusals that have no REST counterpart: run_main's gates
// and a program that ran and failed. Every other refusal carries a code
// of core.
const (
	CodePlanGate  core.Code = "plan_gate"
	CodeHostGate  core.Code = "host_denied"
	CodeRunFailed           = workspace.CodeRunFailed
	// CodeCallLimit is the result of a tool call beyond the team's
	// limits.tool_calls in one turn; the call did not run.
	CodeCallLimit core.Code = "call_limit"
)

// Offer says to whom a tool is offered.
type Offer struct {
	// Lead and Teammates name the roles offered the tool.
	Lead, Teammates bool
	// WorkspaceOnly offers the tool only to members of a team with a
	// workspace.
	WorkspaceOnly bool
}

// Handler runs one call of a tool. The caller is the member principal in
// ctx (core.AsMember), never a field of input; input is the call's JSON
// arguments, decoded strictly. A refusal is a *ToolError or an error of
// core.
type Handler func(ctx context.Context, input json.RawMessage) (Result, error)

// Result is what a tool call answers.
type Result struct {
	// Value is the structured result (MCP's structuredContent; the agent's
	// model reads its JSON unless ModelReadsText).
	Value any
	// Text is a short text beside Value (MCP's text content).
	Text string
	// ModelReadsText makes the agent's model read Text rather than the
	// JSON of Value: a file's content or a program's output.
	ModelReadsText bool
	// Ran is set when run_main started the program.
	Ran bool
}

// ToolError is a refusal made by a tool itself rather than by core: an
// input that does not fit the tool, a workspace path refused, a gate that
// refused run_main, a program that failed.
type ToolError struct {
	// Code is the refusal's stable word.
	Code core.Code
	// Message is what the caller reads: safe, naming no internal detail.
	Message string
	// Gate names the gate that refused run_main (GatePlan or GateHost).
	Gate string
	// Ran is set when the program was started.
	Ran bool
}

func (e *ToolError) Error() string { return e.Message }

func toolErr(code core.Code, format string, args ...any) *ToolError {
	return &ToolError{Code: code, Message: fmt.Sprintf(format, args...)}
}

// Tool is one tool of the registry.
type Tool struct {
	Name        string
	Description string
	// InputSchema is the JSON schema of the input. The team's limits are
	// stated in descriptions, not as maxLength: an over-long value reaches
	// core and is refused there (body_length), as in REST.
	InputSchema json.RawMessage
	// Doors are the doors that offer the tool.
	Doors Door
	// Offer says to whom.
	Offer Offer
	// Handler runs a call.
	Handler Handler
}

// OfferedTo reports whether door offers t to member of a team with or
// without a workspace.
func (t Tool) OfferedTo(door Door, member string, workspace bool) bool {
	if t.Doors&door == 0 || (t.Offer.WorkspaceOnly && !workspace) {
		return false
	}
	if member == core.LeadName {
		return t.Offer.Lead
	}
	return t.Offer.Teammates
}

// Spec is the tool as a model request names it.
func (t Tool) Spec() ToolSpec {
	return ToolSpec{Name: t.Name, Description: t.Description, InputSchema: t.InputSchema}
}

// Env is what the tools of one team need besides the caller: core, the
// team's limits and workspace, and how run_main's gates are answered.
type Env struct {
	// Svc is core. It may be nil when only the specs are wanted.
	Svc *core.Service
	// Limits are the team's; their bounds are stated in the schemas.
	Limits core.Limits
	// Workspace is the directory read_file and run_main work in; they
	// refuse every call when it is empty.
	Workspace string
	// Runner runs run_main's program (workspace.Default when nil): one
	// for every door of a server, so that one program runs per team.
	Runner *workspace.Runner
	// AskHost answers run_main's host gate by the team's host_permission
	// (core.Service.AskHost: at once under allow or deny, by a person under
	// ask); otherwise AllowRun answers it.
	AskHost  bool
	AllowRun bool
	// PlanID, when set, is the plan request whose approval the plan gate
	// requires; otherwise it is the caller's most recent plan request.
	PlanID string
	// Mail waits for letters (wait_for_mail): the process's live hub
	// (internal/live). Without it a read answers at once with what
	// there is, as read_inbox does.
	Mail MailWaiter
}

// MailWaiter waits for the letters of a member's inbox after after, up
// to wait (internal/live's Hub.WaitInbox).
type MailWaiter interface {
	WaitInbox(ctx context.Context, team, member, after string, wait time.Duration) ([]core.Message, error)
}

// Registry returns every tool of env, in the order a door offers them.
func Registry(env Env) []Tool {
	r := registry{env}
	l := env.Limits
	all := Offer{Lead: true, Teammates: true}
	tools := []Tool{
		{
			Name: ToolSendMessage, Doors: DoorAgent | DoorMCP, Offer: all, Handler: r.sendMessage,
			Description: fmt.Sprintf("Send a letter (1 to %d characters after trimming) to a member of your team or to yourself. It is queued in the recipient's inbox; queued does not mean read.", l.BodyChars),
			InputSchema: object(
				prop{name: "to", typ: "string", desc: "The recipient's member name.", required: true},
				prop{name: "body", typ: "string", desc: fmt.Sprintf("The letter, 1 to %d characters after trimming.", l.BodyChars), required: true},
				inReplyToProp, ackRequiredProp),
		},
		{
			Name: ToolReadInbox, Doors: DoorMCP, Offer: all, Handler: r.readInbox,
			Description: "Read your inbox, oldest first. Reading deletes nothing.",
			InputSchema: object(prop{name: "after", typ: "string", desc: "Optional: the id of a letter of your inbox; only the letters after it are returned."},
				unreadOnlyProp, markReadProp),
		},
		{
			Name: ToolWaitForMail, Doors: DoorMCP, Offer: all, Handler: r.waitForMail,
			Description: fmt.Sprintf("Sleep until a letter arrives in your inbox (an unread one, or one after the given one), then return the new letters; returns at once when unread letters wait, and an empty list at the deadline (1 to %d seconds, default %d). Use it instead of polling.", int(core.MaxWait/time.Second), int(DefaultWait/time.Second)),
			InputSchema: object(
				prop{name: "after", typ: "string", desc: "Optional: the id of the last letter you have seen; only later letters count."},
				prop{name: "timeout_seconds", typ: "integer", desc: fmt.Sprintf("How long to wait, 1 to %d seconds (default %d).", int(core.MaxWait/time.Second), int(DefaultWait/time.Second)), min: 1, max: int(core.MaxWait / time.Second)},
				waitUnreadOnlyProp, markReadProp),
		},
		{
			Name: ToolMarkRead, Doors: DoorMCP, Offer: all, Handler: r.markRead,
			Description: "Mark the letters of your inbox read, up to and including the given one. Your read cursor only moves forward; senders see it in their receipts.",
			InputSchema: object(prop{name: "through", typ: "string", desc: "The id of a letter of your inbox, e.g. reader-3.", required: true}),
		},
		{
			// One entry for both doors: the same name, description and
			// input ({plan}) wherever a member submits a plan.
			Name: ToolSubmitPlan, Doors: DoorAgent | DoorMCP, Offer: Offer{Teammates: true}, Handler: r.submitPlan,
			Description: fmt.Sprintf("Submit a plan (1 to %d characters after trimming) to lead for approval (a plan request). It stays pending until you have seen lead's reply.", l.PayloadChars),
			InputSchema: object(prop{name: "plan", typ: "string", desc: fmt.Sprintf("The plan, 1 to %d characters after trimming.", l.PayloadChars), required: true}),
		},
		{
			Name: ToolRequestShutdown, Doors: DoorMCP, Offer: Offer{Lead: true}, Handler: r.requestShutdown,
			Description: "Ask a teammate to shut down (a shutdown request). The teammate answers with reply_request; call check_replies to learn the answer.",
			InputSchema: object(
				prop{name: "target", typ: "string", desc: "The teammate's member name.", required: true},
				prop{name: "reason", typ: "string", desc: fmt.Sprintf("Optional: why, 1 to %d characters after trimming.", l.PayloadChars)}),
		},
		{
			Name: ToolReviewPlan, Doors: DoorAgent, Offer: Offer{Lead: true}, Handler: r.reply(ToolReviewPlan),
			Description: fmt.Sprintf("Approve or reject a plan request addressed to you, with optional feedback (at most %d characters). A decision, once sent, cannot change.", l.FeedbackChars),
			InputSchema: replySchema(l),
		},
		{
			Name: ToolReplyRequest, Doors: DoorMCP, Offer: all, Handler: r.reply(ToolReplyRequest),
			Description: fmt.Sprintf("Answer a plan or shutdown request addressed to you: approve or reject, with optional feedback (at most %d characters). Approving a shutdown closes you.", l.FeedbackChars),
			InputSchema: replySchema(l),
		},
		{
			Name: ToolCheckReplies, Doors: DoorMCP, Offer: all, Handler: r.checkReplies,
			Description: "Match the protocol replies in your inbox against your requests: each letter's status says approved, rejected, duplicate or ignored.",
			InputSchema: object(),
		},
		{
			Name: ToolListRequests, Doors: DoorMCP, Offer: all, Handler: r.listRequests,
			Description: "List the team's plan and shutdown requests with their status and reply.",
			InputSchema: object(),
		},
		{
			Name: ToolTeam, Doors: DoorMCP, Offer: all, Handler: r.team,
			Description: "Show your team: its members with their roles, status and skills (a task that needs skills goes only to a member with all of them).",
			InputSchema: object(),
		},
		{
			Name: ToolReadFile, Doors: DoorAgent | DoorMCP, Offer: Offer{Lead: true, Teammates: true, WorkspaceOnly: true}, Handler: r.readFile,
			Description: fmt.Sprintf("Read a text file of the team's workspace (at most %d KiB). The path is relative to the workspace.", workspace.MaxReadBytes>>10),
			InputSchema: object(prop{name: "path", typ: "string", desc: "A relative path inside the workspace, e.g. main.py.", required: true}),
		},
		{
			// Lead is not offered run_main: the plan gate needs a plan the
			// caller sent to lead, which lead cannot.
			Name: ToolRunMain, Doors: DoorAgent | DoorMCP, Offer: Offer{Teammates: true, WorkspaceOnly: true}, Handler: r.runMain,
			Description: fmt.Sprintf("Run the workspace's fixed program (python3 %s, at most %s) and return its output (at most %d KiB). Needs your plan approved by lead and the host's permission, which may wait for a person's answer (up to %d seconds).", workspace.Program, workspace.RunTimeout, workspace.MaxOutputBytes>>10, l.PermissionTimeoutS),
			InputSchema: object(),
		},
	}
	return append(append(append(append(append(tools, r.taskTools()...), r.reservationTools()...), r.searchTools()...), r.mailTools()...), r.archiveTools()...) // searchtool.go
}

// Offered returns the tools of door offered to member of a team with or
// without a workspace, in the registry's order.
func Offered(tools []Tool, door Door, member string, workspace bool) []Tool {
	var out []Tool
	for _, t := range tools {
		if t.OfferedTo(door, member, workspace) {
			out = append(out, t)
		}
	}
	return out
}

// Lookup returns the tool named name that door offers.
func Lookup(tools []Tool, door Door, name string) (Tool, bool) {
	for _, t := range tools {
		if t.Name == name && t.Doors&door != 0 {
			return t, true
		}
	}
	return Tool{}, false
}

// prop is one property of an input schema.
type prop struct {
	name, typ, desc string
	required        bool
	min, max        int    // bounds of an integer; 0 for none
	items           string // the type of an array's items
}

// object is the schema of an input object with props and no other field.
func object(props ...prop) json.RawMessage {
	properties := map[string]any{}
	required := []string{}
	for _, p := range props {
		s := map[string]any{"type": p.typ}
		if p.desc != "" {
			s["description"] = p.desc
		}
		if p.max > 0 {
			s["minimum"], s["maximum"] = p.min, p.max
		}
		if p.items != "" {
			s["items"] = map[string]any{"type": p.items}
		}
		properties[p.name] = s
		if p.required {
			required = append(required, p.name)
		}
	}
	schema := map[string]any{"type": "object", "properties": properties, "additionalProperties": false}
	if len(required) > 0 {
		schema["required"] = required
	}
	b, err := json.Marshal(schema)
	if err != nil {
		panic(fmt.Sprintf("agent: a tool schema cannot be encoded: %v", err)) // maps of strings and ints always encode
	}
	return b
}

// replySchema is the input of review_plan and reply_request, one act
// under two names: the lesson's and the MCP contract's.
func replySchema(l core.Limits) json.RawMessage {
	return object(
		prop{name: "request_id", typ: "string", desc: "The request's id, e.g. req-1.", required: true},
		prop{name: "approve", typ: "boolean", desc: "true to approve, false to reject.", required: true},
		prop{name: "feedback", typ: "string", desc: fmt.Sprintf("Optional: at most %d characters.", l.FeedbackChars)})
}

// registry holds the handlers' environment.
type registry struct{ env Env }

// callerOf returns the member principal of ctx.
func callerOf(ctx context.Context) (team, member string, err error) {
	p, ok := core.PrincipalFrom(ctx)
	if !ok || p.Admin || p.Member == "" {
		return "", "", core.Errorf(core.CodeUnauthorized, "A member is required to call a tool.")
	}
	return p.Team, p.Member, nil
}

// decode decodes input strictly into v, refusing it, under the tool's
// name, when it is not one JSON object with the tool's fields and types:
// a model or a client cannot smuggle in an identity such as a sender.
func decode(tool string, input json.RawMessage, v any) error {
	if err := decodeInput(input, v); err != nil {
		return toolErr(core.CodeValidation, "%s: %v", tool, err)
	}
	return nil
}

// decodeInput decodes a tool input with the strict decoder REST bodies
// pass too (internal/strictjson): one JSON object with exactly the tool's
// field names, case included, no other field and no name twice.
func decodeInput(input json.RawMessage, v any) error {
	return strictjson.Decode(input, v)
}

func (r registry) sendMessage(ctx context.Context, input json.RawMessage) (Result, error) {
	var in struct {
		To          *string `json:"to"`
		Body        *string `json:"body"`
		InReplyTo   string  `json:"in_reply_to"`
		AckRequired bool    `json:"ack_required"`
	}
	if err := decode(ToolSendMessage, input, &in); err != nil {
		return Result{}, err
	}
	if in.To == nil || in.Body == nil {
		return Result{}, toolErr(core.CodeValidation, "send_message: to and body are required")
	}
	team, _, err := callerOf(ctx)
	if err != nil {
		return Result{}, err
	}
	res, err := r.env.Svc.Send(ctx, core.SendInput{Team: team, To: *in.To, Body: *in.Body, InReplyTo: in.InReplyTo, AckRequired: in.AckRequired})
	if err != nil {
		return Result{}, err
	}
	return Result{Value: res, Text: fmt.Sprintf("Sent to %s as letter %s (%s).", *in.To, res.ID, res.Status)}, nil
}

// inboxOutput is the result of read_inbox and wait_for_mail.
type inboxOutput struct {
	Messages []core.Message `json:"messages"`
}

func lettersResult(msgs []core.Message) Result {
	if msgs == nil {
		msgs = []core.Message{}
	}
	text := "No letters."
	if len(msgs) > 0 {
		text = fmt.Sprintf("%d letters, the last %s.", len(msgs), msgs[len(msgs)-1].ID)
	}
	return Result{Value: inboxOutput{Messages: msgs}, Text: text}
}

// The inputs read_inbox and wait_for_mail share about the read cursor.
var (
	unreadOnlyProp = prop{name: "unread_only", typ: "boolean", desc: "Optional (default false): only the letters after your read cursor; not together with after."}
	markReadProp   = prop{name: "mark_read", typ: "boolean", desc: "Optional (default false): mark the letters returned read (your read cursor moves through the last one)."}
	// wait_for_mail waits for unread mail unless after is given, so that
	// an agent looping on it with no arguments sleeps until a letter
	// arrives instead of being handed its old mail at once.
	waitUnreadOnlyProp = prop{name: "unread_only", typ: "boolean", desc: "Optional (default true without after, false with it): only the letters after your read cursor; not together with after."}
)

// cursorInput is unread_only and mark_read.
type cursorInput struct {
	UnreadOnly bool `json:"unread_only"`
	MarkRead   bool `json:"mark_read"`
}

// readLetters is read_inbox and wait_for_mail: the letters after after
// (or after the read cursor with unread_only), waiting up to wait for
// one, then marked read with mark_read.
func (r registry) readLetters(ctx context.Context, tool, after string, c cursorInput, wait time.Duration) (Result, error) {
	team, member, err := callerOf(ctx)
	if err != nil {
		return Result{}, err
	}
	if c.UnreadOnly {
		if after != "" {
			return Result{}, toolErr(core.CodeValidation, "%s: unread_only and after cannot be used together", tool)
		}
		if after, err = r.env.Svc.UnreadAfter(ctx, team, member); err != nil {
			return Result{}, err
		}
	}
	var msgs []core.Message
	if r.env.Mail != nil {
		msgs, err = r.env.Mail.WaitInbox(ctx, team, member, after, wait)
	} else {
		msgs, err = r.env.Svc.LettersAfter(ctx, team, member, after)
	}
	if err != nil {
		return Result{}, err
	}
	if c.MarkRead && len(msgs) > 0 {
		if _, err := r.env.Svc.MarkRead(ctx, team, member, msgs[len(msgs)-1].ID); err != nil {
			return Result{}, err
		}
	}
	return lettersResult(msgs), nil
}

func (r registry) readInbox(ctx context.Context, input json.RawMessage) (Result, error) {
	var in struct {
		After string `json:"after"`
		cursorInput
	}
	if err := decode(ToolReadInbox, input, &in); err != nil {
		return Result{}, err
	}
	return r.readLetters(ctx, ToolReadInbox, in.After, in.cursorInput, 0)
}

func (r registry) markRead(ctx context.Context, input json.RawMessage) (Result, error) {
	var in struct {
		Through *string `json:"through"`
	}
	if err := decode(ToolMarkRead, input, &in); err != nil {
		return Result{}, err
	}
	if in.Through == nil {
		return Result{}, toolErr(core.CodeValidation, "mark_read: through is required")
	}
	team, member, err := callerOf(ctx)
	if err != nil {
		return Result{}, err
	}
	rs, err := r.env.Svc.MarkRead(ctx, team, member, *in.Through)
	if err != nil {
		return Result{}, err
	}
	through := "nothing"
	if rs.ReadThrough != nil {
		through = *rs.ReadThrough
	}
	return Result{Value: rs, Text: fmt.Sprintf("Read through %s; %d unread.", through, rs.Unread)}, nil
}

func (r registry) waitForMail(ctx context.Context, input json.RawMessage) (Result, error) {
	var in struct {
		After          string `json:"after"`
		TimeoutSeconds *int   `json:"timeout_seconds"`
		UnreadOnly     *bool  `json:"unread_only"`
		MarkRead       bool   `json:"mark_read"`
	}
	if err := decode(ToolWaitForMail, input, &in); err != nil {
		return Result{}, err
	}
	// No after: the unread letters, waited for when there are none. With
	// after, after decides (unread_only defaults to false).
	c := cursorInput{UnreadOnly: in.After == "", MarkRead: in.MarkRead}
	if in.UnreadOnly != nil {
		c.UnreadOnly = *in.UnreadOnly
	}
	wait := DefaultWait
	if in.TimeoutSeconds != nil {
		if max := int(core.MaxWait / time.Second); *in.TimeoutSeconds < 1 || *in.TimeoutSeconds > max {
			return Result{}, toolErr(core.CodeValidation, "wait_for_mail: timeout_seconds must be 1 to %d", max)
		}
		wait = time.Duration(*in.TimeoutSeconds) * time.Second
	}
	return r.readLetters(ctx, ToolWaitForMail, in.After, c, wait)
}

// submitPlan opens a plan request to lead.
func (r registry) submitPlan(ctx context.Context, input json.RawMessage) (Result, error) {
	var in struct {
		Plan *string `json:"plan"`
	}
	if err := decode(ToolSubmitPlan, input, &in); err != nil {
		return Result{}, err
	}
	if in.Plan == nil {
		return Result{}, toolErr(core.CodeValidation, "submit_plan: plan is required")
	}
	return r.open(ctx, core.LeadName, core.KindPlan, *in.Plan, "Plan")
}

func (r registry) requestShutdown(ctx context.Context, input json.RawMessage) (Result, error) {
	var in struct {
		Target *string `json:"target"`
		Reason string  `json:"reason"`
	}
	if err := decode(ToolRequestShutdown, input, &in); err != nil {
		return Result{}, err
	}
	if in.Target == nil {
		return Result{}, toolErr(core.CodeValidation, "request_shutdown: target is required")
	}
	reason := in.Reason
	if reason == "" {
		reason = shutdownReason
	}
	return r.open(ctx, *in.Target, core.KindShutdown, reason, "Shutdown")
}

func (r registry) open(ctx context.Context, target, kind, payload, what string) (Result, error) {
	team, _, err := callerOf(ctx)
	if err != nil {
		return Result{}, err
	}
	res, err := r.env.Svc.OpenRequest(ctx, core.OpenInput{Team: team, Target: target, Kind: kind, Payload: payload})
	if err != nil {
		return Result{}, err
	}
	return Result{Value: res, Text: fmt.Sprintf("%s request %s is %s.", what, res.RequestID, res.Status)}, nil
}

// reply is the act of answering a request, offered as review_plan to the
// agent and as reply_request over MCP.
func (r registry) reply(name string) Handler {
	return func(ctx context.Context, input json.RawMessage) (Result, error) {
		var in struct {
			RequestID *string `json:"request_id"`
			Approve   *bool   `json:"approve"`
			Feedback  string  `json:"feedback"`
		}
		if err := decode(name, input, &in); err != nil {
			return Result{}, err
		}
		if in.RequestID == nil || in.Approve == nil {
			return Result{}, toolErr(core.CodeValidation, "%s: request_id and a boolean approve are required", name)
		}
		team, _, err := callerOf(ctx)
		if err != nil {
			return Result{}, err
		}
		res, err := r.env.Svc.Reply(ctx, core.ReplyInput{Team: team, RequestID: *in.RequestID, Approve: *in.Approve, Feedback: in.Feedback})
		if err != nil {
			return Result{}, err
		}
		return Result{Value: res, Text: fmt.Sprintf("Reply to %s: %s.", res.RequestID, res.Status)}, nil
	}
}

type repliesOutput struct {
	Results []core.MatchResult `json:"results"`
}

func (r registry) checkReplies(ctx context.Context, input json.RawMessage) (Result, error) {
	if err := decode(ToolCheckReplies, input, &struct{}{}); err != nil {
		return Result{}, err
	}
	team, _, err := callerOf(ctx)
	if err != nil {
		return Result{}, err
	}
	rs, err := r.env.Svc.Consume(ctx, team)
	if err != nil {
		return Result{}, err
	}
	if rs == nil {
		rs = []core.MatchResult{}
	}
	var parts []string
	for _, m := range rs {
		if m.RequestID != "" {
			parts = append(parts, m.RequestID+" "+m.Status)
		}
	}
	text := fmt.Sprintf("%d letters, no replies to your requests.", len(rs))
	if len(parts) > 0 {
		text = "Replies: " + strings.Join(parts, ", ") + "."
	}
	return Result{Value: repliesOutput{Results: rs}, Text: text}, nil
}

type requestsOutput struct {
	Requests []core.Request `json:"requests"`
}

func (r registry) listRequests(ctx context.Context, input json.RawMessage) (Result, error) {
	if err := decode(ToolListRequests, input, &struct{}{}); err != nil {
		return Result{}, err
	}
	team, _, err := callerOf(ctx)
	if err != nil {
		return Result{}, err
	}
	rs, err := r.env.Svc.Requests(ctx, team)
	if err != nil {
		return Result{}, err
	}
	if rs == nil {
		rs = []core.Request{}
	}
	return Result{Value: requestsOutput{Requests: rs}, Text: fmt.Sprintf("%d requests.", len(rs))}, nil
}

type teamMember struct {
	Name   string   `json:"name"`
	Role   string   `json:"role"`
	Status string   `json:"status"`
	Skills []string `json:"skills"`
}

type teamOutput struct {
	Name    string       `json:"name"`
	Members []teamMember `json:"members"`
}

func (r registry) team(ctx context.Context, input json.RawMessage) (Result, error) {
	if err := decode(ToolTeam, input, &struct{}{}); err != nil {
		return Result{}, err
	}
	team, member, err := callerOf(ctx)
	if err != nil {
		return Result{}, err
	}
	v, err := r.env.Svc.Team(ctx, team)
	if err != nil {
		return Result{}, err
	}
	// Names, roles, status and skills only: a member never sees tokens.
	out := teamOutput{Name: v.Name, Members: []teamMember{}}
	for _, m := range v.Members {
		out.Members = append(out.Members, teamMember{Name: m.Name, Role: m.Role, Status: m.Status, Skills: append([]string{}, m.Skills...)})
	}
	return Result{Value: out, Text: fmt.Sprintf("Team %s, %d members; you are %s.", v.Name, len(out.Members), member)}, nil
}
