// Package core holds every domain rule of Mailroom: teams, mailboxes,
// protocol requests and turns, exactly as the lessons define them (docs/spec.md §4)
// with the decisions of docs/spec.md §13. It imports no transport and no storage;
// storage is reached through the Store interface it owns.
package core

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"log/slog"
	"sort"
	"time"
	"unicode/utf8"
)

// Service is the domain over a Store. It keeps no state of its own, of a
// team or of the process: every operation is one unit of work on a
// snapshot of the team (update or view, changeset.go), and the store
// commits them with a version check (docs/spec.md §3), whichever process
// runs them. What the Service holds is only its parameters: the store,
// the clock, the team limit, and this process's name and lease duration
// that the lease rule uses. What the process knows of the moment (the
// event bus, MCP sessions, connections, waiting reads) is its Live's
// (internal/live); the turns it runs, the deletions in progress here and
// the goroutines that run work are its Work's (internal/runtime).
type Service struct {
	store Store
	log   *slog.Logger
	now   func() time.Time

	// live is told of every commit and asked for presence (Options.Live).
	live     Live
	maxTeams int
	// work keeps the turns this process runs and the deletions in
	// progress here, and is told of the teams whose work here ends
	// (Options.Work).
	work Work
	// holder names this process in the leases of the turns it runs;
	// leaseDur is how long a lease holds without renewal.
	holder   string
	leaseDur time.Duration
}

// Options configure a Service.
type Options struct {
	Logger *slog.Logger
	// Work is the runtime (internal/runtime) that keeps which turns this
	// process runs and which teams it is deleting, renews the leases of
	// the turns, counts them until they end and drops a deleted team's
	// wakes; nil means core keeps the turns and deletions itself and no
	// lease is renewed.
	Work Work
	// Live is the process around core (internal/live) that hears of every
	// commit, knows members' presence and wakes the turns waiting for a
	// person's decision; nil means none: events go nowhere and such a
	// wait ends only at its expiry.
	Live Live
	// Now is the clock; nil means time.Now.
	Now func() time.Time
	// MaxTeams bounds how many teams exist at once (every team counts,
	// damaged ones too); 0 means DefaultMaxTeams.
	MaxTeams int
	// Holder names this process in turn and run leases; "" means a
	// random name. Replicas on one store must have different holders.
	Holder string
	// LeaseDuration is how long a turn's or run's lease holds without
	// renewal; 0 means DefaultLeaseDuration. It is renewed every third
	// of it.
	LeaseDuration time.Duration
}

// DefaultMaxTeams is the team limit when Options.MaxTeams is 0.
const DefaultMaxTeams = 10000

