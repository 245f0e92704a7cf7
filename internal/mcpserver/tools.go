package mcpserver

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/url"
	"strings"
	"sync"
	"time"

	"github.com/google/jsonschema-go/jsonschema"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"mailroom/internal/core"
)

// DefaultWait is wait_for_mail's wait when the call names none.
const DefaultWait = 30 * time.Second

// shutdownReason is the payload of a shutdown request opened without one:
// a request's payload may not be empty (docs/spec.md §4.9).
const shutdownReason = "Please finish and shut down."

// session is one MCP session: the member it acts as and that member's
// server. Every tool is a method that makes one core call as s.me; the
// member never comes from a tool's input.
type session struct {
	svc    *core.Service
	log    *slog.Logger
	me     Member
	limits core.Limits
	server *mcp.Server

	// ctx ends with the session; it bounds the subscription watchers.
	ctx    context.Context
	cancel context.CancelFunc
	mu     sync.Mutex
	subs   map[string]context.CancelFunc // resource URI → its watcher
}

// newSession builds the server of a session opened by me.
func newSession(ctx context.Context, svc *core.Service, log *slog.Logger, me Member) (*session, error) {
	view, err := svc.Team(core.AsMember(ctx, me.Team, me.Name), me.Team)
	if err != nil {
		return nil, err
	}
	s := &session{svc: svc, log: log, me: me, limits: view.Limits, subs: map[string]context.CancelFunc{}}
	s.ctx, s.cancel = context.WithCancel(context.Background())
	s.server = mcp.NewServer(implementation, &mcp.ServerOptions{
		Instructions: fmt.Sprintf("You are %q, a member of the Mailroom team %q. Letters and requests you send come from you; "+
			"use wait_for_mail to sleep until a letter arrives instead of polling.", me.Name, me.Team),
		Logger:             log,
		SubscribeHandler:   s.subscribe,
		UnsubscribeHandler: s.unsubscribe,
		Capabilities:       &mcp.ServerCapabilities{},
	})
	s.server.AddReceivingMiddleware(schemaRefusals)
	s.addTools()
	s.server.AddResourceTemplate(&mcp.ResourceTemplate{
		Name:        "inbox",
		Title:       "Your inbox",
		Description: "Your own inbox as JSON {\"messages\": [...]}, oldest first. Subscribe to be told of every new letter.",
		MIMEType:    "application/json",
		URITemplate: "mailroom://teams/{team}/members/{member}/inbox",
	}, s.readInbox)
	return s, nil
}

func (s *session) close() {
	s.cancel()
}

// isLead tells the two tool sets apart: only lead asks for shutdowns, only
// teammates submit plans (docs/spec.md §4.9).
func (s *session) isLead() bool { return s.me.Name == core.LeadName }

// as returns ctx carrying the session's member as the caller.
func (s *session) as(ctx context.Context) context.Context {
	return core.AsMember(ctx, s.me.Team, s.me.Name)
}

// Inputs. Names match the REST bodies; the per-team limits are stated in the
// descriptions set by addTools, not as schema constraints, so that an
// over-long value is refused by core with body_length as in REST.

type sendInput struct {
	To   string `json:"to"`
	Body string `json:"body"`
}

type readInput struct {
	After string `json:"after,omitempty"`
}

type waitInput struct {
	After          string `json:"after,omitempty"`
	TimeoutSeconds int    `json:"timeout_seconds,omitempty"`
}

type planInput struct {
	Plan string `json:"plan"`
}

type shutdownInput struct {
	Target string `json:"target"`
	Reason string `json:"reason,omitempty"`
}

type replyInput struct {
	RequestID string `json:"request_id"`
	Approve   bool   `json:"approve"`
	Feedback  string `json:"feedback,omitempty"`
}

type noInput struct{}

// Outputs.

type inboxOutput struct {
	Messages []core.Message `json:"messages"`
}

type repliesOutput struct {
	Results []core.MatchResult `json:"results"`
}

type requestsOutput struct {
	Requests []core.Request `json:"requests"`
}

type teamMember struct {
	Name   string `json:"name"`
	Role   string `json:"role"`
	Status string `json:"status"`
}

type teamOutput struct {
	Name    string       `json:"name"`
	Members []teamMember `json:"members"`
}

