package e2e

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"math/rand/v2"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"mailroom/internal/core"
)

// The crash test's shape. Every loop below is bounded by these.
const (
	crashCycles      = 12 // kill/restart cycles in a normal run
	crashCyclesShort = 3  // with -short
	crashTeams       = 4
	opsPerCycle      = 400 // cap on one client's operations in one cycle
	minKillDelay     = 30 * time.Millisecond
	maxKillDelay     = 600 * time.Millisecond
)

// crashMembers are the members of every team: lead and two teammates.
var crashMembers = []string{core.LeadName, "ann", "bob"}

// outcome is what a client learned of one write.
type outcome int

const (
	// acked: a 2xx arrived, so the write must be on disk exactly once.
	acked outcome = iota + 1
	// refused: a 4xx arrived, so nothing may have been stored.
	refused
	// unknown: no complete response (the server died). The write may or
	// may not be stored, but never twice.
	unknown
)

func (o outcome) String() string {
	switch o {
	case acked:
		return "acknowledged"
	case refused:
		return "refused"
	case unknown:
		return "unacknowledged"
	}
	return "outcome(" + strconv.Itoa(int(o)) + ")"
}

type sendRec struct {
	team, sender, to, body, key string
	out                         outcome
	id                          string
}

type openRec struct {
	team, sender, target, kind, payload, key string
	out                                      outcome
	id                                       string
}

type replyRec struct {
	team, requestID, actor, key string
	approve                     bool
	feedback                    string
	out                         outcome
	status, receipt             string
}

// matchRec is an acknowledged consume result that changed a request.
type matchRec struct{ team, requestID, status string }

// ledger is everything the clients did and what they were told. Clients
// append under mu; the checks read it once every client has returned.
type ledger struct {
	mu      sync.Mutex
	sends   []*sendRec
	opens   []*openRec
	replies []*replyRec
	matches []matchRec
	bad     []string // responses that no correct server gives
	// unavailable counts 503 storage_unavailable answers (allowUnavailable).
	unavailable int
}

func (l *ledger) add(f func()) {
	l.mu.Lock()
	defer l.mu.Unlock()
	f()
}

func (l *ledger) badf(format string, args ...any) {
	l.add(func() { l.bad = append(l.bad, fmt.Sprintf(format, args...)) })
}

type teamInfo struct {
	name   string
	tokens map[string]string // member → token
}

// apiRequest is a request record as the API returns it.
type apiRequest struct {
	ID      string      `json:"request_id"`
	Kind    string      `json:"kind"`
	Sender  string      `json:"sender"`
	Target  string      `json:"target"`
	Payload string      `json:"payload"`
	Status  string      `json:"status"`
	Reply   *core.Reply `json:"reply"`
	Receipt string      `json:"receipt"`
}

type apiTeam struct {
	Damaged bool `json:"damaged"`
	Members []struct {
		Name   string `json:"name"`
		Status string `json:"status"`
	} `json:"members"`
	Requests []apiRequest `json:"requests"`
}

type sendResult struct {
	ID     string `json:"id"`
	Status string `json:"status"`
}

type openResult struct {
	RequestID string `json:"request_id"`
	Status    string `json:"status"`
}

type replyResult struct {
	RequestID string `json:"request_id"`
	Status    string `json:"status"`
	Receipt   string `json:"receipt"`
}

