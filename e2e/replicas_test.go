package e2e

import (
	"bufio"
	"context"
	"fmt"
	"math/rand/v2"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"mailroom/internal/core"
	"mailroom/internal/pgtest"
	"mailroom/internal/testkit"
)

// Tests of several real server processes on one PostgreSQL database (a
// private cluster of this test binary, see internal/pgtest). They reuse
// the crash test's clients (actor) and checks (verify): every
// acknowledged write is stored exactly once, the request table agrees
// with the inboxes, and letter ids have no gaps.

// replicaClients is how many concurrent clients drive the replicas.
const replicaClients = 64

// replicaLoad bounds how long the clients run in one phase; each also
// stops at opsPerCycle operations.
const replicaLoad = 2 * time.Second

// sharedReplicas starts two replicas on a fresh database, sharing one
// data directory (replicas may), and a client of each, closed at the
// test's end. It returns the data directory too.
func sharedReplicas(t *testing.T) (a, b *server, ca, cb *client, dataDir string) {
	t.Helper()
	dbURL := pgtest.New(t)
	dataDir = filepath.Join(t.TempDir(), "data")
	a = startReplica(t, dataDir, dbURL)
	b = startReplica(t, dataDir, dbURL)
	ca, cb = newClient(a.base), newClient(b.base)
	t.Cleanup(ca.close)
	t.Cleanup(cb.close)
	return a, b, ca, cb, dataDir
}

// startReplica starts the binary on PostgreSQL at dbURL with dataDir as
// its (shareable) data directory.
func startReplica(t *testing.T, dataDir, dbURL string, env ...string) *server {
	t.Helper()
	s := startServer(t, dataDir, append([]string{"MAILROOM_STORE=postgres", "MAILROOM_DATABASE_URL=" + dbURL}, env...)...)
	t.Cleanup(func() {
		if !t.Failed() {
			return
		}
		for _, line := range strings.Split(s.stderr.String(), "\n") {
			if strings.Contains(line, `"level":"ERROR"`) || strings.Contains(line, `"level":"WARN"`) {
				t.Logf("%s: %s", s.base, line)
			}
		}
	})
	return s
}

// runLoad runs replicaClients actors over teams, client i on clients[i %
// len(clients)], until stop is closed or each has done opsPerCycle
// operations or lost its server. phase keeps the operations of different
// calls apart.
func runLoad(teams []*teamInfo, clients []*client, l *ledger, seed uint64, phase int, allowUnavailable bool, stop <-chan struct{}) *sync.WaitGroup {
	var wg sync.WaitGroup
	for i := range replicaClients {
		tm := teams[i%len(teams)]
		name := crashMembers[(i/len(teams))%len(crashMembers)]
		a := &actor{
			team: tm, name: name, token: tm.tokens[name], c: clients[i%len(clients)], l: l,
			// cycle only keeps the unique strings of the actors of one
			// member apart.
			cycle:            phase*1000 + i,
			rng:              rand.New(rand.NewPCG(seed, uint64(phase*1000+i))),
			allowUnavailable: allowUnavailable,
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			a.run(stop)
		}()
	}
	return &wg
}

// checkIDs requires every inbox of snaps to hold <member>-1 … <member>-n
// in order: no gap, no duplicate.
func checkIDs(t *testing.T, snaps map[string]*snapshot, when string) {
	t.Helper()
	for team, s := range snaps {
		for member, letters := range s.inbox {
			for i, m := range letters {
				if want := member + "-" + strconv.Itoa(i+1); m.ID != want {
					t.Errorf("%s: %s/%s letter %d has id %s, want %s", when, team, member, i+1, m.ID, want)
					break
				}
			}
		}
	}
}

func (l *ledger) ackedSends() int {
	n := 0
	for _, r := range l.sends {
		if r.out == acked {
			n++
		}
	}
	return n
}

