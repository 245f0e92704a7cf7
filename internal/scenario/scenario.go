// Package scenario runs the two lesson scenarios end to end on a real
// team: agent-teams (lesson 15, docs/spec.md §7: save mail, receive mail, continue
// the same teammate) and team-protocols (lesson 16, docs/spec.md §8: a plan is
// approved, matched and only then acted on, with host permission as a
// separate gate, then an idle-boundary shutdown).
//
// Each run creates its own team and its own workspace (the team's, under
// the server's workspaces directory), drives the teammates with scripted
// models (or, with Options.Model, a real model) through the one agent loop
// of package agent, checks what the lesson promises and keeps the result
// document in the store (core.Runs.Put): the file store's
// <data>/runs/<run_id>/result.json, or the database.
package scenario

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"mailroom/internal/agent"
	"mailroom/internal/core"
	"mailroom/internal/runtime"
	"mailroom/internal/workspace"
)

// Scenario names.
const (
	AgentTeams    = "agent-teams"
	TeamProtocols = "team-protocols"
)

// Option values of team-protocols.
const (
	PlanApprove    = "approve"
	PlanReject     = "reject"
	DecisionAllow  = "allow"
	DecisionDeny   = "deny"
	DefaultExpect  = "42"
	MaxStepMS      = agent.MaxWaitMS
	maxExpectChars = 32
)

// Options configure a run. agent-teams takes only StepMS; team-protocols
// takes all four. Empty strings mean the defaults: plan approve, decision
// deny, expected "42".
type Options struct {
	Plan     string `json:"plan,omitempty"`
	Decision string `json:"decision,omitempty"`
	Expected string `json:"expected,omitempty"`
	// StepMS slows every scripted model answer and every host step by
	// this many milliseconds, so a person can follow the live page.
	StepMS int `json:"step_ms,omitempty"`
	// Model, when set, drives every member instead of the script, with
	// the lesson's team, prompts, tools and workspace. Lead's model then
	// decides on the plan, so Plan is not taken; the host keeps Decision.
	// Checks that only the script can guarantee are reported as not
	// applicable. It is never stored: the document names it by its
	// ModelConfig when the model is an agent.Described.
	Model agent.Model `json:"-"`
}

// normalize applies defaults and validates opts for scenario name.
func (o Options) normalize(name string) (Options, error) {
	if o.StepMS < 0 || o.StepMS > MaxStepMS {
		return o, core.Errorf(core.CodeValidation, "step_ms must be within 0..%d.", MaxStepMS)
	}
	if name == AgentTeams {
		if o.Plan != "" || o.Decision != "" || o.Expected != "" {
			return o, core.Errorf(core.CodeValidation, "agent-teams takes only step_ms and model.")
		}
		return o, nil
	}
	if o.Model != nil && o.Plan != "" {
		return o, core.Errorf(core.CodeValidation, "With a model, lead's model decides on the plan: plan is not taken.")
	}
	if o.Plan == "" && o.Model == nil {
		o.Plan = PlanApprove
	}
	if o.Decision == "" {
		o.Decision = DecisionDeny
	}
	if o.Expected == "" {
		o.Expected = DefaultExpect
	}
	if o.Model == nil && o.Plan != PlanApprove && o.Plan != PlanReject {
		return o, core.Errorf(core.CodeValidation, "plan must be approve or reject.")
	}
	if o.Decision != DecisionAllow && o.Decision != DecisionDeny {
		return o, core.Errorf(core.CodeValidation, "decision must be allow or deny.")
	}
	if n := core.Length(o.Expected); n > maxExpectChars || core.Trim(o.Expected) != o.Expected || strings.ContainsFunc(o.Expected, isControl) {
		return o, core.Errorf(core.CodeValidation, "expected must be 1 to %d characters on one line, without surrounding spaces.", maxExpectChars)
	}
	return o, nil
}

func isControl(r rune) bool { return r < 0x20 || r == 0x7f }

