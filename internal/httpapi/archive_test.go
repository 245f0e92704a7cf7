package httpapi_test

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"mailroom/internal/httpapi"
)

// archivePath is the route that archives member's read letters.
func archivePath(tm team, member string) string {
	return "/api/v1/teams/" + tm.name + "/members/" + member + "/inbox/archive"
}

// archiveOf reads member's archive with query (e.g. "?after=reader-1").
func (e *env) archiveOf(tm team, member, token, query string) result {
	e.t.Helper()
	return e.get("/api/v1/teams/"+tm.name+"/members/"+member+"/archive"+query, token)
}

// wantArchived checks an archive's answer: how many letters moved and
// how many stay.
func wantArchived(t *testing.T, r result, archived, inboxLength int) {
	t.Helper()
	want(t, r, http.StatusOK, "")
	if got := decode[httpapi.ArchiveResult](t, r); got.Archived != archived || got.InboxLength != inboxLength {
		t.Fatalf("archive = %s, want archived %d, inbox_length %d", r.body, archived, inboxLength)
	}
}

// TestArchiveRoutes: a member (or the admin) moves the letters it has
// read out of its inbox; they stay in its archive, readable in pages, in
// threads and receipts; ids are never reused; refusals store nothing;
// all of it survives a restart.
func TestArchiveRoutes(t *testing.T) {
	e := openEnv(t, nil, 0)
	tm := e.newTeam("arch", nil)
	events := e.openStream(t, "?team=arch", adminToken)
	for _, body := range []string{"one", "two", "three"} {
		want(t, e.send(tm, "lead", "reader", body), http.StatusCreated, "")
	}
	through := func(id string) map[string]string { return map[string]string{"through": id} }
	path := archivePath(tm, "reader")
	// Nothing read yet: no letter may move.
	want(t, e.post(path, tm.tokens["reader"], through("reader-1")), http.StatusConflict, "not_read")
	want(t, e.post(readPath(tm, "reader"), tm.tokens["reader"], through("reader-2")), http.StatusOK, "")

	other := e.newTeam("elsewhere", nil)
	for _, tt := range []struct {
		name, path, token string
		body              any
		status            int
		code              string
	}{
		{"ErrNotRead", path, tm.tokens["reader"], through("reader-3"), 409, "not_read"},
		{"ErrNoSuchLetter", path, tm.tokens["reader"], through("reader-9"), 400, "validation_failed"},
		{"ErrOtherInbox", path, tm.tokens["reader"], through("lead-1"), 400, "validation_failed"},
		{"ErrMalformed", path, tm.tokens["reader"], through("reader-01"), 400, "validation_failed"},
		{"ErrEmpty", path, tm.tokens["reader"], through(""), 400, "validation_failed"},
		{"ErrNoThrough", path, tm.tokens["reader"], map[string]string{}, 400, "validation_failed"},
		{"ErrUnknownField", path, tm.tokens["reader"], map[string]string{"through": "reader-1", "all": "yes"}, 400, "validation_failed"},
		{"ErrOtherMember", path, tm.tokens["lead"], through("reader-1"), 403, "forbidden"},
		{"ErrOtherTeam", path, other.tokens["reader"], through("reader-1"), 403, "forbidden"},
		{"ErrNoToken", path, "", through("reader-1"), 401, "unauthorized"},
		{"ErrNoSuchMember", archivePath(tm, "ghost"), adminToken, through("ghost-1"), 404, "not_found"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			want(t, e.post(tt.path, tt.token, tt.body), tt.status, tt.code)
		})
	}
	if got := ids(e.inbox(tm, "reader")); got != "reader-1,reader-2,reader-3" {
		t.Fatalf("reader's inbox after the refusals = %s, want reader-1,reader-2,reader-3", got)
	}

	wantArchived(t, e.post(path, tm.tokens["reader"], through("reader-1")), 1, 2)
	var view struct {
		Name     string `json:"name"`
		Archived int    `json:"archived"`
	}
	for view.Name != "reader" || view.Archived != 1 {
		if err := json.Unmarshal(events.nextOf("member").data.Data, &view); err != nil {
			t.Fatalf("member event: %v", err)
		}
	}
	// The admin may archive a member's letters; letters archived already
	// count for nothing.
	wantArchived(t, e.post(path, adminToken, through("reader-2")), 1, 1)
	wantArchived(t, e.post(path, tm.tokens["reader"], through("reader-2")), 0, 1)
	wantArchived(t, e.post(path, tm.tokens["reader"], through("reader-1")), 0, 1)
	// Ids are never reused: the next letter follows the last one sent.
	want(t, e.send(tm, "lead", "reader", "four"), http.StatusCreated, "")

	for round, env := range []*env{e, openEnv(t, e.place, 0)} {
		if got := ids(env.inbox(tm, "reader")); got != "reader-3,reader-4" {
			t.Errorf("round %d: inbox = %s, want reader-3,reader-4", round, got)
		}
		m := env.memberDoc(tm, "reader")
		if m.Archived != 2 || m.InboxLength != 2 {
			t.Errorf("round %d: reader archived %d, inbox_length %d; want 2 and 2", round, m.Archived, m.InboxLength)
		}
		wantCursor(t, m, "reader-2", 2)
		for _, token := range []string{tm.tokens["reader"], adminToken} {
			r := env.archiveOf(tm, "reader", token, "")
			want(t, r, http.StatusOK, "")
			letters := decode[httpapi.Archive](t, r).Letters
			if got := ids(letters); got != "reader-1,reader-2" {
				t.Fatalf("round %d: archive = %s, want reader-1,reader-2", round, got)
			}
			if l := letters[1]; l.Sender != "lead" || l.Recipient != "reader" || l.Body != "two" || l.ThreadID != "reader-2" {
				t.Errorf("round %d: archived reader-2 = %+v, want lead's letter two in its own thread", round, l)
			}
		}
		// Archived letters stay in threads and receipts.
		r := env.get("/api/v1/teams/arch/threads/reader-1", tm.tokens["lead"])
		want(t, r, http.StatusOK, "")
		if got := ids(decode[httpapi.Thread](t, r).Letters); got != "reader-1" {
			t.Errorf("round %d: thread reader-1 = %s, want reader-1", round, got)
		}
		r = env.get("/api/v1/teams/arch/receipts?ids=reader-1,reader-3", tm.tokens["lead"])
		want(t, r, http.StatusOK, "")
		if rs := decode[httpapi.Receipts](t, r).Receipts; len(rs) != 2 || !rs[0].Read || rs[1].Read {
			t.Errorf("round %d: receipts = %+v, want reader-1 read, reader-3 unread", round, rs)
		}
	}
}

