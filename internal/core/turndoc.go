package core

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"
	"unicode/utf8"
)

// Turn documents: every turn has an id (<member>-t<n>, n the member's turn
// count once the turn is claimed) and a document of what it did — its
// model requests with their usage, its tool calls, its permissions — kept
// per team, bounded, and stored through the Store (TeamTx.PutTurn), so
// that documents survive a restart and every replica sees them.

// Step kinds of a turn document.
const (
	StepModelRequest = "model_request"
	StepToolCall     = "tool_call"
	StepPermission   = "permission"
)

// Bounds of what a team keeps of its turns. Documents are kept small so
// that storing one after every model request stays cheap.
const (
	// MaxTurnDocs is how many turn documents a team keeps; the oldest
	// finished ones are dropped first.
	MaxTurnDocs = 100
	// MaxTurnSteps is how many steps one document keeps; later steps are
	// counted in steps_dropped.
	MaxTurnSteps = 64
	// MaxStepText bounds, in characters, a tool call's input and result
	// as a document shows them.
	MaxStepText = 2000
)

// CancelledText is the text of a turn the admin cancelled.
const CancelledText = "cancelled"

// RestartInterruptedText is the text of a turn that was running when the
// server stopped without ending it (a crash, a kill).
const RestartInterruptedText = "interrupted: the server stopped while the turn was running"

// ModelRef names the model a turn asked: provider and model name.
type ModelRef struct {
	Provider string `json:"provider"`
	Name     string `json:"name"`
}

// TurnStep is one step of a turn document. Which fields are set depends
// on Kind: model_request (N, StopReason, Usage, DurationMS, Retries, and
// Error when the request failed), tool_call (ToolUseID, Tool, Input,
// IsError, Result) or permission (PermissionID, Status).
type TurnStep struct {
	Kind string `json:"kind"`

	N          int    `json:"n,omitempty"`
	StopReason string `json:"stop_reason,omitempty"`
	Usage      Usage  `json:"usage"`
	DurationMS int64  `json:"duration_ms,omitempty"`
	Retries    int    `json:"retries,omitempty"`
	// Error names what failed when a model request brought no answer: the
	// provider's error type, "canceled" or "timeout".
	Error string `json:"error,omitempty"`
	// UsageEstimated says that the answer reported no usage and Usage is
	// the estimate charged for it (EstimateUsage).
	UsageEstimated bool `json:"usage_estimated,omitempty"`

	ToolUseID string `json:"tool_use_id,omitempty"`
	Tool      string `json:"tool,omitempty"`
	Input     string `json:"input,omitempty"`
	IsError   bool   `json:"is_error,omitempty"`
	Result    string `json:"result,omitempty"`

	PermissionID string `json:"permission_id,omitempty"`
	Status       string `json:"status,omitempty"`
}

// MarshalJSON writes the fields of the step's kind, all of them, so that
// a client sees a zero (no retries, not an error) as a value.
func (s TurnStep) MarshalJSON() ([]byte, error) {
	switch s.Kind {
	case StepModelRequest:
		out := map[string]any{"kind": s.Kind, "n": s.N, "stop_reason": s.StopReason, "usage": s.Usage, "duration_ms": s.DurationMS, "retries": s.Retries}
		if s.Error != "" {
			out["error"] = s.Error
		}
		if s.UsageEstimated {
			out["usage_estimated"] = true
		}
		return json.Marshal(out)
	case StepToolCall:
		return json.Marshal(map[string]any{"kind": s.Kind, "tool_use_id": s.ToolUseID, "tool": s.Tool, "input": s.Input, "is_error": s.IsError, "result": s.Result})
	case StepPermission:
		return json.Marshal(map[string]any{"kind": s.Kind, "permission_id": s.PermissionID, "status": s.Status})
	}
	type plain TurnStep
	return json.Marshal(plain(s))
}