// Refusal is the structured content of a refused call: code is the REST
// error word.
type Refusal struct {
	Code   string `json:"code"`
	Detail string `json:"detail"`
}

func (s *session) addTools() {
	l := s.limits
	addTool(s, "send_message", "Send a letter to a member of your team (or to yourself). It is stored in the recipient's inbox; \"queued\" does not mean read.",
		map[string]string{
			"to":   "The recipient's member name.",
			"body": fmt.Sprintf("The letter, 1 to %d characters after trimming.", l.BodyChars),
		},
		func(ctx context.Context, in sendInput) (any, string, error) {
			r, err := s.svc.Send(ctx, core.SendInput{Team: s.me.Team, To: in.To, Body: in.Body})
			return r, fmt.Sprintf("Sent to %s as letter %s (%s).", in.To, r.ID, r.Status), err
		})
	addTool(s, "read_inbox", "Read your inbox, oldest first. Reading deletes nothing.",
		map[string]string{"after": "Optional: the id of a letter of your inbox; only the letters after it are returned."},
		func(ctx context.Context, in readInput) (any, string, error) {
			msgs, err := s.svc.WaitInbox(ctx, s.me.Team, s.me.Name, in.After, 0)
			return inboxOutput{Messages: msgs}, lettersText(msgs), err
		})
	addTool(s, "wait_for_mail", "Sleep until a letter arrives in your inbox (after the given one), then return the new letters; returns an empty list at the deadline. Use it instead of polling.",
		map[string]string{
			"after":           "Optional: the id of the last letter you have seen; only later letters count.",
			"timeout_seconds": "How long to wait, 1 to 60 seconds (default 30).",
		},
		func(ctx context.Context, in waitInput) (any, string, error) {
			wait := DefaultWait
			if in.TimeoutSeconds != 0 {
				wait = time.Duration(in.TimeoutSeconds) * time.Second
			}
			msgs, err := s.svc.WaitInbox(ctx, s.me.Team, s.me.Name, in.After, wait)
			return inboxOutput{Messages: msgs}, lettersText(msgs), err
		})
	if !s.isLead() {
		addTool(s, "submit_plan", "Submit a plan to lead for approval (a plan request). Lead answers with reply_request; call check_replies to learn the verdict.",
			map[string]string{"plan": fmt.Sprintf("The plan, 1 to %d characters after trimming.", l.PayloadChars)},
			func(ctx context.Context, in planInput) (any, string, error) {
				r, err := s.svc.OpenRequest(ctx, core.OpenInput{Team: s.me.Team, Target: core.LeadName, Kind: core.KindPlan, Payload: in.Plan})
				return r, fmt.Sprintf("Plan request %s is %s.", r.RequestID, r.Status), err
			})
	}
	if s.isLead() {
		addTool(s, "request_shutdown", "Ask a teammate to shut down (a shutdown request). The teammate answers with reply_request; call check_replies to learn the answer.",
			map[string]string{
				"target": "The teammate's member name.",
				"reason": fmt.Sprintf("Optional: why, 1 to %d characters after trimming.", l.PayloadChars),
			},
			func(ctx context.Context, in shutdownInput) (any, string, error) {
				reason := in.Reason
				if reason == "" {
					reason = shutdownReason
				}
				r, err := s.svc.OpenRequest(ctx, core.OpenInput{Team: s.me.Team, Target: in.Target, Kind: core.KindShutdown, Payload: reason})
				return r, fmt.Sprintf("Shutdown request %s is %s.", r.RequestID, r.Status), err
			})
	}
	addTool(s, "reply_request", "Answer a plan or shutdown request addressed to you: approve or reject, with optional feedback. Approving a shutdown closes you.",
		map[string]string{
			"request_id": "The request's id, as list_requests shows it (req-N).",
			"approve":    "true to approve, false to reject.",
			"feedback":   fmt.Sprintf("Optional: at most %d characters.", l.FeedbackChars),
		},
		func(ctx context.Context, in replyInput) (any, string, error) {
			r, err := s.svc.Reply(ctx, core.ReplyInput{Team: s.me.Team, RequestID: in.RequestID, Approve: in.Approve, Feedback: in.Feedback})
			return r, fmt.Sprintf("Reply to %s: %s.", r.RequestID, r.Status), err
		})
	addTool(s, "check_replies", "Match the protocol replies in your inbox against your requests: each letter's status says approved, rejected, duplicate or ignored.",
		nil,
		func(ctx context.Context, _ noInput) (any, string, error) {
			rs, err := s.svc.Consume(ctx, s.me.Team)
			return repliesOutput{Results: rs}, repliesText(rs), err
		})
	addTool(s, "list_requests", "List the team's plan and shutdown requests with their status and reply.",
		nil,
		func(ctx context.Context, _ noInput) (any, string, error) {
			rs, err := s.svc.Requests(ctx, s.me.Team)
			if rs == nil {
				rs = []core.Request{}
			}
			return requestsOutput{Requests: rs}, fmt.Sprintf("%d requests.", len(rs)), err
		})
	addTool(s, "team", "Show your team: its members with their roles and status.",
		nil,
		func(ctx context.Context, _ noInput) (any, string, error) {
			v, err := s.svc.Team(ctx, s.me.Team)
			out := teamOutput{Name: v.Name, Members: []teamMember{}}
			for _, m := range v.Members {
				out.Members = append(out.Members, teamMember{Name: m.Name, Role: m.Role, Status: m.Status})
			}
			return out, fmt.Sprintf("Team %s, %d members; you are %s.", v.Name, len(out.Members), s.me.Name), err
		})
}