// Info describes a scenario for the scenario list.
type Info struct {
	Name        string         `json:"name"`
	Title       string         `json:"title"`
	Description string         `json:"description"`
	Options     map[string]any `json:"options"`
}

// Scenarios lists the scenarios with their option defaults.
func Scenarios() []Info {
	return []Info{
		{
			Name:        AgentTeams,
			Title:       "Agent teams (lesson 15)",
			Description: "reader and reviewer work at the same time; reviewer mails reader the expected value; reader continues from its own earlier record without reading main.py again; lead summarises both reports. 9 model requests; mailboxes lead 2, reader 1, reviewer 0.",
			Options:     map[string]any{"step_ms": 0},
		},
		{
			Name:        TeamProtocols,
			Title:       "Team protocols (lesson 16)",
			Description: "reader submits a plan; lead approves or rejects it; reader matches the reply and only then works; running main.py also needs host permission; lead then closes reader at an idle boundary. 7 model requests and 4 protocol letters on every path.",
			Options:     map[string]any{"plan": PlanApprove, "decision": DecisionDeny, "expected": DefaultExpect, "step_ms": 0},
		},
	}
}

// Check is one named check of a run. A check that does not apply (on a
// run driven by a real model, one that only the script can guarantee)
// has OK true, Applicable false and a Detail that says why and what was
// seen; it never makes a run fail, and it never makes one pass either:
// the run's OK means that every applicable check held.
type Check struct {
	Name string `json:"name"`
	OK   bool   `json:"ok"`
	// Applicable is false for a check this run cannot make, true
	// otherwise; always written, never null.
	Applicable bool   `json:"applicable"`
	Detail     string `json:"detail"`
}

// UnmarshalJSON reads a stored check; one stored before checks said
// whether they applied (no applicable, or null) applied.
func (c *Check) UnmarshalJSON(data []byte) error {
	type plain Check
	var raw struct {
		plain
		Applicable *bool `json:"applicable"`
	}
	if err := json.Unmarshal(data, &raw); err != nil {
		return err
	}
	*c = Check(raw.plain)
	c.Applicable = raw.Applicable == nil || *raw.Applicable
	return nil
}

// Applies reports whether c was checked on this run.
func (c Check) Applies() bool { return c.Applicable }

// ProtocolOutcome is what the team-protocols run did with the program.
type ProtocolOutcome struct {
	Ran bool `json:"ran"`
	// RefusedBy is "plan" or "host" when run_main was refused, else nil.
	RefusedBy *string `json:"refused_by"`
	// Output is the program's stdout, trimmed, when it ran.
	Output   *string `json:"output"`
	Expected string  `json:"expected"`
	// Match compares Output with Expected; nil when the program did not run.
	Match *bool `json:"match"`
	// Counter is the program's counter file after the run ("" if absent).
	Counter string `json:"counter"`
}

// TeamsOutcome is what the agent-teams run left behind.
type TeamsOutcome struct {
	LeadLetters        int  `json:"lead_letters"`
	ReaderLetters      int  `json:"reader_letters"`
	ReviewerLetters    int  `json:"reviewer_letters"`
	ReaderRereadSource bool `json:"reader_reread_source"`
	// LeadSawReports counts lead's letters present in its model input.
	LeadSawReports int `json:"lead_saw_reports"`
}

// Result is a run's document (docs/api.md, Scenarios). Outcome is a
// *ProtocolOutcome or a *TeamsOutcome according to Scenario; it is nil
// while the run is in progress.
type Result struct {
	RunID    string `json:"run_id"`
	Scenario string `json:"scenario"`
	Team     string `json:"team"`
	OK       bool   `json:"ok"`
	// Model names the real model that drove the run; nil for the script.
	Model         *agent.ModelConfig        `json:"model,omitempty"`
	Checks        []Check                   `json:"checks"`
	ModelRequests int                       `json:"model_requests"`
	Outcome       any                       `json:"outcome"`
	Requests      []core.Request            `json:"requests"`
	Mailboxes     map[string][]core.Message `json:"mailboxes"`
}

