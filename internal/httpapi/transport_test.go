package httpapi_test

import (
	"bytes"
	"io"
	"net/http"
	"strings"
	"testing"

	"mailroom/api"
	"mailroom/internal/httpapi"
)

// TestAuthMatrix covers identity on every route: no token, an unknown token,
// a token outside the header, and the wrong scheme are all 401.
func TestAuthMatrix(t *testing.T) {
	e := newEnv(t)
	a := e.newTeam("alpha", nil)
	lead := a.tokens["lead"]

	routes := []struct{ method, path string }{
		{http.MethodGet, "/api/v1/teams"},
		{http.MethodPost, "/api/v1/teams"},
		{http.MethodGet, "/api/v1/teams/alpha"},
		{http.MethodDelete, "/api/v1/teams/alpha"},
		{http.MethodPost, "/api/v1/teams/alpha/members/reader/reset"},
		{http.MethodPost, "/api/v1/teams/alpha/messages"},
		{http.MethodGet, "/api/v1/teams/alpha/members/lead/inbox"},
		{http.MethodPost, "/api/v1/teams/alpha/members/lead/inbox/consume"},
		{http.MethodGet, "/api/v1/teams/alpha/requests"},
		{http.MethodPost, "/api/v1/teams/alpha/requests"},
		{http.MethodGet, "/api/v1/teams/alpha/requests/req-1"},
		{http.MethodPost, "/api/v1/teams/alpha/requests/req-1/reply"},
		{http.MethodGet, "/api/v1/events"},
		{http.MethodGet, "/api/v1/no-such-route"},
	}
	creds := []struct {
		name   string
		query  string
		header map[string]string
	}{
		{name: "none"},
		{name: "unknown token", header: map[string]string{"Authorization": "Bearer mr_0123456789abcdef"}},
		{name: "query token", query: "?token=" + lead},
		{name: "query access_token", query: "?access_token=" + adminToken},
		{name: "basic scheme", header: map[string]string{"Authorization": "Basic " + adminToken}},
		{name: "bare token", header: map[string]string{"Authorization": adminToken}},
		{name: "empty bearer", header: map[string]string{"Authorization": "Bearer "}},
		{name: "token in another header", header: map[string]string{"X-Api-Key": adminToken}},
	}
	for _, rt := range routes {
		for _, c := range creds {
			t.Run(rt.method+" "+rt.path+"/"+c.name, func(t *testing.T) {
				r := e.do(call{method: rt.method, path: rt.path + c.query, header: c.header, body: `{"name":"x"}`})
				want(t, r, http.StatusUnauthorized, "unauthorized")
				if got := r.header.Get("WWW-Authenticate"); !strings.HasPrefix(got, "Bearer") {
					t.Errorf("WWW-Authenticate = %q", got)
				}
			})
		}
	}
	t.Run("scheme is case-insensitive", func(t *testing.T) {
		r := e.do(call{method: http.MethodGet, path: "/api/v1/teams", header: map[string]string{"Authorization": "bearer " + adminToken}})
		want(t, r, http.StatusOK, "")
	})
}

func TestRequestErrors(t *testing.T) {
	e := newEnv(t)
	a := e.newTeam("alpha", nil)
	lead := a.tokens["lead"]
	send := "/api/v1/teams/alpha/messages"

	tests := []struct {
		name   string
		call   call
		status int
		code   string
	}{
		{"ErrMalformedJSON", call{method: http.MethodPost, path: send, token: lead, body: `{"to": "reader", "body": `}, http.StatusBadRequest, "validation_failed"},
		{"ErrJSONArray", call{method: http.MethodPost, path: send, token: lead, body: `["reader", "hi"]`}, http.StatusBadRequest, "validation_failed"},
		{"ErrEmptyBody", call{method: http.MethodPost, path: send, token: lead, header: map[string]string{"Content-Type": "application/json"}}, http.StatusBadRequest, "validation_failed"},
		{"ErrCaseVariantField", call{method: http.MethodPost, path: send, token: lead, body: `{"to":"reader","body":"hi","TO":"lead"}`}, http.StatusBadRequest, "validation_failed"},
		{"ErrTextPlain", call{method: http.MethodPost, path: send, token: lead, body: `{"to":"reader","body":"hi"}`, header: map[string]string{"Content-Type": "text/plain"}}, http.StatusUnsupportedMediaType, "unsupported_media_type"},
		{"ErrFormEncoded", call{method: http.MethodPost, path: "/api/v1/teams", token: adminToken, body: `name=x`, header: map[string]string{"Content-Type": "application/x-www-form-urlencoded"}}, http.StatusUnsupportedMediaType, "unsupported_media_type"},
		{"ErrTooLarge", call{method: http.MethodPost, path: send, token: lead, body: `{"to":"reader","body":"` + strings.Repeat("x", httpapi.MaxBodyBytes) + `"}`}, http.StatusRequestEntityTooLarge, "body_too_large"},
		{"ErrMethodNotAllowed", call{method: http.MethodDelete, path: "/api/v1/teams", token: adminToken}, http.StatusMethodNotAllowed, "method_not_allowed"},
		{"ErrMethodNotAllowedPut", call{method: http.MethodPut, path: send, token: lead, body: `{}`}, http.StatusMethodNotAllowed, "method_not_allowed"},
		{"ErrUnknownPath", call{method: http.MethodGet, path: "/api/v1/nothing/here", token: adminToken}, http.StatusNotFound, "not_found"},
		{"ErrBadIdempotencyKey", call{method: http.MethodPost, path: send, token: lead, body: `{"to":"reader","body":"hi"}`, header: map[string]string{"Idempotency-Key": strings.Repeat("k", 201)}}, http.StatusBadRequest, "validation_failed"},
		{"ErrBadEventsTeam", call{method: http.MethodGet, path: "/api/v1/events?team=Not_A_Name", token: adminToken}, http.StatusBadRequest, "validation_failed"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			want(t, e.do(tt.call), tt.status, tt.code)
		})
	}
	if msgs := e.inbox(a, "reader"); len(msgs) != 0 {
		t.Fatalf("refused requests stored letters: %+v", msgs)
	}
}

