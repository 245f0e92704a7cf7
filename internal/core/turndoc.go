package core

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"sync"
	"time"
	"unicode/utf8"
)

// Turn documents: every turn has an id (<member>-t<n>, n the member's turn
// count once the turn is claimed) and a document of what it did — its
// model requests with their usage, its tool calls, its permissions — kept
// per team, bounded, and stored through the Store when it implements
// TurnStore, so that documents survive a restart.

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
}

func (d *TurnDoc) clone() TurnDoc {
	c := *d
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
	// Provider names the model's provider, for metrics; it is not sent.
	Provider string `json:"-"`
}

// TurnStore is implemented by a Store that keeps turn documents. Core
// calls it with the team's lock held, like every Store method. A Store
// without it keeps documents in memory only.
type TurnStore interface {
	// LoadTurns returns the team's stored documents, in any order.
	LoadTurns(ctx context.Context, team string) ([]TurnDoc, error)
	// SaveTurn durably writes one document, replacing the one with the
	// same id.
	SaveTurn(ctx context.Context, team string, doc *TurnDoc) error
	// DeleteTurn removes one document; a missing one is no error.
	DeleteTurn(ctx context.Context, team, turnID string) error
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

// turnBook is a team's turn documents, oldest first, and its running turns.
type turnBook struct {
	docs    []*TurnDoc
	running map[string]*Turn
}

func (b *turnBook) find(id string) *TurnDoc {
	for _, d := range b.docs {
		if d.TurnID == id {
			return d
		}
	}
	return nil
}

// Turn is a claimed turn of one member: created by BeginTurn, run once by
// Run. The agent loop finds it with TurnFrom and records its steps.
type Turn struct {
	s   *Service
	t   *team
	doc *TurnDoc // guarded by t.mu

	// guarded by t.mu
	cancel          context.CancelCauseFunc
	cancelRequested bool
	done            chan struct{}
	ran             bool
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
	tr.t.mu.Lock()
	defer tr.t.mu.Unlock()
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
	tr.t.mu.Lock()
	defer tr.t.mu.Unlock()
	tr.appendLocked(step)
	if step.Kind == StepPermission {
		// A turn waiting for a person may wait long: what it waits for
		// must survive a crash in the meantime.
		tr.s.saveTurnLocked(ctx, tr.t, tr.doc)
	}
}

func (tr *Turn) appendLocked(step TurnStep) {
	if len(tr.doc.Steps) < MaxTurnSteps {
		tr.doc.Steps = append(tr.doc.Steps, step)
	} else {
		tr.doc.StepsDropped++
	}
	tr.s.emit("turn", tr.t.st.Name, TurnEvent{TurnID: tr.doc.TurnID, Member: tr.doc.Member, Status: tr.doc.Status, Step: &step, Usage: tr.doc.Usage, Provider: tr.doc.Model.Provider})
}

// RecordModelRequest records one model request, answered or failed: its
// step, and its tokens on the turn, the member and so the team. Tokens
// are saved at once, since they were spent whatever becomes of the turn.
func (tr *Turn) RecordModelRequest(ctx context.Context, step TurnStep) {
	step.Kind = StepModelRequest
	tr.t.mu.Lock()
	defer tr.t.mu.Unlock()
	tr.doc.ModelRequests++
	if step.N == 0 {
		step.N = tr.doc.ModelRequests
	}
	tr.doc.Usage = tr.doc.Usage.Add(step.Usage)
	tr.appendLocked(step)
	saveCtx := context.WithoutCancel(ctx)
	if step.Usage != (Usage{}) && !tr.t.deleted {
		if m := tr.t.member(tr.doc.Member); m != nil {
			m.Usage = m.Usage.Add(step.Usage)
			// A failed save leaves the tokens in memory; the turn's end
			// (or the next write) saves them with everything else.
			if err := tr.s.store.SaveTeam(saveCtx, tr.t.st); err != nil {
				tr.s.log.WarnContext(ctx, "saving model usage failed", "team", tr.t.st.Name, "member", m.Name, "err", err)
			}
			tr.s.emit("member", tr.t.st.Name, tr.s.memberViewLocked(ctx, tr.t, m))
		}
	}
	tr.s.saveTurnLocked(saveCtx, tr.t, tr.doc)
}

// CheckBudget returns budget_exhausted when the team has spent its
// limits.model_tokens; a turn calls it before each model request.
func (tr *Turn) CheckBudget() error {
	tr.t.mu.Lock()
	defer tr.t.mu.Unlock()
	return budgetLocked(tr.t)
}

func budgetLocked(t *team) error {
	limit := t.st.Limits.ModelTokens
	if limit > 0 && t.usage().Total() >= limit {
		return Errorf(CodeBudgetExhausted, "The team has spent its model tokens (limits.model_tokens).")
	}
	return nil
}

// usage is the sum of the members' usage.
func (t *team) usage() Usage {
	var u Usage
	for _, m := range t.st.Members {
		u = u.Add(m.Usage)
	}
	return u
}

// BeginTurn claims member for a turn (see RunTurn for the rules) and
// creates its document, status running; Run runs it. The model names
// what the document shows. A team whose model tokens are spent is refused
// with budget_exhausted before anything changes.
func (s *Service) BeginTurn(ctx context.Context, teamName, member string, model ModelRef) (*Turn, error) {
	// Turns are started by the operator (the REST turn route, a scenario
	// run); a member's token cannot make anyone take a turn.
	if err := CheckAdmin(ctx); err != nil {
		return nil, err
	}
	t, err := s.lockTeam(teamName)
	if err != nil {
		return nil, err
	}
	defer t.mu.Unlock()
	m := t.member(member)
	if m == nil {
		return nil, Errorf(CodeNotFound, "No such member.")
	}
	if t.active[member] || m.Status != StatusIdle || (member != LeadName && m.Turns >= t.st.Limits.Turns) {
		return nil, Errorf(CodeMemberUnavailable, "The member is busy, not idle, closed or out of turns.")
	}
	if err := budgetLocked(t); err != nil {
		return nil, err
	}
	if err := s.clearStaleIntent(ctx, t); err != nil {
		return nil, err
	}
	m.Status, m.Turns = StatusRunning, m.Turns+1
	if err := s.store.SaveTeam(ctx, t.st); err != nil {
		m.Status, m.Turns = StatusIdle, m.Turns-1
		return nil, StorageError(err)
	}
	t.active[member] = true
	if model.Provider == "" {
		model.Provider = ScriptedModel().Provider
	}
	doc := &TurnDoc{
		TurnID: fmt.Sprintf("%s-t%d", member, m.Turns), Team: t.st.Name, Member: member, Model: model,
		Status: TurnRunning, Steps: []TurnStep{}, StartedAt: s.now().UTC(),
	}
	tr := &Turn{s: s, t: t, doc: doc, done: make(chan struct{})}
	if t.turns.running == nil {
		t.turns.running = map[string]*Turn{}
	}
	t.turns.running[doc.TurnID] = tr
	s.addTurnDocLocked(ctx, t, doc)
	s.turnStarted()
	s.emit("member", t.st.Name, s.memberViewLocked(ctx, t, m))
	s.emit("turn", t.st.Name, TurnEvent{TurnID: doc.TurnID, Member: member, Status: TurnRunning, Provider: model.Provider})
	return tr, nil
}

// addTurnDocLocked keeps doc as the team's newest document, saves it, and
// drops the oldest finished documents beyond MaxTurnDocs.
func (s *Service) addTurnDocLocked(ctx context.Context, t *team, doc *TurnDoc) {
	t.turns.docs = append(t.turns.docs, doc)
	s.saveTurnLocked(ctx, t, doc)
	for len(t.turns.docs) > MaxTurnDocs {
		i := 0
		for i < len(t.turns.docs) && t.turns.docs[i].Status == TurnRunning {
			i++
		}
		if i == len(t.turns.docs) {
			return
		}
		old := t.turns.docs[i]
		t.turns.docs = append(t.turns.docs[:i], t.turns.docs[i+1:]...)
		if ts, ok := s.store.(TurnStore); ok {
			if err := ts.DeleteTurn(ctx, t.st.Name, old.TurnID); err != nil {
				s.log.WarnContext(ctx, "removing an old turn document failed", "team", t.st.Name, "turn", old.TurnID, "err", err)
			}
		}
	}
}

// saveTurnLocked stores doc when the store keeps documents. A document is
// a record, not state the rules depend on: a failed save is logged and
// the turn goes on.
func (s *Service) saveTurnLocked(ctx context.Context, t *team, doc *TurnDoc) {
	ts, ok := s.store.(TurnStore)
	if !ok || t.deleted {
		return
	}
	if err := ts.SaveTurn(context.WithoutCancel(ctx), t.st.Name, doc); err != nil {
		s.log.WarnContext(ctx, "saving a turn document failed", "team", t.st.Name, "turn", doc.TurnID, "err", err)
	}
}

// Turns returns the team's turn documents, newest first.
func (s *Service) Turns(ctx context.Context, teamName string) ([]TurnDoc, error) {
	t, err := s.lookup(teamName)
	if err != nil {
		return nil, err
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	out := make([]TurnDoc, 0, len(t.turns.docs))
	for i := len(t.turns.docs) - 1; i >= 0; i-- {
		out = append(out, t.turns.docs[i].clone())
	}
	return out, nil
}

// TurnDocument returns one turn document; not_found when the team keeps
// none with that id.
func (s *Service) TurnDocument(ctx context.Context, teamName, turnID string) (TurnDoc, error) {
	t, err := s.lookup(teamName)
	if err != nil {
		return TurnDoc{}, err
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	d := t.turns.find(turnID)
	if d == nil {
		return TurnDoc{}, Errorf(CodeNotFound, "No such turn.")
	}
	return d.clone(), nil
}

// CancelTurn asks a running turn to stop at its next boundary: an
// in-flight model request is cancelled, a running tool finishes. It
// waits, bounded by ctx, for the turn to end, and returns the document as
// it then is. A turn that has already ended is returned unchanged.
func (s *Service) CancelTurn(ctx context.Context, teamName, turnID string) (TurnDoc, error) {
	t, err := s.lookup(teamName)
	if err != nil {
		return TurnDoc{}, err
	}
	t.mu.Lock()
	d := t.turns.find(turnID)
	if d == nil {
		t.mu.Unlock()
		return TurnDoc{}, Errorf(CodeNotFound, "No such turn.")
	}
	tr := t.turns.running[turnID]
	if tr == nil {
		doc := d.clone()
		t.mu.Unlock()
		return doc, nil
	}
	tr.cancelRequested = true
	if tr.cancel != nil {
		tr.cancel(errTurnCancelled)
	}
	t.mu.Unlock()
	select {
	case <-tr.done:
	case <-ctx.Done():
	}
	return tr.Document(), nil
}

// running turns of the whole service, so that a stopping server can wait
// for them (WaitTurns).
type turnCounter struct {
	mu   sync.Mutex
	n    int
	idle chan struct{}
}

func (s *Service) turnStarted() {
	c := &s.turnCount
	c.mu.Lock()
	c.n++
	c.mu.Unlock()
}

func (s *Service) turnEnded() {
	c := &s.turnCount
	c.mu.Lock()
	c.n--
	if c.n == 0 && c.idle != nil {
		close(c.idle)
		c.idle = nil
	}
	c.mu.Unlock()
}

// WaitTurns returns once no turn is running, or with ctx's error. A
// stopping server calls it after it has cancelled the turns, so that
// turns started without a waiting request (Prefer: respond-async) record
// how they ended before the store is closed.
func (s *Service) WaitTurns(ctx context.Context) error {
	c := &s.turnCount
	c.mu.Lock()
	if c.n == 0 {
		c.mu.Unlock()
		return nil
	}
	if c.idle == nil {
		c.idle = make(chan struct{})
	}
	idle := c.idle
	c.mu.Unlock()
	select {
	case <-idle:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// restoreTurns loads a team's stored documents at start. A document still
// running is a turn the server never ended: it becomes failed, with a
// text saying it was interrupted.
func (s *Service) restoreTurns(ctx context.Context, t *team) {
	ts, ok := s.store.(TurnStore)
	if !ok {
		return
	}
	docs, err := ts.LoadTurns(ctx, t.st.Name)
	if err != nil {
		s.log.Warn("loading turn documents failed; the team starts without them", "team", t.st.Name, "err", err)
		return
	}
	sort.Slice(docs, func(i, j int) bool {
		if !docs[i].StartedAt.Equal(docs[j].StartedAt) {
			return docs[i].StartedAt.Before(docs[j].StartedAt)
		}
		return docs[i].TurnID < docs[j].TurnID
	})
	for i := range docs {
		d := &docs[i]
		if d.Steps == nil {
			d.Steps = []TurnStep{}
		}
		if d.Status == TurnRunning {
			now := s.now().UTC()
			d.Status, d.Text, d.EndedAt = TurnFailed, RestartInterruptedText, &now
			if err := ts.SaveTurn(ctx, t.st.Name, d); err != nil {
				s.log.Warn("saving an interrupted turn's document failed", "team", t.st.Name, "turn", d.TurnID, "err", err)
			}
		}
		t.turns.docs = append(t.turns.docs, d)
	}
	for len(t.turns.docs) > MaxTurnDocs {
		old := t.turns.docs[0]
		t.turns.docs = t.turns.docs[1:]
		_ = ts.DeleteTurn(ctx, t.st.Name, old.TurnID)
	}
}