// UnmarshalJSON reads a stored document, decoding Outcome into the type
// its scenario uses.
func (r *Result) UnmarshalJSON(data []byte) error {
	type plain Result
	var raw struct {
		plain
		Outcome json.RawMessage `json:"outcome"`
	}
	if err := json.Unmarshal(data, &raw); err != nil {
		return err
	}
	*r = Result(raw.plain)
	r.Outcome = nil
	if len(raw.Outcome) == 0 || string(raw.Outcome) == "null" {
		return nil
	}
	switch r.Scenario {
	case TeamProtocols:
		var o ProtocolOutcome
		if err := json.Unmarshal(raw.Outcome, &o); err != nil {
			return err
		}
		r.Outcome = &o
	case AgentTeams:
		var o TeamsOutcome
		if err := json.Unmarshal(raw.Outcome, &o); err != nil {
			return err
		}
		r.Outcome = &o
	default:
		return fmt.Errorf("scenario: unknown scenario %q in a stored result", r.Scenario)
	}
	return nil
}

// Config configures a Runner.
type Config struct {
	// OnStart, when set, is called right after a run's team is created,
	// so that the caller can announce the run while it is in progress.
	OnStart func(runID, team string)
	Logger  *slog.Logger
	// Runner runs run_main's program; nil means workspace.Default(). A
	// server passes the one its other doors use.
	Runner *workspace.Runner
	// Leases hold the runs' leases in this process; nil means leases of
	// the Runner's own. A server passes the ones its deletions ask
	// whether a run is in progress.
	Leases *runtime.RunLeases
}

// Runner runs scenarios and keeps their documents in the store
// (core.Runs, and the leases of Config.Leases): claimed
// with no result, under this process's lease, when a run starts, with its
// result when it ends. In memory it keeps only the runs of this process
// that have no stored result yet (in progress, or whose result could not
// be stored). A run without a result whose lease another replica holds is
// answered as in progress; one whose lease has expired, or that has none,
// as interrupted (docs/storage.md).
type Runner struct {
	svc        *core.Service
	docs       *core.Runs
	workspaces string
	cfg        Config
	log        *slog.Logger

	mu   sync.Mutex
	runs map[string]*Result
}

// NewRunner returns a Runner that creates its teams in svc, keeps its
// documents in svc's store and each run's workspace on this machine at
// workspaces/<run_id> (the run's team's workspace: the server's workspaces
// directory, <data>/workspaces by default).
func NewRunner(svc *core.Service, workspaces string, cfg Config) *Runner {
	log := cfg.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	if cfg.Runner == nil {
		cfg.Runner = workspace.Default()
	}
	if cfg.Leases == nil {
		cfg.Leases = runtime.NewRunLeases(svc.Runs(), log)
	}
	return &Runner{svc: svc, docs: svc.Runs(), workspaces: workspaces, cfg: cfg, log: log, runs: map[string]*Result{}}
}

// workspace is the directory of run id's workspace.
func (r *Runner) workspace(id string) string { return filepath.Join(r.workspaces, id) }

// ErrInterrupted is returned, wrapping the context's cause, by a run whose
// context ended before the run did. Its document is stored all the same:
// finished, not ok, with a failed CheckInterrupted first.
var ErrInterrupted = errors.New("scenario: the run was interrupted before its end")

// CheckInterrupted names the check that a run records when it was stopped
// before its end, by its context or by the end of the process.
const CheckInterrupted = "interrupted"