// TestCrashRecovery drives concurrent clients against the real server,
// kills it with SIGKILL at a random moment, restarts it over the same data
// directory and checks that nothing acknowledged was lost or doubled, that
// the request table, the member statuses and the inboxes agree, and that
// every inbox file is exactly the lesson's bytes (docs/spec.md §13.14).
//
// The run is random; its seed is logged, and MAILROOM_E2E_SEED=<seed>
// repeats the same choices (the kill moments still depend on timing).
func TestCrashRecovery(t *testing.T) {
	seed := uint64(time.Now().UnixNano())
	if s := os.Getenv("MAILROOM_E2E_SEED"); s != "" {
		v, err := strconv.ParseUint(s, 10, 64)
		if err != nil {
			t.Fatalf("MAILROOM_E2E_SEED=%q: %v", s, err)
		}
		seed = v
	}
	t.Logf("seed %d (MAILROOM_E2E_SEED=%d repeats it)", seed, seed)
	rng := rand.New(rand.NewPCG(seed, 0x6d61696c726f6f6d))

	cycles := crashCycles
	if testing.Short() {
		cycles = crashCyclesShort
	}
	dataDir := filepath.Join(t.TempDir(), "data")
	srv := startServer(t, dataDir)
	c := newClient(srv.base)
	teams := createCrashTeams(t, c)
	l := &ledger{}
	var logs strings.Builder

	for cycle := 1; cycle <= cycles; cycle++ {
		delay := minKillDelay + time.Duration(rng.Int64N(int64(maxKillDelay-minKillDelay)))
		stop := make(chan struct{})
		var wg sync.WaitGroup
		for ti, tm := range teams {
			for mi, name := range crashMembers {
				a := &actor{
					team: tm, name: name, token: tm.tokens[name], c: c, l: l, cycle: cycle,
					rng: rand.New(rand.NewPCG(seed, uint64(cycle*1000+ti*10+mi))),
				}
				wg.Add(1)
				go func() {
					defer wg.Done()
					a.run(stop)
				}()
			}
		}
		// The random delay is the point of the test (where the kill lands),
		// not a way to wait for something.
		time.Sleep(delay)
		srv.kill()
		close(stop)
		wg.Wait()
		c.close()
		logs.WriteString(srv.stderr.String())

		srv = startServer(t, dataDir)
		c = newClient(srv.base)
		snaps := verify(t, c, dataDir, teams, l, fmt.Sprintf("cycle %d after restart", cycle))
		retryUnknown(t, c, teams, l, snaps)
		verify(t, c, dataDir, teams, l, fmt.Sprintf("cycle %d after retries", cycle))
		if t.Failed() {
			t.Fatalf("cycle %d (killed after %v) failed; seed %d", cycle, delay, seed)
		}
	}
	srv.stop()
	c.close()
	logs.WriteString(srv.stderr.String())

	// A clean stop and start changes nothing either.
	srv = startServer(t, dataDir)
	c = newClient(srv.base)
	verify(t, c, dataDir, teams, l, "after a clean restart")
	srv.stop()
	c.close()
	logs.WriteString(srv.stderr.String())

	summarize(t, l, logs.String())
}

// summarize logs what the run covered, so a passing run shows it tested
// something: how many writes of each outcome, and which repairs start-up
// made.
func summarize(t *testing.T, l *ledger, logs string) {
	t.Helper()
	count := func(n *[3]int, o outcome) { n[o-1]++ }
	var sends, opens, replies [3]int
	for _, r := range l.sends {
		count(&sends, r.out)
	}
	for _, r := range l.opens {
		count(&opens, r.out)
	}
	for _, r := range l.replies {
		count(&replies, r.out)
	}
	t.Logf("sends %v, opens %v, replies %v (acknowledged, refused, unacknowledged); matches %d",
		sends, opens, replies, len(l.matches))
	t.Logf("start-up: %d intents completed, %d intents dropped, %d torn lines removed",
		strings.Count(logs, "completed a recorded intent"),
		strings.Count(logs, "dropped a recorded intent"),
		strings.Count(logs, "removed the torn last line"))
}

func createCrashTeams(t *testing.T, c *client) []*teamInfo {
	t.Helper()
	var teams []*teamInfo
	for i := range crashTeams {
		name := fmt.Sprintf("crash-%d", i)
		body := map[string]any{
			"name": name,
			"members": []map[string]string{
				{"name": "lead", "role": "leads"},
				{"name": "ann", "role": "writes"},
				{"name": "bob", "role": "reviews"},
			},
			"limits": map[string]int{"inbox_messages": 5000, "inbox_bytes": 10000000, "requests": 1000},
		}
		var created struct {
			Members []struct {
				Name  string `json:"name"`
				Token string `json:"token"`
			} `json:"members"`
		}
		status, code, err := c.do(http.MethodPost, "/teams", adminToken, "", body, &created)
		if err != nil || status != http.StatusCreated {
			t.Fatalf("create team %s: %d %s %v", name, status, code, err)
		}
		tm := &teamInfo{name: name, tokens: map[string]string{}}
		for _, m := range created.Members {
			tm.tokens[m.Name] = m.Token
		}
		for _, m := range crashMembers {
			if tm.tokens[m] == "" {
				t.Fatalf("team %s: no token for %s", name, m)
			}
		}
		teams = append(teams, tm)
	}
	return teams
}

