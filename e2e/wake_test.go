package e2e

import (
	"net/http"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"mailroom/internal/pgtest"
	"mailroom/internal/providertest"
)

// Members woken on mail, with the real binary: a wake pending at a kill
// -9 is not lost, a woken turn cut by a kill -9 is never rerun, and on
// replicas one replica runs a wake.

// wakeTurnDoc is the part of a turn document these tests read.
type wakeTurnDoc struct {
	TurnID  string `json:"turn_id"`
	Status  string `json:"status"`
	Text    string `json:"text"`
	Trigger struct {
		Kind    string   `json:"kind"`
		Letters []string `json:"letters"`
	} `json:"trigger"`
}

type wakeMember struct {
	Name     string `json:"name"`
	Status   string `json:"status"`
	Active   bool   `json:"active"`
	Turns    int    `json:"turns"`
	Wake     bool   `json:"wake"`
	WakeHeld bool   `json:"wake_held"`
}

// createWakeTeam creates team crew on the fake Messages API with reader
// woken on mail after delayMS, and returns the members' tokens.
func createWakeTeam(t *testing.T, c *client, delayMS int) map[string]string {
	t.Helper()
	var created struct {
		Members []struct {
			Name  string `json:"name"`
			Token string `json:"token"`
		} `json:"members"`
	}
	status, code, err := c.do(http.MethodPost, "/teams", adminToken, "", map[string]any{
		"name":    "crew",
		"members": []map[string]any{{"name": "reader", "wake": true}},
		"model":   map[string]any{"provider": "anthropic", "name": "claude-test"},
		"limits":  map[string]int{"turns": 5, "wake_delay_ms": delayMS},
	}, &created)
	if err != nil || status != http.StatusCreated {
		t.Fatalf("create team: %d %s %v, want 201", status, code, err)
	}
	tokens := map[string]string{}
	for _, m := range created.Members {
		tokens[m.Name] = m.Token
	}
	return tokens
}

func sendLetter(t *testing.T, c *client, token, to, body string) string {
	t.Helper()
	var sent sendResult
	status, code, err := c.do(http.MethodPost, "/teams/crew/messages", token, "", map[string]string{"to": to, "body": body}, &sent)
	if err != nil || status != http.StatusCreated {
		t.Fatalf("send: %d %s %v, want 201", status, code, err)
	}
	return sent.ID
}

// waitWokenTurn polls until turn id of crew has ended. The bound only
// keeps a broken server from hanging the test.
func waitWokenTurn(t *testing.T, c *client, id string) wakeTurnDoc {
	t.Helper()
	deadline := time.Now().Add(startDeadline)
	for {
		var d wakeTurnDoc
		status, _, err := c.do(http.MethodGet, "/teams/crew/turns/"+id, adminToken, "", nil, &d)
		if err == nil && status == http.StatusOK && d.Status != "running" {
			return d
		}
		if time.Now().After(deadline) {
			t.Fatalf("turn %s did not end within %v", id, startDeadline)
		}
		time.Sleep(10 * time.Millisecond) // polling interval, not synchronisation
	}
}

// waitRequests polls until the fake provider has seen n requests.
func waitRequests(t *testing.T, fake *providertest.Server, n int) {
	t.Helper()
	deadline := time.Now().Add(startDeadline)
	for len(fake.Requests()) < n {
		if time.Now().After(deadline) {
			t.Fatalf("the fake provider saw %d requests within %v, want %d", len(fake.Requests()), startDeadline, n)
		}
		time.Sleep(10 * time.Millisecond) // polling interval, not synchronisation
	}
}

func reader(t *testing.T, c *client) wakeMember {
	t.Helper()
	var view struct {
		Members []wakeMember `json:"members"`
	}
	status, code, err := c.do(http.MethodGet, "/teams/crew", adminToken, "", nil, &view)
	if err != nil || status != http.StatusOK {
		t.Fatalf("GET /teams/crew: %d %s %v", status, code, err)
	}
	for _, m := range view.Members {
		if m.Name == "reader" {
			return m
		}
	}
	t.Fatal("no reader")
	return wakeMember{}
}