// Run runs scenario name with opts and returns its document. The run's
// team and workspace are created first; its id is the team's name. An
// unknown scenario is not_found, invalid options validation_failed. A
// check that fails is reported in the document, not as an error; an error
// means the run could not be carried out at all, or ctx ended
// (ErrInterrupted), and the document, as far as it got, is still stored.
func (r *Runner) Run(ctx context.Context, name string, opts Options) (Result, error) {
	if name != AgentTeams && name != TeamProtocols {
		return Result{}, core.Errorf(core.CodeNotFound, "No such scenario.")
	}
	opts, err := opts.normalize(name)
	if err != nil {
		return Result{}, err
	}
	// The run's team names the model that drives it, as a team created
	// over REST does: its document says who answers, not "scripted".
	var cfg *agent.ModelConfig
	var teamModel *core.ModelSettings
	if opts.Model != nil {
		c := agent.ModelConfig{Provider: "unnamed"}
		if d, ok := opts.Model.(agent.Described); ok {
			c = d.ModelConfig()
			teamModel = &core.ModelSettings{Provider: c.Provider, Name: c.Name, MaxTokens: c.MaxTokens}
		}
		cfg = &c
	}
	x, err := r.start(ctx, name, teamModel)
	if err != nil {
		return Result{}, err
	}
	x.stepMS = opts.StepMS
	x.opts = opts
	x.model = opts.Model
	if cfg != nil {
		r.mu.Lock()
		x.doc.Model = cfg
		r.mu.Unlock()
	}
	if r.cfg.OnStart != nil {
		r.cfg.OnStart(x.id, x.team)
	}
	expected := DefaultExpect
	if name == TeamProtocols {
		expected = opts.Expected
	}
	if err := writeWorkspace(x.ws, expected); err != nil {
		return r.finish(ctx, x, fmt.Errorf("scenario: write workspace: %w", err))
	}
	switch name {
	case AgentTeams:
		x.doc.Outcome = x.agentTeams(ctx)
	case TeamProtocols:
		x.doc.Outcome = x.teamProtocols(ctx)
	}
	return r.finish(ctx, x, nil)
}

// start claims a run id (the next free <scenario>-<n>) with its team and
// its stored document (no result yet), and registers the in-progress
// document. The team's creation is the claim: it fails for a name any
// process took, so two runs, of this process or another replica, never
// share an id.
func (r *Runner) start(ctx context.Context, name string, model *core.ModelSettings) (*run, error) {
	n, err := r.nextNumber(ctx, name)
	if err != nil {
		return nil, err
	}
	for tries := 0; tries < 100; tries, n = tries+1, n+1 {
		id := name + "-" + strconv.Itoa(n)
		if !core.ValidName(id) {
			break
		}
		// Registered at once: a stored run without a result that is not
		// registered is one that an earlier process left unfinished (see
		// Get).
		x := &run{svc: r.svc, log: r.log, programs: r.cfg.Runner, id: id, team: id, ws: r.workspace(id),
			doc: &Result{RunID: id, Scenario: name, Team: id, Checks: []Check{}, Requests: []core.Request{}, Mailboxes: map[string][]core.Message{}}}
		r.mu.Lock()
		if _, taken := r.runs[id]; taken {
			r.mu.Unlock()
			continue
		}
		r.runs[id] = x.doc
		r.mu.Unlock()
		var created []string
		var err error
		if name == TeamProtocols {
			if _, _, err = r.svc.CreateTeam(ctx, closeProofTeam(id)); err == nil {
				created = append(created, closeProofTeam(id).Name)
			}
		}
		if err == nil {
			spec := lessonTeam(id)
			spec.Model = model
			if _, _, err = r.svc.CreateTeam(ctx, spec); err == nil {
				created = append(created, id)
			}
		}
		if err == nil {
			// Claimed under this process's lease, renewed until finish:
			// every replica answers the run as in progress meanwhile.
			x.unlease, err = r.cfg.Leases.ClaimRun(ctx, id)
		}
		if err != nil {
			r.mu.Lock()
			delete(r.runs, id)
			r.mu.Unlock()
			// Nothing of a run that could not start is kept.
			admin := core.AsAdmin(context.WithoutCancel(ctx))
			for _, team := range created {
				if derr := r.svc.DeleteTeam(admin, team, nil); derr != nil {
					r.log.Warn("removing the team of a run that could not start failed", "team", team, "err", derr)
				}
			}
		}
		if core.ErrorCode(err) == core.CodeTeamExists {
			continue
		}
		if err != nil {
			return nil, err
		}
		return x, nil
	}
	return nil, core.Errorf(core.CodeTeamExists, "No free run name for this scenario.")
}

