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

func (t *team) permission(id string) *Permission {
	for i := range t.st.Permissions {
		if t.st.Permissions[i].ID == id {
			return &t.st.Permissions[i]
		}
	}
	return nil
}

// nextPermissionNo numbers a new permission one past the highest kept;
// only the oldest are ever dropped, so numbers are never reused.
func (t *team) nextPermissionNo() int {
	n := 0
	for _, p := range t.st.Permissions {
		if v, err := strconv.Atoi(strings.TrimPrefix(p.ID, "perm-")); err == nil && v > n {
			n = v
		}
	}
	return n + 1
}

func (t *team) permissionTimeout() time.Duration {
	if s := t.st.Limits.PermissionTimeoutS; s > 0 {
		return time.Duration(s) * time.Second
	}
	return DefaultPermissionTimeoutS * time.Second
}

// permissionKey is the waiters' key of one permission. A member name
// never holds a colon, so it cannot collide with an inbox.
func permissionKey(team, id string) inboxKey {
	return inboxKey{team: team, member: "permission:" + id}
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
// The wait holds no lock: mail, other members and the decision itself go
// on while it lasts.
func (s *Service) AskHost(ctx context.Context, teamName, member, tool string, input json.RawMessage, planID string, asked func(Permission)) (HostAnswer, error) {
	t, err := s.lockTeam(teamName)
	if err != nil {
		return HostAnswer{}, err
	}
	policy := t.st.HostPermissionOf()
	if policy != HostAsk {
		t.mu.Unlock()
		return HostAnswer{Allowed: policy == HostAllow, Policy: policy}, nil
	}
	if !t.isMember(member) {
		t.mu.Unlock()
		return HostAnswer{}, Errorf(CodeNotFound, "No such member.")
	}
	if err := s.clearStaleIntent(ctx, t); err != nil {
		t.mu.Unlock()
		return HostAnswer{}, err
	}
	if len(input) == 0 {
		input = json.RawMessage(`{}`)
	}
	now := s.now().UTC()
	timeout := t.permissionTimeout()
	p := Permission{
		ID:            "perm-" + strconv.Itoa(t.nextPermissionNo()),
		Member:        member,
		Tool:          tool,
		Input:         append(json.RawMessage(nil), input...),
		PlanRequestID: planID,
		Status:        PermissionPending,
		CreatedAt:     now,
		ExpiresAt:     now.Add(timeout),
	}
	old := t.st.Permissions
	t.st.Permissions = trimPermissions(append(slices.Clip(old), p))
	if err := s.store.SaveTeam(ctx, t.st); err != nil {
		t.st.Permissions = old
		t.mu.Unlock()
		return HostAnswer{}, StorageError(err)
	}
	// Registered under the lock that recorded the permission, so a
	// decision that comes right after the unlock still wakes this wait.
	decided, release := s.waiters.watch(permissionKey(teamName, p.ID))
	s.emit("permission", teamName, copyPermission(p))
	t.mu.Unlock()
	defer release()
	recordPermissionStep(ctx, p)
	if asked != nil {
		asked(copyPermission(p))
	}

	timer := time.NewTimer(timeout)
	defer timer.Stop()
	select {
	case <-decided:
	case <-timer.C:
	case <-ctx.Done():
	}
	final, err := s.settlePermission(context.WithoutCancel(ctx), teamName, p.ID)
	if err != nil {
		return HostAnswer{}, err
	}
	recordPermissionStep(context.WithoutCancel(ctx), final)
	return HostAnswer{Allowed: final.Status == PermissionAllowed, Policy: policy, Permission: &final}, nil
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
	t, err := s.lookup(teamName)
	if err != nil {
		return Permission{}, err
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	p := t.permission(id)
	if p == nil {
		return Permission{}, Errorf(CodeNotFound, "No such permission.")
	}
	if p.Status != PermissionPending {
		return copyPermission(*p), nil
	}
	if err := s.finishPermission(ctx, t, p, PermissionExpired, nil); err != nil {
		s.log.WarnContext(ctx, "saving an expired permission failed; it is denied and start-up expires it", "team", teamName, "permission", id, "err", err)
		out := copyPermission(*p)
		out.Status = PermissionExpired
		return out, nil
	}
	return copyPermission(*p), nil
}

// finishPermission moves pending p to status, saves it and announces it,
// or leaves it pending when the save fails. The caller holds t's lock.
func (s *Service) finishPermission(ctx context.Context, t *team, p *Permission, status string, by *string) error {
	now := s.now().UTC()
	p.Status, p.DecidedAt, p.DecidedBy = status, &now, by
	if err := s.store.SaveTeam(ctx, t.st); err != nil {
		p.Status, p.DecidedAt, p.DecidedBy = PermissionPending, nil, nil
		return StorageError(err)
	}
	s.emit("permission", t.st.Name, copyPermission(*p))
	s.waiters.wake(permissionKey(t.st.Name, p.ID))
	return nil
}

// DecidePermission answers a pending permission (allow or deny) on behalf
// of the admin. A permission that is no longer pending is refused with
// not_pending, and so is one whose time is up even if its wait has not
// noticed yet: it is recorded as expired first. The decision is saved
// before the waiting turn is woken.
func (s *Service) DecidePermission(ctx context.Context, teamName, id string, allow bool) (Permission, error) {
	if err := CheckAdmin(ctx); err != nil {
		return Permission{}, err
	}
	t, err := s.lockTeam(teamName)
	if err != nil {
		return Permission{}, err
	}
	defer t.mu.Unlock()
	p := t.permission(id)
	if p == nil {
		return Permission{}, Errorf(CodeNotFound, "No such permission.")
	}
	if p.Status != PermissionPending {
		return Permission{}, Errorf(CodeNotPending, "The permission is no longer pending; it is %s.", p.Status)
	}
	if err := s.clearStaleIntent(ctx, t); err != nil {
		return Permission{}, err
	}
	if !s.now().Before(p.ExpiresAt) {
		if err := s.finishPermission(ctx, t, p, PermissionExpired, nil); err != nil {
			return Permission{}, err
		}
		return Permission{}, Errorf(CodeNotPending, "The permission expired before the decision.")
	}
	status := PermissionDenied
	if allow {
		status = PermissionAllowed
	}
	by := DecidedByAdmin
	if err := s.finishPermission(ctx, t, p, status, &by); err != nil {
		return Permission{}, err
	}
	return copyPermission(*p), nil
}

// Permissions lists a team's permissions in the order they were asked,
// to the admin or a member of the team.
func (s *Service) Permissions(ctx context.Context, teamName string) ([]Permission, error) {
	if err := CheckReader(ctx, teamName); err != nil {
		return nil, err
	}
	t, err := s.lookup(teamName)
	if err != nil {
		return nil, err
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	out := make([]Permission, 0, len(t.st.Permissions))
	for _, p := range t.st.Permissions {
		out = append(out, copyPermission(p))
	}
	return out, nil
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

// expireStalePermissions marks every pending permission expired at start:
// the turn that waited for it died with the process, so no answer can
// reach it any more. It reports whether anything changed.
func (s *Service) expireStalePermissions(t *team) bool {
	changed := false
	now := s.now().UTC()
	for i := range t.st.Permissions {
		p := &t.st.Permissions[i]
		if p.Status == PermissionPending {
			at := now
			p.Status, p.DecidedAt, p.DecidedBy = PermissionExpired, &at, nil
			changed = true
		}
	}
	return changed
}