// TestErrorsDoNotEchoInput checks that a problem's detail never repeats what
// the client sent: values or its Content-Type. (Names of unknown fields and
// members are repeated, quoted and cut short: TestErrorsNameTheMistake.)
func TestErrorsDoNotEchoInput(t *testing.T) {
	e := newEnv(t)
	a := e.newTeam("alpha", nil)
	const secret = "zq-secret-7"
	tests := []struct {
		name string
		call call
	}{
		{"pattern", call{method: http.MethodPost, path: "/api/v1/teams", token: adminToken, json: map[string]string{"name": secret + "<script>"}}},
		{"type", call{method: http.MethodPost, path: "/api/v1/teams/alpha/messages", token: a.tokens["lead"], body: `{"to":"reader","body":["` + secret + `"]}`}},
		{"enum", call{method: http.MethodPost, path: "/api/v1/teams/alpha/requests", token: a.tokens["reader"], json: map[string]string{"kind": secret, "target": "lead", "payload": "p"}}},
		{"content type", call{method: http.MethodPost, path: "/api/v1/teams", token: adminToken, body: `{"name":"ok"}`, header: map[string]string{"Content-Type": "text/" + secret}}},
		{"malformed JSON", call{method: http.MethodPost, path: "/api/v1/teams", token: adminToken, body: `{"name": ` + secret}},
		{"path parameter", call{method: http.MethodGet, path: "/api/v1/teams/" + strings.ToUpper(secret), token: adminToken}},
		{"query parameter", call{method: http.MethodGet, path: "/api/v1/events?team=" + strings.ToUpper(secret), token: adminToken}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := e.do(tt.call)
			if r.status < 400 {
				t.Fatalf("status = %d, want an error", r.status)
			}
			p := decode[httpapi.Problem](t, r)
			if p.Detail == "" {
				t.Errorf("problem %+v has no detail", p)
			}
			if low := strings.ToLower(string(r.body)); strings.Contains(low, "zq-secret") {
				t.Errorf("the client's value is echoed: %s", r.body)
			}
		})
	}
}

// TestErrorsNameTheMistake: an unknown field is named, and so is an
// unknown member, with the team's members listed; the client's text comes
// back quoted, its control characters escaped and cut at 64 characters.
func TestErrorsNameTheMistake(t *testing.T) {
	e := newEnv(t)
	a := e.newTeam("alpha", nil)
	tests := []struct {
		name   string
		call   call
		detail string
	}{
		{"unknown field", call{method: http.MethodPost, path: "/api/v1/teams/alpha/messages", token: a.tokens["lead"], json: map[string]string{"to": "reader", "body": "hi", "from": "lead"}},
			`"from" is not a field of this body.`},
		{"unknown nested field", call{method: http.MethodPost, path: "/api/v1/teams", token: adminToken, json: map[string]any{"name": "beta", "members": []map[string]string{{"name": "reader", "role": "r", "colour": "x"}}}},
			`"colour" is not a field of body /members/0.`},
		{"control characters", call{method: http.MethodPost, path: "/api/v1/teams/alpha/messages", token: a.tokens["lead"], json: map[string]string{"to": "reader", "body": "hi", "a\nb": "x"}},
			`"a\nb" is not a field of this body.`},
		{"long field", call{method: http.MethodPost, path: "/api/v1/teams/alpha/messages", token: a.tokens["lead"], json: map[string]string{"to": "reader", "body": "hi", strings.Repeat("f", 100): "x"}},
			`"` + strings.Repeat("f", 64) + `"… is not a field of this body.`},
		{"unknown member", call{method: http.MethodPost, path: "/api/v1/teams/alpha/messages", token: a.tokens["lead"], json: map[string]string{"to": "readr", "body": "hi"}},
			`Only registered member names may be used: "readr" is not a member of team alpha, whose members are lead, reader, reviewer.`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := e.do(tt.call)
			if r.status != http.StatusBadRequest && r.status != http.StatusUnprocessableEntity {
				t.Fatalf("status = %d, want 400 or 422; body %s", r.status, r.body)
			}
			if p := decode[httpapi.Problem](t, r); p.Detail != tt.detail {
				t.Errorf("detail = %q, want %q", p.Detail, tt.detail)
			}
		})
	}
}