// nextNumber is one more than the largest n of the teams and stored runs
// named <scenario>-<n>.
func (r *Runner) nextNumber(ctx context.Context, name string) (int, error) {
	names := []string{}
	for _, t := range r.svc.Teams(ctx) {
		names = append(names, t.Name)
	}
	ids, err := r.docs.IDs(ctx)
	if err != nil {
		return 0, err
	}
	names = append(names, ids...)
	highest := 0
	for _, s := range names {
		rest, ok := strings.CutPrefix(s, name+"-")
		if !ok {
			continue
		}
		if v, err := strconv.Atoi(rest); err == nil && v > highest && strconv.Itoa(v) == rest {
			highest = v
		}
	}
	return highest + 1, nil
}

// finish completes the document from the team's final state, stores it
// and returns it. A run whose ctx has ended was cut short: it gets a
// failed interrupted check and returns ErrInterrupted.
func (r *Runner) finish(ctx context.Context, x *run, runErr error) (Result, error) {
	bg := context.WithoutCancel(ctx)
	if ctx.Err() != nil {
		cause := context.Cause(ctx)
		x.mu.Lock()
		x.checks = append([]Check{{Name: CheckInterrupted, OK: false,
			Detail: "The run was stopped before its end (the server began to stop, or the run was cancelled); the team, its mailboxes and the other checks show how far it got."}}, x.checks...)
		x.mu.Unlock()
		r.log.Warn("scenario run interrupted", "run", x.id, "cause", cause)
		runErr = errors.Join(runErr, fmt.Errorf("%w: %w", ErrInterrupted, cause))
	}
	doc := x.doc
	if reqs, err := r.svc.Requests(bg, x.team); err == nil {
		doc.Requests = reqs
	}
	if view, err := r.svc.Team(bg, x.team); err == nil {
		for _, m := range view.Members {
			box, err := r.svc.Inbox(bg, x.team, m.Name)
			if err != nil {
				x.check("mailboxes_readable", false, "the inbox of %s could not be read: %s", m.Name, core.ErrorMessage(err))
				continue
			}
			doc.Mailboxes[m.Name] = box
		}
	}
	doc.Checks = x.checks
	doc.ModelRequests = x.modelRequests
	doc.OK = runErr == nil && len(doc.Checks) > 0
	for _, c := range doc.Checks {
		doc.OK = doc.OK && (c.OK || !c.Applies())
	}
	out := cloneResult(doc)
	r.mu.Lock()
	r.runs[x.id] = &out
	r.mu.Unlock()
	err := r.store(bg, out)
	if x.unlease != nil {
		// Stored or not, this process no longer runs it.
		x.unlease()
	}
	if err != nil {
		// Kept in memory: this process answers it, and does not take it
		// for an interrupted run.
		r.log.Error("storing a run result failed", "run", x.id, "err", err)
		if runErr == nil {
			runErr = err
		}
	} else {
		r.mu.Lock()
		delete(r.runs, x.id)
		r.mu.Unlock()
	}
	r.log.Info("scenario run finished", "run", x.id, "scenario", out.Scenario, "ok", out.OK)
	return cloneResult(&out), runErr
}