// TurnDoc is a turn as a resource: what it asked, did and cost.
type TurnDoc struct {
	TurnID        string     `json:"turn_id"`
	Team          string     `json:"team"`
	Member        string     `json:"member"`
	Model         ModelRef   `json:"model"`
	Status        string     `json:"status"`
	Text          string     `json:"text"`
	ModelRequests int        `json:"model_requests"`
	Usage         Usage      `json:"usage"`
	Steps         []TurnStep `json:"steps"`
	// StepsDropped counts the steps beyond MaxTurnSteps, not kept.
	StepsDropped int        `json:"steps_dropped,omitempty"`
	StartedAt    time.Time  `json:"started_at"`
	EndedAt      *time.Time `json:"ended_at"`
	// Trigger says what started the turn; a document stored before
	// triggers existed reads as a request.
	Trigger Trigger `json:"trigger"`
}

func (d *TurnDoc) clone() TurnDoc {
	c := *d
	c.Trigger.Letters = slices.Clone(d.Trigger.Letters)
	c.Steps = append([]TurnStep{}, d.Steps...)
	if d.EndedAt != nil {
		at := *d.EndedAt
		c.EndedAt = &at
	}
	return c
}

// TurnEvent is the data of a "turn" event: one step as it happens
// (Status running), or the turn's end (Step nil, the final status).
type TurnEvent struct {
	TurnID string    `json:"turn_id"`
	Member string    `json:"member"`
	Status string    `json:"status"`
	Step   *TurnStep `json:"step"`
	Text   string    `json:"text,omitempty"`
	// Usage is the turn's usage so far.
	Usage Usage `json:"usage"`
	// Trigger is what started the turn, on the events of its start and
	// its end.
	Trigger *Trigger `json:"trigger,omitempty"`
	// Provider names the model's provider, for metrics; it is not sent.
	Provider string `json:"-"`
}

// Trigger kinds: what started a turn.
const (
	// TriggerRequest is a turn asked for (POST .../turns, a scenario).
	TriggerRequest = "request"
	// TriggerMail is a woken turn: Letters are the letters unattended
	// at its start, in inbox order.
	TriggerMail = "mail"
	// TriggerTask is a turn woken by a task assigned to the member
	// becoming claimable (TaskID).
	TriggerTask = "task"
)

// Trigger is what started a turn: {"kind": "request"}, {"kind": "mail",
// "letters": [...]} or {"kind": "task", "task_id"}.
type Trigger struct {
	Kind    string
	Letters []string
	TaskID  string
}

// MarshalJSON writes the fields of the trigger's kind; no kind is a
// request.
func (t Trigger) MarshalJSON() ([]byte, error) {
	switch t.Kind {
	case TriggerMail:
		letters := t.Letters
		if letters == nil {
			letters = []string{}
		}
		return json.Marshal(map[string]any{"kind": t.Kind, "letters": letters})
	case TriggerTask:
		return json.Marshal(map[string]any{"kind": t.Kind, "task_id": t.TaskID})
	}
	return json.Marshal(map[string]any{"kind": TriggerRequest})
}

// UnmarshalJSON reads what MarshalJSON writes.
func (t *Trigger) UnmarshalJSON(b []byte) error {
	var raw struct {
		Kind    string   `json:"kind"`
		Letters []string `json:"letters"`
		TaskID  string   `json:"task_id"`
	}
	if err := json.Unmarshal(b, &raw); err != nil {
		return err
	}
	*t = Trigger{Kind: raw.Kind, Letters: raw.Letters, TaskID: raw.TaskID}
	if t.Kind == "" {
		t.Kind = TriggerRequest
	}
	return nil
}

// StepRecorder records a step of the turn it belongs to. The tools reach
// it through TurnFrom(ctx): a permission the host gate opens is recorded
// as a step of the turn that waits for it.
type StepRecorder interface {
	RecordStep(ctx context.Context, step TurnStep)
}