// createTeam creates team name with lead and members through c.
func createTeam(t *testing.T, c *client, name string, members ...string) map[string]string {
	t.Helper()
	var ms []map[string]string
	for _, m := range members {
		ms = append(ms, map[string]string{"name": m})
	}
	var created struct {
		Members []struct {
			Name  string `json:"name"`
			Token string `json:"token"`
		} `json:"members"`
	}
	status, code, err := c.do(http.MethodPost, "/teams", adminToken, "", map[string]any{"name": name, "members": ms,
		"limits": map[string]int{"turns": 10}}, &created)
	if err != nil || status != http.StatusCreated {
		t.Fatalf("create team %s: %d %s %v", name, status, code, err)
	}
	tokens := map[string]string{}
	for _, m := range created.Members {
		tokens[m.Name] = m.Token
	}
	return tokens
}

// runExit runs the binary with env until it exits and returns its exit
// code and standard error.
func runExit(t *testing.T, env ...string) (int, string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), startDeadline)
	defer cancel()
	cmd := exec.CommandContext(ctx, serverBin)
	cmd.Env = append([]string{"PATH=" + os.Getenv("PATH"), "HOME=" + t.TempDir(), "MAILROOM_ADDR=127.0.0.1:0",
		"MAILROOM_ADMIN_TOKEN=" + adminToken}, env...)
	stderr := &testkit.Output{}
	cmd.Stderr = stderr
	err := cmd.Run()
	if ctx.Err() != nil {
		t.Fatalf("the server did not exit within %v; stderr:\n%s", startDeadline, stderr)
	}
	if err != nil && cmd.ProcessState == nil {
		t.Fatal(err)
	}
	return cmd.ProcessState.ExitCode(), stderr.String()
}