// Get returns a run's document: the finished one, or the in-progress one
// (ok false, no checks yet) while the run is still going in this process.
// Any other run is read from the store.
func (r *Runner) Get(ctx context.Context, runID string) (Result, error) {
	if !core.ValidName(runID) {
		return Result{}, core.Errorf(core.CodeNotFound, "No such run.")
	}
	r.mu.Lock()
	doc, ok := r.runs[runID]
	var out Result
	if ok {
		out = cloneResult(doc)
	}
	r.mu.Unlock()
	if ok {
		return out, nil
	}
	stored, err := r.docs.Get(ctx, runID)
	if err != nil {
		return Result{}, err
	}
	if stored.Result == nil {
		if r.cfg.Leases.RunInProgress(stored) {
			return inProgress(runID), nil
		}
		return r.unfinished(ctx, runID)
	}
	return decodeRun(stored)
}

// inProgress is the document of a run in progress in another process
// (another replica holds its lease): as this process answers for its
// own runs in progress, ok false, no checks and no outcome yet.
func inProgress(runID string) Result {
	return Result{RunID: runID, Scenario: scenarioOf(runID), Team: runID, Checks: []Check{}, Requests: []core.Request{}, Mailboxes: map[string][]core.Message{}}
}

// decodeRun is the document of a stored run with a result.
func decodeRun(stored core.RunDoc) (Result, error) {
	var doc Result
	if err := json.Unmarshal(stored.Result, &doc); err != nil || doc.RunID != stored.ID {
		return Result{}, &core.Error{Code: core.CodeStorageFailed, Message: "The stored run result cannot be read.", Err: err}
	}
	return doc, nil
}

// unfinished answers for a run that is stored without a result and is in
// progress nowhere (no process holds its lease): the process that ran it
// ended while it ran (a kill, a crash, a power cut; on another replica,
// its lease expired). Its document is completed from its team as it was
// left, marked interrupted, stored, and returned from then on.
func (r *Runner) unfinished(ctx context.Context, runID string) (Result, error) {
	name := scenarioOf(runID)
	if name == "" {
		return Result{}, core.Errorf(core.CodeNotFound, "No such run.")
	}
	r.mu.Lock()
	if doc, ok := r.runs[runID]; ok {
		// Registered meanwhile: started or stored by this process.
		out := cloneResult(doc)
		r.mu.Unlock()
		return out, nil
	}
	x := &run{svc: r.svc, log: r.log, programs: r.cfg.Runner, id: runID, team: runID, ws: r.workspace(runID),
		doc: &Result{RunID: runID, Scenario: name, Team: runID, Checks: []Check{}, Requests: []core.Request{}, Mailboxes: map[string][]core.Message{}}}
	r.runs[runID] = x.doc
	r.mu.Unlock()
	// A run of this process may have stored its result and left memory
	// between the caller's read and the registration above, and a
	// replica whose renewal came late may hold the run again.
	if stored, err := r.docs.Get(ctx, runID); err != nil || stored.Result != nil || r.cfg.Leases.RunInProgress(stored) {
		r.mu.Lock()
		delete(r.runs, runID)
		r.mu.Unlock()
		switch {
		case err != nil:
			return Result{}, err
		case stored.Result == nil:
			return inProgress(runID), nil
		}
		return decodeRun(stored)
	}
	x.check(CheckInterrupted, false, "The server stopped before the run finished; the team and the mailboxes show how far it got.")
	doc, err := r.finish(context.WithoutCancel(ctx), x, nil)
	if err != nil {
		// Not stored: forgotten again, so that the next Get, in this
		// process or the next, tries to store it once more.
		r.mu.Lock()
		delete(r.runs, runID)
		r.mu.Unlock()
	}
	return doc, nil
}

// scenarioOf names the scenario of a run id (<scenario>-<n>), or "".
func scenarioOf(runID string) string {
	for _, name := range []string{AgentTeams, TeamProtocols} {
		if rest, ok := strings.CutPrefix(runID, name+"-"); ok && rest != "" {
			return name
		}
	}
	return ""
}

