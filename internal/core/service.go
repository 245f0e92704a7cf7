// Package core holds every domain rule of Mailroom: teams, mailboxes,
// protocol requests and turns, exactly as the lessons define them (SPEC §4)
// with the decisions of SPEC §13. It imports no transport and no storage;
// storage is reached through the Store interface it owns.
package core

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"log/slog"
	"sort"
	"sync"
	"time"
	"unicode/utf8"
)

// Observer receives events. It is called with the team's lock held, so it
// must not block and must not call back into the Service.
type Observer func(Event)

// Service is the set of teams. Each team has its own lock (SPEC §3): the
// lock covers every mailbox read-modify-write and every change of member
// and request state of that team, and never a model turn.
type Service struct {
	store legacyStore
	log   *slog.Logger
	now   func() time.Time

	mu       sync.RWMutex
	teams    map[string]*team
	tokens   map[string]principalRef // sha256(token) hex → member
	observer Observer
	waiters  waiters // readers waiting for mail (waiters.go)
	maxTeams int
	// turnCount counts the running turns (turndoc.go, WaitTurns).
	turnCount turnCounter
}

type principalRef struct {
	team   string
	member string
}

// Options configure a Service.
type Options struct {
	Logger   *slog.Logger
	Observer Observer
	// Now is the clock; nil means time.Now.
	Now func() time.Time
	// MaxTeams bounds how many teams exist at once (every team counts,
	// damaged ones too); 0 means DefaultMaxTeams.
	MaxTeams int
}

// DefaultMaxTeams is the team limit when Options.MaxTeams is 0.
const DefaultMaxTeams = 10000

// NewService returns an empty Service over store. Call Open to load the
// teams that store already holds.
func NewService(store legacyStore, opts Options) *Service {
	s := &Service{
		store:    store,
		log:      opts.Logger,
		now:      opts.Now,
		teams:    map[string]*team{},
		tokens:   map[string]principalRef{},
		observer: opts.Observer,
		maxTeams: opts.MaxTeams,
	}
	if s.maxTeams <= 0 {
		s.maxTeams = DefaultMaxTeams
	}
	if s.log == nil {
		s.log = slog.New(slog.DiscardHandler)
	}
	if s.now == nil {
		s.now = time.Now
	}
	return s
}

// SetObserver replaces the observer; wiring code sets it once before serving.
func (s *Service) SetObserver(o Observer) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.observer = o
}

func (s *Service) emit(typ, team string, data any) {
	s.wakeWaiters(typ, team, data)
	s.mu.RLock()
	o := s.observer
	s.mu.RUnlock()
	if o != nil {
		o(Event{Type: typ, Team: team, Data: data})
	}
}

// team is one team in memory. st is the durable state; active is the
// occupancy flag of each member, which is not durable.
type team struct {
	mu      sync.Mutex
	st      *TeamState
	active  map[string]bool
	damaged error
	// deleted is set, under mu, once the team has been removed from the
	// store: a call that found the team before and waited for its lock
	// must not write to a name that may already belong to a new team.
	deleted bool
	// staleIntent is set when memory is ahead of disk because a save
	// failed: an intent whose letter was not written could not be cleared,
	// start-up's repair could not be saved, or a turn's rollback could not
	// be. Memory is what a restart would load, so it is served as it is;
	// the next letter or turn saves it first, and fails with
	// storage_failed while it cannot.
	staleIntent bool
	// idem is the team's remembered idempotent writes (idempotency.go).
	idem idemState
	// turns is the team's turn documents and running turns (turndoc.go).
	turns turnBook
}

func (t *team) member(name string) *MemberState {
	for i := range t.st.Members {
		if t.st.Members[i].Name == name {
			return &t.st.Members[i]
		}
	}
	return nil
}

func (t *team) isMember(name string) bool { return t.member(name) != nil }

func (t *team) rules(recipient string) InboxRules {
	return InboxRules{Recipient: recipient, Limits: t.st.Limits, IsMember: t.isMember}
}