// actor is one client: a member of one team acting with its own token
// during one cycle.
type actor struct {
	team     *teamInfo
	name     string
	token    string
	c        *client
	l        *ledger
	rng      *rand.Rand
	cycle    int
	n        int
	requests int // how many requests the team had when last listed
	// allowUnavailable takes 503 storage_unavailable as an outcome a
	// correct server gives (the database is down) instead of a bad answer.
	allowUnavailable bool
}

// uniq is a string no other operation of the run uses.
func (a *actor) uniq() string {
	a.n++
	return fmt.Sprintf("%s.%s.c%d.%d", a.team.name, a.name, a.cycle, a.n)
}

func (a *actor) other() string {
	for {
		if m := crashMembers[a.rng.IntN(len(crashMembers))]; m != a.name {
			return m
		}
	}
}

// run performs random operations until stop is closed, the operation cap
// is reached or a call gets no complete response (the server is gone).
func (a *actor) run(stop <-chan struct{}) {
	for range opsPerCycle {
		select {
		case <-stop:
			return
		default:
		}
		if !a.step() {
			return
		}
	}
}

// step performs one operation and reports whether the server answered.
func (a *actor) step() bool {
	switch p := a.rng.IntN(100); {
	case p < 40:
		return a.send(false)
	case p < 46:
		return a.send(true)
	case p < 62:
		if a.name == core.LeadName {
			if a.rng.IntN(3) != 0 {
				return a.send(false)
			}
			return a.open(core.KindShutdown, crashMembers[1+a.rng.IntN(len(crashMembers)-1)])
		}
		return a.open(core.KindPlan, core.LeadName)
	case p < 80:
		return a.reply()
	case p < 94:
		return a.consume()
	default:
		return a.read()
	}
}

// classify turns a call's result into an outcome; codes lists the 4xx
// problem codes a correct server may give for this operation.
func (a *actor) classify(op string, status int, code string, err error, codes ...string) (outcome, bool) {
	switch {
	case errors.Is(err, errTransport):
		return unknown, false
	case err != nil:
		a.l.badf("%s %s: %v", a.team.name, op, err)
		return unknown, false
	case status/100 == 2:
		return acked, true
	case a.allowUnavailable && status == http.StatusServiceUnavailable && code == "storage_unavailable":
		// The database is down: nothing acknowledged, and a commit cut
		// off mid-way may or may not have landed.
		a.l.add(func() { a.l.unavailable++ })
		return unknown, true
	case status/100 == 4:
		for _, c := range codes {
			if c == code {
				return refused, true
			}
		}
		a.l.badf("%s %s by %s: unexpected %d %s", a.team.name, op, a.name, status, code)
		return refused, true
	default:
		a.l.badf("%s %s by %s: unexpected %d %s", a.team.name, op, a.name, status, code)
		return unknown, true
	}
}

// send mails a letter with a unique body, half of them with an
// Idempotency-Key. A look-alike is a plain letter whose body is
// byte-for-byte a request letter with an id the team may soon use: it must
// stay ordinary mail across every restart.
func (a *actor) send(lookalike bool) bool {
	u := a.uniq()
	rec := &sendRec{team: a.team.name, sender: a.name, to: a.other(), body: "letter " + u}
	if lookalike {
		kind := core.KindPlan
		if rec.to != core.LeadName {
			kind = core.KindShutdown
		}
		id := "req-" + strconv.Itoa(a.requests+1+a.rng.IntN(2))
		rec.body = core.EncodeRequestLetter(kind, id, "lookalike "+u)
	}
	if a.rng.IntN(2) == 0 {
		rec.key = "send-" + u
	}
	var res sendResult
	status, code, err := a.c.do(http.MethodPost, "/teams/"+a.team.name+"/messages", a.token, rec.key,
		map[string]string{"to": rec.to, "body": rec.body}, &res)
	var ok bool
	rec.out, ok = a.classify("send", status, code, err)
	if rec.out == acked {
		rec.id = res.ID
		if res.Status != "queued" || !strings.HasPrefix(res.ID, rec.to+"-") {
			a.l.badf("%s send: answer %+v", a.team.name, res)
		}
	}
	a.l.add(func() { a.l.sends = append(a.l.sends, rec) })
	return ok
}