// Delete removes a run's document from the store and its workspace from
// this machine (all or nothing across a crash, workspace.Remove). A run that
// does not exist is not an error. The caller makes sure the run is not in
// progress; a deleted run's id can be used again.
func (r *Runner) Delete(ctx context.Context, runID string) error {
	if !core.ValidName(runID) {
		return nil
	}
	if err := r.docs.Delete(ctx, runID); err != nil {
		return err
	}
	left, err := workspace.Remove(r.workspace(runID))
	if err != nil {
		return err
	}
	if left != nil {
		r.log.WarnContext(ctx, "removing a deleted run's workspace files failed; the next start removes them", "run", runID, "err", left)
	}
	r.mu.Lock()
	delete(r.runs, runID)
	r.mu.Unlock()
	return nil
}

// cloneResult copies a document deeply enough that callers cannot change
// the runner's copy (outcomes are replaced, never mutated).
func cloneResult(d *Result) Result {
	out := *d
	out.Checks = append([]Check{}, d.Checks...)
	if d.Model != nil {
		m := *d.Model
		out.Model = &m
	}
	out.Requests = append([]core.Request{}, d.Requests...)
	for i, rq := range out.Requests {
		if rq.Reply != nil {
			rep := *rq.Reply
			out.Requests[i].Reply = &rep
		}
	}
	out.Mailboxes = make(map[string][]core.Message, len(d.Mailboxes))
	for k, v := range d.Mailboxes {
		out.Mailboxes[k] = append([]core.Message{}, v...)
	}
	return out
}

// store stores doc as its run's result, durably (core.Runs.Put).
func (r *Runner) store(ctx context.Context, doc Result) error {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	enc.SetIndent("", "  ")
	if err := enc.Encode(doc); err != nil {
		return core.StorageError(err)
	}
	return r.docs.Put(ctx, core.RunDoc{ID: doc.RunID, Result: buf.Bytes()})
}

// lessonTeam is the lessons' fixed team (docs/spec.md §1).
func lessonTeam(name string) core.TeamSpec {
	return core.TeamSpec{Name: name, Members: []core.MemberSpec{
		// The lesson's roles: summarise read-only evidence; read the source
		// and keep the investigation context; read the expected value and
		// notify reader.
		{Name: core.LeadName, Role: "汇总只读证据"},
		{Name: "reader", Role: "读取源码并保留调查上下文"},
		{Name: "reviewer", Role: "读取预期并通知reader"},
	}}
}

// run is one scenario run in progress.
type run struct {
	svc  *core.Service
	log  *slog.Logger
	id   string
	team string
	ws   string
	// programs runs run_main's program.
	programs *workspace.Runner
	stepMS   int
	opts     Options
	doc      *Result
	// model drives every member when set; nil means the script.
	model agent.Model
	// unlease ends the run's lease (runtime.RunLeases.ClaimRun); nil for a
	// run this process did not start.
	unlease func()

	mu            sync.Mutex
	checks        []Check
	modelRequests int
}

// check records a named check.
func (x *run) check(name string, ok bool, format string, args ...any) {
	x.mu.Lock()
	defer x.mu.Unlock()
	x.checks = append(x.checks, Check{Name: name, OK: ok, Applicable: true, Detail: fmt.Sprintf(format, args...)})
}

// notApplicable records a check that this run cannot make, with why.
func (x *run) notApplicable(name string, format string, args ...any) {
	x.mu.Lock()
	defer x.mu.Unlock()
	x.checks = append(x.checks, Check{Name: name, OK: true, Applicable: false, Detail: "not applicable: " + fmt.Sprintf(format, args...)})
}

// scripted reports whether the run follows the lesson's script.
func (x *run) scripted() bool { return x.model == nil }

// pause waits step_ms before a host step, so the live page can follow.
func (x *run) pause(ctx context.Context) {
	if x.stepMS <= 0 {
		return
	}
	t := time.NewTimer(time.Duration(x.stepMS) * time.Millisecond)
	defer t.Stop()
	select {
	case <-t.C:
	case <-ctx.Done():
	}
}

