package agent

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"
	"unicode/utf8"

	"mailroom/internal/core"
)

// Tool names (docs/spec.md §13.12).
const (
	ToolReadFile    = "read_file"
	ToolSendMessage = "send_message"
	ToolSubmitPlan  = "submit_plan"
	ToolReviewPlan  = "review_plan"
	ToolRunMain     = "run_main"
)

// Bounds of the workspace tools.
const (
	// MaxReadBytes is the largest file read_file returns.
	MaxReadBytes = 64 << 10
	// MaxOutputBytes is the most of run_main's stdout kept.
	MaxOutputBytes = 64 << 10
	// RunTimeout bounds one run of the fixed program.
	RunTimeout = 10 * time.Second
	// Program is the workspace's fixed program; run_main runs nothing else.
	Program = "main.py"
)

// Gates that can refuse run_main, named in ToolCall.Refused.
const (
	GatePlan = "plan"
	GateHost = "host"
)

// ToolSet is the host's configuration of one turn's tools. The model sees
// only the tools named here; identity (the sender of a message or request,
// the actor of a reply) is always the member running the turn and never
// comes from the model's input.
type ToolSet struct {
	// Names lists the tools offered, in the order the model sees them.
	Names []string
	// Workspace is the directory read_file and run_main work in. The
	// workspace tools refuse every call when it is empty.
	Workspace string
	// AllowRun is the host's permission decision for run_main, taken
	// only after the plan gate has let the call through. A scenario run
	// sets it from its decision option; AskHost replaces it.
	AllowRun bool
	// Limits, when not nil, are the team's limits: the tool schemas then
	// state the team's own bounds of a letter, a plan and a feedback
	// instead of the lesson's.
	Limits *core.Limits
	// AskHost, when set, answers run_main's host gate by the team's
	// host_permission instead of AllowRun: at once under allow or deny,
	// and under ask by a person, the turn waiting for the decision
	// (core.Service.AskHost).
	AskHost bool
	// PlanID, when set, is the plan request whose approval the plan gate
	// requires; otherwise it is the member's most recent plan request.
	PlanID string
}

// DefaultTools is the tool set of a turn outside any scenario: mail for
// everyone, plans for teammates and plan reviews for lead. The workspace
// tools need a workspace and are not offered.
func DefaultTools(member string) ToolSet {
	if member == core.LeadName {
		return ToolSet{Names: []string{ToolSendMessage, ToolReviewPlan}}
	}
	return ToolSet{Names: []string{ToolSendMessage, ToolSubmitPlan}}
}

// WorkspaceTools is the tool set of a turn of a team with a workspace
// (the directory workspace): DefaultTools plus read_file for everyone and
// run_main for teammates, as in the lesson, whose host gate is the team's
// host_permission, and whose schemas state the team's limits. Lead gets
// no run_main: the plan gate needs a plan the
// member sent to lead, which lead cannot.
func WorkspaceTools(member, workspace string, limits core.Limits) ToolSet {
	set := DefaultTools(member)
	set.Limits = &limits
	set.Names = append(set.Names, ToolReadFile)
	if member != core.LeadName {
		set.Names = append(set.Names, ToolRunMain)
	}
	set.Workspace = workspace
	set.AskHost = true
	return set
}