// open opens a request with a unique payload; a third carry a key.
func (a *actor) open(kind, target string) bool {
	u := a.uniq()
	rec := &openRec{team: a.team.name, sender: a.name, target: target, kind: kind, payload: kind + " " + u}
	if a.rng.IntN(3) == 0 {
		rec.key = "open-" + u
	}
	var res openResult
	status, code, err := a.c.do(http.MethodPost, "/teams/"+a.team.name+"/requests", a.token, rec.key,
		map[string]string{"kind": kind, "target": target, "payload": rec.payload}, &res)
	var ok bool
	rec.out, ok = a.classify("open", status, code, err, "request_pending", "request_limit", "member_closed")
	if rec.out == acked {
		rec.id = res.RequestID
		if res.Status != "pending" {
			a.l.badf("%s open: answer %+v", a.team.name, res)
		}
	}
	a.l.add(func() { a.l.opens = append(a.l.opens, rec) })
	return ok
}

// reply answers one request addressed to this member that has no reply
// yet. Shutdowns are approved less often, so teammates stay open longer.
func (a *actor) reply() bool {
	var list struct {
		Requests []apiRequest `json:"requests"`
	}
	status, code, err := a.c.do(http.MethodGet, "/teams/"+a.team.name+"/requests", a.token, "", nil, &list)
	if _, ok := a.classify("list requests", status, code, err); !ok || status != http.StatusOK {
		return ok
	}
	a.requests = len(list.Requests)
	var open []apiRequest
	for _, r := range list.Requests {
		if r.Target == a.name && r.Reply == nil && r.Status == core.RequestPending {
			open = append(open, r)
		}
	}
	if len(open) == 0 {
		return a.consume()
	}
	r := open[a.rng.IntN(len(open))]
	u := a.uniq()
	rec := &replyRec{team: a.team.name, requestID: r.ID, actor: a.name, feedback: "fb " + u}
	if r.Kind == core.KindShutdown {
		rec.approve = a.rng.IntN(10) < 3
	} else {
		rec.approve = a.rng.IntN(10) < 6
	}
	if a.rng.IntN(3) == 0 {
		rec.key = "reply-" + u
	}
	var res replyResult
	status, code, err = a.c.do(http.MethodPost, "/teams/"+a.team.name+"/requests/"+r.ID+"/reply", a.token, rec.key,
		map[string]any{"approve": rec.approve, "feedback": rec.feedback}, &res)
	var ok bool
	rec.out, ok = a.classify("reply", status, code, err, "reply_conflict")
	if rec.out == acked {
		rec.status, rec.receipt = res.Status, res.Receipt
		if res.Status != "queued" || !strings.HasPrefix(res.Receipt, r.Sender+"-") {
			a.l.badf("%s reply to %s: answer %+v", a.team.name, r.ID, res)
		}
	}
	a.l.add(func() { a.l.replies = append(a.l.replies, rec) })
	return ok
}

// consume matches this member's inbox and records every status change it
// was told about.
func (a *actor) consume() bool {
	var res struct {
		Results []struct {
			MessageID string `json:"message_id"`
			Status    string `json:"status"`
			RequestID string `json:"request_id"`
		} `json:"results"`
	}
	status, code, err := a.c.do(http.MethodPost, "/teams/"+a.team.name+"/members/"+a.name+"/inbox/consume", a.token, "", nil, &res)
	out, ok := a.classify("consume", status, code, err)
	if out == acked {
		a.l.add(func() {
			for _, r := range res.Results {
				if r.Status == core.RequestApproved || r.Status == core.RequestRejected {
					a.l.matches = append(a.l.matches, matchRec{team: a.team.name, requestID: r.RequestID, status: r.Status})
				}
			}
		})
	}
	return ok
}

func (a *actor) read() bool {
	status, code, err := a.c.do(http.MethodGet, "/teams/"+a.team.name+"/members/"+a.name+"/inbox", a.token, "", nil, nil)
	_, ok := a.classify("read inbox", status, code, err)
	return ok
}

// snapshot is one team as the restarted server serves it.
type snapshot struct {
	inbox    map[string][]core.Message // member → letters
	byBody   map[string][]core.Message
	requests map[string]apiRequest // by payload
	byID     map[string]apiRequest
	status   map[string]string // member → status
}

