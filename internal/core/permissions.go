package core

import (
	"context"
	"encoding/json"
	"slices"
	"strconv"
	"strings"
	"time"
)

// Permission statuses. A pending permission becomes exactly one of the
// other three, once; expired counts as a denial.
const (
	PermissionPending = "pending"
	PermissionAllowed = "allowed"
	PermissionDenied  = "denied"
	PermissionExpired = "expired"
)

// DecidedByAdmin is the decided_by of a permission a person answered with
// the admin token.
const DecidedByAdmin = "admin"

// maxKeptPermissions bounds the permissions a team keeps, since every one
// is part of the team's state. Beyond it the oldest decided ones are
// dropped; a pending one is never dropped.
const maxKeptPermissions = 200

// Permission is one question of the host gate to a person: may member run
// tool with input, now that plan PlanRequestID is approved? It is kept
// with the team's state, so decisions survive restarts as an audit trail.
type Permission struct {
	ID            string          `json:"permission_id"`
	Member        string          `json:"member"`
	Tool          string          `json:"tool"`
	Input         json.RawMessage `json:"input"`
	PlanRequestID string          `json:"plan_request_id"`
	Status        string          `json:"status"`
	CreatedAt     time.Time       `json:"created_at"`
	ExpiresAt     time.Time       `json:"expires_at"`
	// DecidedAt is when the permission stopped being pending: the
	// decision, or its expiry. Nil while pending.
	DecidedAt *time.Time `json:"decided_at"`
	// DecidedBy is DecidedByAdmin for a decision and nil otherwise (an
	// expired permission was decided by no one).
	DecidedBy *string `json:"decided_by"`
}

// HostAnswer is the host gate's answer to one run_main call.
type HostAnswer struct {
	// Allowed is true only for an explicit allow: of the team's policy or
	// of a person.
	Allowed bool
	// Policy is the team's host_permission the answer came from.
	Policy string
	// Permission is the question asked under policy ask; nil otherwise.
	Permission *Permission
}

func copyPermission(p Permission) Permission {
	p.Input = append(json.RawMessage(nil), p.Input...)
	if p.DecidedAt != nil {
		at := *p.DecidedAt
		p.DecidedAt = &at
	}
	if p.DecidedBy != nil {
		by := *p.DecidedBy
		p.DecidedBy = &by
	}
	return p
}

func (u *unit) permission(id string) *Permission {
	for i := range u.st.Permissions {
		if u.st.Permissions[i].ID == id {
			return &u.st.Permissions[i]
		}
	}
	return nil
}

// nextPermissionNo numbers a new permission one past the highest kept;
// only the oldest are ever dropped, so numbers are never reused.
func (u *unit) nextPermissionNo() int {
	n := 0
	for _, p := range u.st.Permissions {
		if v, err := strconv.Atoi(strings.TrimPrefix(p.ID, "perm-")); err == nil && v > n {
			n = v
		}
	}
	return n + 1
}

func permissionTimeout(st *TeamState) time.Duration {
	if s := st.Limits.PermissionTimeoutS; s > 0 {
		return time.Duration(s) * time.Second
	}
	return DefaultPermissionTimeoutS * time.Second
}