// NewService returns a Service over store. Call Open before serving.
func NewService(store Store, opts Options) *Service {
	s := &Service{
		store:    store,
		log:      opts.Logger,
		now:      opts.Now,
		maxTeams: opts.MaxTeams,
		holder:   opts.Holder,
		leaseDur: opts.LeaseDuration,
		live:     opts.Live,
		work:     opts.Work,
	}
	if s.work == nil {
		s.work = &LocalWork{}
	}
	if s.live == nil {
		s.live = noLive{}
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
	if s.holder == "" {
		s.holder = "p-" + newToken()[3:19]
	}
	if s.leaseDur <= 0 {
		s.leaseDur = DefaultLeaseDuration
	}
	return s
}

// Now is the Service's clock (Options.Now), which the runtime's timers
// share.
func (s *Service) Now() time.Time { return s.now() }

// publish announces committed events to the process's Live, which
// tells its subscribers and the other processes.
func (s *Service) publish(events []Event) {
	for _, ev := range events {
		s.live.Publish(ev)
	}
}

// unit is one unit of work as core sees it: the store's transaction,
// the state it hands out, and the events to publish once it commits.
type unit struct {
	s      *Service
	tx     TeamTx
	st     *TeamState
	now    time.Time
	events []Event
	// after runs once the unit committed (process-local bookkeeping).
	after []func()
	// undo runs when it did not.
	undo []func()
	// autoArchived is set on the run of a unit after the auto-archive
	// its first run asked for (archive.go): a full inbox is then full.
	autoArchived bool
}

func (u *unit) emit(typ string, data any) {
	u.events = append(u.events, Event{Type: typ, Team: u.st.Name, Data: data})
}

func (u *unit) member(name string) *MemberState { return u.st.Member(name) }

func (u *unit) isMember(name string) bool { return u.st.IsMember(name) }

func (u *unit) request(id string) *Request {
	for i := range u.st.Requests {
		if u.st.Requests[i].ID == id {
			return &u.st.Requests[i]
		}
	}
	return nil
}

// update runs fn as one unit of work of team name and publishes its
// events once it committed. A caller that called with its member token
// must still be that member by that token (tokenHolds), checked before
// anything else. Leases of turns that no longer run are released first
// (releaseDead).
func (s *Service) update(ctx context.Context, name string, fn func(u *unit) error) error {
	err := s.update1(ctx, name, fn, false)
	var full *Error
	var want autoArchiveWanted
	if !errors.As(err, &full) || !errors.As(full.Err, &want) {
		return err
	}
	// A letter found its recipient's inbox full and the team archives
	// what the recipient has read first: one unit of work for the
	// archive, then the unit again. The archive stands even when the
	// letter still does not fit.
	if err := s.update1(ctx, name, func(u *unit) error {
		_, err := u.autoArchive(want.member)
		return err
	}, true); err != nil {
		return err
	}
	return s.update1(ctx, name, fn, true)
}

// update1 is one unit of work of update; autoArchived is set when a send
// in it must not ask for an auto-archive again.
func (s *Service) update1(ctx context.Context, name string, fn func(u *unit) error, autoArchived bool) error {
	var u *unit
	p, _ := PrincipalFrom(ctx)
	check := p.tokenCheck(name)
	var last error // what the last run of the function returned
	err := update(ctx, s.store, name, s.now, func(tx TeamTx) error {
		if u != nil {
			// Run again after a conflict: the last run did not commit,
			// so what it did in memory is undone first.
			for _, f := range u.undo {
				f()
			}
		}
		u = &unit{s: s, tx: tx, st: tx.State(), now: s.now(), autoArchived: autoArchived}
		last = func() error {
			if check && !p.tokenHolds(u.st) {
				return UnknownToken()
			}
			if u.st.Requests == nil {
				u.st.Requests = []Request{}
			}
			if err := s.releaseDead(u); err != nil {
				return err
			}
			return fn(u)
		}()
		return last
	})
	if check && teamGone(err, last) {
		return UnknownToken()
	}
	if err != nil {
		if u != nil {
			for _, f := range u.undo {
				f()
			}
		}
		return asStoreError(err)
	}
	for _, f := range u.after {
		f()
	}
	s.publish(u.events)
	return nil
}

// view runs fn on a consistent view of team name; with sound set a
// damaged team is refused. Dead leases are shown released, as the next
// unit of work will store them.
// The caller's token is checked as in update.
func (s *Service) view(ctx context.Context, name string, sound bool, fn func(u *unit) error) error {
	p, _ := PrincipalFrom(ctx)
	check := p.tokenCheck(name)
	var last error
	err := view(ctx, s.store, name, s.now(), func(tx TeamTx) error {
		last = func() error {
			if check && !p.tokenHolds(tx.State()) {
				return UnknownToken()
			}
			if sound && tx.Damaged() != nil {
				return DamagedError(tx.Damaged())
			}
			u := &unit{s: s, tx: tx, st: tx.State(), now: s.now()}
			if u.st.Requests == nil {
				u.st.Requests = []Request{}
			}
			if tx.Damaged() == nil {
				s.releaseDeadState(u)
			}
			return fn(u)
		}()
		return last
	})
	if check && teamGone(err, last) {
		return UnknownToken()
	}
	return asStoreError(err)
}

// teamGone reports whether err, what a unit of work on a team returned,
// says that the team does not exist: not_found that the unit's function
// (which returned last in its last run) did not return. For a caller
// with a token of that team it means the token's team was deleted since
// the lookup, which is refused as an unknown token is.
func teamGone(err, last error) bool {
	return ErrorCode(err) == CodeNotFound && (last == nil || !errors.Is(err, last))
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

// Open prepares the store: a Starter loads and repairs its teams. The
// other processes' events are the Live's to deliver (internal/live).
func (s *Service) Open(ctx context.Context) error {
	if st, ok := s.store.(Starter); ok {
		if err := st.Start(ctx); err != nil {
			return err
		}
	}
	return nil
}

// AdminName is what Mailroom calls the admin token where a member's name
// would stand (a task's created_by, a permission's decided_by), so no new
// member may take it (docs/api.md section I). A team imported with such a
// member keeps it: only creation refuses the name.
const AdminName = "admin"

// CreateTeam creates a team with lead plus the listed members and returns
// it with each member's token; tokens are shown only here and stored only
// as SHA-256 hashes.
func (s *Service) CreateTeam(ctx context.Context, spec TeamSpec) (TeamView, []CreatedMember, error) {
	if err := CheckAdmin(ctx); err != nil {
		return TeamView{}, nil, err
	}
	if !ValidName(spec.Name) {
		return TeamView{}, nil, Errorf(CodeValidation, "The team name is not a valid name: %s.", NameRule)
	}
	limits := DefaultLimits()
	if spec.Limits != nil {
		limits = *spec.Limits
	}
	// These limits have no "no bound": a spec that leaves one at 0 gets
	// its default.
	orDefault(&limits.PermissionTimeoutS, DefaultPermissionTimeoutS)
	orDefault(&limits.Tasks, DefaultTaskLimit)
	orDefault(&limits.ToolCalls, DefaultToolCalls)
	orDefault(&limits.ModelRequests, DefaultModelRequests)
	orDefault(&limits.WorkspaceBytes, DefaultWorkspaceBytes)
	orDefault(&limits.WorkspaceFiles, DefaultWorkspaceFiles)
	orDefault(&limits.Reservations, DefaultReservationLimit)
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
			return TeamView{}, nil, Errorf(CodeValidation, "A member name is not a valid name: %s.", NameRule)
		}
		if m.Name == AdminName {
			return TeamView{}, nil, Errorf(CodeValidation, "A member may not be named %s: it names the admin token.", AdminName)
		}
		if seen[m.Name] {
			return TeamView{}, nil, Errorf(CodeValidation, "Member names must be unique.")
		}
		seen[m.Name] = true
		skills, err := CheckLabels(m.Skills, "skills")
		if err != nil {
			return TeamView{}, nil, err
		}
		ms := MemberState{Name: m.Name, Role: m.Role, Status: StatusIdle, History: []Entry{}, Wake: m.Wake}
		if len(skills) > 0 {
			ms.Skills = skills
		}
		if m.Model != nil {
			if m.Model.Provider == "" {
				return TeamView{}, nil, Errorf(CodeValidation, "The model needs a provider.")
			}
			model := *m.Model
			ms.Model = &model
		}
		if ms.Wake && st.MemberModel(&ms).Provider == ScriptedModel().Provider {
			return TeamView{}, nil, Errorf(CodeValidation, "Member %s: %s", m.Name, scriptedWakeText)
		}
		if m.Name == LeadName {
			st.Members[0] = ms
			continue
		}
		st.Members = append(st.Members, ms)
	}
	tokens := make([]string, len(st.Members))
	for i := range st.Members {
		tokens[i] = newToken()
		st.Members[i].TokenHash = hashToken(tokens[i])
	}

	if err := s.TeamRoom(ctx, 1); err != nil {
		return TeamView{}, nil, err
	}
	if err := s.store.CreateTeam(ctx, st); err != nil {
		if ErrorCode(err) == CodeTeamExists {
			return TeamView{}, nil, err
		}
		return TeamView{}, nil, StorageError(err)
	}
	u := &unit{s: s, st: st, now: s.now()}
	view := u.teamView(nil)
	created := make([]CreatedMember, len(view.Members))
	for i, m := range view.Members {
		created[i] = CreatedMember{MemberView: m, Token: tokens[i]}
	}
	s.publish([]Event{{Type: EventMember, Team: st.Name, Data: view.Members}})
	return view, created, nil
}