// ModelError is a turn's model request that failed after the provider's
// own retries. The turn ends failed with Text as its text and the member
// idle with its previous history: the provider failed, not the member.
type ModelError struct {
	// Text names the provider's error; it never holds a credential.
	Text string
	Err  error
}

func (e *ModelError) Error() string { return e.Text }

// Unwrap gives the cause, so that a cancelled request is told apart.
func (e *ModelError) Unwrap() error { return e.Err }

// errTurnCancelled is the cancellation cause of a turn the admin cancelled.
var errTurnCancelled = errors.New("the turn was cancelled")

// Turn is a claimed turn of one member: created by BeginTurn, run once by
// Run. The agent loop finds it with TurnFrom and records its steps. It
// belongs to the process that runs it; the team's state holds its lease.
type Turn struct {
	s    *Service
	team string
	// inc is the incarnation of the team the turn was claimed on: its
	// commits refuse any other (Turn.update).
	inc string

	mu  sync.Mutex
	doc *TurnDoc // guarded by mu
	// pending is model usage recorded but not yet committed to the
	// member (a failed commit); the next commit of the turn adds it.
	pending         Usage
	cancel          context.CancelCauseFunc
	cancelRequested bool
	done            chan struct{}
	ran             bool
	// firstRequest, when set, is called once as the turn prepares its
	// first model request (a woken turn's delay ends there).
	firstRequest func(at time.Time)
}

type turnKey struct{}

// TurnFrom returns the turn whose function runs with ctx, or nil.
func TurnFrom(ctx context.Context) *Turn {
	tr, _ := ctx.Value(turnKey{}).(*Turn)
	return tr
}

// ID is the turn's id, <member>-t<n>.
func (tr *Turn) ID() string { return tr.doc.TurnID }

// Member is the member whose turn it is.
func (tr *Turn) Member() string { return tr.doc.Member }

// Document returns a copy of the turn's document as it is now.
func (tr *Turn) Document() TurnDoc {
	tr.mu.Lock()
	defer tr.mu.Unlock()
	return tr.doc.clone()
}

// Done is closed once the turn has ended and its document is final.
func (tr *Turn) Done() <-chan struct{} { return tr.done }

// ShortenStepText cuts s to at most MaxStepText characters, marking the
// cut with an ellipsis.
func ShortenStepText(s string) string {
	if utf8.RuneCountInString(s) <= MaxStepText {
		return s
	}
	return truncate(s, MaxStepText-1) + "…"
}

// RecordStep appends step to the document and publishes it as a turn
// event. Tool inputs and results are shortened to MaxStepText.
func (tr *Turn) RecordStep(ctx context.Context, step TurnStep) {
	step.Input, step.Result = ShortenStepText(step.Input), ShortenStepText(step.Result)
	tr.mu.Lock()
	ev := tr.appendLocked(step)
	doc := tr.doc.clone()
	tr.mu.Unlock()
	tr.s.publish([]Event{ev})
	if step.Kind == StepPermission {
		// A turn waiting for a person may wait long: what it waits for
		// must survive a crash in the meantime.
		tr.save(ctx, doc)
	}
}

// save stores a snapshot of the document, with the usage not yet
// committed. A document is a record, not state the rules depend on: a
// failed save is logged and the turn goes on.
func (tr *Turn) save(ctx context.Context, doc TurnDoc) {
	s := tr.s
	var added Usage
	err := tr.update(context.WithoutCancel(ctx), func(u *unit) error {
		tr.mu.Lock()
		added = tr.pending
		tr.mu.Unlock()
		if added != (Usage{}) {
			if m := u.member(doc.Member); m != nil {
				m.Usage = m.Usage.Add(added)
				u.emit(EventMember, u.memberView(m))
			}
		}
		return u.tx.PutTurn(doc)
	})
	if err != nil {
		s.log.WarnContext(ctx, "saving a turn document failed", "team", tr.team, "turn", doc.TurnID, "err", err)
		return
	}
	tr.mu.Lock()
	tr.pending = Usage{InputTokens: tr.pending.InputTokens - added.InputTokens, OutputTokens: tr.pending.OutputTokens - added.OutputTokens}
	tr.mu.Unlock()
}