// AskHost answers the host gate of one call of tool by member, made under
// the approved plan planID (docs/spec.md §4.13). Under the team's policy
// allow or deny the answer is immediate and nothing is recorded. Under ask
// it records a pending permission, announces it (a permission event),
// calls asked with it, and waits until a person decides it, it expires
// (the team's permission_timeout_s), or ctx ends (the turn was cancelled
// or the server stops); in the last two cases it is recorded as expired,
// which is a denial. The answer is what the permission ended as.
//
// A member holds at most one pending permission: asking while one is
// pending records nothing new and waits for that one's answer (until its
// own expiry), which is then the answer to both.
//
// The wait holds no lock: mail, other members and the decision itself go
// on while it lasts.
func (s *Service) AskHost(ctx context.Context, teamName, member, tool string, input json.RawMessage, planID string, asked func(Permission)) (HostAnswer, error) {
	if len(input) == 0 {
		input = json.RawMessage(`{}`)
	}
	var (
		policy  string
		p       Permission
		timeout time.Duration
		decided <-chan struct{}
		release = func() {}
	)
	err := s.update(ctx, teamName, func(u *unit) error {
		policy = u.st.HostPermissionOf()
		if policy != HostAsk {
			return nil
		}
		if !u.isMember(member) {
			return u.noSuchMember()
		}
		now := u.now.UTC()
		if pending := u.pendingPermissionOf(member); pending != nil {
			// One question per member at a time: asking again (a second
			// run_main while a person has not answered the first) waits
			// for the same answer instead of piling up questions.
			p = copyPermission(*pending)
			timeout = max(p.ExpiresAt.Sub(now), 0)
			release()
			decided, release = s.live.WatchPermission(teamName, p.ID)
			return nil
		}
		timeout = permissionTimeout(u.st)
		p = Permission{
			ID:            "perm-" + strconv.Itoa(u.nextPermissionNo()),
			Member:        member,
			Tool:          tool,
			Input:         append(json.RawMessage(nil), input...),
			PlanRequestID: planID,
			Status:        PermissionPending,
			CreatedAt:     now,
			ExpiresAt:     now.Add(timeout),
		}
		u.st.Permissions = trimPermissions(append(slices.Clip(u.st.Permissions), p))
		// Registered before the commit, so a decision that comes right
		// after it (on any replica) still wakes this wait.
		release()
		decided, release = s.live.WatchPermission(teamName, p.ID)
		u.emit(EventPermission, copyPermission(p))
		return nil
	})
	if err != nil {
		release()
		return HostAnswer{}, err
	}
	if policy != HostAsk {
		release()
		return HostAnswer{Allowed: policy == HostAllow, Policy: policy}, nil
	}
	defer func() { release() }() // the one awaitDecision leaves
	recordPermissionStep(ctx, p)
	if asked != nil {
		asked(copyPermission(p))
	}

	timer := time.NewTimer(timeout)
	defer timer.Stop()
	s.awaitDecision(ctx, teamName, p.ID, decided, &release, timer.C)
	final, err := s.settlePermission(context.WithoutCancel(ctx), teamName, p.ID)
	if err != nil {
		return HostAnswer{}, err
	}
	recordPermissionStep(context.WithoutCancel(ctx), final)
	return HostAnswer{Allowed: final.Status == PermissionAllowed, Policy: policy, Permission: &final}, nil
}

// pendingPermissionOf returns member's pending permission, nil when it
// has none; a member has at most one (AskHost).
func (u *unit) pendingPermissionOf(member string) *Permission {
	for i := range u.st.Permissions {
		if p := &u.st.Permissions[i]; p.Member == member && p.Status == PermissionPending {
			return p
		}
	}
	return nil
}

// awaitDecision waits until permission id of team is no longer pending,
// expired is closed or ctx ends. A wake does not mean a decision: a
// resync wakes every waiter (internal/live), so each wake reads the
// permission, with the next wake registered first (*release is replaced
// by its release), and waits on while it is pending. A read that fails
// ends the wait: settlePermission then answers, as for a timeout.
func (s *Service) awaitDecision(ctx context.Context, teamName, id string, decided <-chan struct{}, release *func(), expired <-chan time.Time) {
	for {
		select {
		case <-decided:
		case <-expired:
			return
		case <-ctx.Done():
			return
		}
		next, nextRelease := s.live.WatchPermission(teamName, id)
		pending := false
		err := s.view(ctx, teamName, false, func(u *unit) error {
			if p := u.permission(id); p != nil {
				pending = p.Status == PermissionPending
			}
			return nil
		})
		(*release)()
		decided, *release = next, nextRelease
		if err != nil || !pending {
			return
		}
	}
}

// recordPermissionStep adds p, as it is now, to the document of the turn
// that asked for it, when a turn did: the turn shows that it waits for a
// person, and then how the person answered. The caller holds no lock.
func recordPermissionStep(ctx context.Context, p Permission) {
	if tr := TurnFrom(ctx); tr != nil {
		tr.RecordStep(ctx, TurnStep{Kind: StepPermission, PermissionID: p.ID, Status: p.Status})
	}
}

