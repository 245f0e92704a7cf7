package core

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
	"unicode/utf8"

	"mailroom/internal/globs"
)

// File reservations (docs/api.md, "Agents that share a repository"): a
// member announces the files it is about to change as glob patterns, and
// the others learn who holds what before they touch it. They are advisory:
// nothing stops a write, but a grant that would clash is refused, and the
// commit guard refuses a commit of held paths.
//
// The reservations live in the team's state (TeamState.Reservations), so
// that a grant is decided inside the team's unit of work: of concurrent
// conflicting requests exactly one is granted, on either store and across
// replicas, because units of work of one team run one after another. And
// they are as durable as the state itself.

// The bounds of a reservation.
const (
	// DefaultReservationTTL is a reservation's life when the caller names
	// none; MinReservationTTL and MaxReservationTTL bound what it may name.
	DefaultReservationTTL = 3600
	MinReservationTTL     = 60
	MaxReservationTTL     = 86400
	// MaxReservationReason bounds the reason in characters.
	MaxReservationReason = 200
	// DefaultReservationLimit is limits.reservations when a team names
	// none: the live reservations a team may hold.
	DefaultReservationLimit = 200
	// MaxCheckPaths bounds the concrete paths of one check; a client with
	// more (a commit of thousands of files) asks in batches.
	MaxCheckPaths = 1000
	// MaxCheckPathChars bounds one concrete path of a check.
	MaxCheckPathChars = 4096
	// keptClosedReservations is how many released or expired
	// reservations a team keeps for ?all=true, newest first; older ones
	// are dropped, so that the state does not grow with every grant.
	keptClosedReservations = 50
)

// Codes of reservations.
const (
	// CodeReservationConflict refuses a grant that would clash with a live
	// reservation of another member; the error carries the conflicts
	// (ReservationConflicts) and nothing was reserved.
	CodeReservationConflict Code = "reservation_conflict"
	// CodeReservationLimit refuses a grant past limits.reservations.
	CodeReservationLimit Code = "reservation_limit"
	// CodeReservationClosed refuses a renew or release of a reservation
	// that was released or has expired.
	CodeReservationClosed Code = "reservation_closed"
)

// EventReservation announces a reservation granted, renewed or released
// (its data is the Reservation as it is now).
const EventReservation = "reservation"

// Reservation is one grant of path patterns to a member.
type Reservation struct {
	ID        string   `json:"reservation_id"`
	Member    string   `json:"member"`
	Paths     []string `json:"paths"`
	Exclusive bool     `json:"exclusive"`
	// Reason is the holder's note, or nil.
	Reason     *string    `json:"reason"`
	CreatedAt  time.Time  `json:"created_at"`
	ExpiresAt  time.Time  `json:"expires_at"`
	ReleasedAt *time.Time `json:"released_at"`
}

// Live reports whether r holds its paths at now: not released and not
// past its expiry. Only live reservations conflict.
func (r *Reservation) Live(now time.Time) bool {
	return r.ReleasedAt == nil && now.Before(r.ExpiresAt)
}

// clashes reports whether a grant of a (by member, exclusive) would clash
// with the live reservation r: they belong to different members, at least
// one of them is exclusive, and some path could match both.
func (r *Reservation) clashes(member string, exclusive bool, patterns []*globs.Pattern) bool {
	if r.Member == member || (!exclusive && !r.Exclusive) {
		return false
	}
	return globs.ListsOverlap(patterns, compiledList(r.Paths))
}

// ReservationConflict names one reservation a grant clashed with.
type ReservationConflict struct {
	ReservationID string    `json:"reservation_id"`
	Member        string    `json:"member"`
	Paths         []string  `json:"paths"`
	ExpiresAt     time.Time `json:"expires_at"`
}

// ReservationConflicts is the cause of a reservation_conflict error: the
// reservations the grant clashed with, in id order. The doors find it
// with errors.As and send it beside the problem's code.
type ReservationConflicts struct {
	Conflicts []ReservationConflict
}

func (c *ReservationConflicts) Error() string {
	ids := make([]string, len(c.Conflicts))
	for i, x := range c.Conflicts {
		ids[i] = x.ReservationID
	}
	return "conflicts with " + strings.Join(ids, ", ")
}

// PathConflict is one concrete path of a check that a live reservation of
// another member holds.
type PathConflict struct {
	Path          string `json:"path"`
	ReservationID string `json:"reservation_id"`
	Member        string `json:"member"`
	Exclusive     bool   `json:"exclusive"`
}

// ReserveInput is a request for a reservation. A nil TTLSeconds means
// DefaultReservationTTL; a nil Exclusive means exclusive.
type ReserveInput struct {
	Paths      []string
	Exclusive  *bool
	TTLSeconds *int
	Reason     *string
}