// TestReplicasShareTeams runs two replicas on one database and one data
// directory: 64 clients split across them on shared teams; an event
// stream and a waiting read on one replica see a send through the other;
// a turn running on one makes its member busy on the other.
func TestReplicasShareTeams(t *testing.T) {
	seed := uint64(time.Now().UnixNano())
	t.Logf("seed %d", seed)
	a, b, ca, cb, dataDir := sharedReplicas(t)

	// A file-store server cannot use the replicas' directory.
	if code, stderr := runExit(t, "MAILROOM_DATA="+dataDir); code != 1 || !strings.Contains(stderr, "replicas on PostgreSQL") {
		t.Errorf("a file-store server on the replicas' data directory: exit %d, stderr %q; want exit 1 naming the reason", code, stderr)
	}

	teams := createCrashTeams(t, ca)
	tokens := createTeam(t, cb, "cross", "ann", "reader")

	// An event stream on a sees a letter sent through b.
	t.Run("EventStreamCrossesReplicas", func(t *testing.T) {
		ctx, cancel := context.WithTimeout(context.Background(), startDeadline)
		defer cancel()
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, a.base+"/api/v1/events?team=cross", nil)
		req.Header.Set("Authorization", "Bearer "+adminToken)
		resp, err := http.DefaultClient.Do(req)
		if err != nil || resp.StatusCode != http.StatusOK {
			t.Fatalf("GET /events on a: %v %v", resp, err)
		}
		defer resp.Body.Close()
		sc := bufio.NewScanner(resp.Body)
		// The stream sends a comment line once it is subscribed.
		for sc.Scan() && !strings.HasPrefix(sc.Text(), ":") {
		}
		var sent sendResult
		status, code, err := cb.do(http.MethodPost, "/teams/cross/messages", tokens["ann"], "", map[string]string{"to": "lead", "body": "through b"}, &sent)
		if err != nil || status != http.StatusCreated {
			t.Fatalf("send through b: %d %s %v", status, code, err)
		}
		for sc.Scan() {
			line := sc.Text()
			if strings.HasPrefix(line, "data: ") && strings.Contains(line, `"type":"message"`) && strings.Contains(line, `"`+sent.ID+`"`) {
				return
			}
		}
		t.Fatalf("the stream on a ended without the letter %s sent through b (%v)", sent.ID, sc.Err())
	})

	// A waiting read on a wakes on a send through b. If it did not, the
	// read would answer an empty list after 60 s.
	t.Run("WaitingReadCrossesReplicas", func(t *testing.T) {
		for i := range 3 {
			var inbox struct {
				Messages []core.Message `json:"messages"`
			}
			got := make(chan callResult, 1)
			go func() {
				status, code, err := ca.do(http.MethodGet, "/teams/cross/members/reader/inbox?wait=60"+afterParam(i), tokens["reader"], "", nil, &inbox)
				got <- callResult{status, code, err}
			}()
			// Not synchronisation: the read is right either way; the pause
			// only makes it likely that the read is held when the letter comes.
			time.Sleep(200 * time.Millisecond)
			var sent sendResult
			status, code, err := cb.do(http.MethodPost, "/teams/cross/messages", tokens["ann"], "", map[string]string{"to": "reader", "body": fmt.Sprintf("wake %d", i)}, &sent)
			if err != nil || status != http.StatusCreated {
				t.Fatalf("send through b: %d %s %v", status, code, err)
			}
			r := <-got
			if r.err != nil || r.status != http.StatusOK || len(inbox.Messages) != 1 || inbox.Messages[0].ID != sent.ID {
				t.Fatalf("waiting read on a: %d %s %v %+v; want 200 with %s", r.status, r.code, r.err, inbox.Messages, sent.ID)
			}
		}
	})

	// A turn running on a makes its member busy on b.
	t.Run("TurnBusyAcrossReplicas", func(t *testing.T) {
		var answer turnAnswer
		slow := ca.doAsync("/teams/cross/members/reader/turns", map[string]any{"responses": []map[string]any{
			{"text": "slow", "wait_ms": 3000},
		}}, &answer)
		cb.waitActive(t, "cross", "reader")
		status, code, err := cb.do(http.MethodPost, "/teams/cross/members/reader/turns", adminToken, "",
			map[string]any{"responses": []map[string]any{{"text": "second"}}}, nil)
		if err != nil || status != http.StatusConflict || code != "member_unavailable" {
			t.Errorf("turn on b while a runs one: %d %s %v; want 409 member_unavailable", status, code, err)
		}
		r := <-slow
		if r.err != nil || r.status != http.StatusOK || answer.Status != "answered" {
			t.Fatalf("slow turn on a: %d %s %v %+v", r.status, r.code, r.err, answer)
		}
		status, code, err = cb.do(http.MethodPost, "/teams/cross/members/reader/turns", adminToken, "",
			map[string]any{"responses": []map[string]any{{"text": "after"}}}, &answer)
		if err != nil || status != http.StatusOK || answer.Status != "answered" {
			t.Errorf("turn on b after a's ended: %d %s %v %+v; want 200 answered", status, code, err, answer)
		}
	})

	// 64 clients, split across the replicas, on the same four teams.
	l := &ledger{}
	stop := make(chan struct{})
	wg := runLoad(teams, []*client{ca, cb}, l, seed, 1, false, stop)
	time.AfterFunc(replicaLoad, func() { close(stop) })
	wg.Wait()
	t.Logf("%d sends acknowledged, %d requests opened, %d replies", l.ackedSends(), len(l.opens), len(l.replies))
	for _, c := range []*client{ca, cb} {
		snaps := verify(t, c, "", teams, l, "after the load, read through "+c.base)
		checkIDs(t, snaps, "after the load")
	}
	a.stop()
	b.stop()
}

// waitActiveOr is waitActive that fails at once when the turn call
// answered before it was seen running.
func waitActiveOr(t *testing.T, c *client, team, member string, call <-chan callResult) {
	t.Helper()
	deadline := time.Now().Add(startDeadline)
	for {
		if ms, ok := c.members(t, team); ok && ms[member].Active {
			return
		}
		select {
		case r := <-call:
			t.Fatalf("the turn of %s/%s answered before it was seen running: %d %s %v", team, member, r.status, r.code, r.err)
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("no turn of %s/%s started within %v", team, member, startDeadline)
		}
		time.Sleep(10 * time.Millisecond) // polling interval, not synchronisation
	}
}