func anthropicEnv(fake *providertest.Server) []string {
	return []string{"ANTHROPIC_API_KEY=" + modelKey, "ANTHROPIC_BASE_URL=" + fake.URL()}
}

// TestWakePendingAtKill: a letter opens a wake window of five seconds and
// the server is killed (kill -9) inside it. Nothing of the wake was
// stored, yet after the restart the member is woken for that letter.
func TestWakePendingAtKill(t *testing.T) {
	fake := providertest.NewAnthropic(t, modelKey)
	dataDir := filepath.Join(t.TempDir(), "data")
	srv := startServer(t, dataDir, anthropicEnv(fake)...)
	c := newClient(srv.base)
	tokens := createWakeTeam(t, c, 5000)
	id := sendLetter(t, c, tokens["lead"], "reader", "Read main.py, please.")
	srv.kill()
	c.close()
	if n := len(fake.Requests()); n != 0 {
		t.Fatalf("the provider saw %d requests before the kill; the wake was not pending", n)
	}

	fake.Push(providertest.AnthropicText("Read it.", providertest.AnthropicUsage{InputTokens: 10, OutputTokens: 2}))
	srv = startServer(t, dataDir, anthropicEnv(fake)...)
	c = newClient(srv.base)
	defer c.close()
	d := waitWokenTurn(t, c, "reader-t1")
	if d.Status != "answered" || d.Trigger.Kind != "mail" || !slices.Equal(d.Trigger.Letters, []string{id}) {
		t.Errorf("turn after restart = %+v, want answered, woken by [%s]", d, id)
	}
	srv.stop()
}

// TestKillDuringWokenTurn: the server is killed while a woken turn waits
// for its model. After the restart the turn is failed (interrupted), the
// member's wake is held and nothing reruns: a new letter does not wake
// it; a reset does, for both letters, as the member's second turn.
func TestKillDuringWokenTurn(t *testing.T) {
	fake := providertest.NewAnthropic(t, modelKey)
	dataDir := filepath.Join(t.TempDir(), "data")
	srv := startServer(t, dataDir, anthropicEnv(fake)...)
	c := newClient(srv.base)
	tokens := createWakeTeam(t, c, 0)
	fake.Push(providertest.Reply{Stall: true})
	first := sendLetter(t, c, tokens["lead"], "reader", "first")
	waitRequests(t, fake, 1)
	srv.kill()
	c.close()

	srv = startServer(t, dataDir, anthropicEnv(fake)...)
	c = newClient(srv.base)
	defer c.close()
	d := waitWokenTurn(t, c, "reader-t1")
	if d.Status != "failed" || d.Trigger.Kind != "mail" {
		t.Errorf("the cut turn = %+v, want failed, woken by mail", d)
	}
	if m := reader(t, c); !m.WakeHeld || m.Active {
		t.Errorf("reader after restart = %+v, want its wake held and no turn running", m)
	}
	second := sendLetter(t, c, tokens["lead"], "reader", "second")
	fake.Push(providertest.AnthropicText("Both read.", providertest.AnthropicUsage{InputTokens: 10, OutputTokens: 2}))
	status, code, err := c.do(http.MethodPost, "/teams/crew/members/reader/reset", adminToken, "", nil, nil)
	if err != nil || status != http.StatusOK {
		t.Fatalf("reset: %d %s %v, want 200", status, code, err)
	}
	d = waitWokenTurn(t, c, "reader-t2")
	if d.Status != "answered" || !slices.Equal(d.Trigger.Letters, []string{first, second}) {
		t.Errorf("turn after reset = %+v, want answered, woken by [%s %s]", d, first, second)
	}
	if n := len(fake.Requests()); n != 2 {
		t.Errorf("the provider saw %d requests, want 2: the cut one and the one after the reset", n)
	}
	srv.stop()
}