// ReservationFilter selects reservations of a list; empty fields select
// all. Path is a concrete path: the reservations with a pattern matching
// it. All includes released and expired ones.
type ReservationFilter struct {
	Member string
	Path   string
	All    bool
}

// ReservationLimit is limits.reservations, its default when unset (a team
// stored before reservations existed).
func (l Limits) ReservationLimit() int {
	if l.Reservations <= 0 {
		return DefaultReservationLimit
	}
	return l.Reservations
}

// patternCache holds each pattern compiled once: building a pattern's
// automaton costs far more than asking it a question, and a grant asks
// the patterns of every live reservation. A pattern's model depends on
// its text only, so the cache is shared by all teams; it is emptied when
// it grows past cachedPatterns entries.
var patternCache struct {
	m sync.Map // string → *globs.Pattern
	n atomic.Int64
}

const cachedPatterns = 1 << 16

// compiled returns pattern compiled. A stored pattern was validated
// when it was granted; one that no longer compiles (never expected) is
// read as "**", which overlaps everything, so that a mistake errs on the
// side of a conflict.
func compiled(pattern string) *globs.Pattern {
	if p, ok := patternCache.m.Load(pattern); ok {
		return p.(*globs.Pattern)
	}
	p, err := globs.Compile(pattern)
	if err != nil {
		p, _ = globs.Compile("**")
	}
	if patternCache.n.Add(1) > cachedPatterns {
		patternCache.m.Clear()
		patternCache.n.Store(1)
	}
	patternCache.m.Store(pattern, p)
	return p
}

func compiledList(patterns []string) []*globs.Pattern {
	out := make([]*globs.Pattern, len(patterns))
	for i, p := range patterns {
		out[i] = compiled(p)
	}
	return out
}

// checkReserveInput validates a request before any unit of work, so that
// bad input never reaches the store, and returns its TTL and reason.
func checkReserveInput(in ReserveInput) (time.Duration, *string, error) {
	if err := globs.ValidateList(in.Paths); err != nil {
		return 0, nil, Errorf(CodeValidation, "%s", err.Error())
	}
	ttl := DefaultReservationTTL
	if in.TTLSeconds != nil {
		ttl = *in.TTLSeconds
	}
	if err := checkTTL(ttl); err != nil {
		return 0, nil, err
	}
	var reason *string
	if in.Reason != nil {
		if !utf8.ValidString(*in.Reason) || utf8.RuneCountInString(*in.Reason) > MaxReservationReason {
			return 0, nil, Errorf(CodeValidation, "The reason must be at most %d characters of valid UTF-8.", MaxReservationReason)
		}
		if t := strings.TrimSpace(*in.Reason); t != "" {
			reason = &t
		}
	}
	return time.Duration(ttl) * time.Second, reason, nil
}

func checkTTL(ttl int) error {
	if ttl < MinReservationTTL || ttl > MaxReservationTTL {
		return Errorf(CodeValidation, "ttl_seconds must be %d to %d.", MinReservationTTL, MaxReservationTTL)
	}
	return nil
}

// Reserve grants the caller (a member) a reservation of in.Paths, or
// refuses it whole: validation_failed, member_closed, reservation_conflict
// (naming every live reservation of another member it clashes with) or
// reservation_limit. The decision and the grant are one unit of work.
func (s *Service) Reserve(ctx context.Context, team string, in ReserveInput) (Reservation, error) {
	me, err := actor(ctx, team)
	if err != nil {
		return Reservation{}, err
	}
	ttl, reason, err := checkReserveInput(in)
	if err != nil {
		return Reservation{}, err
	}
	exclusive := in.Exclusive == nil || *in.Exclusive
	paths := slices.Clone(in.Paths)
	patterns := compiledList(paths)
	// The costly part, the overlap of the patterns with every live
	// reservation, is decided on a view, outside the team's unit of work,
	// so that it holds up no send. The unit of work then asks only about
	// the reservations granted since (the others' patterns and kinds
	// never change, and one released or expired since conflicts with
	// nothing): the decision is the one a unit of work that did it all
	// would make.
	var (
		incarnation time.Time
		seen        = map[string]bool{}
		clash       = map[string]bool{}
		live        []Reservation
	)
	err = s.view(ctx, team, false, func(u *unit) error {
		incarnation, live = u.st.CreatedAt, u.liveReservations()
		return nil
	})
	if err != nil {
		return Reservation{}, err
	}
	ix := indexFor(team, live)
	for _, r := range live {
		seen[r.ID] = true
	}
	for _, i := range ix.clashing(me, exclusive, patterns) {
		clash[live[i].ID] = true
	}
	var out Reservation
	err = s.update(ctx, team, func(u *unit) error {
		m := u.member(me)
		if m == nil {
			return u.noSuchMember()
		}
		if m.Status == StatusClosed {
			return Errorf(CodeMemberClosed, "The member has been shut down.")
		}
		sameTeam := u.st.CreatedAt.Equal(incarnation)
		live := 0
		var conflicts []ReservationConflict
		for i := range u.st.Reservations {
			r := &u.st.Reservations[i]
			if !r.Live(u.now) {
				continue
			}
			live++
			decided := sameTeam && seen[r.ID]
			if (decided && clash[r.ID]) || (!decided && r.clashes(me, exclusive, patterns)) {
				conflicts = append(conflicts, ReservationConflict{ReservationID: r.ID, Member: r.Member, Paths: slices.Clone(r.Paths), ExpiresAt: r.ExpiresAt})
			}
		}
		if len(conflicts) > 0 {
			return &Error{
				Code:    CodeReservationConflict,
				Message: conflictMessage(conflicts),
				Err:     &ReservationConflicts{Conflicts: conflicts},
			}
		}
		if limit := u.st.Limits.ReservationLimit(); live >= limit {
			return Errorf(CodeReservationLimit, "The team holds %d live reservations, its limit (limits.reservations); release one or wait for one to expire.", limit)
		}
		u.st.ReservationSeq++
		now := u.now.UTC()
		out = Reservation{
			ID:        "res-" + strconv.Itoa(u.st.ReservationSeq),
			Member:    me,
			Paths:     paths,
			Exclusive: exclusive,
			Reason:    reason,
			CreatedAt: now,
			ExpiresAt: now.Add(ttl),
		}
		rs := append(slices.Clone(u.st.Reservations), out)
		u.st.Reservations = pruneReservations(rs, u.now)
		u.emit(EventReservation, out)
		return nil
	})
	if err != nil {
		return Reservation{}, err
	}
	return out, nil
}

