package e2e

import (
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"path/filepath"
	"sort"
	"sync"
	"sync/atomic"
	"testing"
)

// The task board against the real binary: concurrent claims of the same
// tasks, claim-next draining a board, both on one server and across two
// replicas on PostgreSQL, and kill -9 in the middle of claims and
// completions.

// taskDoc is what these tests read of a task.
type taskDoc struct {
	ID     string  `json:"task_id"`
	Status string  `json:"status"`
	Owner  *string `json:"owner"`
	Result *string `json:"result"`
}

// boardTeam creates team name with lead and n-1 teammates m1…, and tasks
// untitled tasks; it returns the members' tokens, lead first.
func boardTeam(t *testing.T, c *client, name string, n, tasks int) (names []string, tokens map[string]string) {
	t.Helper()
	members := []string{}
	for i := 1; i < n; i++ {
		members = append(members, fmt.Sprintf("m%d", i))
	}
	tokens = createTeam(t, c, name, members...)
	names = append([]string{"lead"}, members...)
	for i := range tasks {
		var d taskDoc
		status, code, err := c.do(http.MethodPost, "/teams/"+name+"/tasks", adminToken, "", map[string]any{"title": fmt.Sprintf("task %d", i+1)}, &d)
		if err != nil || status != http.StatusCreated || d.ID != fmt.Sprintf("task-%d", i+1) {
			t.Fatalf("create task %d: %d %s %v (%s)", i+1, status, code, err, d.ID)
		}
	}
	return names, tokens
}