// TestWakeOnReplicas: two replicas on one database, each with a fake
// provider of its own (so the test knows which one ran a turn). A letter
// sent through one wakes the member once, on one replica; killing that
// replica mid-turn leaves the turn to no one: once its lease has expired
// the survivor shows the turn interrupted and the wake held, and runs
// nothing until a reset.
func TestWakeOnReplicas(t *testing.T) {
	dbURL := pgtest.New(t)
	dataDir := filepath.Join(t.TempDir(), "data")
	fakeA, fakeB := providertest.NewAnthropic(t, modelKey), providertest.NewAnthropic(t, modelKey)
	lease := "MAILROOM_LEASE=1s"
	a := startReplica(t, dataDir, dbURL, append(anthropicEnv(fakeA), lease)...)
	b := startReplica(t, dataDir, dbURL, append(anthropicEnv(fakeB), lease)...)
	ca, cb := newClient(a.base), newClient(b.base)
	defer ca.close()
	defer cb.close()
	tokens := createWakeTeam(t, ca, 0)
	usage := providertest.AnthropicUsage{InputTokens: 10, OutputTokens: 2}
	fakeA.Push(providertest.AnthropicText("from a", usage))
	fakeB.Push(providertest.AnthropicText("from b", usage))

	first := sendLetter(t, ca, tokens["lead"], "reader", "first")
	d := waitWokenTurn(t, cb, "reader-t1")
	if d.Status != "answered" || !slices.Equal(d.Trigger.Letters, []string{first}) {
		t.Fatalf("woken turn = %+v, want answered, woken by [%s]", d, first)
	}
	if n := len(fakeA.Requests()) + len(fakeB.Requests()); n != 1 {
		t.Fatalf("the providers saw %d requests, want 1: one replica ran the wake", n)
	}
	// The replica that ran it takes the next, stalled, turn too; the
	// other's reply stays queued.
	runner, runnerFake, otherFake, otherClient := a, fakeA, fakeB, cb
	if d.Text == "from b" {
		runner, runnerFake, otherFake, otherClient = b, fakeB, fakeA, ca
	}
	// The runner's provider now stalls its next request; the other's
	// still answers: whichever replica wins the second wake, the test
	// sees which.
	runnerFake.Push(providertest.Reply{Stall: true})
	second := sendLetter(t, otherClient, tokens["lead"], "reader", "second")
	deadline := time.Now().Add(startDeadline)
	for len(fakeA.Requests())+len(fakeB.Requests()) < 2 {
		if time.Now().After(deadline) {
			t.Fatal("the second wake reached no provider")
		}
		time.Sleep(10 * time.Millisecond) // polling interval, not synchronisation
	}
	if len(runnerFake.Requests()) != 2 {
		// The other replica took the second wake and answered it: the
		// kill below would cut nothing. Still one runner per wake.
		d = waitWokenTurn(t, otherClient, "reader-t2")
		if d.Status != "answered" || !slices.Equal(d.Trigger.Letters, []string{second}) {
			t.Fatalf("second woken turn = %+v, want answered, woken by [%s]", d, second)
		}
		return
	}
	runner.kill()
	// The survivor sees the member busy until the dead replica's lease
	// expires, then the turn interrupted and the wake held.
	deadline = time.Now().Add(startDeadline)
	for {
		m := reader(t, otherClient)
		if !m.Active {
			if !m.WakeHeld || m.Status != "idle" {
				t.Fatalf("reader after its replica died = %+v, want idle with its wake held", m)
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the dead replica's turn kept the member busy")
		}
		time.Sleep(50 * time.Millisecond) // polling interval, not synchronisation
	}
	if d := waitWokenTurn(t, otherClient, "reader-t2"); d.Status != "failed" {
		t.Errorf("the cut turn = %+v, want failed", d)
	}
	if n := len(otherFake.Requests()); n != 0 {
		t.Errorf("the survivor's provider saw %d requests before the reset, want none (no rerun)", n)
	}
	status, code, err := otherClient.do(http.MethodPost, "/teams/crew/members/reader/reset", adminToken, "", nil, nil)
	if err != nil || status != http.StatusOK {
		t.Fatalf("reset: %d %s %v, want 200", status, code, err)
	}
	d = waitWokenTurn(t, otherClient, "reader-t3")
	if d.Status != "answered" || !slices.Equal(d.Trigger.Letters, []string{second}) {
		t.Errorf("turn after reset = %+v, want answered, woken by [%s]", d, second)
	}
}