// verify checks every invariant of the ledger against the running server
// and the files on disk, and returns what it read.
func verify(t *testing.T, c *client, dataDir string, teams []*teamInfo, l *ledger, when string) map[string]*snapshot {
	t.Helper()
	for _, b := range l.bad {
		t.Errorf("%s: %s", when, b)
	}
	l.bad = nil
	snaps := map[string]*snapshot{}
	for _, tm := range teams {
		snaps[tm.name] = verifyTeam(t, c, dataDir, tm, when)
	}

	for _, r := range l.sends {
		s := snaps[r.team]
		found := s.byBody[r.body]
		switch {
		case len(found) > 1:
			t.Errorf("%s: %s send %q (%v) stored %d times: %v", when, r.team, r.body, r.out, len(found), found)
		case r.out == acked && len(found) == 0:
			t.Errorf("%s: %s acknowledged send %s %q is lost", when, r.team, r.id, r.body)
		case r.out == refused && len(found) != 0:
			t.Errorf("%s: %s refused send %q was stored as %s", when, r.team, r.body, found[0].ID)
		case len(found) == 1:
			m := found[0]
			if m.Sender != r.sender || m.Recipient != r.to || (r.out == acked && m.ID != r.id) {
				t.Errorf("%s: %s send %q (%v, id %q) stored as %+v", when, r.team, r.body, r.out, r.id, m)
			}
		}
	}

	for _, r := range l.opens {
		req, ok := snaps[r.team].requests[r.payload]
		switch {
		case r.out == acked && !ok:
			t.Errorf("%s: %s acknowledged request %s (%q) is lost", when, r.team, r.id, r.payload)
		case r.out == refused && ok:
			t.Errorf("%s: %s refused request %q was stored as %s", when, r.team, r.payload, req.ID)
		case ok && (req.Kind != r.kind || req.Sender != r.sender || req.Target != r.target || (r.out == acked && req.ID != r.id)):
			t.Errorf("%s: %s request %q (%v, id %q) stored as %+v", when, r.team, r.payload, r.out, r.id, req)
		}
	}

	for _, r := range l.replies {
		req, ok := snaps[r.team].byID[r.requestID]
		if !ok {
			t.Errorf("%s: %s reply to unknown request %s", when, r.team, r.requestID)
			continue
		}
		want := core.Reply{Type: req.Kind + "_response", RequestID: r.requestID, Approve: r.approve, Feedback: r.feedback}
		switch {
		case r.out == acked && (req.Reply == nil || *req.Reply != want):
			t.Errorf("%s: %s acknowledged reply %+v to %s is lost; request holds %+v", when, r.team, want, r.requestID, req.Reply)
		case r.out == acked && r.status == "queued":
			letters := snaps[r.team].inbox[req.Sender]
			if !hasLetter(letters, core.Message{ID: r.receipt, Sender: r.actor, Recipient: req.Sender, Body: core.EncodeReplyLetter(want)}) {
				t.Errorf("%s: %s acknowledged reply letter %s for %s is not in %s's inbox", when, r.team, r.receipt, r.requestID, req.Sender)
			}
		}
	}

	for _, m := range l.matches {
		req, ok := snaps[m.team].byID[m.requestID]
		if !ok || req.Status != m.status {
			t.Errorf("%s: %s acknowledged match of %s as %s; request now %+v", when, m.team, m.requestID, m.status, req)
		}
	}

	// Every letter on disk has an origin: a send of the ledger (plain
	// mail, look-alikes included), or the letter of a registered request
	// or reply. This is stronger than the request → letter direction the
	// server needs: it holds because the test knows which letters it sent
	// as plain mail, while the server cannot tell (docs/spec.md §13.14).
	sendBodies := map[string]bool{}
	for _, r := range l.sends {
		sendBodies[r.team+"\x00"+r.body] = true
	}
	for _, tm := range teams {
		s := snaps[tm.name]
		for _, letters := range s.inbox {
			for _, m := range letters {
				if !sendBodies[tm.name+"\x00"+m.Body] && !protocolOrigin(s, m) {
					t.Errorf("%s: %s letter %+v has no origin", when, tm.name, m)
				}
			}
		}
	}
	return snaps
}

func protocolOrigin(s *snapshot, m core.Message) bool {
	for _, r := range s.byID {
		if r.Receipt == m.ID && r.Target == m.Recipient && r.Sender == m.Sender && m.Body == core.EncodeRequestLetter(r.Kind, r.ID, r.Payload) {
			return true
		}
		if r.Reply != nil && r.Sender == m.Recipient && r.Target == m.Sender && m.Body == core.EncodeReplyLetter(*r.Reply) {
			return true
		}
	}
	return false
}