// settlePermission returns permission id as it ended; one still pending
// (its wait timed out or was cut) is recorded as expired first. A failed
// save of the expiry still answers expired, a denial: the permission is
// pending on disk, and start-up expires whatever it finds pending.
func (s *Service) settlePermission(ctx context.Context, teamName, id string) (Permission, error) {
	var out Permission
	err := s.update(ctx, teamName, func(u *unit) error {
		p := u.permission(id)
		if p == nil {
			return Errorf(CodeNotFound, "No such permission.")
		}
		if p.Status == PermissionPending {
			u.finishPermission(p, PermissionExpired, nil)
		}
		out = copyPermission(*p)
		return nil
	})
	if ErrorCode(err) == CodeNotFound {
		return Permission{}, err
	}
	if err != nil {
		s.log.WarnContext(ctx, "saving an expired permission failed; it is denied and start-up expires it", "team", teamName, "permission", id, "err", err)
		if out.ID == "" {
			out.ID = id
		}
		out.Status = PermissionExpired
		return out, nil
	}
	return out, nil
}

// finishPermission moves pending p to status and announces it once the
// unit of work commits (which wakes the wait, on whichever replica).
func (u *unit) finishPermission(p *Permission, status string, by *string) {
	now := u.now.UTC()
	p.Status, p.DecidedAt, p.DecidedBy = status, &now, by
	u.emit(EventPermission, copyPermission(*p))
}

// DecidePermission answers a pending permission (allow or deny) on behalf
// of the admin. A permission that is no longer pending is refused with
// not_pending, and so is one whose time is up even if its wait has not
// noticed yet: it is recorded as expired first. The decision is committed
// before the waiting turn is woken.
func (s *Service) DecidePermission(ctx context.Context, teamName, id string, allow bool) (Permission, error) {
	if err := CheckAdmin(ctx); err != nil {
		return Permission{}, err
	}
	var out Permission
	expired := false
	err := s.update(ctx, teamName, func(u *unit) error {
		p := u.permission(id)
		if p == nil {
			return Errorf(CodeNotFound, "No such permission.")
		}
		if p.Status != PermissionPending {
			return Errorf(CodeNotPending, "The permission is no longer pending; it is %s.", p.Status)
		}
		if !u.now.Before(p.ExpiresAt) {
			u.finishPermission(p, PermissionExpired, nil)
			expired = true
			return nil
		}
		status := PermissionDenied
		if allow {
			status = PermissionAllowed
		}
		by := DecidedByAdmin
		u.finishPermission(p, status, &by)
		out = copyPermission(*p)
		return nil
	})
	if err != nil {
		return Permission{}, err
	}
	if expired {
		return Permission{}, Errorf(CodeNotPending, "The permission expired before the decision.")
	}
	return out, nil
}

// Permissions lists a team's permissions in the order they were asked,
// to the admin or a member of the team.
func (s *Service) Permissions(ctx context.Context, teamName string) ([]Permission, error) {
	if err := CheckReader(ctx, teamName); err != nil {
		return nil, err
	}
	var out []Permission
	err := s.view(ctx, teamName, false, func(u *unit) error {
		out = make([]Permission, 0, len(u.st.Permissions))
		for _, p := range u.st.Permissions {
			out = append(out, copyPermission(p))
		}
		return nil
	})
	return out, err
}

// trimPermissions drops the oldest decided permissions beyond
// maxKeptPermissions.
func trimPermissions(ps []Permission) []Permission {
	extra := len(ps) - maxKeptPermissions
	if extra <= 0 {
		return ps
	}
	out := make([]Permission, 0, maxKeptPermissions)
	for _, p := range ps {
		if extra > 0 && p.Status != PermissionPending {
			extra--
			continue
		}
		out = append(out, p)
	}
	return out
}

// expirePendingPermissions marks every pending permission expired: the
// turn that waited for it died with its process, so no answer can reach
// it any more (ReleaseAtStart). It reports whether anything changed.
func expirePendingPermissions(st *TeamState, now time.Time) bool {
	changed := false
	at := now.UTC()
	for i := range st.Permissions {
		p := &st.Permissions[i]
		if p.Status == PermissionPending {
			d := at
			p.Status, p.DecidedAt, p.DecidedBy = PermissionExpired, &d, nil
			changed = true
		}
	}
	return changed
}
