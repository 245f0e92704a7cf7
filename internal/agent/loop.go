package agent

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"mailroom/internal/core"
)

// MaxModelRequests is the number of model requests one turn may make
// (docs/spec.md §1, §4.7). A turn that still asks for tools after the last one
// ends with outcome call_limit and the member stops.
const MaxModelRequests = 4

// Spec describes one turn: whose turn it is, the user prompt that opens it
// (none when empty), the system text, the model and the host's tools.
type Spec struct {
	Team   string
	Member string
	Prompt string
	// System is the model's system text; empty means a short default
	// naming the member and its team.
	System string
	Model  Model
	Tools  ToolSet
	Logger *slog.Logger
}

// ToolCall records one executed tool call of a turn.
type ToolCall struct {
	ID      string          `json:"id"`
	Name    string          `json:"name"`
	Input   json.RawMessage `json:"input"`
	Content string          `json:"content"`
	IsError bool            `json:"is_error"`
	// Refused names the gate that refused run_main ("plan" or "host").
	Refused string `json:"refused,omitempty"`
	// Ran is set when run_main started the program.
	Ran bool `json:"ran,omitempty"`
}

// Stats is what a turn did, for reports and checks: how many model
// requests it made and every tool call it executed, in order.
type Stats struct {
	ModelRequests int
	Calls         []ToolCall
}

// recorder collects Stats while a turn runs; the caller reads them once
// the turn has returned.
type recorder struct {
	mu    sync.Mutex
	stats Stats
}

func (r *recorder) request() {
	r.mu.Lock()
	r.stats.ModelRequests++
	r.mu.Unlock()
}

func (r *recorder) call(c ToolCall) {
	r.mu.Lock()
	r.stats.Calls = append(r.stats.Calls, c)
	r.mu.Unlock()
}

func (r *recorder) snapshot() Stats {
	r.mu.Lock()
	defer r.mu.Unlock()
	return Stats{ModelRequests: r.stats.ModelRequests, Calls: append([]ToolCall(nil), r.stats.Calls...)}
}

// Run runs one turn of spec.Member through core's turn runner, which
// claims the member, commits or discards the history and refuses a member
// that is unknown (not_found) or cannot take a turn (member_unavailable;
// the model is then never asked).
//
// The turn's document names the model that answers (Ref), so that the
// document, the turn events and the metrics say which provider was asked.
func Run(ctx context.Context, svc *core.Service, spec Spec) (core.TurnResult, Stats, error) {
	rec := &recorder{}
	tr, err := svc.BeginTurn(ctx, spec.Team, spec.Member, Ref(spec.Model))
	if err != nil {
		return core.TurnResult{}, rec.snapshot(), err
	}
	doc, err := tr.Run(ctx, turn(svc, spec, rec))
	if err != nil {
		return core.TurnResult{}, rec.snapshot(), err
	}
	return core.TurnResult{Member: doc.Member, Status: doc.Status, Text: doc.Text}, rec.snapshot(), nil
}

// Ref names m as a turn document shows it: the provider and model name
// of a provider adapter (or of any Model that is Described), the
// scripted model otherwise.
func Ref(m Model) core.ModelRef {
	if d, ok := m.(Described); ok {
		c := d.ModelConfig()
		return core.ModelRef{Provider: c.Provider, Name: c.Name}
	}
	return core.ModelRef{Provider: ProviderScripted}
}

// RunScriptedTurn runs one turn with a Scripted model replaying steps and
// returns the turn result and the number of model requests made. It is
// what the REST turn endpoint calls; steps are validated first.
func RunScriptedTurn(ctx context.Context, svc *core.Service, team, member, prompt string, steps []Step, tools ToolSet) (core.TurnResult, int, error) {
	if err := ValidateSteps(steps); err != nil {
		return core.TurnResult{}, 0, err
	}
	res, stats, err := Run(ctx, svc, Spec{Team: team, Member: member, Prompt: prompt, Model: NewScripted(steps...), Tools: tools})
	return res, stats.ModelRequests, err
}

// Turn returns the agent loop for one turn as a core.TurnFunc, for callers
// that drive core.Service.RunTurn themselves.
func Turn(svc *core.Service, spec Spec) core.TurnFunc {
	return turn(svc, spec, &recorder{})
}