// turnRecord is one turn: its result, what it did and every request its
// model was shown.
type turnRecord struct {
	member   string
	res      core.TurnResult
	stats    agent.Stats
	requests []agent.Request
	err      error
}

func (tr turnRecord) String() string {
	if tr.err != nil {
		return fmt.Sprintf("%s: %s", tr.member, core.ErrorCode(tr.err))
	}
	return fmt.Sprintf("%s %s", tr.member, tr.res.Status)
}

// turn runs one turn of member in the run's team: scripted, every step
// waiting step_ms, or driven by the run's model, which is then given the
// member's system text (its role in the lesson's team) and ignores steps.
// first, when set, runs as the turn's first model request arrives, i.e.
// just after its first prepare. The turn's model requests count toward
// the run's total.
//
// A run that has been stopped starts no further turn: the member is not
// claimed, so its turn count and status stay as the last finished step
// left them.
func (x *run) turn(ctx context.Context, member, prompt string, tools agent.ToolSet, first func(), steps ...agent.Step) turnRecord {
	if err := ctx.Err(); err != nil {
		return turnRecord{member: member, err: &core.Error{Code: core.CodeShuttingDown, Message: "The run was stopped before this turn.", Err: err}}
	}
	spec := agent.Spec{Team: x.team, Member: member, Prompt: prompt, Tools: tools, Logger: x.log}
	if x.model != nil {
		spec.System = agent.SystemText(x.team, "", member, lessonRole(member))
		spec.Model = x.model
	} else {
		for i := range steps {
			if steps[i].WaitMS == 0 {
				steps[i].WaitMS = x.stepMS
			}
		}
		spec.Model = agent.NewScripted(steps...)
	}
	seen := &observed{next: spec.Model, first: first}
	spec.Model = seen
	res, stats, err := agent.Run(ctx, x.svc, spec)
	x.mu.Lock()
	x.modelRequests += stats.ModelRequests
	x.mu.Unlock()
	return turnRecord{member: member, res: res, stats: stats, requests: seen.seen(), err: err}
}

// observed keeps every request a turn's model is shown, and runs first
// as the first one arrives.
type observed struct {
	next  agent.Model
	first func()

	mu   sync.Mutex
	reqs []agent.Request
}

func (o *observed) Respond(ctx context.Context, req agent.Request) (agent.Response, error) {
	o.mu.Lock()
	n := len(o.reqs)
	kept := req
	kept.Messages = append([]core.Entry(nil), req.Messages...)
	o.reqs = append(o.reqs, kept)
	o.mu.Unlock()
	if n == 0 && o.first != nil {
		o.first()
	}
	return o.next.Respond(ctx, req)
}

// ModelConfig names the model behind o, so that the turn's document
// names it too (agent.Ref).
func (o *observed) ModelConfig() agent.ModelConfig {
	if d, ok := o.next.(agent.Described); ok {
		return d.ModelConfig()
	}
	return agent.ModelConfig{Provider: agent.ProviderScripted}
}

func (o *observed) seen() []agent.Request {
	o.mu.Lock()
	defer o.mu.Unlock()
	return append([]agent.Request(nil), o.reqs...)
}

// answered reports whether every turn answered, with a detail line. A
// real model may also end a turn at the request limit or on its token
// bound: on such a run only a turn that failed counts against it.
func (x *run) answered(turns ...turnRecord) (bool, string) {
	ok := true
	parts := make([]string, len(turns))
	for i, tr := range turns {
		if x.scripted() {
			ok = ok && tr.err == nil && tr.res.Status == core.TurnAnswered
		} else {
			ok = ok && tr.err == nil && tr.res.Status != core.TurnFailed
		}
		parts[i] = tr.String()
	}
	return ok, strings.Join(parts, ", ")
}

// lessonRole is member's role in lessonTeam.
func lessonRole(member string) string {
	for _, m := range lessonTeam("x").Members {
		if m.Name == member {
			return m.Role
		}
	}
	return ""
}