func (tr *Turn) appendLocked(step TurnStep) Event {
	if len(tr.doc.Steps) < MaxTurnSteps {
		tr.doc.Steps = append(tr.doc.Steps, step)
	} else {
		tr.doc.StepsDropped++
	}
	return Event{Type: EventTurn, Team: tr.team, Data: TurnEvent{TurnID: tr.doc.TurnID, Member: tr.doc.Member, Status: tr.doc.Status, Step: &step, Usage: tr.doc.Usage, Provider: tr.doc.Model.Provider}}
}

// RecordModelRequest records one model request, answered or failed: its
// step, and its tokens on the turn, the member and so the team. Tokens
// are committed at once, since they were spent whatever becomes of the
// turn; a failed commit keeps them for the turn's next commit.
func (tr *Turn) RecordModelRequest(ctx context.Context, step TurnStep) {
	step.Kind = StepModelRequest
	if !step.Usage.Valid() {
		// A count out of range is a provider's bad answer, which the
		// adapters refuse; it is never added to any total or budget.
		step.Usage = Usage{}
		if step.Error == "" {
			step.Error = "invalid_usage"
		}
	}
	tr.mu.Lock()
	tr.doc.ModelRequests++
	if step.N == 0 {
		step.N = tr.doc.ModelRequests
	}
	tr.doc.Usage = tr.doc.Usage.Add(step.Usage)
	tr.pending = tr.pending.Add(step.Usage)
	ev := tr.appendLocked(step)
	doc := tr.doc.clone()
	tr.mu.Unlock()
	tr.s.publish([]Event{ev})
	tr.save(ctx, doc)
}

// BeginModelRequest is called by a turn before each model request: it
// returns budget_exhausted when the team has spent its
// limits.model_tokens or made its limits.model_requests, and otherwise
// counts the request against the latter, committed at once, so that
// members asking at the same moment never pass the bound together.
func (tr *Turn) BeginModelRequest(ctx context.Context) error {
	member := tr.Member()
	return tr.update(context.WithoutCancel(ctx), func(u *unit) error {
		if err := u.budget(); err != nil {
			return err
		}
		m := u.member(member)
		if m == nil {
			return Errorf(CodeNotFound, "No such member.")
		}
		m.ModelRequests++
		return nil
	})
}

// budget refuses a team that has spent its model tokens or made its
// model requests.
func (u *unit) budget() error {
	limit := u.st.Limits.ModelTokens
	if limit > 0 && u.usage().Total() >= limit {
		return Errorf(CodeBudgetExhausted, "The team has spent its model tokens (limits.model_tokens).")
	}
	if limit := u.st.Limits.ModelRequests; limit > 0 && u.modelRequests() >= limit {
		return Errorf(CodeBudgetExhausted, "The team has made its %d model requests (limits.model_requests).", limit)
	}
	return nil
}

// modelRequests is the sum of the members' model requests.
func (u *unit) modelRequests() int {
	n := 0
	for _, m := range u.st.Members {
		n += m.ModelRequests
	}
	return n
}

// EstimateUsage is what a model answer that reported no usage is charged
// (docs/api.md, "A budget that holds without usage"): a token per four
// bytes of the request and of the answer, at least one each way, so that
// limits.model_tokens holds whatever a provider reports.
func EstimateUsage(requestBytes, answerBytes int) Usage {
	return Usage{InputTokens: max(1, int64(requestBytes)/4), OutputTokens: max(1, int64(answerBytes)/4)}
}

// usage is the sum of the members' usage.
func (u *unit) usage() Usage {
	var sum Usage
	for _, m := range u.st.Members {
		sum = sum.Add(m.Usage)
	}
	return sum
}