// claimNext calls claim-next; id is "" on 204.
func claimNext(c *client, team, token string) (id string, status int, code string, err error) {
	req, err := http.NewRequest(http.MethodPost, c.base+"/api/v1/teams/"+team+"/tasks/claim-next", nil)
	if err != nil {
		return "", 0, "", err
	}
	req.Header.Set("Authorization", "Bearer "+token)
	resp, err := c.http.Do(req)
	if err != nil {
		return "", 0, "", fmt.Errorf("%w: %v", errTransport, err)
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	if err != nil {
		return "", 0, "", fmt.Errorf("%w: %v", errTransport, err)
	}
	var d struct {
		taskDoc
		Code string `json:"code"`
	}
	if len(data) > 0 {
		if err := json.Unmarshal(data, &d); err != nil {
			return "", resp.StatusCode, "", fmt.Errorf("claim-next: %d %q: %v", resp.StatusCode, data, err)
		}
	}
	return d.ID, resp.StatusCode, d.Code, nil
}

func taskList(t *testing.T, c *client, team string) []taskDoc {
	t.Helper()
	var list struct {
		Tasks []taskDoc `json:"tasks"`
	}
	status, code, err := c.do(http.MethodGet, "/teams/"+team+"/tasks", adminToken, "", nil, &list)
	if err != nil || status != http.StatusOK {
		t.Fatalf("list tasks of %s: %d %s %v", team, status, code, err)
	}
	return list.Tasks
}

// claimRace: 64 clients, two per member of a 32-member team, each claim
// every one of 100 tasks in an order of its own. Each task ends with
// exactly one owner; every 200 a client got names that owner (its own
// member: the owner claiming again is answered 200, unchanged), every
// other answer is task_claimed.
func claimRace(t *testing.T, clients []*client, team string, names []string, tokens map[string]string, tasks int) {
	t.Helper()
	const n = 64
	type answer struct {
		member string
		status int
		code   string
		owner  string
	}
	answers := make([][]answer, tasks) // by task
	var mu sync.Mutex
	var wg sync.WaitGroup
	for i := range n {
		member := names[i%len(names)]
		c := clients[i%len(clients)]
		wg.Go(func() {
			order := rand.Perm(tasks)
			for _, k := range order {
				var d taskDoc
				status, code, err := c.do(http.MethodPost, fmt.Sprintf("/teams/%s/tasks/task-%d/claim", team, k+1), tokens[member], "", nil, &d)
				if err != nil {
					t.Errorf("claim task-%d as %s: %v", k+1, member, err)
					return
				}
				a := answer{member: member, status: status, code: code}
				if d.Owner != nil {
					a.owner = *d.Owner
				}
				mu.Lock()
				answers[k] = append(answers[k], a)
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	final := taskList(t, clients[0], team)
	for k := range tasks {
		owner := final[k].Owner
		if owner == nil || final[k].Status != "in_progress" {
			t.Fatalf("task-%d = %+v, want one owner, in progress", k+1, final[k])
		}
		if len(answers[k]) != n {
			t.Fatalf("task-%d got %d answers, want %d", k+1, len(answers[k]), n)
		}
		wins := 0
		for _, a := range answers[k] {
			switch {
			case a.status == http.StatusOK && a.member == *owner && a.owner == *owner:
				wins++
			case a.status == http.StatusConflict && a.code == "task_claimed" && a.member != *owner:
			default:
				t.Fatalf("task-%d owned by %s: %s got %d %s (owner %q), want 200 for the owner's clients, task_claimed for the others",
					k+1, *owner, a.member, a.status, a.code, a.owner)
			}
		}
		if wins != 2 {
			t.Fatalf("task-%d: %d answers of 200, want the owner's two clients", k+1, wins)
		}
	}
}

// drain: 16 members call claim-next until it answers 204; each of the
// tasks is handed out exactly once and owned by the member it was
// handed to.
func drain(t *testing.T, clients []*client, team string, names []string, tokens map[string]string, tasks int) {
	t.Helper()
	var mu sync.Mutex
	handed := map[string]string{}
	var wg sync.WaitGroup
	var calls atomic.Int64
	for i, member := range names[:16] {
		c := clients[i%len(clients)]
		wg.Go(func() {
			for {
				id, status, code, err := claimNext(c, team, tokens[member])
				calls.Add(1)
				if err != nil || (status != http.StatusOK && status != http.StatusNoContent) {
					t.Errorf("claim-next as %s: %d %s %v", member, status, code, err)
					return
				}
				if status == http.StatusNoContent {
					return
				}
				mu.Lock()
				if prev, dup := handed[id]; dup {
					t.Errorf("%s handed to %s and to %s", id, prev, member)
				}
				handed[id] = member
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	if len(handed) != tasks {
		t.Fatalf("%d tasks handed out, want %d", len(handed), tasks)
	}
	for _, d := range taskList(t, clients[0], team) {
		if d.Owner == nil || *d.Owner != handed[d.ID] || d.Status != "in_progress" {
			t.Fatalf("%s = %+v, want in progress, owned by %s", d.ID, d, handed[d.ID])
		}
	}
	t.Logf("%d tasks drained by 16 members in %d calls", tasks, calls.Load())
}

func TestTaskClaimsOnTheBinary(t *testing.T) {
	srv := startServer(t, filepath.Join(t.TempDir(), "data"))
	c := newClient(srv.base)
	defer c.close()
	names, tokens := boardTeam(t, c, "race", 32, 100)
	claimRace(t, []*client{c}, "race", names, tokens, 100)
	names, tokens = boardTeam(t, c, "drain", 16, 500)
	drain(t, []*client{c}, "drain", names, tokens, 500)
}

func TestTaskClaimsAcrossReplicas(t *testing.T) {
	_, _, ca, cb, _ := sharedReplicas(t)
	names, tokens := boardTeam(t, ca, "race", 32, 100)
	claimRace(t, []*client{ca, cb}, "race", names, tokens, 100)
	names, tokens = boardTeam(t, cb, "drain", 16, 500)
	drain(t, []*client{ca, cb}, "drain", names, tokens, 500)
}

// TestTaskCrash kills the server (SIGKILL) while 16 members claim and
// complete tasks. After the restart every acknowledged claim and
// completion is there, no task was acknowledged to two owners, and new
// tasks get ids after every id given before the crash.
func TestTaskCrash(t *testing.T) {
	dataDir := filepath.Join(t.TempDir(), "data")
	srv := startServer(t, dataDir)
	c := newClient(srv.base)
	const tasks = 300
	names, tokens := boardTeam(t, c, "crash", 16, tasks)

	var mu sync.Mutex
	claimed := map[string]string{} // acknowledged claims: task → member
	completed := map[string]bool{}
	var acks atomic.Int64
	killAt := int64(200 + rand.IntN(200))
	killed := make(chan struct{})
	var once sync.Once
	var wg sync.WaitGroup
	for _, member := range names {
		wg.Go(func() {
			for {
				id, status, _, err := claimNext(c, "crash", tokens[member])
				if err != nil || status == http.StatusNoContent || status != http.StatusOK {
					return // the server is gone (or nothing is left)
				}
				mu.Lock()
				if prev, dup := claimed[id]; dup && prev != member {
					t.Errorf("%s acknowledged to %s and to %s", id, prev, member)
				}
				claimed[id] = member
				mu.Unlock()
				if acks.Add(1) == killAt {
					once.Do(func() { srv.kill(); close(killed) })
				}
				var d taskDoc
				status, _, err = c.do(http.MethodPost, "/teams/crash/tasks/"+id+"/complete", tokens[member], "", map[string]any{"result": "done by " + member}, &d)
				if err != nil || status != http.StatusOK {
					return
				}
				mu.Lock()
				completed[id] = true
				mu.Unlock()
				if acks.Add(1) == killAt {
					once.Do(func() { srv.kill(); close(killed) })
				}
			}
		})
	}
	wg.Wait()
	select {
	case <-killed:
	default:
		srv.kill() // the board drained before the kill: the check still holds
	}
	c.close()

	srv = startServer(t, dataDir)
	c = newClient(srv.base)
	defer c.close()
	board := taskList(t, c, "crash")
	if len(board) != tasks {
		t.Fatalf("%d tasks after the restart, want %d", len(board), tasks)
	}
	byID := map[string]taskDoc{}
	for _, d := range board {
		byID[d.ID] = d
	}
	ids := make([]string, 0, len(claimed))
	for id := range claimed {
		ids = append(ids, id)
	}
	sort.Strings(ids)
	for _, id := range ids {
		d := byID[id]
		if d.Owner == nil || *d.Owner != claimed[id] {
			t.Errorf("%s = %+v after the restart, want the acknowledged owner %s", id, d, claimed[id])
		}
		if completed[id] && (d.Status != "completed" || d.Result == nil || *d.Result != "done by "+claimed[id]) {
			t.Errorf("%s = %+v after the restart, want its acknowledged completion", id, d)
		}
	}
	var d taskDoc
	status, code, err := c.do(http.MethodPost, "/teams/crash/tasks", adminToken, "", map[string]any{"title": "after"}, &d)
	if err == nil && status == http.StatusConflict && code == "task_limit" {
		return // the board is full: no id could be given again anyway
	}
	if err != nil || status != http.StatusCreated || d.ID != fmt.Sprintf("task-%d", tasks+1) {
		t.Fatalf("a task after the restart: %d %s %v id %s, want task-%d", status, code, err, d.ID, tasks+1)
	}
	t.Logf("killed after %d acknowledged claims and completions (%d claims, %d completions)", acks.Load(), len(claimed), len(completed))
}