func afterParam(i int) string {
	if i == 0 {
		return ""
	}
	return "&after=reader-" + strconv.Itoa(i)
}

// TestReplicaKilledUnderLoad kills one of two replicas with SIGKILL while
// 64 clients use both and a turn runs on it: nothing acknowledged is
// lost, the other replica keeps serving, and once the dead replica's lease
// expires (MAILROOM_LEASE=1s here) its member is available again and the
// turn's document ends failed, interrupted.
func TestReplicaKilledUnderLoad(t *testing.T) {
	seed := uint64(time.Now().UnixNano())
	t.Logf("seed %d", seed)
	dbURL := pgtest.New(t)
	a := startReplica(t, filepath.Join(t.TempDir(), "a"), dbURL, "MAILROOM_LEASE=1s")
	b := startReplica(t, filepath.Join(t.TempDir(), "b"), dbURL, "MAILROOM_LEASE=1s")
	ca, cb := newClient(a.base), newClient(b.base)
	defer cb.close()
	teams := createCrashTeams(t, cb)
	createTeam(t, cb, "cross", "reader")

	var answer turnAnswer
	slow := ca.doAsync("/teams/cross/members/reader/turns", map[string]any{"responses": []map[string]any{
		{"tool": "send_message", "input": map[string]string{"to": "lead", "body": "never sent"}, "wait_ms": 10000},
		{"text": "never said", "wait_ms": 10000},
	}}, &answer)
	waitActiveOr(t, cb, "cross", "reader", slow)

	l := &ledger{}
	stop := make(chan struct{})
	wg := runLoad(teams, []*client{ca, cb}, l, seed, 1, false, stop)
	// Where the kill lands under load is the point, not a wait for something.
	time.Sleep(replicaLoad / 2)
	a.kill()
	time.AfterFunc(replicaLoad/2, func() { close(stop) })
	wg.Wait()
	ca.close()
	if r := <-slow; r.err == nil {
		t.Errorf("the turn on the killed replica answered: %d %s", r.status, r.code)
	}

	// The other replica serves everything, and keeps serving.
	snaps := verify(t, cb, "", teams, l, "after a replica was killed")
	checkIDs(t, snaps, "after a replica was killed")
	var sent sendResult
	if status, code, err := cb.do(http.MethodPost, "/teams/"+teams[0].name+"/messages", teams[0].tokens["ann"], "",
		map[string]string{"to": "bob", "body": "still here"}, &sent); err != nil || status != http.StatusCreated {
		t.Errorf("send through the survivor: %d %s %v", status, code, err)
	}
	t.Logf("%d sends acknowledged", l.ackedSends())

	// The dead replica's lease expires: the member is available again.
	deadline := time.Now().Add(startDeadline)
	for {
		if ms, _ := cb.members(t, "cross"); !ms["reader"].Active {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("reader still busy %v after its replica died", startDeadline)
		}
		time.Sleep(50 * time.Millisecond) // polling interval, not synchronisation
	}
	status, code, err := cb.do(http.MethodPost, "/teams/cross/members/reader/turns", adminToken, "",
		map[string]any{"responses": []map[string]any{{"text": "back"}}}, &answer)
	if err != nil || status != http.StatusOK || answer.Status != "answered" || answer.Text != "back" {
		t.Fatalf("turn on the survivor after the lease expired: %d %s %v %+v; want 200 answered", status, code, err, answer)
	}
	var dead turnAnswer
	status, code, err = cb.do(http.MethodGet, "/teams/cross/turns/reader-t1", adminToken, "", nil, &dead)
	if err != nil || status != http.StatusOK || dead.Status != "failed" || !strings.HasPrefix(dead.Text, "interrupted") {
		t.Errorf("the dead replica's turn: %d %s %v %+v; want failed, interrupted", status, code, err, dead)
	}
	b.stop()
}