var toolSpecs = map[string]ToolSpec{
	ToolReadFile: {
		Name:        ToolReadFile,
		Description: "Read a text file of the run's workspace (at most 64 KiB). The path is relative to the workspace.",
		InputSchema: json.RawMessage(`{"type":"object","properties":{"path":{"type":"string","description":"a relative path inside the workspace, e.g. main.py"}},"required":["path"],"additionalProperties":false}`),
	},
	ToolSendMessage: {
		Name:        ToolSendMessage,
		Description: "Mail a teammate. The letter is queued in the recipient's inbox; queued does not mean read.",
		InputSchema: json.RawMessage(`{"type":"object","properties":{"to":{"type":"string","description":"the recipient's member name"},"body":{"type":"string","description":"the letter, 1 to 600 characters"}},"required":["to","body"],"additionalProperties":false}`),
	},
	ToolSubmitPlan: {
		Name:        ToolSubmitPlan,
		Description: "Submit a plan to lead for approval. The request stays pending until you see lead's reply.",
		InputSchema: json.RawMessage(`{"type":"object","properties":{"payload":{"type":"string","description":"the plan, 1 to 180 characters"}},"required":["payload"],"additionalProperties":false}`),
	},
	ToolReviewPlan: {
		Name:        ToolReviewPlan,
		Description: "Approve or reject a plan request addressed to you. A decision, once sent, cannot change.",
		InputSchema: json.RawMessage(`{"type":"object","properties":{"request_id":{"type":"string","description":"the plan's request id, e.g. req-1"},"approve":{"type":"boolean"},"feedback":{"type":"string","description":"at most 120 characters"}},"required":["request_id","approve"],"additionalProperties":false}`),
	},
	ToolRunMain: {
		Name:        ToolRunMain,
		Description: "Run the workspace's fixed program (python3 main.py) and return its output. Needs an approved plan and the host's permission.",
		InputSchema: json.RawMessage(`{"type":"object","properties":{},"additionalProperties":false}`),
	},
}

// Specs returns the specs of the tools in set, in order; unknown names
// are skipped. With set.Limits the bounds they state are the team's.
func (set ToolSet) Specs() []ToolSpec {
	out := make([]ToolSpec, 0, len(set.Names))
	for _, n := range set.Names {
		if s, ok := toolSpecs[n]; ok {
			if set.Limits != nil {
				s = limitedSpec(s, *set.Limits)
			}
			out = append(out, s)
		}
	}
	return out
}

// limitedSpec is spec with the bounds of its schema taken from limits.
func limitedSpec(spec ToolSpec, l core.Limits) ToolSpec {
	switch spec.Name {
	case ToolSendMessage:
		spec.InputSchema = json.RawMessage(fmt.Sprintf(`{"type":"object","properties":{"to":{"type":"string","description":"the recipient's member name"},"body":{"type":"string","description":"the letter, 1 to %d characters","minLength":1,"maxLength":%d}},"required":["to","body"],"additionalProperties":false}`, l.BodyChars, l.BodyChars))
	case ToolSubmitPlan:
		spec.InputSchema = json.RawMessage(fmt.Sprintf(`{"type":"object","properties":{"payload":{"type":"string","description":"the plan, 1 to %d characters","minLength":1,"maxLength":%d}},"required":["payload"],"additionalProperties":false}`, l.PayloadChars, l.PayloadChars))
	case ToolReviewPlan:
		spec.InputSchema = json.RawMessage(fmt.Sprintf(`{"type":"object","properties":{"request_id":{"type":"string","description":"the plan's request id, e.g. req-1"},"approve":{"type":"boolean"},"feedback":{"type":"string","description":"at most %d characters","maxLength":%d}},"required":["request_id","approve"],"additionalProperties":false}`, l.FeedbackChars, l.FeedbackChars))
	}
	return spec
}

func (set ToolSet) offers(name string) bool {
	for _, n := range set.Names {
		if n == name {
			return true
		}
	}
	return false
}

// toolResult is what one tool call returns to the model.
type toolResult struct {
	content string
	isError bool
	refused string // GatePlan or GateHost when run_main was refused
	ran     bool   // the program was started
}

func fail(format string, args ...any) toolResult {
	return toolResult{content: fmt.Sprintf(format, args...), isError: true}
}

// domainFailure turns an error of core into a tool result that names the
// error code and its user-safe message, never internal text.
func domainFailure(err error) toolResult {
	return fail("%s: %s", core.ErrorCode(err), core.ErrorMessage(err))
}

func okJSON(v any) toolResult {
	b, err := json.Marshal(v)
	if err != nil {
		return fail("internal: the result could not be encoded")
	}
	return toolResult{content: string(b)}
}

