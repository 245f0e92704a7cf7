package httpapi_test

import (
	"net/http"
	"net/url"
	"testing"
)

// TestLetterIDsCanonicalREST: another spelling of an existing letter's id
// ("reader-+1", "reader-01") is 400 validation_failed for mark-read, the
// after of a read and receipts, never that letter.
func TestLetterIDsCanonicalREST(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	tm := e.newTeam("canon", nil)
	want(t, e.send(tm, "lead", "reader", "one"), http.StatusCreated, "") // reader-1
	for _, id := range []string{"reader-+1", "reader-01", "reader-1 "} {
		want(t, e.post(readPath(tm, "reader"), tm.tokens["reader"], map[string]string{"through": id}), http.StatusBadRequest, "validation_failed")
		want(t, e.get("/api/v1/teams/canon/receipts?ids="+url.QueryEscape(id), tm.tokens["lead"]), http.StatusBadRequest, "validation_failed")
		want(t, e.get("/api/v1/teams/canon/members/reader/inbox?after="+url.QueryEscape(id), tm.tokens["reader"]), http.StatusBadRequest, "validation_failed")
	}
	want(t, e.post(readPath(tm, "reader"), tm.tokens["reader"], map[string]string{"through": "reader-1"}), http.StatusOK, "")
}

// TestAdminIsNoMemberNameREST: a team with a member named admin is 400
// validation_failed, and nothing is created.
func TestAdminIsNoMemberNameREST(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	want(t, e.post("/api/v1/teams", adminToken, map[string]any{"name": "named",
		"members": []map[string]string{{"name": "admin", "role": "r"}}}), http.StatusBadRequest, "validation_failed")
	want(t, e.get("/api/v1/teams/named", adminToken), http.StatusNotFound, "not_found")
}