func hasLetter(letters []core.Message, want core.Message) bool {
	for _, m := range letters {
		if m == want {
			return true
		}
	}
	return false
}

// verifyTeam reads one team through the API and its inbox files from disk
// and checks what holds within the team alone.
func verifyTeam(t *testing.T, c *client, dataDir string, tm *teamInfo, when string) *snapshot {
	t.Helper()
	s := &snapshot{
		inbox: map[string][]core.Message{}, byBody: map[string][]core.Message{},
		requests: map[string]apiRequest{}, byID: map[string]apiRequest{}, status: map[string]string{},
	}
	var view apiTeam
	status, code, err := c.do(http.MethodGet, "/teams/"+tm.name, adminToken, "", nil, &view)
	if err != nil || status != http.StatusOK {
		t.Fatalf("%s: GET team %s: %d %s %v", when, tm.name, status, code, err)
	}
	if view.Damaged {
		t.Errorf("%s: team %s is served as damaged", when, tm.name)
	}
	for _, m := range view.Members {
		s.status[m.Name] = m.Status
	}
	var list struct {
		Requests []apiRequest `json:"requests"`
	}
	status, code, err = c.do(http.MethodGet, "/teams/"+tm.name+"/requests", adminToken, "", nil, &list)
	if err != nil || status != http.StatusOK {
		t.Fatalf("%s: GET requests of %s: %d %s %v", when, tm.name, status, code, err)
	}
	for i, r := range list.Requests {
		if r.ID != "req-"+strconv.Itoa(i+1) {
			t.Errorf("%s: %s request %d has id %s", when, tm.name, i+1, r.ID)
		}
		if _, dup := s.requests[r.Payload]; dup {
			t.Errorf("%s: %s payload %q registered twice", when, tm.name, r.Payload)
		}
		s.requests[r.Payload] = r
		s.byID[r.ID] = r
	}

	for _, name := range crashMembers {
		var inbox struct {
			Messages []core.Message `json:"messages"`
		}
		status, code, err := c.do(http.MethodGet, "/teams/"+tm.name+"/members/"+name+"/inbox", adminToken, "", nil, &inbox)
		if err != nil || status != http.StatusOK {
			t.Errorf("%s: GET inbox %s/%s: %d %s %v", when, tm.name, name, status, code, err)
			continue
		}
		s.inbox[name] = inbox.Messages
		for _, m := range inbox.Messages {
			s.byBody[m.Body] = append(s.byBody[m.Body], m)
		}
		checkInboxFile(t, dataDir, tm.name, name, inbox.Messages, when)
	}

	closedBy := map[string]bool{}
	for _, r := range list.Requests {
		target := s.inbox[r.Target]
		if !hasLetter(target, core.Message{ID: r.Receipt, Sender: r.Sender, Recipient: r.Target, Body: core.EncodeRequestLetter(r.Kind, r.ID, r.Payload)}) {
			t.Errorf("%s: %s request %s has no letter %s in %s's inbox", when, tm.name, r.ID, r.Receipt, r.Target)
		}
		switch r.Status {
		case core.RequestPending:
		case core.RequestApproved, core.RequestRejected:
			if r.Reply == nil || r.Reply.Approve != (r.Status == core.RequestApproved) {
				t.Errorf("%s: %s request %s is %s with reply %+v", when, tm.name, r.ID, r.Status, r.Reply)
			}
		default:
			t.Errorf("%s: %s request %s has status %q", when, tm.name, r.ID, r.Status)
		}
		if r.Reply == nil {
			continue
		}
		if r.Reply.Type != r.Kind+"_response" || r.Reply.RequestID != r.ID {
			t.Errorf("%s: %s request %s holds reply %+v", when, tm.name, r.ID, r.Reply)
		}
		body := core.EncodeReplyLetter(*r.Reply)
		n := 0
		for _, m := range s.inbox[r.Sender] {
			if m.Body == body && m.Sender == r.Target {
				n++
			}
		}
		if n != 1 {
			t.Errorf("%s: %s reply to %s is in %s's inbox %d times, want once", when, tm.name, r.ID, r.Sender, n)
		}
		if r.Kind == core.KindShutdown && r.Reply.Approve {
			closedBy[r.Target] = true
		}
	}
	for _, name := range crashMembers {
		want := core.StatusIdle
		if closedBy[name] {
			want = core.StatusClosed
		}
		if s.status[name] != want {
			t.Errorf("%s: %s member %s is %q, want %q (closed iff an approving shutdown reply is recorded)", when, tm.name, name, s.status[name], want)
		}
	}
	return s
}

