package pgstore_test

import (
	"bytes"
	"encoding/json"
	"testing"

	"mailroom/internal/core"
	"mailroom/internal/mail"
	"mailroom/internal/pgstore"
	"mailroom/internal/pgtest"
	"mailroom/internal/storetest"
)

// TestImportKeepsEveryScalar: a file-store team whose letter body,
// request payload and feedback, history and task text hold U+0000 and the
// other interesting scalar values is imported whole, and reads back the
// same from PostgreSQL: the inbox byte for byte, the documents equal.
func TestImportKeepsEveryScalar(t *testing.T) {
	ctx := t.Context()
	text := storetest.UnicodeText()
	fs, err := mail.Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	defer fs.Close()
	if err := fs.CreateTeam(ctx, storetest.Team("demo", "reader")); err != nil {
		t.Fatal(err)
	}
	task := storetest.Task(1, text)
	task.Detail, task.Result = text, &text
	if err := core.Update(ctx, fs, "demo", func(tx core.TeamTx) error {
		st := tx.State()
		st.Requests = append(st.Requests, core.Request{ID: "req-1", Kind: core.KindPlan, Sender: "reader", Target: core.LeadName,
			Payload: text, Status: core.RequestRejected, Receipt: "lead-1",
			Reply: &core.Reply{Type: "plan_approval_response", RequestID: "req-1", Feedback: text}})
		st.Member("reader").History = []core.Entry{core.UserText(text)}
		if err := tx.AppendLetter(core.Message{ID: "lead-1", Sender: "reader", Recipient: core.LeadName, Body: text}); err != nil {
			return err
		}
		return tx.PutTask(task)
	}); err != nil {
		t.Fatalf("file store: %v", err)
	}
	imported := pgstore.ImportedTeam{Inboxes: map[string][]byte{}}
	var wantState []byte
	if err := core.View(ctx, fs, "demo", func(tx core.TeamTx) error {
		imported.State = tx.State().Clone()
		for _, m := range imported.State.Members {
			b, err := tx.InboxBytes(m.Name)
			if err != nil {
				return err
			}
			imported.Inboxes[m.Name] = b
		}
		tasks, err := tx.Tasks()
		imported.Tasks = append([]core.Task(nil), tasks...)
		return err
	}); err != nil {
		t.Fatal(err)
	}
	wantState = mustJSON(t, imported.State)
	pg := open(t, pgtest.New(t))
	if err := pg.Import(ctx, []pgstore.ImportedTeam{imported}, nil); err != nil {
		t.Fatalf("Import of text %+q: %v", text, err)
	}
	if err := core.View(ctx, pg, "demo", func(tx core.TeamTx) error {
		for member, want := range imported.Inboxes {
			got, err := tx.InboxBytes(member)
			if err != nil || !bytes.Equal(got, want) {
				t.Errorf("inbox of %s = %q, %v; want %q", member, got, err, want)
			}
		}
		if got := mustJSON(t, tx.State()); !bytes.Equal(got, wantState) {
			t.Errorf("state:\n got %s\nwant %s", got, wantState)
		}
		tasks, err := tx.Tasks()
		if err != nil || len(tasks) != 1 || !bytes.Equal(mustJSON(t, tasks[0]), mustJSON(t, imported.Tasks[0])) {
			t.Errorf("tasks = %+v, %v; want %+v", tasks, err, imported.Tasks)
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
}

func mustJSON(t *testing.T, v any) []byte {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return b
}