func turn(svc *core.Service, spec Spec, rec *recorder) core.TurnFunc {
	log := spec.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	system := spec.System
	if system == "" {
		system = fmt.Sprintf("You are %s, a member of team %s.", spec.Member, spec.Team)
	}
	h := host{svc: svc, team: spec.Team, member: spec.Member, set: spec.Tools}
	tools := spec.Tools.Specs()

	return func(ctx context.Context, prefix []core.Entry) (core.TurnOutcome, error) {
		// doc records the turn's steps and usage; nil when the turn is
		// run without core's turn runner.
		doc := core.TurnFrom(ctx)
		// The member's turn number names its tool-use ids; core has
		// already counted this turn when the function runs.
		turnNo, maxCalls, err := memberTurns(ctx, svc, spec.Team, spec.Member)
		if err != nil {
			return core.TurnOutcome{}, err
		}
		var this []core.Entry
		if spec.Prompt != "" {
			this = append(this, core.UserText(spec.Prompt))
		}
		calls := 0
		lastText := ""
		for requests := 0; ; requests++ {
			// A turn stops at its next boundary once its context ends:
			// before a model request and before a tool call. core then
			// keeps the member's previous history (core.RunTurn).
			if err := interrupted(ctx, spec.Member); err != nil {
				return core.TurnOutcome{}, err
			}
			if requests == MaxModelRequests {
				return core.TurnOutcome{Messages: join(prefix, this), Status: core.TurnCallLimit, Text: lastText}, nil
			}
			// A team whose model tokens are spent, or whose model
			// requests are made, asks no more: the turn stops here, at the
			// boundary call_limit stops at, and keeps what it did. Before
			// its first request it did nothing worth keeping, so the
			// history stays as it was.
			if doc != nil {
				if err := doc.BeginModelRequest(ctx); err != nil {
					if core.ErrorCode(err) != core.CodeBudgetExhausted {
						return core.TurnOutcome{}, err
					}
					kept := prefix
					if requests > 0 {
						kept = join(prefix, this)
					}
					return core.TurnOutcome{Messages: kept, Status: core.TurnBudgetExhausted, Text: lastText}, nil
				}
			}
			// Prepare (docs/spec.md §4.7, §4.12): match protocol replies, then
			// attach mail to prefix + this turn and keep only the part
			// beyond the prefix. Mail attached during a turn that fails is
			// never committed and is attached again next time.
			if _, err := svc.Consume(core.AsMember(ctx, spec.Team, spec.Member), spec.Team); err != nil {
				return core.TurnOutcome{}, err
			}
			candidate, err := svc.PrepareInbox(ctx, spec.Team, spec.Member, join(prefix, this))
			if err != nil {
				return core.TurnOutcome{}, err
			}
			this = cloneEntries(candidate[len(prefix):])

			rec.request()
			start := time.Now()
			req := Request{Member: spec.Member, System: system, Messages: candidate, Tools: tools}
			resp, err := spec.Model.Respond(ctx, req)
			if doc != nil {
				step := modelStep(requests+1, resp, err, time.Since(start))
				if err == nil && resp.UsageMissing {
					// No usage reported: an estimate is charged, so that the
					// team's model_tokens hold all the same.
					step.Usage, step.UsageEstimated = core.EstimateUsage(jsonSize(req), jsonSize(resp.Content)), true
				}
				doc.RecordModelRequest(ctx, step)
			}
			if err != nil {
				err = fmt.Errorf("model request %d of %s: %w", requests+1, spec.Member, err)
				if perr := (*ProviderError)(nil); errors.As(err, &perr) && ctx.Err() == nil {
					// The provider failed after its SDK's retries: the turn
					// ends failed with the provider's error named, and the
					// member stays usable (core.ModelError).
					return core.TurnOutcome{}, &core.ModelError{Text: perr.Error(), Err: err}
				}
				return core.TurnOutcome{}, err
			}

			// The loop owns tool-use ids: <member>-t<turn>-<n>, unique
			// across the member's resumed history. Each id is executed
			// exactly once, right here, after the response has arrived,
			// so nothing a model (or its retries) does can run a tool twice.
			content := cloneBlocks(resp.Content)
			var uses []int
			var texts []string
			for i := range content {
				switch content[i].Type {
				case "tool_use":
					calls++
					content[i].ID = fmt.Sprintf("%s-t%d-%d", spec.Member, turnNo, calls)
					uses = append(uses, i)
				case "text":
					texts = append(texts, content[i].Text)
				}
			}
			if len(texts) > 0 {
				lastText = strings.Join(texts, "\n")
			}
			this = append(this, core.Entry{Role: "assistant", Blocks: content})
			if len(uses) == 0 {
				return core.TurnOutcome{Messages: join(prefix, this), Status: core.TurnAnswered, Text: lastText}, nil
			}
			results := make([]core.Block, 0, len(uses))
			// The calls beyond the team's limits.tool_calls get an error
			// result instead of running, and the turn then ends as it does
			// after its last model request (docs/api.md, Turns).
			overLimit := false
			for k, i := range uses {
				if err := interrupted(ctx, spec.Member); err != nil {
					return core.TurnOutcome{}, err
				}
				use := content[i]
				var out toolResult
				if calls-len(uses)+k >= maxCalls {
					overLimit = true
					out = fail("%s: this turn has made its %d tool calls (limits.tool_calls); this call did not run", CodeCallLimit, maxCalls)
				} else {
					out = h.call(ctx, use.Name, use.Input)
				}
				log.DebugContext(ctx, "tool call", "team", spec.Team, "member", spec.Member, "id", use.ID, "tool", use.Name, "is_error", out.isError)
				rec.call(ToolCall{ID: use.ID, Name: use.Name, Input: append(json.RawMessage(nil), use.Input...), Content: out.content, IsError: out.isError, Refused: out.refused, Ran: out.ran})
				if doc != nil {
					doc.RecordStep(ctx, core.TurnStep{Kind: core.StepToolCall, ToolUseID: use.ID, Tool: keptName(use.Name), Input: string(use.Input), IsError: out.isError, Result: out.content})
				}
				if out.isError {
					// content[i] is the block this turn's history holds.
					content[i].Name, content[i].Input = keptName(use.Name), refusedInput(use.Input)
				}
				results = append(results, core.Block{Type: "tool_result", ToolUseID: use.ID, Content: out.content, IsError: out.isError})
			}
			this = append(this, core.Entry{Role: "user", Blocks: results})
			if overLimit {
				return core.TurnOutcome{Messages: join(prefix, this), Status: core.TurnCallLimit, Text: lastText}, nil
			}
		}
	}
}