func (l Limits) validate() error {
	for _, v := range []int{l.InboxMessages, l.InboxBytes, l.BodyChars, l.Requests, l.PayloadChars, l.Turns, l.HistoryEntries, l.Tasks, l.ToolCalls, l.ModelRequests, l.Reservations} {
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
	if l.WakeDelayMS < 0 || l.WakeDelayMS > MaxWakeDelayMS {
		return Errorf(CodeValidation, "wake_delay_ms must be 0 to %d.", MaxWakeDelayMS)
	}
	if l.WorkspaceBytes < 1 || l.WorkspaceFiles < 1 {
		return Errorf(CodeValidation, "workspace_bytes and workspace_files must be at least 1.")
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

// LookupPrincipal is the principal of the member token belongs to, as a
// door authenticates a call (internal/bearer), the lookup bound by the
// call's ctx: it carries the token's hash, so that the units of work of
// the call confirm the token (tokenHolds), the connections it opens
// follow exactly the team the token belongs to (CheckConnection) and the
// per-token bounds count by token. Its errors: CodeNotFound for a token
// no member has, or the store's error (storage_unavailable while a shared
// database cannot be reached), so that a door can answer 503 rather than
// 401 when it cannot tell. The token is hashed once, for the lookup and
// the principal.
//
// It asks the store's token lookup, which never waits for a team's unit
// of work: a team busy with a long write must not hold up every request
// of its members before they reach their own work. Tokens are looked up
// by their SHA-256, so the time a lookup takes depends on the hash, never
// on how much of a guessed token is right.
func (s *Service) LookupPrincipal(ctx context.Context, token string) (Principal, error) {
	if token == "" {
		return Principal{}, Errorf(CodeNotFound, "No member has this token.")
	}
	hash := hashToken(token)
	team, m, err := s.store.LookupToken(ctx, hash)
	if err != nil {
		if ErrorCode(err) != CodeNotFound {
			s.log.WarnContext(ctx, "token lookup failed", "err", err)
		}
		return Principal{}, err
	}
	return Principal{Team: team, Member: m, tokenHash: hash}, nil
}

// Teams lists every team, newest first.
func (s *Service) Teams(ctx context.Context) []TeamSummary {
	out, err := s.store.ListTeams(ctx)
	if err != nil {
		s.log.WarnContext(ctx, "listing teams failed", "err", err)
		return []TeamSummary{}
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
	var v TeamView
	err := s.view(ctx, name, false, func(u *unit) error {
		v = u.teamView(u.tx.Damaged())
		return nil
	})
	return v, err
}

// HasMember reports whether member belongs to team (not_found otherwise).
func (s *Service) HasMember(ctx context.Context, teamName, member string) error {
	return s.view(ctx, teamName, false, func(u *unit) error {
		if !u.isMember(member) {
			return u.noSuchMember()
		}
		return nil
	})
}

func (u *unit) teamView(damaged error) TeamView {
	st := u.st
	v := TeamView{Name: st.Name, CreatedAt: st.CreatedAt, Limits: st.Limits, Damaged: damaged != nil,
		Purpose: st.Purpose, Model: st.ModelOf(), Workspace: st.Workspace, HostPermission: st.HostPermissionOf()}
	v.Members = make([]MemberView, 0, len(st.Members))
	for i := range st.Members {
		v.Members = append(v.Members, u.memberView(&st.Members[i]))
	}
	v.Usage = u.usage()
	v.Requests = append([]Request{}, st.Requests...)
	for i := range v.Requests {
		v.Requests[i] = copyRequest(v.Requests[i])
	}
	return v
}

func (u *unit) memberView(m *MemberState) MemberView {
	mv := MemberView{Name: m.Name, Role: m.Role, Status: m.Status, Active: u.s.busy(u.st.Name, m, u.now), Turns: m.Turns, HistoryLength: len(m.History), Usage: m.Usage,
		Wake: m.Wake, WakeHeld: m.WakeHeld, Skills: append([]string{}, m.Skills...), Archived: m.Archive.Count()}
	mv.MCPSessions, mv.MCPLastSeen = u.s.live.Presence(u.st.Name, m.Name)
	if m.WakeHeld {
		reason := m.WakeHeldReason
		mv.WakeHeldReason = &reason
	}
	if m.Model != nil {
		model := *m.Model
		mv.Model = &model
	}
	if u.tx != nil && u.tx.Damaged() == nil {
		// Counted, not read, where the store keeps counts (InboxCounter):
		// a member document costs the same over any inbox.
		if n, err := inboxLen(u.tx, m.Name); err == nil {
			mv.InboxLength = n
		}
		if rs, err := u.readState(m.Name, mv.InboxLength); err == nil {
			mv.ReadThrough, mv.Unread = rs.ReadThrough, rs.Unread
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

// orDefault sets *v to d when it is 0.
func orDefault[T int | int64](v *T, d T) {
	if *v == 0 {
		*v = d
	}
}