// busy reports whether member m of team runs a turn: its lease is held
// by this process for a turn it runs, or by another holder and live.
func (s *Service) busy(team string, m *MemberState, now time.Time) bool {
	if m == nil || m.Lease == nil {
		return false
	}
	if m.Lease.Holder == s.holder {
		return s.work.TurnRunning(team, m.Name)
	}
	return m.Lease.Live(now)
}

// releaseDead releases the leases of turns that no longer run, in the
// unit of work about to run: a lease of this process whose turn is not
// running here (its outcome could not be committed) leaves the member
// stopped, as a restart would find it; an expired lease of another
// holder (a replica that died) leaves the member idle, available again.
// Either way the turn's document ends failed. With write unset (a view)
// only the state is changed, as the next unit of work will store it.
func (s *Service) releaseDead(u *unit) error { return s.releaseDeadWith(u, true) }

func (s *Service) releaseDeadState(u *unit) { _ = s.releaseDeadWith(u, false) }

func (s *Service) releaseDeadWith(u *unit, write bool) error {
	for i := range u.st.Members {
		m := &u.st.Members[i]
		if m.Lease == nil || s.busy(u.st.Name, m, u.now) {
			continue
		}
		own := m.Lease.Holder == s.holder
		m.Lease = nil
		if m.Status == StatusRunning {
			m.Status = StatusIdle
			if own {
				m.Status = StatusStopped
			}
			// The turn died with its process: never rerun on its own.
			holdWake(m, TurnFailed)
		}
		if !write {
			continue
		}
		docs, err := u.tx.Turns()
		if err != nil {
			return err
		}
		for _, d := range docs {
			if d.Member == m.Name && InterruptTurnDoc(&d, u.now) {
				if err := u.tx.PutTurn(d); err != nil {
					return err
				}
				u.emit(EventTurn, TurnEvent{TurnID: d.TurnID, Member: d.Member, Status: d.Status, Text: d.Text, Usage: d.Usage, Provider: d.Model.Provider, Trigger: &d.Trigger})
			}
		}
		u.emit(EventMember, u.memberView(m))
	}
	return nil
}

// BeginTurn claims member for a turn (see RunTurn for the rules) and
// creates its document, status running; Run runs it. The claim takes the
// member's lease, renewed while the turn runs. The model names what the
// document shows. A team whose model tokens are spent is refused with
// budget_exhausted before anything changes.
func (s *Service) BeginTurn(ctx context.Context, teamName, member string, model ModelRef) (*Turn, error) {
	// Turns are started by the operator (the REST turn route, a scenario
	// run); a member's token cannot make anyone take a turn.
	if err := CheckAdmin(ctx); err != nil {
		return nil, err
	}
	return s.beginTurn(ctx, teamName, member, model, "")
}