// liveReservations copies the team's live reservations, in id order.
func (u *unit) liveReservations() []Reservation {
	var out []Reservation
	for i := range u.st.Reservations {
		if u.st.Reservations[i].Live(u.now) {
			out = append(out, u.st.Reservations[i])
		}
	}
	return out
}

// conflictMessage names the clashing reservations and their holders.
// Member names and ids are of the safe alphabets of names and ids, so the
// message may hold them.
func conflictMessage(cs []ReservationConflict) string {
	parts := make([]string, len(cs))
	for i, c := range cs {
		parts[i] = fmt.Sprintf("%s of %s until %s", c.ReservationID, c.Member, c.ExpiresAt.UTC().Format(time.RFC3339))
	}
	return "The paths overlap live reservations of other members; nothing was reserved: " + strings.Join(parts, "; ") + "."
}

// pruneReservations keeps every live reservation and the newest
// keptClosedReservations closed ones, in id order.
func pruneReservations(rs []Reservation, now time.Time) []Reservation {
	closed := 0
	for i := range rs {
		if !rs[i].Live(now) {
			closed++
		}
	}
	drop := closed - keptClosedReservations
	if drop <= 0 {
		return rs
	}
	out := rs[:0:0]
	for i := range rs {
		if drop > 0 && !rs[i].Live(now) {
			drop--
			continue
		}
		out = append(out, rs[i])
	}
	return out
}