func (t *team) request(id string) *Request {
	for i := range t.st.Requests {
		if t.st.Requests[i].ID == id {
			return &t.st.Requests[i]
		}
	}
	return nil
}

// lookup finds a team; not_found when absent.
func (s *Service) lookup(name string) (*team, error) {
	s.mu.RLock()
	t := s.teams[name]
	s.mu.RUnlock()
	if t == nil {
		return nil, Errorf(CodeNotFound, "No such team.")
	}
	return t, nil
}

// lockTeam finds and locks a team that is not damaged. The caller unlocks.
func (s *Service) lockTeam(name string) (*team, error) {
	t, err := s.lookup(name)
	if err != nil {
		return nil, err
	}
	t.mu.Lock()
	if t.deleted {
		t.mu.Unlock()
		return nil, Errorf(CodeNotFound, "No such team.")
	}
	if t.damaged != nil {
		t.mu.Unlock()
		return nil, &Error{Code: CodeInboxCorrupt, Message: "The team's stored state failed validation at start; it is served read-only.", Err: t.damaged}
	}
	return t, nil
}

func hashToken(token string) string {
	sum := sha256.Sum256([]byte(token))
	return hex.EncodeToString(sum[:])
}

func newToken() string {
	b := make([]byte, 24)
	_, _ = rand.Read(b) // crypto/rand.Read never fails on supported platforms
	return "mr_" + hex.EncodeToString(b)
}

