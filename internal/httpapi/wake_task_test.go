package httpapi_test

import (
	"net/http"
	"slices"
	"testing"

	"mailroom/internal/agent"
	"mailroom/internal/core"
)

// TestTaskWokenTurnThroughEachAdapter: a task created unblocked and
// assigned to a wake member wakes it; the woken turn's trigger names the
// task, and its first model request, sent by the provider's official SDK
// to the fake provider, carries exactly the task's [team-task] line from
// the user: no prompt is invented. Answered, the task is attended: it
// wakes the member no more.
func TestTaskWokenTurnThroughEachAdapter(t *testing.T) {
	for _, provider := range []string{agent.ProviderAnthropic, agent.ProviderOpenAI} {
		t.Run(provider, func(t *testing.T) {
			t.Parallel()
			m := newModelEnv(t, provider)
			tokens := newWakeCrew(t, m, provider)
			m.fake.Push(m.text("On it.", 10, 5))
			r := m.post("/api/v1/teams/crew/tasks", tokens["lead"], map[string]any{"title": "Read main.py", "assignee": "reader"})
			want(t, r, http.StatusCreated, "")

			d := waitTurn(t, m.env, "crew", "reader-t1")
			if d.Status != "answered" || d.Trigger.Kind != "task" || d.Trigger.TaskID != "task-1" {
				t.Errorf("woken turn = %s trigger %+v, want answered with trigger task task-1", d.Status, d.Trigger)
			}
			reqs := m.fake.Requests()
			if len(reqs) != 1 || len(m.fake.Problems()) != 0 {
				t.Fatalf("provider saw %d requests, problems %v; want 1 and none", len(reqs), m.fake.Problems())
			}
			task, err := m.svc.Task(core.AsAdmin(t.Context()), "crew", "task-1")
			if err != nil {
				t.Fatal(err)
			}
			line := core.TaskHistoryText(task)
			if got := userTexts(t, reqs[0].Body); !slices.Equal(got, []string{line}) {
				t.Errorf("user messages = %q, want exactly the task's line %q", got, line)
			}
			// A letter now wakes reader for the letter alone: the task's
			// line is in its history and is not attached again.
			m.fake.Push(m.text("Read it.", 10, 5))
			want(t, m.post("/api/v1/teams/crew/messages", tokens["lead"], map[string]string{"to": "reader", "body": "Any news?"}), http.StatusCreated, "")
			d = waitTurn(t, m.env, "crew", "reader-t2")
			if d.Trigger.Kind != "mail" {
				t.Errorf("second turn trigger = %+v, want mail", d.Trigger)
			}
			reqs = m.fake.Requests()
			if len(reqs) != 2 {
				t.Fatalf("provider saw %d requests, want 2", len(reqs))
			}
			letter := core.HistoryText(core.Message{ID: "reader-1", Sender: "lead", Recipient: "reader", Body: "Any news?"})
			if got := userTexts(t, reqs[1].Body); !slices.Equal(got, []string{line, letter}) {
				t.Errorf("second request's user messages = %q, want the task's line once, then the letter's", got)
			}
			if mem := memberNamed(t, m.env, "crew", "reader"); mem.Turns != 2 || mem.WakeHeld {
				t.Errorf("reader = %+v, want 2 turns, no hold", mem)
			}
		})
	}
}