// ListReservations returns the team's reservations that match f, in id
// order (the admin or a member of the team).
func (s *Service) ListReservations(ctx context.Context, team string, f ReservationFilter) ([]Reservation, error) {
	if err := CheckReader(ctx, team); err != nil {
		return nil, err
	}
	if f.Path != "" {
		if err := checkConcretePath(f.Path); err != nil {
			return nil, err
		}
	}
	out := []Reservation{}
	err := s.view(ctx, team, false, func(u *unit) error {
		for i := range u.st.Reservations {
			r := u.st.Reservations[i]
			if !f.All && !r.Live(u.now) {
				continue
			}
			if f.Member != "" && r.Member != f.Member {
				continue
			}
			if f.Path != "" && !slices.ContainsFunc(r.Paths, func(p string) bool { return compiled(p).Match(f.Path) }) {
				continue
			}
			out = append(out, r)
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// reservationIn finds reservation id of the team's state for a change:
// the slice is replaced by a copy first (units of work never change a
// stored slice in place), and the returned pointer points into the copy.
func (u *unit) reservationIn(id string) (*Reservation, error) {
	for i := range u.st.Reservations {
		if u.st.Reservations[i].ID == id {
			u.st.Reservations = slices.Clone(u.st.Reservations)
			return &u.st.Reservations[i], nil
		}
	}
	return nil, Errorf(CodeNotFound, "No such reservation in this team.")
}

func reservationClosed(r *Reservation) error {
	if r.ReleasedAt != nil {
		return Errorf(CodeReservationClosed, "The reservation was released.")
	}
	return Errorf(CodeReservationClosed, "The reservation has expired.")
}

// RenewReservation gives reservation id a new expiry ttlSeconds from now
// (its holder only). A released or expired one cannot be renewed: the
// holder reserves again, and learns of anyone who took the paths since.
func (s *Service) RenewReservation(ctx context.Context, team, id string, ttlSeconds int) (Reservation, error) {
	me, err := actor(ctx, team)
	if err != nil {
		return Reservation{}, err
	}
	if err := checkTTL(ttlSeconds); err != nil {
		return Reservation{}, err
	}
	var out Reservation
	err = s.update(ctx, team, func(u *unit) error {
		r, err := u.reservationIn(id)
		if err != nil {
			return err
		}
		if r.Member != me {
			return Errorf(CodeForbidden, "Only the member holding a reservation may renew it.")
		}
		if !r.Live(u.now) {
			return reservationClosed(r)
		}
		r.ExpiresAt = u.now.UTC().Add(time.Duration(ttlSeconds) * time.Second)
		out = *r
		u.emit(EventReservation, out)
		return nil
	})
	if err != nil {
		return Reservation{}, err
	}
	return out, nil
}

// ReleaseReservation releases reservation id: its holder, the lead or the
// admin may.
func (s *Service) ReleaseReservation(ctx context.Context, team, id string) (Reservation, error) {
	p, ok := PrincipalFrom(ctx)
	admin := !ok || p.Admin
	if !admin {
		if _, err := actor(ctx, team); err != nil {
			return Reservation{}, err
		}
	}
	var out Reservation
	err := s.update(ctx, team, func(u *unit) error {
		r, err := u.reservationIn(id)
		if err != nil {
			return err
		}
		if !admin && r.Member != p.Member && p.Member != LeadName {
			return Errorf(CodeForbidden, "Only the holder, the lead or the admin may release a reservation.")
		}
		if !r.Live(u.now) {
			return reservationClosed(r)
		}
		at := u.now.UTC()
		r.ReleasedAt = &at
		out = *r
		u.emit(EventReservation, out)
		u.st.Reservations = pruneReservations(u.st.Reservations, u.now)
		return nil
	})
	if err != nil {
		return Reservation{}, err
	}
	return out, nil
}

// releaseReservationsOf releases every live reservation of member: it was
// closed or reset, and holds nothing any more.
func (u *unit) releaseReservationsOf(member string) {
	var cloned bool
	for i := range u.st.Reservations {
		if u.st.Reservations[i].Member != member || !u.st.Reservations[i].Live(u.now) {
			continue
		}
		if !cloned {
			u.st.Reservations = slices.Clone(u.st.Reservations)
			cloned = true
		}
		at := u.now.UTC()
		u.st.Reservations[i].ReleasedAt = &at
		u.emit(EventReservation, u.st.Reservations[i])
	}
	if cloned {
		u.st.Reservations = pruneReservations(u.st.Reservations, u.now)
	}
}

// checkConcretePath validates a path of a check or of ?path=: a path
// relative to the repository root, as git names it.
func checkConcretePath(p string) error {
	switch {
	case p == "" || !utf8.ValidString(p) || utf8.RuneCountInString(p) > MaxCheckPathChars:
		return Errorf(CodeValidation, "Each path must be 1 to %d characters of valid UTF-8.", MaxCheckPathChars)
	case strings.HasPrefix(p, "/"):
		return Errorf(CodeValidation, "Each path must be relative to the repository root, not start with /.")
	case slices.Contains(strings.Split(p, "/"), ".."):
		return Errorf(CodeValidation, "No path may have a .. segment.")
	}
	return nil
}

// CheckPaths returns, for the caller (a member), the concrete paths that
// live reservations of other members hold: one entry per path and
// reservation, in the order of paths and then of ids.
func (s *Service) CheckPaths(ctx context.Context, team string, paths []string) ([]PathConflict, error) {
	me, err := actor(ctx, team)
	if err != nil {
		return nil, err
	}
	if len(paths) == 0 || len(paths) > MaxCheckPaths {
		return nil, Errorf(CodeValidation, "paths must hold 1 to %d paths.", MaxCheckPaths)
	}
	for _, p := range paths {
		if err := checkConcretePath(p); err != nil {
			return nil, err
		}
	}
	var live []Reservation
	err = s.view(ctx, team, false, func(u *unit) error {
		if !u.isMember(me) {
			return u.noSuchMember()
		}
		live = u.liveReservations()
		return nil
	})
	if err != nil {
		return nil, err
	}
	// The matching runs after the view, on the copies it took.
	out := []PathConflict{}
	if len(live) == 0 {
		return out, nil
	}
	ix := indexFor(team, live)
	for _, path := range paths {
		for _, i := range ix.holding(me, path) {
			r := &live[i]
			out = append(out, PathConflict{Path: path, ReservationID: r.ID, Member: r.Member, Exclusive: r.Exclusive})
		}
	}
	return out, nil
}
