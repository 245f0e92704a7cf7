package httpapi_test

import (
	"io"
	"net/http"
	"strings"
	"testing"

	"mailroom/internal/httpapi"
)

// readPath is the cursor route of member's inbox.
func readPath(tm team, member string) string {
	return "/api/v1/teams/" + tm.name + "/members/" + member + "/inbox/read"
}

// memberDoc returns member's document as GET team shows it.
func (e *env) memberDoc(tm team, member string) httpapi.Member {
	e.t.Helper()
	r := e.get("/api/v1/teams/"+tm.name, adminToken)
	want(e.t, r, http.StatusOK, "")
	for _, m := range decode[httpapi.Team](e.t, r).Members {
		if m.Name == member {
			return m
		}
	}
	e.t.Fatalf("no member %s in team %s", member, tm.name)
	return httpapi.Member{}
}

// wantCursor checks a member document's read_through and unread.
func wantCursor(t *testing.T, m httpapi.Member, through string, unread int) {
	t.Helper()
	got := "<null>"
	if m.ReadThrough != nil {
		got = *m.ReadThrough
	}
	if got != through || m.Unread != unread {
		t.Fatalf("%s: read_through %s, unread %d; want %s, %d", m.Name, got, m.Unread, through, unread)
	}
}

func ids(msgs []httpapi.Message) string {
	var out []string
	for _, m := range msgs {
		out = append(out, m.ID)
	}
	return strings.Join(out, ",")
}

// TestReadCursorRules: a cursor starts at null, moves forward only, by
// the member itself, through letters of its own inbox; unread reads
// answer what follows it; it survives a restart of the store.
func TestReadCursorRules(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	tm := e.newTeam("cursors", nil)
	wantCursor(t, e.memberDoc(tm, "reader"), "<null>", 0)
	for _, b := range []string{"one", "two", "three"} {
		want(t, e.send(tm, "lead", "reader", b), http.StatusCreated, "")
	}
	wantCursor(t, e.memberDoc(tm, "reader"), "<null>", 3)
	unread := "/api/v1/teams/cursors/members/reader/inbox?unread=true"
	r := e.get(unread, tm.tokens["reader"])
	want(t, r, http.StatusOK, "")
	if got := ids(decode[httpapi.Inbox](t, r).Messages); got != "reader-1,reader-2,reader-3" {
		t.Fatalf("unread before any read = %s, want reader-1..3", got)
	}

	r = e.post(readPath(tm, "reader"), tm.tokens["reader"], map[string]string{"through": "reader-2"})
	want(t, r, http.StatusOK, "")
	if rs := decode[httpapi.ReadState](t, r); rs.ReadThrough == nil || *rs.ReadThrough != "reader-2" || rs.Unread != 1 {
		t.Fatalf("mark through reader-2 = %s, want reader-2 with 1 unread", r.body)
	}
	wantCursor(t, e.memberDoc(tm, "reader"), "reader-2", 1)
	r = e.get(unread, tm.tokens["reader"])
	if got := ids(decode[httpapi.Inbox](t, r).Messages); got != "reader-3" {
		t.Fatalf("unread = %s, want reader-3", got)
	}
	// The admin reads unread letters too (and moves nothing).
	r = e.get(unread, adminToken)
	want(t, r, http.StatusOK, "")
	if got := ids(decode[httpapi.Inbox](t, r).Messages); got != "reader-3" {
		t.Fatalf("unread read by the admin = %s, want reader-3", got)
	}

	t.Run("OlderIsUnchanged", func(t *testing.T) {
		r := e.post(readPath(tm, "reader"), tm.tokens["reader"], map[string]string{"through": "reader-1"})
		want(t, r, http.StatusOK, "")
		if rs := decode[httpapi.ReadState](t, r); rs.ReadThrough == nil || *rs.ReadThrough != "reader-2" || rs.Unread != 1 {
			t.Fatalf("mark through an older letter = %s, want the cursor unchanged at reader-2", r.body)
		}
	})
	t.Run("ErrUnknownLetter", func(t *testing.T) {
		for _, id := range []string{"reader-4", "reader-0", "lead-1", "reader", "reader-01", "nobody-1"} {
			want(t, e.post(readPath(tm, "reader"), tm.tokens["reader"], map[string]string{"through": id}), http.StatusBadRequest, "validation_failed")
		}
	})
	t.Run("ErrNotOwnInbox", func(t *testing.T) {
		want(t, e.post(readPath(tm, "reader"), tm.tokens["lead"], map[string]string{"through": "reader-3"}), http.StatusForbidden, "forbidden")
		want(t, e.post(readPath(tm, "reader"), adminToken, map[string]string{"through": "reader-3"}), http.StatusForbidden, "forbidden")
		want(t, e.get(unread, tm.tokens["lead"]), http.StatusForbidden, "forbidden")
		other := e.newTeam("others", nil)
		want(t, e.post(readPath(tm, "reader"), other.tokens["reader"], map[string]string{"through": "reader-3"}), http.StatusForbidden, "forbidden")
		wantCursor(t, e.memberDoc(tm, "reader"), "reader-2", 1)
	})
	t.Run("ErrUnreadWithAfter", func(t *testing.T) {
		want(t, e.get(unread+"&after=reader-1", tm.tokens["reader"]), http.StatusBadRequest, "validation_failed")
	})
	t.Run("ErrBody", func(t *testing.T) {
		want(t, e.post(readPath(tm, "reader"), tm.tokens["reader"], map[string]string{}), http.StatusBadRequest, "validation_failed")
		want(t, e.post(readPath(tm, "reader"), tm.tokens["reader"], map[string]string{"through": "reader-3", "member": "lead"}), http.StatusBadRequest, "validation_failed")
	})

	// Through the last letter: nothing unread, and the others' cursors
	// never moved.
	want(t, e.post(readPath(tm, "reader"), tm.tokens["reader"], map[string]string{"through": "reader-3"}), http.StatusOK, "")
	wantCursor(t, e.memberDoc(tm, "reader"), "reader-3", 0)
	wantCursor(t, e.memberDoc(tm, "lead"), "<null>", 0)
	r = e.get(unread, tm.tokens["reader"])
	if got := decode[httpapi.Inbox](t, r).Messages; len(got) != 0 {
		t.Fatalf("unread after reading all = %s, want none", ids(got))
	}

	// Restarted over the same data, the cursor is where it was.
	if c, ok := e.store.(io.Closer); ok {
		if err := c.Close(); err != nil {
			t.Fatal(err)
		}
	}
	e2 := startEnv(t, envOptions{place: e.place})
	want(t, e2.send(tm, "lead", "reader", "four"), http.StatusCreated, "")
	wantCursor(t, e2.memberDoc(tm, "reader"), "reader-3", 1)
}