// TestArchivePages: the archive is read in pages (after, limit), by the
// member or the admin only, with bounds checked.
func TestArchivePages(t *testing.T) {
	e := newEnv(t)
	tm := e.newTeam("pages", nil)
	for range 5 {
		want(t, e.send(tm, "lead", "reader", "a letter"), http.StatusCreated, "")
	}
	want(t, e.post(readPath(tm, "reader"), tm.tokens["reader"], map[string]string{"through": "reader-4"}), http.StatusOK, "")
	wantArchived(t, e.post(archivePath(tm, "reader"), tm.tokens["reader"], map[string]string{"through": "reader-4"}), 4, 1)
	reader := tm.tokens["reader"]
	for _, tt := range []struct{ query, want string }{
		{"", "reader-1,reader-2,reader-3,reader-4"},
		{"?limit=2", "reader-1,reader-2"},
		{"?after=reader-2&limit=1", "reader-3"},
		{"?after=reader-2", "reader-3,reader-4"},
		{"?after=reader-4", ""},
		// After a letter still in the inbox: nothing archived follows it.
		{"?after=reader-5", ""},
		{"?limit=1000", "reader-1,reader-2,reader-3,reader-4"},
	} {
		r := e.archiveOf(tm, "reader", reader, tt.query)
		want(t, r, http.StatusOK, "")
		if got := ids(decode[httpapi.Archive](t, r).Letters); got != tt.want {
			t.Errorf("archive%s = %q, want %q", tt.query, got, tt.want)
		}
	}
	// A member whose archive is empty reads an empty list.
	r := e.archiveOf(tm, "lead", tm.tokens["lead"], "")
	want(t, r, http.StatusOK, "")
	if string(r.body) != `{"letters":[]}`+"\n" && string(r.body) != `{"letters":[]}` {
		t.Errorf("lead's empty archive = %s, want {\"letters\":[]}", r.body)
	}
	other := e.newTeam("elsewhere", nil)
	for _, tt := range []struct {
		name, member, token, query string
		status                     int
		code                       string
	}{
		{"ErrLimitZero", "reader", reader, "?limit=0", 400, "validation_failed"},
		{"ErrLimitOver", "reader", reader, "?limit=1001", 400, "validation_failed"},
		{"ErrLimitNotNumber", "reader", reader, "?limit=ten", 400, "validation_failed"},
		{"ErrAfterOtherMember", "reader", reader, "?after=lead-1", 400, "validation_failed"},
		{"ErrAfterMalformed", "reader", reader, "?after=reader-01", 400, "validation_failed"},
		{"ErrOtherMember", "reader", tm.tokens["lead"], "", 403, "forbidden"},
		{"ErrOtherTeam", "reader", other.tokens["reader"], "", 403, "forbidden"},
		{"ErrNoToken", "reader", "", "", 401, "unauthorized"},
		{"ErrNoSuchMember", "ghost", adminToken, "", 404, "not_found"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			want(t, e.archiveOf(tm, tt.member, tt.token, tt.query), tt.status, tt.code)
		})
	}
}