func TestOutsideTheAPI(t *testing.T) {
	e := newEnv(t)
	tests := []struct {
		name, path  string
		status      int
		contentType string
		body        []byte
		csp         bool
	}{
		{"status page", "/", http.StatusOK, "text/html; charset=utf-8", []byte(statusPage), true},
		{"health", "/healthz", http.StatusOK, "application/json", []byte("{\"status\":\"ok\"}\n"), false},
		{"spec", "/api/openapi.yaml", http.StatusOK, "application/yaml", api.Spec, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := e.get(tt.path, "")
			if r.status != tt.status || r.header.Get("Content-Type") != tt.contentType || !bytes.Equal(r.body, tt.body) {
				t.Fatalf("GET %s = %d %q %q", tt.path, r.status, r.header.Get("Content-Type"), r.body)
			}
			if got := r.header.Get("X-Content-Type-Options"); got != "nosniff" {
				t.Errorf("X-Content-Type-Options = %q", got)
			}
			csp := r.header.Get("Content-Security-Policy")
			if tt.csp && csp != "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; connect-src 'self'; object-src 'none'; base-uri 'none'; frame-ancestors 'none'" {
				t.Errorf("Content-Security-Policy = %q", csp)
			}
		})
	}
}

func TestMetrics(t *testing.T) {
	e := newEnv(t)
	a := e.newTeam("secretteam", nil)
	want(t, e.send(a, "lead", "reader", "hello"), http.StatusCreated, "")
	want(t, e.open(a, "reader", "plan", "lead", "plan"), http.StatusCreated, "")
	want(t, e.reply(a, "lead", "req-1", true, ""), http.StatusOK, "")
	e.consume(a, "reader")
	want(t, e.get("/api/v1/teams/secretteam/members/reviewer/inbox", adminToken), http.StatusOK, "")

	resp, err := e.client.Get(e.srv.URL + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	text := string(body)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET /metrics = %d", resp.StatusCode)
	}
	for _, line := range []string{
		`mailroom_letters_stored_total 3`,
		`mailroom_protocol_requests_total{status="pending"} 1`,
		`mailroom_protocol_requests_total{status="approved"} 1`,
		`mailroom_http_requests_total{code="201",method="POST",route="/api/v1/teams/{team}/messages"} 1`,
		`mailroom_http_requests_total{code="200",method="GET",route="/api/v1/teams/{team}/members/{member}/inbox"} 1`,
		`mailroom_event_stream_clients 0`,
	} {
		if !strings.Contains(text, line+"\n") {
			t.Errorf("metrics lack %q", line)
		}
	}
	for _, name := range []string{"secretteam", "reader", "reviewer", "lead"} {
		if strings.Contains(text, name) {
			t.Errorf("metrics name %q", name)
		}
	}
}

