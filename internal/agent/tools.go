package agent

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"strings"
	"unicode/utf8"

	"mailroom/internal/core"
	"mailroom/internal/workspace"
)

// Tool names (docs/spec.md §13.12).
const (
	ToolReadFile    = "read_file"
	ToolSendMessage = "send_message"
	ToolSubmitPlan  = "submit_plan"
	ToolReviewPlan  = "review_plan"
	ToolRunMain     = "run_main"
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
	// Runner runs run_main's program (workspace.Default when nil).
	Runner *workspace.Runner
}

// DefaultTools is the tool set of a turn outside any scenario: mail for
// everyone, plans for teammates and plan reviews for lead. The workspace
// tools need a workspace and are not offered.
func DefaultTools(member string) ToolSet {
	return ToolSet{Names: offeredNames(member, false)}
}

// WorkspaceTools is the tool set of a turn of a team with a workspace
// (the directory workspace): DefaultTools plus read_file for everyone and
// run_main for teammates, as in the lesson, whose host gate is the team's
// host_permission, and whose schemas state the team's limits. Lead gets
// no run_main: the plan gate needs a plan the
// member sent to lead, which lead cannot.
func WorkspaceTools(member, workspace string, limits core.Limits) ToolSet {
	return ToolSet{Names: offeredNames(member, true), Limits: &limits, Workspace: workspace, AskHost: true}
}

// limits are the bounds the tool schemas state: the team's when set, the
// lesson's otherwise.
func (set ToolSet) limits() core.Limits {
	if set.Limits != nil {
		return *set.Limits
	}
	return core.DefaultLimits()
}

// env is the registry's environment of set's tools over svc.
func (set ToolSet) env(svc *core.Service) Env {
	return Env{Svc: svc, Limits: set.limits(), Workspace: set.Workspace, Runner: set.Runner, AskHost: set.AskHost, AllowRun: set.AllowRun, PlanID: set.PlanID}
}

// Specs returns the specs of the tools in set, in order, taken from the
// registry (Registry); unknown names are skipped. With set.Limits the
// bounds they state are the team's.
func (set ToolSet) Specs() []ToolSpec {
	tools := Registry(set.env(nil))
	out := make([]ToolSpec, 0, len(set.Names))
	for _, n := range set.Names {
		if t, ok := Lookup(tools, DoorAgent, n); ok {
			out = append(out, t.Spec())
		}
	}
	return out
}