// TestHeldUnreadReadWokenBySend: GET inbox?unread=true&wait holds while
// nothing is unread and answers the letter a send stores, only it.
func TestHeldUnreadReadWokenBySend(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	tm := e.newTeam("held", nil)
	want(t, e.send(tm, "lead", "reader", "old"), http.StatusCreated, "")
	want(t, e.post(readPath(tm, "reader"), tm.tokens["reader"], map[string]string{"through": "reader-1"}), http.StatusOK, "")
	done := e.holdRead(tm, "reader", tm.tokens["reader"], "unread=true&wait=30", 1)
	want(t, e.send(tm, "reviewer", "reader", "new"), http.StatusCreated, "")
	got := <-done
	if got.err != nil || got.status != http.StatusOK {
		t.Fatalf("held unread read = %d, %v; want 200", got.status, got.err)
	}
	if ids(got.inbox.Messages) != "reader-2" || got.inbox.Messages[0].Body != "new" {
		t.Fatalf("held unread read answered %s, want only reader-2", got.body)
	}
}

// TestReceipts: a sender (or the admin) learns whether its letters were
// read, in the order asked; the first id that fails decides the error.
func TestReceipts(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	tm := e.newTeam("receipts", nil)
	want(t, e.send(tm, "lead", "reader", "one"), http.StatusCreated, "")       // reader-1
	want(t, e.send(tm, "lead", "reader", "two"), http.StatusCreated, "")       // reader-2
	want(t, e.send(tm, "reviewer", "reader", "three"), http.StatusCreated, "") // reader-3
	want(t, e.send(tm, "lead", "reviewer", "four"), http.StatusCreated, "")    // reviewer-1
	want(t, e.post(readPath(tm, "reader"), tm.tokens["reader"], map[string]string{"through": "reader-1"}), http.StatusOK, "")
	get := func(token, q string) result {
		return e.get("/api/v1/teams/receipts/receipts?ids="+q, token)
	}

	r := get(tm.tokens["lead"], "reviewer-1,reader-2,reader-1")
	want(t, r, http.StatusOK, "")
	got := decode[httpapi.Receipts](t, r).Receipts
	wantList := []httpapi.Receipt{{ID: "reviewer-1", To: "reviewer", Read: false}, {ID: "reader-2", To: "reader", Read: false}, {ID: "reader-1", To: "reader", Read: true}}
	if len(got) != len(wantList) {
		t.Fatalf("receipts = %+v, want %+v", got, wantList)
	}
	for i := range got {
		if got[i] != wantList[i] {
			t.Fatalf("receipt %d = %+v, want %+v", i, got[i], wantList[i])
		}
	}
	r = get(adminToken, "reader-3")
	want(t, r, http.StatusOK, "")
	if got := decode[httpapi.Receipts](t, r).Receipts; len(got) != 1 || got[0].Read || got[0].To != "reader" {
		t.Fatalf("admin's receipt of reader-3 = %+v, want unread, to reader", got)
	}

	t.Run("ErrNotSender", func(t *testing.T) {
		want(t, get(tm.tokens["lead"], "reader-1,reader-3"), http.StatusForbidden, "forbidden")
		want(t, get(tm.tokens["reader"], "reader-1"), http.StatusForbidden, "forbidden")
	})
	t.Run("ErrUnknownLetter", func(t *testing.T) {
		want(t, get(tm.tokens["lead"], "reader-1,reader-9"), http.StatusNotFound, "not_found")
		want(t, get(tm.tokens["lead"], "nobody-1"), http.StatusNotFound, "not_found")
	})
	t.Run("FirstFailureDecides", func(t *testing.T) {
		want(t, get(tm.tokens["lead"], "reader-9,reader-3"), http.StatusNotFound, "not_found")
		want(t, get(tm.tokens["lead"], "reader-3,reader-9"), http.StatusForbidden, "forbidden")
	})
	t.Run("ErrCount", func(t *testing.T) {
		many := strings.TrimSuffix(strings.Repeat("reader-1,", 101), ",")
		want(t, get(tm.tokens["lead"], many), http.StatusBadRequest, "validation_failed")
		hundred := strings.TrimSuffix(strings.Repeat("reader-1,", 100), ",")
		want(t, get(tm.tokens["lead"], hundred), http.StatusOK, "")
		want(t, get(tm.tokens["lead"], ""), http.StatusBadRequest, "validation_failed")
		want(t, get(tm.tokens["lead"], "reader-1,,reader-2"), http.StatusBadRequest, "validation_failed")
	})
	t.Run("ErrOtherTeam", func(t *testing.T) {
		other := e.newTeam("elsewhere", nil)
		want(t, get(other.tokens["lead"], "reader-1"), http.StatusForbidden, "forbidden")
	})
}

// TestMe: a member token names its team, member and role; the admin
// token says admin; no token is 401.
func TestMe(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	tm := e.newTeam("whoami", nil)
	r := e.get("/api/v1/me", tm.tokens["reader"])
	want(t, r, http.StatusOK, "")
	if me := decode[httpapi.Me](t, r); me.Team == nil || *me.Team != "whoami" || me.Member == nil || *me.Member != "reader" || me.Role == nil || *me.Role != "reads the source" || me.Admin != nil {
		t.Fatalf("GET /me as reader = %s, want team whoami, member reader, its role", r.body)
	}
	r = e.get("/api/v1/me", adminToken)
	want(t, r, http.StatusOK, "")
	if string(r.body) != "{\"admin\":true}\n" {
		t.Fatalf("GET /me as admin = %q, want {\"admin\":true}", r.body)
	}
	want(t, e.get("/api/v1/me", ""), http.StatusUnauthorized, "unauthorized")
	want(t, e.get("/api/v1/me", "mr_nobody"), http.StatusUnauthorized, "unauthorized")
}