// modelStep is the turn document's step of one model request.
func modelStep(n int, resp Response, err error, took time.Duration) core.TurnStep {
	step := core.TurnStep{Kind: core.StepModelRequest, N: n, DurationMS: took.Milliseconds()}
	if err != nil {
		step.Error = "error"
		var perr *ProviderError
		switch {
		case errors.As(err, &perr):
			step.Error, step.Retries = perr.Type, perr.Retries
		case errors.Is(err, context.Canceled):
			step.Error = "canceled"
		case errors.Is(err, context.DeadlineExceeded):
			step.Error = "timeout"
		}
		return step
	}
	step.StopReason, step.Retries = resp.StopReason, resp.Retries
	step.Usage = core.Usage{InputTokens: resp.Usage.InputTokens, OutputTokens: resp.Usage.OutputTokens}
	return step
}

// SystemText is a member's system text: who it is, in which team, its
// role and the team's purpose, each when set.
func SystemText(team, purpose, member, role string) string {
	var b strings.Builder
	fmt.Fprintf(&b, "You are %s, a member of team %s.", member, team)
	if strings.TrimSpace(role) != "" {
		fmt.Fprintf(&b, " Your role: %s", strings.TrimSpace(role))
	}
	if strings.TrimSpace(purpose) != "" {
		fmt.Fprintf(&b, "\n\nThe team's purpose: %s", strings.TrimSpace(purpose))
	}
	b.WriteString("\n\nYou work through the tools you are given: mail your teammates with send_message; what they send you arrives as user messages.")
	return b.String()
}

// interrupted returns an error wrapping ctx's when the turn's context has
// ended, so that the turn stops before doing anything more.
func interrupted(ctx context.Context, member string) error {
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("turn of %s interrupted: %w", member, err)
	}
	return nil
}

// maxToolName is the longest tool name kept in history, the Messages
// API's own bound; the tools' names are far shorter.
const maxToolName = 64

// keptName is the tool name a tool_use block keeps in history: a name the
// model made up is cut to maxToolName bytes, on a character boundary.
func keptName(name string) string {
	if len(name) <= maxToolName {
		return name
	}
	cut := maxToolName
	for cut > 0 && !utf8.RuneStart(name[cut]) {
		cut--
	}
	return name[:cut]
}

// refusedInput is what history keeps of a tool input the tool refused: a
// short note with its size, never the input itself. A model can put
// anything in an input (megabytes, nesting deeper than any decoder
// accepts) and the tool reads only what it accepts, so only an accepted
// input is worth keeping, and only that is bounded by the tool. The note
// is a JSON object because a tool_use input must be one.
func refusedInput(input json.RawMessage) json.RawMessage {
	note, _ := json.Marshal(map[string]string{"note": fmt.Sprintf("input not kept: the tool refused it (%d bytes)", len(input))})
	return note
}

// memberTurns returns the member's turn count as core keeps it and the
// team's bound on one turn's tool calls.
func memberTurns(ctx context.Context, svc *core.Service, team, member string) (int, int, error) {
	view, err := svc.Team(ctx, team)
	if err != nil {
		return 0, 0, err
	}
	maxCalls := view.Limits.ToolCalls
	if maxCalls < 1 {
		maxCalls = core.DefaultToolCalls
	}
	for _, m := range view.Members {
		if m.Name == member {
			return m.Turns, maxCalls, nil
		}
	}
	return 0, 0, core.Errorf(core.CodeNotFound, "No such member.")
}

// jsonSize is the size of v as JSON, what an estimate of its tokens is
// made from.
func jsonSize(v any) int {
	b, _ := json.Marshal(v)
	return len(b)
}

func join(prefix, this []core.Entry) []core.Entry {
	out := make([]core.Entry, 0, len(prefix)+len(this))
	out = append(out, prefix...)
	return append(out, this...)
}
