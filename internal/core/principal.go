package core

import "context"

// Principal is who is calling: the admin, or one member of one team. Every
// door into Mailroom (the REST API, the MCP endpoint, a teammate's own tools)
// resolves its caller to a Principal and puts it in the call's context with
// WithPrincipal; the Service reads it from there and checks every right
// itself, so the doors share one implementation of each check and none of
// them can name another sender, actor or reader.
type Principal struct {
	// Admin is the operator: it creates and deletes teams, runs turns and
	// scenarios and reads everything, but it is not a member, so it
	// cannot send, open, reply or consume.
	Admin bool
	// Team and Member name the member a member principal acts as.
	Team   string
	Member string
	// tokenHash, when set, is the SHA-256 of the token the member called
	// with (LookupPrincipal): it names this member of this team's
	// incarnation, which its name alone does not once a team of that name
	// was deleted and created again, and it is the key of per-token
	// bounds. Unexported, so that only a door holding the token sets it.
	tokenHash string
}

// TokenHash is the hex SHA-256 of the token the member called with, set
// only on a principal a door resolved from a token (LookupPrincipal);
// "" otherwise. A door keys what it bounds per token by it (the MCP
// endpoint's sessions) without keeping the token.
func (p Principal) TokenHash() string { return p.tokenHash }

// AdminPrincipal is the operator's principal.
func AdminPrincipal() Principal { return Principal{Admin: true} }

// MemberPrincipal is the principal of member of team.
func MemberPrincipal(team, member string) Principal {
	return Principal{Team: team, Member: member}
}

// UnknownToken is the refusal of a member token that names no member: one
// no member has, or one whose team was deleted (and perhaps created again
// by the same name, with new tokens) since the call looked it up. The doors
// answer an unknown token with it, and core a stale one (tokenHolds), so
// a client cannot tell the two apart and retries neither.
func UnknownToken() *Error {
	return Errorf(CodeUnauthorized, "A valid bearer token is required in the Authorization header.")
}

// tokenCheck reports whether a unit of work on team must confirm the
// caller's token (tokenHolds): the caller is a member of team that
// called with its token. The admin, a principal without a token (the
// wake loop's AsMember, the scenario host) and a member of another team
// (whose rights refuse it anyway) are not checked.
func (p Principal) tokenCheck(team string) bool {
	return p.tokenHash != "" && !p.Admin && p.Team == team
}

// tokenHolds reports whether st, the team as a unit of work sees it,
// still has the caller's member with the caller's token. A token is set
// only when its team is created and never changes, so this fails only
// when the team the token was looked up in is gone: between the lookup
// and the unit of work, the team was deleted and perhaps created again
// by the same name. Checked inside the unit, it holds on both stores
// however old the lookup is, which is what lets a store answer lookups
// from a cache (docs/storage.md).
func (p Principal) tokenHolds(st *TeamState) bool {
	m := st.Member(p.Member)
	return m != nil && m.TokenHash == p.tokenHash
}

type principalKey struct{}

// WithPrincipal returns ctx carrying p as the caller.
func WithPrincipal(ctx context.Context, p Principal) context.Context {
	return context.WithValue(ctx, principalKey{}, p)
}

// AsMember returns ctx carrying member of team as the caller: the shape the
// agent loop and the scenario host use to act for one member.
func AsMember(ctx context.Context, team, member string) context.Context {
	return WithPrincipal(ctx, MemberPrincipal(team, member))
}

// AsAdmin returns ctx carrying the admin as the caller.
func AsAdmin(ctx context.Context) context.Context {
	return WithPrincipal(ctx, AdminPrincipal())
}

// PrincipalFrom returns the caller recorded in ctx, if any.
func PrincipalFrom(ctx context.Context) (Principal, bool) {
	p, ok := ctx.Value(principalKey{}).(Principal)
	return p, ok
}

// The rights. Each returns a forbidden or unauthorized error when the
// caller may not act, and is called by the Service before anything else
// (after the transport's own schema checks), so that a refusal never
// depends on whether the team or the member exists.
//
// A context without a principal is the in-process host (start-up repair,
// tests of core itself): reads and admin actions are allowed to it, but
// it has no member identity, so the acts of a member (send, open, reply,
// consume) are refused with unauthorized. Both transports always set a
// principal (their authentication middleware refuses a request without
// one), so no client reaches the host's rights.

// actor returns the member a write acts as: the caller's own member of
// team. The admin is not a member; a member of another team may not act
// here; a context without a principal has no member to act as.
func actor(ctx context.Context, team string) (string, error) {
	p, ok := PrincipalFrom(ctx)
	switch {
	case !ok:
		return "", Errorf(CodeUnauthorized, "A member token is required.")
	case p.Admin:
		return "", Errorf(CodeForbidden, "The admin token is not a member; use a member token.")
	case p.Team != team:
		return "", Errorf(CodeForbidden, "The token belongs to another team.")
	}
	return p.Member, nil
}

// CheckAdmin admits the admin (and the in-process host) only.
func CheckAdmin(ctx context.Context) error {
	if p, ok := PrincipalFrom(ctx); ok && !p.Admin {
		return Errorf(CodeForbidden, "Only the admin token may do this.")
	}
	return nil
}

// CheckReader admits the admin or any member of team: the right to read
// the team's document, its requests and its event stream.
func CheckReader(ctx context.Context, team string) error {
	if p, ok := PrincipalFrom(ctx); ok && !p.Admin && p.Team != team {
		return Errorf(CodeForbidden, "The token belongs to another team.")
	}
	return nil
}

// CheckSelf admits only member of team itself: the right to act on its
// own inbox (consume).
func CheckSelf(ctx context.Context, team, member string) error {
	me, err := actor(ctx, team)
	if err != nil {
		return err
	}
	if me != member {
		return Errorf(CodeForbidden, "A member may only act on its own inbox.")
	}
	return nil
}

// CheckSelfOrAdmin admits the admin or member of team itself: the right
// to read an inbox.
func CheckSelfOrAdmin(ctx context.Context, team, member string) error {
	p, ok := PrincipalFrom(ctx)
	if !ok || p.Admin {
		return nil
	}
	return CheckSelf(ctx, team, member)
}