// checkInboxFile requires the inbox file to be byte-for-byte what the
// lesson's save_inbox writes for the letters the server returned; no file
// means no letters.
func checkInboxFile(t *testing.T, dataDir, team, member string, msgs []core.Message, when string) {
	t.Helper()
	if dataDir == "" {
		return // not a file store: no inbox files to compare
	}
	data, err := os.ReadFile(filepath.Join(dataDir, "teams", team, "inboxes", member+".jsonl"))
	if errors.Is(err, fs.ErrNotExist) {
		if len(msgs) != 0 {
			t.Errorf("%s: %s/%s has %d letters and no file", when, team, member, len(msgs))
		}
		return
	}
	if err != nil {
		t.Errorf("%s: %v", when, err)
		return
	}
	var want []byte
	for _, m := range msgs {
		want = append(want, core.EncodeInboxLine(m)...)
	}
	if !bytes.Equal(data, want) {
		t.Errorf("%s: %s/%s file (%d bytes) is not the encoding of its %d letters (%d bytes)", when, team, member, len(data), len(msgs), len(want))
	}
}

// retryUnknown repeats every unacknowledged write that carried an
// Idempotency-Key, with the same key and body, as a client would after a
// restart: it must return what was stored, or store it now, once.
func retryUnknown(t *testing.T, c *client, teams []*teamInfo, l *ledger, snaps map[string]*snapshot) {
	t.Helper()
	tokens := map[string]map[string]string{}
	for _, tm := range teams {
		tokens[tm.name] = tm.tokens
	}
	for _, r := range l.sends {
		if r.out != unknown || r.key == "" {
			continue
		}
		found := snaps[r.team].byBody[r.body]
		var res sendResult
		status, code, err := c.do(http.MethodPost, "/teams/"+r.team+"/messages", tokens[r.team][r.sender], r.key,
			map[string]string{"to": r.to, "body": r.body}, &res)
		if err != nil || status != http.StatusCreated {
			t.Errorf("retry of send %q: %d %s %v", r.body, status, code, err)
			continue
		}
		if len(found) == 1 && res.ID != found[0].ID {
			t.Errorf("retry of stored send %q returned %s, want %s", r.body, res.ID, found[0].ID)
		}
		r.out, r.id = acked, res.ID
	}
	for _, r := range l.opens {
		if r.out != unknown || r.key == "" {
			continue
		}
		stored, ok := snaps[r.team].requests[r.payload]
		var res openResult
		status, code, err := c.do(http.MethodPost, "/teams/"+r.team+"/requests", tokens[r.team][r.sender], r.key,
			map[string]string{"kind": r.kind, "target": r.target, "payload": r.payload}, &res)
		switch {
		case err != nil:
			t.Errorf("retry of open %q: %v", r.payload, err)
		case status == http.StatusCreated:
			if ok && res.RequestID != stored.ID {
				t.Errorf("retry of stored open %q returned %s, want %s", r.payload, res.RequestID, stored.ID)
			}
			r.out, r.id = acked, res.RequestID
		case ok:
			t.Errorf("retry of stored open %q (%s): %d %s, want its first answer", r.payload, stored.ID, status, code)
		case status == http.StatusConflict:
			r.out = refused
		default:
			t.Errorf("retry of open %q: %d %s", r.payload, status, code)
		}
	}
	for _, r := range l.replies {
		if r.out != unknown || r.key == "" {
			continue
		}
		var res replyResult
		status, code, err := c.do(http.MethodPost, "/teams/"+r.team+"/requests/"+r.requestID+"/reply", tokens[r.team][r.actor], r.key,
			map[string]any{"approve": r.approve, "feedback": r.feedback}, &res)
		if err != nil || status != http.StatusOK {
			t.Errorf("retry of reply to %s: %d %s %v", r.requestID, status, code, err)
			continue
		}
		r.out, r.status, r.receipt = acked, res.Status, res.Receipt
		if res.Status != "queued" {
			t.Errorf("retry of reply to %s: status %q, want the first answer (queued)", r.requestID, res.Status)
		}
	}
}