// host runs tool calls for one member of one team.
type host struct {
	svc    *core.Service
	team   string
	member string
	set    ToolSet
}

func (h host) call(ctx context.Context, name string, input json.RawMessage) toolResult {
	if !h.set.offers(name) {
		return fail("unknown tool %q: this turn offers %s", keptName(name), strings.Join(h.set.Names, ", "))
	}
	switch name {
	case ToolReadFile:
		var in struct {
			Path *string `json:"path"`
		}
		if err := decodeInput(input, &in); err != nil {
			return fail("read_file: %v", err)
		}
		if in.Path == nil {
			return fail("read_file: path is required")
		}
		return h.readFile(*in.Path)
	case ToolSendMessage:
		var in struct {
			To   *string `json:"to"`
			Body *string `json:"body"`
		}
		if err := decodeInput(input, &in); err != nil {
			return fail("send_message: %v", err)
		}
		if in.To == nil || in.Body == nil {
			return fail("send_message: to and body are required")
		}
		res, err := h.svc.Send(core.AsMember(ctx, h.team, h.member), core.SendInput{Team: h.team, To: *in.To, Body: *in.Body})
		if err != nil {
			return domainFailure(err)
		}
		return okJSON(res)
	case ToolSubmitPlan:
		var in struct {
			Payload *string `json:"payload"`
		}
		if err := decodeInput(input, &in); err != nil {
			return fail("submit_plan: %v", err)
		}
		if in.Payload == nil {
			return fail("submit_plan: payload is required")
		}
		res, err := h.svc.OpenRequest(core.AsMember(ctx, h.team, h.member), core.OpenInput{Team: h.team, Target: core.LeadName, Kind: core.KindPlan, Payload: *in.Payload})
		if err != nil {
			return domainFailure(err)
		}
		return okJSON(res)
	case ToolReviewPlan:
		var in struct {
			RequestID *string `json:"request_id"`
			Approve   *bool   `json:"approve"`
			Feedback  string  `json:"feedback"`
		}
		if err := decodeInput(input, &in); err != nil {
			return fail("review_plan: %v", err)
		}
		if in.RequestID == nil || in.Approve == nil {
			return fail("review_plan: request_id and a boolean approve are required")
		}
		res, err := h.svc.Reply(core.AsMember(ctx, h.team, h.member), core.ReplyInput{Team: h.team, RequestID: *in.RequestID, Approve: *in.Approve, Feedback: in.Feedback})
		if err != nil {
			return domainFailure(err)
		}
		return okJSON(res)
	case ToolRunMain:
		if err := decodeInput(input, &struct{}{}); err != nil {
			return fail("run_main: %v", err)
		}
		return h.runMain(ctx, input)
	}
	return fail("unknown tool %q", keptName(name))
}

// decodeInput decodes a tool input strictly: one JSON object with no
// field the tool does not define, so that a model cannot smuggle in an
// identity such as a sender.
func decodeInput(input json.RawMessage, v any) error {
	if len(bytes.TrimSpace(input)) == 0 {
		input = json.RawMessage(`{}`)
	}
	dec := json.NewDecoder(bytes.NewReader(input))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return errors.New("the input is not a JSON object with the tool's fields and types")
	}
	if _, err := dec.Token(); err != io.EOF {
		return errors.New("the input holds more than one JSON value")
	}
	return nil
}