// beginTurn claims member for a turn. A woken turn (wokenIn names the
// incarnation of the team the member was found wakeable in) claims only a
// member of that incarnation that can be woken (wakeTrigger) and names
// what woke it (the letters unattended at its start, or the task) as its
// trigger; any other is a request.
func (s *Service) beginTurn(ctx context.Context, teamName, member string, model ModelRef, wokenIn string) (*Turn, error) {
	woken := wokenIn != ""
	if model.Provider == "" {
		model.Provider = ScriptedModel().Provider
	}
	var tr *Turn
	full := 0 // the history limit, when no unattended letter fits
	err := s.update(ctx, teamName, func(u *unit) error {
		if woken && teamIncarnation(u.st) != wokenIn {
			return teamReplaced()
		}
		m := u.member(member)
		if m == nil {
			return u.noSuchMember()
		}
		if err := u.cannotTurn(m); err != nil {
			return err
		}
		if err := u.budget(); err != nil {
			return err
		}
		trigger := Trigger{Kind: TriggerRequest}
		if woken {
			var err error
			if trigger, err = u.wakeTrigger(m); err != nil {
				return err
			}
		}
		if ok, err := u.letterFits(m); err != nil {
			return err
		} else if !ok {
			// Nothing starts; the member's wake is held until the admin
			// makes room (a reset that clears its history).
			full = u.st.Limits.HistoryEntries
			if m.Wake {
				m.WakeHeld, m.WakeHeldReason = true, WakeHeldHistoryFull
				u.emit(EventMember, u.memberView(m))
			}
			return nil
		}
		m.Status, m.Turns = StatusRunning, m.Turns+1
		m.Lease = &Lease{Holder: s.holder, Expires: u.now.Add(s.leaseDur)}
		doc := &TurnDoc{
			TurnID: fmt.Sprintf("%s-t%d", member, m.Turns), Team: teamName, Member: member, Model: model,
			Status: TurnRunning, Steps: []TurnStep{}, StartedAt: u.now.UTC(), Trigger: trigger,
		}
		if err := u.addTurnDoc(*doc); err != nil {
			return err
		}
		tr = &Turn{s: s, team: teamName, inc: teamIncarnation(u.st), doc: doc, done: make(chan struct{})}
		// Registered before the commit, so that no unit of work takes
		// the fresh lease for a dead one; refused while the team is
		// being deleted here, so that the deletion sees every turn it
		// must cancel (Work.TurnClaimed).
		if !s.work.TurnClaimed(tr) {
			return Errorf(CodeNotFound, "The team is being deleted.")
		}
		u.undo = append(u.undo, func() { s.work.TurnEnded(tr) })
		u.emit(EventMember, u.memberView(m))
		u.emit(EventTurn, TurnEvent{TurnID: doc.TurnID, Member: member, Status: TurnRunning, Provider: model.Provider, Trigger: &trigger})
		return nil
	})
	if err != nil {
		return nil, err
	}
	if full > 0 {
		return nil, historyFull(full)
	}
	s.work.TurnBegan(tr)
	return tr, nil
}

// letterFits reports whether a turn of m may start as far as its history
// goes: it has no unattended letter, or the oldest one fits with room for
// an answer (turnCandidate).
func (u *unit) letterFits(m *MemberState) (bool, error) {
	if len(m.History)+2 <= u.st.Limits.HistoryEntries {
		return true, nil
	}
	items, err := u.tx.LoadInbox(m.Name)
	if err != nil {
		return false, asStoreError(err)
	}
	return len(unattended(items, attendedBy(m, m.History))) == 0, nil
}

// RenewLease extends the turn's lease by the lease duration, while its
// member's lease is still this process's: the runtime calls it every
// third of LeaseDuration until the turn is Done (Work.TurnBegan), so that
// other replicas keep the member busy. It is the turn's own unit of work,
// refused once its team is no longer the one it was claimed on.
func (tr *Turn) RenewLease(ctx context.Context) error {
	s := tr.s
	member := tr.doc.Member
	return tr.update(ctx, func(u *unit) error {
		if m := u.member(member); m != nil && m.Lease != nil && m.Lease.Holder == s.holder {
			m.Lease = &Lease{Holder: s.holder, Expires: u.now.Add(s.leaseDur)}
		}
		return nil
	})
}

// LeaseDuration is how long the turn's lease holds without renewal.
func (tr *Turn) LeaseDuration() time.Duration { return tr.s.leaseDur }

// Team is the name of the turn's team.
func (tr *Turn) Team() string { return tr.team }

// addTurnDoc stores doc as the team's newest document and drops the
// oldest finished documents beyond MaxTurnDocs.
func (u *unit) addTurnDoc(doc TurnDoc) error {
	docs, err := u.tx.Turns()
	if err != nil {
		return err
	}
	if err := u.tx.PutTurn(doc); err != nil {
		return err
	}
	extra := len(docs) + 1 - MaxTurnDocs
	for _, d := range docs {
		if extra <= 0 {
			break
		}
		if d.Status == TurnRunning {
			continue
		}
		if err := u.tx.DeleteTurn(d.TurnID); err != nil {
			return err
		}
		extra--
	}
	return nil
}