// addTool registers one tool whose input schema is inferred from In with
// the given property descriptions. call makes the core call and returns
// the structured result and a short text; a core error becomes a refusal.
func addTool[In any](s *session, name, description string, props map[string]string, call func(context.Context, In) (any, string, error)) {
	in, err := jsonschema.For[In](nil)
	if err != nil {
		panic(fmt.Sprintf("mcpserver: input schema of %s: %v", name, err)) // a programming error in the types above
	}
	for prop, desc := range props {
		if p := in.Properties[prop]; p != nil {
			p.Description = desc
		}
	}
	if name == "wait_for_mail" {
		lo, hi := 1.0, 60.0
		in.Properties["timeout_seconds"].Minimum = &lo
		in.Properties["timeout_seconds"].Maximum = &hi
	}
	mcp.AddTool(s.server, &mcp.Tool{Name: name, Description: description, InputSchema: in},
		func(ctx context.Context, _ *mcp.CallToolRequest, input In) (*mcp.CallToolResult, any, error) {
			// The session's member is the caller of every tool: core
			// checks its rights exactly as for a REST call with its token.
			ctx = s.as(ctx)
			out, text, err := call(ctx, input)
			if err != nil {
				return s.refuse(ctx, name, err)
			}
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: text}}}, out, nil
		})
}

// refuse turns a core error into a tool result with isError and the REST
// error word; a failure that is not a domain error is logged and answered
// with a generic text, as REST does.
func (s *session) refuse(ctx context.Context, tool string, err error) (*mcp.CallToolResult, any, error) {
	code := core.ErrorCode(err)
	if code == core.CodeInternal {
		code = "internal_error"
	}
	r := Refusal{Code: string(code), Detail: core.ErrorMessage(err)}
	if code == "internal_error" || code == core.CodeInboxCorrupt || code == core.CodeStorageFailed {
		s.log.ErrorContext(ctx, "mcp tool failed", "tool", tool, "code", code, "err", err)
	}
	return &mcp.CallToolResult{IsError: true, Content: []mcp.Content{&mcp.TextContent{Text: r.Code + ": " + r.Detail}}}, r, nil
}

func lettersText(msgs []core.Message) string {
	if len(msgs) == 0 {
		return "No letters."
	}
	return fmt.Sprintf("%d letters, the last %s.", len(msgs), msgs[len(msgs)-1].ID)
}

func repliesText(rs []core.MatchResult) string {
	var parts []string
	for _, r := range rs {
		if r.RequestID != "" {
			parts = append(parts, r.RequestID+" "+r.Status)
		}
	}
	if len(parts) == 0 {
		return fmt.Sprintf("%d letters, no replies to your requests.", len(rs))
	}
	return "Replies: " + strings.Join(parts, ", ") + "."
}