// Open loads every team the store holds, completes or drops recorded
// intents (SPEC §13.14) and validates each inbox. A team that fails is kept
// as damaged: served with errors, never rewritten, and the others go on.
//
// Teams are recovered by a few goroutines at once, since each recovery
// touches only its own team; they are registered afterwards in the store's
// order, so the outcome does not depend on the schedule.
func (s *Service) Open(ctx context.Context) error {
	loaded, err := s.store.LoadTeams(ctx)
	if err != nil {
		return err
	}
	teams := make([]*team, len(loaded))
	ForEach(len(loaded), func(i int) {
		lt := loaded[i]
		t := &team{st: lt.State, active: map[string]bool{}, damaged: lt.Err}
		if t.st == nil {
			t.st = &TeamState{Name: lt.Name, Limits: DefaultLimits()}
		}
		if t.damaged == nil {
			t.damaged = s.recover(ctx, t)
		}
		if t.damaged == nil {
			s.restoreTurns(ctx, t)
		}
		teams[i] = t
	})
	for i, t := range teams {
		if t.damaged != nil {
			s.log.Error("team damaged; serving it read-only", "team", loaded[i].Name, "err", t.damaged)
		}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	for i, t := range teams {
		s.teams[loaded[i].Name] = t
		for _, m := range t.st.Members {
			if m.TokenHash != "" {
				s.tokens[m.TokenHash] = principalRef{team: loaded[i].Name, member: m.Name}
			}
		}
	}
	return nil
}

// CreateTeam creates a team with lead plus the listed members and returns
// it with each member's token; tokens are shown only here and stored only
// as SHA-256 hashes.
func (s *Service) CreateTeam(ctx context.Context, spec TeamSpec) (TeamView, []CreatedMember, error) {
	if err := CheckAdmin(ctx); err != nil {
		return TeamView{}, nil, err
	}
	if !ValidName(spec.Name) {
		return TeamView{}, nil, Errorf(CodeValidation, "The team name must match ^[a-z][a-z0-9-]{0,23}$.")
	}
	limits := DefaultLimits()
	if spec.Limits != nil {
		limits = *spec.Limits
	}
	if limits.PermissionTimeoutS == 0 {
		limits.PermissionTimeoutS = DefaultPermissionTimeoutS
	}
	if err := limits.validate(); err != nil {
		return TeamView{}, nil, err
	}
	if err := spec.validateSettings(); err != nil {
		return TeamView{}, nil, err
	}
	st := &TeamState{Name: spec.Name, CreatedAt: s.now().UTC(), Limits: limits, Requests: []Request{},
		Purpose: spec.Purpose, Workspace: spec.Workspace, HostPermission: spec.HostPermission}
	if st.HostPermission == "" {
		st.HostPermission = HostAsk
	}
	if spec.Model != nil {
		model := *spec.Model
		st.Model = &model
	}
	st.Members = append(st.Members, MemberState{Name: LeadName, Status: StatusIdle, History: []Entry{}})
	seen := map[string]bool{}
	for _, m := range spec.Members {
		if !ValidName(m.Name) {
			return TeamView{}, nil, Errorf(CodeValidation, "Member names must match ^[a-z][a-z0-9-]{0,23}$.")
		}
		if seen[m.Name] {
			return TeamView{}, nil, Errorf(CodeValidation, "Member names must be unique.")
		}
		seen[m.Name] = true
		if m.Name == LeadName {
			st.Members[0].Role = m.Role
			continue
		}
		st.Members = append(st.Members, MemberState{Name: m.Name, Role: m.Role, Status: StatusIdle, History: []Entry{}})
	}
	tokens := make([]string, len(st.Members))
	for i := range st.Members {
		tokens[i] = newToken()
		st.Members[i].TokenHash = hashToken(tokens[i])
	}

	s.mu.Lock()
	if _, taken := s.teams[spec.Name]; taken {
		s.mu.Unlock()
		return TeamView{}, nil, Errorf(CodeTeamExists, "A team with this name already exists.")
	}
	if len(s.teams) >= s.maxTeams {
		s.mu.Unlock()
		return TeamView{}, nil, teamLimitError()
	}
	// Reserve the name while the store writes, so a concurrent create of
	// the same name fails instead of racing on disk.
	t := &team{st: st, active: map[string]bool{}}
	t.mu.Lock()
	s.teams[spec.Name] = t
	s.mu.Unlock()

	if err := s.store.CreateTeam(ctx, st); err != nil {
		t.mu.Unlock()
		s.mu.Lock()
		delete(s.teams, spec.Name)
		s.mu.Unlock()
		if ErrorCode(err) == CodeTeamExists {
			return TeamView{}, nil, err
		}
		return TeamView{}, nil, StorageError(err)
	}
	s.mu.Lock()
	for _, m := range st.Members {
		s.tokens[m.TokenHash] = principalRef{team: st.Name, member: m.Name}
	}
	s.mu.Unlock()
	view := s.viewLocked(ctx, t)
	t.mu.Unlock()

	created := make([]CreatedMember, len(view.Members))
	for i, m := range view.Members {
		created[i] = CreatedMember{MemberView: m, Token: tokens[i]}
	}
	s.emit("member", st.Name, view.Members)
	return view, created, nil
}

func (l Limits) validate() error {
	for _, v := range []int{l.InboxMessages, l.InboxBytes, l.BodyChars, l.Requests, l.PayloadChars, l.Turns, l.HistoryEntries} {
		if v < 1 {
			return Errorf(CodeValidation, "Every limit must be at least 1 (feedback_chars at least 0).")
		}
	}
	if l.FeedbackChars < 0 {
		return Errorf(CodeValidation, "Every limit must be at least 1 (feedback_chars at least 0).")
	}
	if l.ModelTokens < 0 || l.PermissionTimeoutS < 1 {
		return Errorf(CodeValidation, "model_tokens must be at least 0 (0: no bound) and permission_timeout_s at least 1.")
	}
	return nil
}

// validateSettings checks what a team is told and how it answers the
// host gate; the model itself is validated by whoever knows the
// providers (the agent package).
func (spec TeamSpec) validateSettings() error {
	if utf8.RuneCountInString(spec.Purpose) > MaxPurposeChars {
		return Errorf(CodeValidation, "The purpose must be at most %d characters.", MaxPurposeChars)
	}
	switch spec.HostPermission {
	case "", HostAsk, HostAllow, HostDeny:
	default:
		return Errorf(CodeValidation, "host_permission must be ask, allow or deny.")
	}
	if spec.Model != nil && spec.Model.Provider == "" {
		return Errorf(CodeValidation, "The model needs a provider.")
	}
	return nil
}

// Authenticate returns the team and member a member token belongs to.
//
// It reads only the token map, under the service's read lock, and never
// takes a team's lock: a team busy with a long write must not hold up
// every request of its members before they reach their own work. The map
// is keyed by the token's SHA-256, so the time a lookup takes depends on
// the hash, never on how much of a guessed token is right. Whatever
// removes a member or a team removes its tokens from the map.
func (s *Service) Authenticate(token string) (teamName, member string, ok bool) {
	if token == "" {
		return "", "", false
	}
	h := hashToken(token)
	s.mu.RLock()
	ref, found := s.tokens[h]
	s.mu.RUnlock()
	if !found {
		return "", "", false
	}
	return ref.team, ref.member, true
}

// Teams lists every team, newest first.
func (s *Service) Teams() []TeamSummary {
	s.mu.RLock()
	list := make([]*team, 0, len(s.teams))
	for _, t := range s.teams {
		list = append(list, t)
	}
	s.mu.RUnlock()
	out := make([]TeamSummary, 0, len(list))
	for _, t := range list {
		t.mu.Lock()
		out = append(out, TeamSummary{Name: t.st.Name, Members: len(t.st.Members), CreatedAt: t.st.CreatedAt})
		t.mu.Unlock()
	}
	sort.Slice(out, func(i, j int) bool {
		if !out[i].CreatedAt.Equal(out[j].CreatedAt) {
			return out[i].CreatedAt.After(out[j].CreatedAt)
		}
		return out[i].Name < out[j].Name
	})
	return out
}

// Team returns one team's view. A damaged team is returned with Damaged set.
func (s *Service) Team(ctx context.Context, name string) (TeamView, error) {
	if err := CheckReader(ctx, name); err != nil {
		return TeamView{}, err
	}
	t, err := s.lookup(name)
	if err != nil {
		return TeamView{}, err
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	return s.viewLocked(ctx, t), nil
}

// HasMember reports whether member belongs to team (not_found otherwise).
func (s *Service) HasMember(teamName, member string) error {
	t, err := s.lookup(teamName)
	if err != nil {
		return err
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if !t.isMember(member) {
		return Errorf(CodeNotFound, "No such member.")
	}
	return nil
}

func (s *Service) viewLocked(ctx context.Context, t *team) TeamView {
	v := TeamView{Name: t.st.Name, CreatedAt: t.st.CreatedAt, Limits: t.st.Limits, Damaged: t.damaged != nil,
		Purpose: t.st.Purpose, Model: t.st.ModelOf(), Workspace: t.st.Workspace, HostPermission: t.st.HostPermissionOf()}
	v.Members = make([]MemberView, 0, len(t.st.Members))
	for i := range t.st.Members {
		v.Members = append(v.Members, s.memberViewLocked(ctx, t, &t.st.Members[i]))
	}
	v.Usage = t.usage()
	v.Requests = append([]Request{}, t.st.Requests...)
	for i := range v.Requests {
		v.Requests[i] = copyRequest(v.Requests[i])
	}
	return v
}

func (s *Service) memberViewLocked(ctx context.Context, t *team, m *MemberState) MemberView {
	mv := MemberView{Name: m.Name, Role: m.Role, Status: m.Status, Active: t.active[m.Name], Turns: m.Turns, HistoryLength: len(m.History), Usage: m.Usage}
	if t.damaged == nil {
		if items, err := s.store.LoadInbox(ctx, t.st.Name, t.rules(m.Name)); err == nil {
			mv.InboxLength = len(items)
		}
	}
	return mv
}

func copyRequest(r Request) Request {
	if r.Reply != nil {
		rep := *r.Reply
		r.Reply = &rep
	}
	return r
}
