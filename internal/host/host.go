// Package host is what this machine keeps for the teams beside the store:
// their workspaces, the models and tools their turns use, and the
// scenario runs. Both doors and the waker get their turns from it, so a
// turn is built one way whoever starts it, and a team is deleted with what
// the host keeps of it in one place (DeleteTeam), whichever door asked.
package host

import (
	"context"
	"log/slog"
	"path/filepath"
	"sync"

	"mailroom/internal/agent"
	"mailroom/internal/core"
	"mailroom/internal/live"
	"mailroom/internal/runtime"
	"mailroom/internal/scenario"
	"mailroom/internal/workspace"
)

// ModelOptions configure the real models turns may use.
type ModelOptions struct {
	// Default is the model of a team created without one (--model);
	// the zero value means the scripted model.
	Default agent.ModelConfig
	// Lookup reads provider credentials and base URLs (os.LookupEnv in
	// the server); nil means none are set, so only scripted turns run.
	Lookup func(string) (string, bool)
	// Provider tunes the provider adapters (retries, timeouts, the HTTP
	// client); the zero value is the production setting.
	Provider agent.ProviderOptions
}

// DefaultModel is the model of a team created without one.
func (o ModelOptions) DefaultModel() agent.ModelConfig {
	if o.Default.Provider == "" {
		return agent.ModelConfig{Provider: agent.ProviderScripted}
	}
	return o.Default
}

// Options configure a Host.
type Options struct {
	// Logger receives what could not be done; nil discards it.
	Logger *slog.Logger
	// Models are the real models turns may use.
	Models ModelOptions
	// DataDir, when not empty, enables scenario runs: each run keeps its
	// result document in the store and its workspace in the workspaces
	// root (Workspaces, by default DataDir/workspaces).
	DataDir string
	// Workspaces is the root of the teams' workspaces; empty means
	// DataDir/workspaces, and no workspaces when DataDir is empty too.
	Workspaces string
	// Programs runs run_main's program, one per team at a time whichever
	// door asked; nil means workspace.Default().
	Programs *workspace.Runner
}

// Host builds turns and keeps the teams' files and scenario runs of this
// machine.
type Host struct {
	svc        *core.Service
	log        *slog.Logger
	models     ModelOptions
	dataDir    string
	workspaces string
	programs   *workspace.Runner
	// runner runs scenarios; nil when there is no data directory.
	runner *scenario.Runner
	// leases hold the leases of the runs this process runs.
	leases *runtime.RunLeases

	// runMu orders a team's deletion against the start of a run on it;
	// runTeams holds the teams of the runs in progress here, which may
	// not be deleted under the run.
	runMu    sync.Mutex
	runTeams map[string]bool
	// runSubs are told of the runs' events (SubscribeRuns).
	runSubs live.Bus
}

// New returns the Host of svc.
func New(svc *core.Service, opts Options) *Host {
	h := &Host{svc: svc, log: opts.Logger, models: opts.Models, dataDir: opts.DataDir, programs: opts.Programs}
	if h.log == nil {
		h.log = slog.New(slog.DiscardHandler)
	}
	if h.programs == nil {
		h.programs = workspace.Default()
	}
	h.workspaces = opts.Workspaces
	if h.workspaces == "" && opts.DataDir != "" {
		h.workspaces = filepath.Join(opts.DataDir, "workspaces")
	}
	h.leases = runtime.NewRunLeases(svc.Runs(), h.log)
	if opts.DataDir != "" {
		h.runner = scenario.NewRunner(svc, h.workspaces, scenario.Config{OnStart: h.runStarted, Logger: h.log, Runner: h.programs, Leases: h.leases})
	}
	return h
}

// Wait returns once the renewals of the runs' leases have ended (the
// runs end with the requests that run them), or with ctx's error.
func (h *Host) Wait(ctx context.Context) error { return h.leases.Wait(ctx) }

// Models are the real models turns may use.
func (h *Host) Models() ModelOptions { return h.models }

// Model builds the model cfg names from this machine's environment
// (model_unavailable without its credentials).
func (h *Host) Model(cfg agent.ModelConfig) (agent.Model, error) {
	return agent.NewModel(cfg, h.models.Lookup, h.models.Provider)
}

// WorkspacesRoot is the root of the teams' workspaces; empty when this
// machine keeps none.
func (h *Host) WorkspacesRoot() string { return h.workspaces }

// Programs runs run_main's program for every door.
func (h *Host) Programs() *workspace.Runner { return h.programs }

// Workspace returns team's workspace directory and the team's limits;
// not_found when the team does not exist (for the caller) or has none.
func (h *Host) Workspace(ctx context.Context, team string) (string, core.Limits, error) {
	view, err := h.svc.Team(ctx, team)
	if err != nil {
		return "", core.Limits{}, err
	}
	if !view.Workspace || h.workspaces == "" {
		return "", core.Limits{}, core.Errorf(core.CodeNotFound, "The team has no workspace; create it with \"workspace\": true.")
	}
	return filepath.Join(h.workspaces, team), view.Limits, nil
}

// Tools is the tool set of a turn of member: the workspace tools for a
// team with a workspace (whose host gate is the team's host_permission),
// the default ones otherwise.
func (h *Host) Tools(ctx context.Context, team, member string) agent.ToolSet {
	dir, limits, err := h.Workspace(ctx, team)
	if err != nil {
		return agent.DefaultTools(member)
	}
	if err := workspace.Ensure(dir); err != nil {
		// The tools then answer that the workspace is not available.
		h.log.WarnContext(ctx, "creating a team's workspace failed", "team", team, "err", err)
	}
	set := agent.WorkspaceTools(member, dir, limits)
	set.Runner = h.programs
	return set
}

// MemberModel is the model member's turns use: its own, else the team's.
func MemberModel(view core.TeamView, member string) agent.ModelConfig {
	model := view.Model
	for _, m := range view.Members {
		if m.Name == member && m.Model != nil {
			model = *m.Model
		}
	}
	return agent.ModelConfig{Provider: model.Provider, Name: model.Name, MaxTokens: model.MaxTokens}
}

// Turn is the agent loop of a turn of member of the team view shows with
// model: its system text, the prompt (empty for a woken turn, whose loop
// attaches the unattended letters before its first model request) and
// the member's tools.
func (h *Host) Turn(ctx context.Context, view core.TeamView, member, prompt string, model agent.Model) core.TurnFunc {
	role := ""
	for _, m := range view.Members {
		if m.Name == member {
			role = m.Role
		}
	}
	spec := agent.Spec{
		Team: view.Name, Member: member, Prompt: prompt,
		System: agent.SystemText(view.Name, view.Purpose, member, role),
		Model:  model, Tools: h.Tools(ctx, view.Name, member), Logger: h.log,
	}
	return agent.Turn(h.svc, spec)
}

// WokenTurn builds a woken turn of member (the waker's builder): no
// prompt, the member's model and the tools a requested turn gets.
func (h *Host) WokenTurn(ctx context.Context, team, member string) (core.ModelRef, core.TurnFunc, error) {
	view, err := h.svc.Team(ctx, team)
	if err != nil {
		return core.ModelRef{}, nil, err
	}
	cfg := MemberModel(view, member)
	model, err := h.Model(cfg)
	if err != nil {
		return core.ModelRef{}, nil, err
	}
	return core.ModelRef{Provider: cfg.Provider, Name: cfg.Name}, h.Turn(ctx, view, member, "", model), nil
}