// TestPostgresRestartUnderLoad stops PostgreSQL (pg_ctl -m immediate)
// while 64 clients use two replicas: requests answer 503
// storage_unavailable with Retry-After, and once it is started again the
// replicas serve again without a restart, with nothing acknowledged lost.
func TestPostgresRestartUnderLoad(t *testing.T) {
	seed := uint64(time.Now().UnixNano())
	t.Logf("seed %d", seed)
	dbURL := pgtest.New(t)
	cluster := pgtest.Shared(t)
	a := startReplica(t, filepath.Join(t.TempDir(), "a"), dbURL)
	b := startReplica(t, filepath.Join(t.TempDir(), "b"), dbURL)
	ca, cb := newClient(a.base), newClient(b.base)
	defer ca.close()
	defer cb.close()
	teams := createCrashTeams(t, ca)
	probe := createTeam(t, ca, "probe", "ann")

	l := &ledger{}
	stop := make(chan struct{})
	wg := runLoad(teams, []*client{ca, cb}, l, seed, 1, true, stop)
	// Where the stop lands under load is the point, not a wait.
	time.Sleep(replicaLoad / 2)
	if err := cluster.Stop("immediate"); err != nil {
		t.Fatal(err)
	}
	restarted := false
	defer func() {
		if !restarted {
			_ = cluster.Start()
		}
	}()

	// While it is down, both replicas answer 503 with Retry-After.
	for _, s := range []*server{a, b} {
		deadline := time.Now().Add(startDeadline)
		for {
			req, _ := http.NewRequest(http.MethodGet, s.base+"/api/v1/teams/"+teams[0].name, nil)
			req.Header.Set("Authorization", "Bearer "+adminToken)
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatalf("GET team while the database is down: %v", err)
			}
			body := new(strings.Builder)
			_, _ = bufio.NewReader(resp.Body).WriteTo(body)
			resp.Body.Close()
			if resp.StatusCode == http.StatusServiceUnavailable {
				if resp.Header.Get("Retry-After") == "" || !strings.Contains(body.String(), "storage_unavailable") {
					t.Errorf("503 without Retry-After or storage_unavailable: %v %s", resp.Header, body)
				}
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("%s still answers %d %s with the database stopped", s.base, resp.StatusCode, body)
			}
			time.Sleep(20 * time.Millisecond) // polling interval, not synchronisation
		}
	}
	if err := cluster.Start(); err != nil {
		t.Fatal(err)
	}
	restarted = true

	// Both serve again, without a restart.
	for _, c := range []*client{ca, cb} {
		deadline := time.Now().Add(startDeadline)
		for {
			var sent sendResult
			status, code, err := c.do(http.MethodPost, "/teams/probe/messages", probe["lead"], "",
				map[string]string{"to": "ann", "body": "back " + c.base}, &sent)
			if err == nil && status == http.StatusCreated {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("%s does not serve %v after the database is back: %d %s %v", c.base, startDeadline, status, code, err)
			}
			time.Sleep(50 * time.Millisecond) // polling interval, not synchronisation
		}
	}
	close(stop)
	wg.Wait()

	// More load after the restart, then the checks.
	stop2 := make(chan struct{})
	wg = runLoad(teams, []*client{ca, cb}, l, seed, 2, false, stop2)
	time.AfterFunc(replicaLoad/2, func() { close(stop2) })
	wg.Wait()
	t.Logf("%d sends acknowledged, %d answers 503 storage_unavailable", l.ackedSends(), l.unavailable)
	for _, c := range []*client{ca, cb} {
		snaps := verify(t, c, "", teams, l, "after PostgreSQL restarted, read through "+c.base)
		checkIDs(t, snaps, "after PostgreSQL restarted")
	}
	a.stop()
	b.stop()
}