// inboxURI is the resource of one's own inbox.
func (s *session) inboxURI() string {
	return "mailroom://teams/" + s.me.Team + "/members/" + s.me.Name + "/inbox"
}

// ownInbox checks that uri is this member's inbox: another member's inbox
// is not a resource of this session.
func (s *session) ownInbox(uri string) error {
	u, err := url.Parse(uri)
	if err != nil || uri != s.inboxURI() || u.Scheme != "mailroom" {
		return mcp.ResourceNotFoundError(uri)
	}
	return nil
}

func (s *session) readInbox(ctx context.Context, req *mcp.ReadResourceRequest) (*mcp.ReadResourceResult, error) {
	if err := s.ownInbox(req.Params.URI); err != nil {
		return nil, err
	}
	msgs, err := s.svc.WaitInbox(s.as(ctx), s.me.Team, s.me.Name, "", 0)
	if err != nil {
		return nil, fmt.Errorf("%s: %s", core.ErrorCode(err), core.ErrorMessage(err))
	}
	b, err := json.Marshal(inboxOutput{Messages: msgs})
	if err != nil {
		return nil, err
	}
	return &mcp.ReadResourceResult{Contents: []*mcp.ResourceContents{{URI: req.Params.URI, MIMEType: "application/json", Text: string(b)}}}, nil
}

// subscribe starts watching one's inbox: each new letter sends
// notifications/resources/updated, woken by the same change notification
// as the long poll.
func (s *session) subscribe(_ context.Context, req *mcp.SubscribeRequest) error {
	if err := s.ownInbox(req.Params.URI); err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, ok := s.subs[req.Params.URI]; ok {
		return nil
	}
	n, changed, stop, release, err := s.svc.WatchInbox(s.as(s.ctx), s.me.Team, s.me.Name)
	if err != nil {
		return fmt.Errorf("%s: %s", core.ErrorCode(err), core.ErrorMessage(err))
	}
	ctx, cancel := context.WithCancel(s.ctx)
	s.subs[req.Params.URI] = cancel
	go s.watch(ctx, req.Params.URI, n, changed, stop, release)
	return nil
}

func (s *session) unsubscribe(_ context.Context, req *mcp.UnsubscribeRequest) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if cancel, ok := s.subs[req.Params.URI]; ok {
		cancel()
		delete(s.subs, req.Params.URI)
	}
	return nil
}

// watch tells the subscriber of every letter after the first n, until the
// subscription or the session ends or the server stops.
func (s *session) watch(ctx context.Context, uri string, seen int, changed, stop <-chan struct{}, release func()) {
	for {
		select {
		case <-changed:
		case <-ctx.Done():
			release()
			return
		case <-stop:
			release()
			return
		}
		release()
		var n int
		var err error
		n, changed, stop, release, err = s.svc.WatchInbox(s.as(ctx), s.me.Team, s.me.Name)
		if err != nil {
			s.log.WarnContext(ctx, "mcp inbox subscription ended", "code", core.ErrorCode(err))
			return
		}
		if n > seen {
			seen = n
			if err := s.server.ResourceUpdated(ctx, &mcp.ResourceUpdatedNotificationParams{URI: uri}); err != nil {
				s.log.DebugContext(ctx, "mcp resource update not sent", "err", err)
			}
		}
	}
}

// schemaRefusals gives the SDK's own refusals of a call, made before the
// handler when the arguments do not match the input schema (a missing or
// unknown field, a wrong type), the same structured shape as core's:
// validation_failed, as REST answers a body that does not match its schema.
func schemaRefusals(next mcp.MethodHandler) mcp.MethodHandler {
	return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
		res, err := next(ctx, method, req)
		if r, ok := res.(*mcp.CallToolResult); ok && err == nil && r.IsError && r.StructuredContent == nil {
			r.StructuredContent = Refusal{Code: string(core.CodeValidation), Detail: "The arguments do not match the tool's input schema."}
			r.Content = []mcp.Content{&mcp.TextContent{Text: string(core.CodeValidation) + ": " + textContent(r)}}
		}
		return res, err
	}
}

func textContent(r *mcp.CallToolResult) string {
	var parts []string
	for _, c := range r.Content {
		if t, ok := c.(*mcp.TextContent); ok {
			parts = append(parts, t.Text)
		}
	}
	return strings.Join(parts, " ")
}