// CheckWorkspacePath refuses, with a reason a model or a client can act
// on, a path that is not a plain relative path inside a workspace: empty,
// holding a NUL, absolute, or with a ".." component. What it lets through
// is still opened through os.Root, which refuses whatever a symbolic link
// would lead out of the workspace.
func CheckWorkspacePath(path string) error {
	if path == "" || strings.ContainsRune(path, 0) {
		return errors.New("the path must be a non-empty relative path")
	}
	if filepath.IsAbs(path) || strings.HasPrefix(path, "/") || strings.HasPrefix(path, `\`) {
		return errors.New("absolute paths are not allowed; give a path relative to the workspace")
	}
	for _, part := range strings.FieldsFunc(path, func(r rune) bool { return r == '/' || r == '\\' }) {
		if part == ".." {
			return errors.New("paths may not contain a .. component")
		}
	}
	return nil
}

// readFile reads path inside the workspace. Absolute paths and ".."
// components are refused up front with a clear reason; os.Root then
// guarantees that no symbolic link leads outside the workspace.
func (h host) readFile(path string) toolResult {
	if h.set.Workspace == "" {
		return fail("read_file: this turn has no workspace")
	}
	if err := CheckWorkspacePath(path); err != nil {
		return fail("read_file: %v", err)
	}
	root, err := os.OpenRoot(h.set.Workspace)
	if err != nil {
		return fail("read_file: the workspace is not available")
	}
	defer root.Close()
	f, err := root.Open(path)
	// The messages below name the path; a long one is cut, since a
	// result is kept in the member's history.
	path = shownPath(path)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return fail("read_file: %s does not exist in the workspace", path)
		}
		return fail("read_file: %s cannot be opened inside the workspace (links out of it are refused)", path)
	}
	defer f.Close()
	info, err := f.Stat()
	if err != nil || !info.Mode().IsRegular() {
		return fail("read_file: %s is not a regular file", path)
	}
	data, err := io.ReadAll(io.LimitReader(f, MaxReadBytes+1))
	if err != nil {
		return fail("read_file: %s could not be read", path)
	}
	if len(data) > MaxReadBytes {
		return fail("read_file: %s is larger than %d bytes", path, MaxReadBytes)
	}
	return toolResult{content: string(data)}
}

// runMain applies the two gates of docs/spec.md §4.13 in order, the plan gate and
// then the host's permission, and only then runs the fixed program.
func (h host) runMain(ctx context.Context, input json.RawMessage) toolResult {
	planID, reason := h.planGate(ctx)
	if reason != "" {
		return toolResult{content: "plan gate: " + reason, isError: true, refused: GatePlan}
	}
	if refused, ok := h.hostGate(ctx, planID, input); !ok {
		return refused
	}
	if h.set.Workspace == "" {
		return fail("run_main: this turn has no workspace")
	}
	root, err := os.OpenRoot(h.set.Workspace)
	if err != nil {
		return fail("run_main: the workspace is not available")
	}
	info, err := root.Lstat(Program)
	root.Close()
	if err != nil || !info.Mode().IsRegular() {
		return fail("run_main: the workspace has no regular %s", Program)
	}
	runCtx, cancel := context.WithTimeout(ctx, RunTimeout)
	defer cancel()
	// Fixed argv, no shell, the workspace as working directory and an
	// environment holding nothing but PATH.
	cmd := exec.CommandContext(runCtx, "python3", Program)
	cmd.Dir = h.set.Workspace
	cmd.Env = []string{"PATH=" + os.Getenv("PATH")}
	cmd.WaitDelay = time.Second
	var stdout cappedBuffer
	stdout.max = MaxOutputBytes
	cmd.Stdout = &stdout
	err = cmd.Run()
	switch {
	case runCtx.Err() == context.DeadlineExceeded:
		return toolResult{content: fmt.Sprintf("run_main: %s did not finish within %s", Program, RunTimeout), isError: true, ran: true}
	case err != nil:
		var exit *exec.ExitError
		if errors.As(err, &exit) {
			return toolResult{content: fmt.Sprintf("run_main: %s exited with status %d; output: %s", Program, exit.ExitCode(), stdout.String()), isError: true, ran: true}
		}
		return fail("run_main: %s could not be started", Program)
	}
	return toolResult{content: stdout.String(), ran: true}
}

// hostGate asks the host's permission for a run_main that passed the
// plan gate under plan planID. It reports whether the program may run,
// and otherwise the result that refuses it.
func (h host) hostGate(ctx context.Context, planID string, input json.RawMessage) (toolResult, bool) {
	if !h.set.AskHost {
		if h.set.AllowRun {
			return toolResult{}, true
		}
		return toolResult{content: "host permission: the host denied running " + Program + " (decision deny)", isError: true, refused: GateHost}, false
	}
	if len(input) == 0 {
		input = json.RawMessage(`{}`)
	}
	// The permission is recorded as a step of the turn in ctx, if any.
	ans, err := h.svc.AskHost(ctx, h.team, h.member, ToolRunMain, input, planID, nil)
	if err != nil {
		return toolResult{content: "host permission: the permission could not be asked (" + string(core.ErrorCode(err)) + ")", isError: true, refused: GateHost}, false
	}
	if ans.Allowed {
		return toolResult{}, true
	}
	var why string
	switch {
	case ans.Permission == nil:
		why = "the team's host_permission is " + ans.Policy
	case ans.Permission.Status == core.PermissionExpired:
		why = fmt.Sprintf("permission %s expired unanswered, which counts as a denial", ans.Permission.ID)
	default:
		why = fmt.Sprintf("permission %s was denied by %s", ans.Permission.ID, deref(ans.Permission.DecidedBy, "the host"))
	}
	return toolResult{content: "host permission: the host denied running " + Program + ": " + why, isError: true, refused: GateHost}, false
}

func deref(p *string, otherwise string) string {
	if p == nil {
		return otherwise
	}
	return *p
}

// planGate returns the approved plan's request id, or why the plan gate
// refuses when the member has no approved plan: a plan request it sent
// whose reply it has matched.
func (h host) planGate(ctx context.Context) (string, string) {
	reqs, err := h.svc.Requests(ctx, h.team)
	if err != nil {
		return "", "the request table is not available"
	}
	var plan *core.Request
	for i := range reqs {
		r := &reqs[i]
		if h.set.PlanID != "" {
			if r.ID == h.set.PlanID {
				plan = r
			}
		} else if r.Kind == core.KindPlan && r.Sender == h.member {
			plan = r // the most recent plan wins: an older approval cannot unlock a run
		}
	}
	switch {
	case plan == nil && h.set.PlanID != "":
		return "", fmt.Sprintf("no request %s", h.set.PlanID)
	case plan == nil:
		return "", fmt.Sprintf("%s has submitted no plan", h.member)
	case plan.Kind != core.KindPlan || plan.Sender != h.member:
		return "", fmt.Sprintf("%s is not a plan submitted by %s", plan.ID, h.member)
	case plan.Status == core.RequestApproved:
		return plan.ID, ""
	case plan.Status == core.RequestRejected:
		return "", fmt.Sprintf("plan %s was rejected", plan.ID)
	case plan.Reply != nil:
		return "", fmt.Sprintf("plan %s is still pending: a reply was sent but %s has not matched it", plan.ID, h.member)
	default:
		return "", fmt.Sprintf("plan %s is still pending: no reply yet", plan.ID)
	}
}

// maxShownPath is the most of a path a tool result repeats back.
const maxShownPath = 256

// shownPath is path as a result names it: cut to maxShownPath bytes on a
// character boundary, with an ellipsis when cut.
func shownPath(path string) string {
	if len(path) <= maxShownPath {
		return path
	}
	cut := maxShownPath
	for cut > 0 && !utf8.RuneStart(path[cut]) {
		cut--
	}
	return path[:cut] + "…"
}

// cappedBuffer keeps the first max bytes written and drops the rest, so a
// chatty program cannot grow memory without bound.
type cappedBuffer struct {
	buf bytes.Buffer
	max int
}

func (b *cappedBuffer) Write(p []byte) (int, error) {
	if room := b.max - b.buf.Len(); room > 0 {
		if len(p) > room {
			b.buf.Write(p[:room])
		} else {
			b.buf.Write(p)
		}
	}
	return len(p), nil
}

func (b *cappedBuffer) String() string { return b.buf.String() }