// TestRunLeaseAcrossReplicas starts a scenario run on replica A (every
// step slowed) and reads it through B: while A runs it, B answers it as
// in progress (not ok, no checks), not interrupted, and refuses to delete
// its team. Then A is killed with SIGKILL: once its lease has expired
// (MAILROOM_LEASE=1s), B answers the run as finished, not ok, with a
// failed interrupted check, keeps answering the same, and deletes the
// team with its run.
func TestRunLeaseAcrossReplicas(t *testing.T) {
	dbURL := pgtest.New(t)
	a := startReplica(t, filepath.Join(t.TempDir(), "a"), dbURL, "MAILROOM_LEASE=1s")
	b := startReplica(t, filepath.Join(t.TempDir(), "b"), dbURL, "MAILROOM_LEASE=1s")
	ca, cb := newClient(a.base), newClient(b.base)
	defer cb.close()

	var doc runDoc
	run := ca.doAsync("/scenarios/agent-teams/runs", map[string]any{"step_ms": 10000}, &doc)
	waitActiveOr(t, cb, "agent-teams-1", "reader", run)

	// Several lease periods pass while A runs the run: A renews its lease,
	// so B keeps answering the run as in progress.
	for range 4 {
		var seen runDoc
		status, code, err := cb.do(http.MethodGet, "/runs/agent-teams-1", adminToken, "", nil, &seen)
		if err != nil || status != http.StatusOK || seen.OK || len(seen.Checks) != 0 {
			t.Fatalf("the run read through b while a runs it: %d %s %v %+v; want 200, in progress (not ok, no checks)", status, code, err, seen)
		}
		time.Sleep(500 * time.Millisecond) // lets lease periods pass, not synchronisation
	}

	// Nor can B delete the run's team under it.
	if status, code, err := cb.do(http.MethodDelete, "/teams/agent-teams-1", adminToken, "", nil, nil); err != nil ||
		status != http.StatusConflict || code != "member_unavailable" {
		t.Fatalf("DELETE the run's team through b while a runs it: %d %s %v; want 409 member_unavailable", status, code, err)
	}

	a.kill()
	ca.close()
	if r := <-run; r.err == nil {
		t.Errorf("the run on the killed replica answered: %d %s", r.status, r.code)
	}
	deadline := time.Now().Add(startDeadline)
	var seen runDoc
	for {
		status, code, err := cb.do(http.MethodGet, "/runs/agent-teams-1", adminToken, "", nil, &seen)
		if err != nil || status != http.StatusOK {
			t.Fatalf("GET the run through b after a died: %d %s %v", status, code, err)
		}
		if len(seen.Checks) > 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the run is still in progress %v after its replica died: %+v", startDeadline, seen)
		}
		time.Sleep(50 * time.Millisecond) // polling interval, not synchronisation
	}
	if seen.OK || seen.Checks[0].Name != "interrupted" || seen.Checks[0].OK {
		t.Fatalf("the dead replica's run through b: %+v; want not ok with a failed interrupted check first", seen)
	}
	var again runDoc
	if status, _, err := cb.do(http.MethodGet, "/runs/agent-teams-1", adminToken, "", nil, &again); err != nil || status != http.StatusOK ||
		again.OK || len(again.Checks) == 0 || again.Checks[0].Name != "interrupted" {
		t.Fatalf("the run read again: %d %v %+v; want the same interrupted document", status, err, again)
	}
	// The run is over for good: its team can go, and its document with
	// it, once the dead replica's turn on the team has lost its lease too.
	for {
		status, code, err := cb.do(http.MethodDelete, "/teams/agent-teams-1", adminToken, "", nil, nil)
		if err == nil && status == http.StatusConflict && time.Now().Before(deadline) {
			time.Sleep(50 * time.Millisecond) // polling interval, not synchronisation
			continue
		}
		if err != nil || status != http.StatusNoContent {
			t.Fatalf("DELETE the interrupted run's team through b: %d %s %v; want 204", status, code, err)
		}
		break
	}
	if status, code, err := cb.do(http.MethodGet, "/runs/agent-teams-1", adminToken, "", nil, nil); err != nil || status != http.StatusNotFound {
		t.Fatalf("the deleted team's run: %d %s %v; want 404", status, code, err)
	}
	b.stop()
}