// TestMalformedJSONBodies: on every route that takes a JSON body, a body
// with anything but whitespace after its value, invalid UTF-8, an escape
// of a lone surrogate or a member named twice is 400 validation_failed and
// stores nothing. The
// same body made well-formed (a surrogate pair, trailing whitespace) is
// then accepted, so the refusals are not the schema's.
func TestMalformedJSONBodies(t *testing.T) {
	e := openEnv(t, nil, 0)
	tm := e.newTeam("alpha", nil)
	want(t, e.open(tm, "reader", "plan", "lead", "Read main.py only."), http.StatusCreated, "")

	bad := []struct {
		name, inject, suffix string
		// twice names the body's first member twice, with the same value.
		twice bool
	}{
		{"DuplicateKey", "", "", true},
		{"TrailingWord", "", " trailing", false},
		{"SecondValue", "", ` {"to": "lead"}`, false},
		{"TrailingBracket", "", "]", false},
		{"InvalidUTF8", "\xff", "", false},
		{"TruncatedUTF8", "\xe2\x82", "", false},
		{"LoneHighSurrogate", `\ud800`, "", false},
		{"LoneLowSurrogate", `\udc00`, "", false},
		{"HighThenLetter", `\ud800\u0041`, "", false},
		{"HighThenHigh", `\ud83d\ud83d`, "", false},
		{"HighThenEscape", `\ud800\n`, "", false},
		{"LowThenHigh", `\ude00\ud83d`, "", false},
	}
	routes := []struct {
		name  string
		path  string
		token string
		// tmpl holds one %s inside a JSON string.
		tmpl string
		// unchanged fails the test when something was stored.
		unchanged func(t *testing.T)
		status    int
	}{
		{
			name: "CreateTeam", path: "/api/v1/teams", token: adminToken,
			tmpl: `{"name": "fresh", "members": [{"name": "reader", "role": "reads %s"}]}`,
			unchanged: func(t *testing.T) {
				want(t, e.get("/api/v1/teams/fresh", adminToken), http.StatusNotFound, "not_found")
			},
			status: http.StatusCreated,
		},
		{
			name: "SendMessage", path: "/api/v1/teams/alpha/messages", token: tm.tokens["lead"],
			tmpl: `{"to": "reviewer", "body": "x%s"}`,
			unchanged: func(t *testing.T) {
				if box := e.inbox(tm, "reviewer"); len(box) != 0 {
					t.Fatalf("reviewer's inbox = %+v, want empty", box)
				}
			},
			status: http.StatusCreated,
		},
		{
			name: "OpenRequest", path: "/api/v1/teams/alpha/requests", token: tm.tokens["lead"],
			tmpl: `{"kind": "shutdown", "target": "reviewer", "payload": "Stop%s"}`,
			unchanged: func(t *testing.T) {
				if reqs := decode[httpapi.RequestList](t, e.get("/api/v1/teams/alpha/requests", adminToken)).Requests; len(reqs) != 1 {
					t.Fatalf("requests = %+v, want only req-1", reqs)
				}
			},
			status: http.StatusCreated,
		},
		{
			name: "ReplyRequest", path: "/api/v1/teams/alpha/requests/req-1/reply", token: tm.tokens["lead"],
			tmpl: `{"approve": true, "feedback": "ok%s"}`,
			unchanged: func(t *testing.T) {
				if r := decode[httpapi.Request](t, e.get("/api/v1/teams/alpha/requests/req-1", adminToken)); r.Status != "pending" {
					t.Fatalf("req-1 = %+v, want still pending", r)
				}
			},
			status: http.StatusOK,
		},
		{
			name: "RunTurn", path: "/api/v1/teams/alpha/members/reviewer/turns", token: adminToken,
			tmpl: `{"prompt": "go%s", "responses": [{"text": "done"}]}`,
			unchanged: func(t *testing.T) {
				if m := e.member(tm, "reviewer"); m.Turns != 0 || m.HistoryLength != 0 {
					t.Fatalf("reviewer = %+v, want no turn taken", m)
				}
			},
			status: http.StatusOK,
		},
		{
			name: "RunScenario", path: "/api/v1/scenarios/team-protocols/runs", token: adminToken,
			tmpl: `{"expected": "4%s"}`,
			unchanged: func(t *testing.T) {
				// alpha, and fresh from the CreateTeam case.
				if teams := decode[httpapi.TeamList](t, e.get("/api/v1/teams", adminToken)).Teams; len(teams) != 2 {
					t.Fatalf("teams = %+v, want alpha and fresh only", teams)
				}
			},
			status: http.StatusOK,
		},
	}
	for _, rt := range routes {
		t.Run(rt.name, func(t *testing.T) {
			for _, b := range bad {
				body := strings.Replace(rt.tmpl, "%s", b.inject, 1) + b.suffix
				if b.twice {
					first, _, _ := strings.Cut(strings.TrimSuffix(body[1:], "}"), ",")
					body = "{" + first + ", " + body[1:]
				}
				r := e.do(call{method: http.MethodPost, path: rt.path, token: rt.token, body: body})
				if r.status != http.StatusBadRequest || !strings.Contains(string(r.body), `"validation_failed"`) {
					t.Errorf("%s: status %d, body %s; want 400 validation_failed", b.name, r.status, r.body)
				}
				rt.unchanged(t)
			}
			// A surrogate pair and trailing whitespace are well-formed.
			body := strings.Replace(rt.tmpl, "%s", `\ud83d\ude00`, 1) + " \r\n\t"
			want(t, e.do(call{method: http.MethodPost, path: rt.path, token: rt.token, body: body}), rt.status, "")
		})
	}
	// The well-formed letter (then the shutdown request) arrived, emoji whole.
	if box := e.inbox(tm, "reviewer"); len(box) != 2 || box[0].ID != "reviewer-1" || box[0].Body != "x😀" {
		t.Errorf("reviewer's inbox = %+v, want the well-formed letter first, with its emoji", box)
	}
}