// localTurn returns the turn with id that this process runs on team, or nil.
func (s *Service) localTurn(team, id string) *Turn {
	for _, tr := range s.work.TeamTurns(team) {
		if tr.doc.TurnID == id {
			return tr
		}
	}
	return nil
}

// turnDocs returns the team's documents, oldest first, with the ones
// this process runs as they are now (steps not yet stored included).
func (s *Service) turnDocs(ctx context.Context, teamName string) ([]TurnDoc, error) {
	docs, dead, err := s.turnDocsOnce(ctx, teamName)
	if err != nil || !dead {
		return docs, err
	}
	// A document shown as interrupted may only look so: a view that read
	// the team before a turn's outcome committed, and this process's
	// running turns after the turn finished, finds a running document
	// that no process runs (a store may read a view without the lock a
	// commit holds). Read once more: a turn that really died is shown
	// interrupted again; one that ended shows how it ended.
	docs, _, err = s.turnDocsOnce(ctx, teamName)
	return docs, err
}

// turnDocsOnce is one read of turnDocs; dead reports whether a running
// document was shown interrupted.
func (s *Service) turnDocsOnce(ctx context.Context, teamName string) (_ []TurnDoc, dead bool, _ error) {
	var docs []TurnDoc
	var now time.Time
	var unleased map[string]bool
	err := s.view(ctx, teamName, false, func(u *unit) error {
		var err error
		docs, err = u.tx.Turns()
		if err != nil {
			return asStoreError(err)
		}
		now = u.now
		unleased = map[string]bool{}
		for _, m := range u.st.Members {
			unleased[m.Name] = m.Lease == nil
		}
		return nil
	})
	if err != nil {
		return nil, false, err
	}
	for i := range docs {
		if docs[i].Status == TurnRunning {
			if tr := s.localTurn(teamName, docs[i].TurnID); tr != nil {
				docs[i] = tr.Document()
			} else if unleased[docs[i].Member] {
				// No process runs it: its member holds no lease (the
				// view released a dead process's). Shown as the next
				// unit of work will store it: failed, interrupted.
				InterruptTurnDoc(&docs[i], now)
				dead = true
			}
		}
		if docs[i].Steps == nil {
			docs[i].Steps = []TurnStep{}
		}
	}
	return docs, dead, nil
}

// Turns returns the team's turn documents, newest first.
func (s *Service) Turns(ctx context.Context, teamName string) ([]TurnDoc, error) {
	docs, err := s.turnDocs(ctx, teamName)
	if err != nil {
		return nil, err
	}
	if docs == nil {
		docs = []TurnDoc{} // a list is a JSON array, never null
	}
	slices.Reverse(docs)
	return docs, nil
}

// TurnDocument returns one turn document; not_found when the team keeps
// none with that id.
func (s *Service) TurnDocument(ctx context.Context, teamName, turnID string) (TurnDoc, error) {
	docs, err := s.turnDocs(ctx, teamName)
	if err != nil {
		return TurnDoc{}, err
	}
	for _, d := range docs {
		if d.TurnID == turnID {
			return d, nil
		}
	}
	return TurnDoc{}, Errorf(CodeNotFound, "No such turn.")
}

// CancelTurn asks a running turn to stop at its next boundary: an
// in-flight model request is cancelled, a running tool finishes. It
// waits, bounded by ctx, for the turn to end, and returns the document as
// it then is. A turn that has already ended is returned unchanged, and so
// is one that another process runs (only the process that runs a turn can
// cut it).
func (s *Service) CancelTurn(ctx context.Context, teamName, turnID string) (TurnDoc, error) {
	tr := s.localTurn(teamName, turnID)
	if tr == nil {
		return s.TurnDocument(ctx, teamName, turnID)
	}
	tr.requestCancel()
	select {
	case <-tr.done:
	case <-ctx.Done():
	}
	return tr.Document(), nil
}