// TestAutoArchive: inbox_full names the archive as a way out; with
// limits.auto_archive (set by PATCH, or at creation) a letter that finds
// the inbox full first archives what the recipient has read, and is
// refused only when nothing read is left to move.
func TestAutoArchive(t *testing.T) {
	e := openEnv(t, nil, 0)
	tm := e.newTeam("auto", map[string]int{"inbox_messages": 2})
	want(t, e.send(tm, "lead", "reader", "one"), http.StatusCreated, "")
	want(t, e.send(tm, "lead", "reader", "two"), http.StatusCreated, "")
	want(t, e.post(readPath(tm, "reader"), tm.tokens["reader"], map[string]string{"through": "reader-2"}), http.StatusOK, "")
	r := e.send(tm, "lead", "reader", "three")
	want(t, r, http.StatusConflict, "inbox_full")
	if p := decode[httpapi.Problem](t, r); !strings.Contains(p.Detail, "inbox_messages") || !strings.Contains(p.Detail, "/inbox/archive") || !strings.Contains(p.Detail, "auto_archive") {
		t.Fatalf("inbox_full detail = %q, want the limit, the archive and auto_archive named", p.Detail)
	}
	if m := e.memberDoc(tm, "reader"); m.Archived != 0 || m.InboxLength != 2 {
		t.Fatalf("after the refusal: archived %d, inbox_length %d; want 0 and 2", m.Archived, m.InboxLength)
	}

	r = e.patch("/api/v1/teams/auto", adminToken, `{"limits": {"auto_archive": true}}`)
	want(t, r, http.StatusOK, "")
	if l := decode[httpapi.Team](t, r).Limits; !l.AutoArchive || l.InboxMessages != 2 {
		t.Fatalf("limits after PATCH = %+v, want auto_archive on, inbox_messages still 2", l)
	}
	r = e.send(tm, "lead", "reader", "three")
	want(t, r, http.StatusCreated, "")
	if id := decode[httpapi.SendResult](t, r).ID; id != "reader-3" {
		t.Fatalf("the letter after the auto-archive is %s, want reader-3", id)
	}
	want(t, e.send(tm, "lead", "reader", "four"), http.StatusCreated, "")
	// Full again, and nothing read: auto_archive has nothing to move.
	want(t, e.send(tm, "lead", "reader", "five"), http.StatusConflict, "inbox_full")
	for round, env := range []*env{e, openEnv(t, e.place, 0)} {
		if got := ids(env.inbox(tm, "reader")); got != "reader-3,reader-4" {
			t.Errorf("round %d: inbox = %s, want reader-3,reader-4", round, got)
		}
		if m := env.memberDoc(tm, "reader"); m.Archived != 2 {
			t.Errorf("round %d: archived = %d, want 2", round, m.Archived)
		}
		r := env.get("/api/v1/teams/auto", adminToken)
		want(t, r, http.StatusOK, "")
		if !decode[httpapi.Team](t, r).Limits.AutoArchive {
			t.Errorf("round %d: auto_archive is off, want on", round)
		}
	}

	// At creation: off by default, on when asked.
	for _, tt := range []struct {
		name   string
		limits map[string]any
		want   bool
	}{
		{"born-off", nil, false},
		{"born-on", map[string]any{"auto_archive": true}, true},
	} {
		body := map[string]any{"name": tt.name}
		if tt.limits != nil {
			body["limits"] = tt.limits
		}
		r := e.post("/api/v1/teams", adminToken, body)
		want(t, r, http.StatusCreated, "")
		if got := decode[httpapi.CreatedTeam](t, r).Limits.AutoArchive; got != tt.want {
			t.Errorf("%s: created with auto_archive %v, want %v", tt.name, got, tt.want)
		}
	}
	want(t, e.patch("/api/v1/teams/auto", adminToken, `{"limits": {"auto_archive": "yes"}}`), http.StatusBadRequest, "validation_failed")
}