// offeredNames are the names of the agent's tools offered to member.
func offeredNames(member string, workspace bool) []string {
	var names []string
	for _, t := range Offered(Registry(Env{Limits: core.DefaultLimits()}), DoorAgent, member, workspace) {
		names = append(names, t.Name)
	}
	return names
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

// modelResult is what the model reads of a registry tool's answer: the
// result's JSON (or its text), a tool's own refusal as it words it, and an
// error of core as its code and user-safe message, never internal text.
func modelResult(res Result, err error) toolResult {
	var te *ToolError
	switch {
	case errors.As(err, &te):
		return toolResult{content: te.Message, isError: true, refused: te.Gate, ran: te.Ran}
	case err != nil:
		return fail("%s: %s", core.ErrorCode(err), core.ErrorMessage(err))
	case res.ModelReadsText:
		return toolResult{content: res.Text, ran: res.Ran}
	}
	b, jerr := json.Marshal(res.Value)
	if jerr != nil {
		return fail("internal: the result could not be encoded")
	}
	return toolResult{content: string(b), ran: res.Ran}
}

// host runs tool calls for one member of one team.
type host struct {
	svc    *core.Service
	team   string
	member string
	set    ToolSet
}

// call runs the registry's tool name as the member of the turn: the
// member is the caller in ctx, so core checks its rights.
func (h host) call(ctx context.Context, name string, input json.RawMessage) toolResult {
	tool, ok := Lookup(Registry(h.set.env(h.svc)), DoorAgent, name)
	if !h.set.offers(name) || !ok {
		return fail("unknown tool %q: this turn offers %s", keptName(name), strings.Join(h.set.Names, ", "))
	}
	return modelResult(tool.Handler(core.AsMember(ctx, h.team, h.member), input))
}

// fileOutput is read_file's structured result.
type fileOutput struct {
	Path    string `json:"path"`
	Content string `json:"content"`
}

// runOutput is run_main's structured result.
type runOutput struct {
	Output string `json:"output"`
}

func (r registry) readFile(_ context.Context, input json.RawMessage) (Result, error) {
	var in struct {
		Path *string `json:"path"`
	}
	if err := decode(ToolReadFile, input, &in); err != nil {
		return Result{}, err
	}
	if in.Path == nil {
		return Result{}, toolErr(core.CodeValidation, "read_file: path is required")
	}
	content, err := r.readPath(*in.Path)
	if err != nil {
		return Result{}, err
	}
	return Result{Value: fileOutput{Path: shownPath(*in.Path), Content: content}, Text: content, ModelReadsText: true}, nil
}

// readPath reads path inside the workspace: a regular file only, opened
// without blocking (workspace.OpenRegular). Absolute paths and ".."
// components are refused up front with a clear reason; os.Root then
// guarantees that no symbolic link leads outside the workspace.
func (r registry) readPath(path string) (string, error) {
	if r.env.Workspace == "" {
		return "", toolErr(core.CodeNotFound, "read_file: this team has no workspace")
	}
	if err := workspace.CheckPath(path); err != nil {
		return "", toolErr(core.CodeValidation, "read_file: %v", err)
	}
	data, err := workspace.ReadFile(r.env.Workspace, path, workspace.MaxReadBytes)
	// The messages below name the path; a long one is cut, since a
	// result is kept in the member's history.
	shown := shownPath(path)
	switch {
	case err == nil:
		return string(data), nil
	case errors.Is(err, workspace.ErrNoWorkspace):
		return "", toolErr(core.CodeNotFound, "read_file: the workspace is not available")
	case errors.Is(err, fs.ErrNotExist):
		return "", toolErr(core.CodeNotFound, "read_file: %s does not exist in the workspace", shown)
	case errors.Is(err, workspace.ErrNotRegular):
		return "", toolErr(core.CodeValidation, "read_file: %s is not a regular file", shown)
	case errors.Is(err, workspace.ErrTooLarge):
		return "", toolErr(core.CodeValidation, "read_file: %s is larger than %d bytes", shown, workspace.MaxReadBytes)
	default:
		return "", toolErr(core.CodeValidation, "read_file: %s cannot be opened inside the workspace (links out of it are refused)", shown)
	}
}

// runMain applies the two gates of docs/spec.md §4.13 in order, the plan
// gate and then the host's permission, and only then runs the fixed
// program. Both gates judge the caller in ctx.
func (r registry) runMain(ctx context.Context, input json.RawMessage) (Result, error) {
	if err := decode(ToolRunMain, input, &struct{}{}); err != nil {
		return Result{}, err
	}
	team, member, err := callerOf(ctx)
	if err != nil {
		return Result{}, err
	}
	planID, reason := r.planGate(ctx, team, member)
	if reason != "" {
		return Result{}, &ToolError{Code: CodePlanGate, Message: "plan gate: " + reason, Gate: GatePlan}
	}
	if err := r.hostGate(ctx, team, member, planID, input); err != nil {
		return Result{}, err
	}
	ws := r.env.Workspace
	if ws == "" {
		return Result{}, toolErr(core.CodeNotFound, "run_main: this team has no workspace")
	}
	runner := r.env.Runner
	if runner == nil {
		runner = workspace.Default()
	}
	out, err := runner.Run(ctx, ws, workspace.QuotaOf(r.env.Limits))
	var re *workspace.RunError
	switch {
	case errors.As(err, &re):
		return Result{}, toolErr(re.Code, "run_main: %s", re.Message)
	case err != nil:
		return Result{}, toolErr(CodeRunFailed, "run_main: %s could not be started", workspace.Program)
	case out.WorkspaceFull:
		return Result{}, &ToolError{Code: core.CodeWorkspaceFull, Message: fmt.Sprintf("run_main: %s wrote past the workspace's quota (limits.workspace_bytes %d, limits.workspace_files %d); what it added was removed and what it grew cut back; output: %s", workspace.Program, r.env.Limits.WorkspaceBytes, r.env.Limits.WorkspaceFiles, out.Output), Ran: true}
	case out.TimedOut:
		return Result{}, &ToolError{Code: CodeRunFailed, Message: fmt.Sprintf("run_main: %s did not finish within %s; output: %s", workspace.Program, workspace.RunTimeout, out.Output), Ran: true}
	case out.Signal != "":
		return Result{}, &ToolError{Code: CodeRunFailed, Message: fmt.Sprintf("run_main: %s was ended by signal %s; output: %s", workspace.Program, out.Signal, out.Output), Ran: true}
	case out.ExitCode != 0:
		return Result{}, &ToolError{Code: CodeRunFailed, Message: fmt.Sprintf("run_main: %s exited with status %d; output: %s%s", workspace.Program, out.ExitCode, out.Output, stderrOf(out)), Ran: true}
	}
	return Result{Value: runOutput{Output: out.Output}, Text: out.Output, ModelReadsText: true, Ran: true}, nil
}

// stderrOf is what a failed run's message quotes of the program's
// standard error: its last lines (a traceback ends with its cause), ""
// when it wrote none.
func stderrOf(out workspace.Outcome) string {
	if tail := out.StderrTail(maxStderrQuoted); tail != "" {
		return "; stderr: " + tail
	}
	return ""
}

// maxStderrQuoted bounds the stderr a failed run's message quotes.
const maxStderrQuoted = 1000

// hostGate asks the host's permission for member's run_main that passed
// the plan gate under plan planID: nil when the program may run, and
// otherwise the refusal.
func (r registry) hostGate(ctx context.Context, team, member, planID string, input json.RawMessage) error {
	denied := func(why string) error {
		return &ToolError{Code: CodeHostGate, Message: "host permission: the host denied running " + workspace.Program + why, Gate: GateHost}
	}
	if !r.env.AskHost {
		if r.env.AllowRun {
			return nil
		}
		return denied(" (decision deny)")
	}
	if len(input) == 0 {
		input = json.RawMessage(`{}`)
	}
	// The permission is recorded as a step of the turn in ctx, if any.
	ans, err := r.env.Svc.AskHost(ctx, team, member, ToolRunMain, input, planID, nil)
	if err != nil {
		return &ToolError{Code: CodeHostGate, Message: "host permission: the permission could not be asked (" + string(core.ErrorCode(err)) + ")", Gate: GateHost}
	}
	if ans.Allowed {
		return nil
	}
	switch {
	case ans.Permission == nil:
		return denied(": the team's host_permission is " + ans.Policy)
	case ans.Permission.Status == core.PermissionExpired:
		return denied(fmt.Sprintf(": permission %s expired unanswered, which counts as a denial", ans.Permission.ID))
	default:
		return denied(fmt.Sprintf(": permission %s was denied by %s", ans.Permission.ID, deref(ans.Permission.DecidedBy, "the host")))
	}
}

func deref(p *string, otherwise string) string {
	if p == nil {
		return otherwise
	}
	return *p
}

// planGate returns the approved plan's request id, or why the plan gate
// refuses when member has no approved plan: a plan request it sent whose
// reply it has matched.
func (r registry) planGate(ctx context.Context, team, member string) (string, string) {
	reqs, err := r.env.Svc.Requests(ctx, team)
	if err != nil {
		return "", "the request table is not available"
	}
	planID := r.env.PlanID
	var plan *core.Request
	for i := range reqs {
		req := &reqs[i]
		if planID != "" {
			if req.ID == planID {
				plan = req
			}
		} else if req.Kind == core.KindPlan && req.Sender == member {
			plan = req // the most recent plan wins: an older approval cannot unlock a run
		}
	}
	switch {
	case plan == nil && planID != "":
		return "", fmt.Sprintf("no request %s", planID)
	case plan == nil:
		return "", fmt.Sprintf("%s has submitted no plan", member)
	case plan.Kind != core.KindPlan || plan.Sender != member:
		return "", fmt.Sprintf("%s is not a plan submitted by %s", plan.ID, member)
	case plan.Status == core.RequestApproved:
		return plan.ID, ""
	case plan.Status == core.RequestRejected:
		return "", fmt.Sprintf("plan %s was rejected", plan.ID)
	case plan.Reply != nil:
		return "", fmt.Sprintf("plan %s is still pending: a reply was sent but %s has not matched it", plan.ID, member)
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
