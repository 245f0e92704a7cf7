package mail_test

import (
	"encoding/json"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"sync"
	"syscall"
	"testing"

	"mailroom/internal/core"
	"mailroom/internal/mail"
)

func TestOpenCreatesTeamsDirectory(t *testing.T) {
	data := filepath.Join(t.TempDir(), "nested", "data")
	if _, err := mail.Open(data); err != nil {
		t.Fatal(err)
	}
	fi, err := os.Stat(filepath.Join(data, "teams"))
	if err != nil || !fi.IsDir() {
		t.Fatalf("teams directory: %v", err)
	}
}

func TestCreateTeamTwice(t *testing.T) {
	s, _ := openStore(t)
	createTeam(t, s, "team")
	err := s.CreateTeam(ctx, teamState("team", "lead"))
	if core.ErrorCode(err) != core.CodeTeamExists {
		t.Fatalf("second CreateTeam = %v, want %s", err, core.CodeTeamExists)
	}
}

// TestCreateTeamRace: of two creations of one name, exactly one wins.
func TestCreateTeamRace(t *testing.T) {
	s, _ := openStore(t)
	const n = 4
	errs := make(chan error, n)
	var wg sync.WaitGroup
	for range n {
		wg.Go(func() { errs <- s.CreateTeam(ctx, teamState("race", "lead")) })
	}
	wg.Wait()
	close(errs)
	won := 0
	for err := range errs {
		switch {
		case err == nil:
			won++
		case core.ErrorCode(err) != core.CodeTeamExists:
			t.Errorf("CreateTeam: %v", err)
		}
	}
	if won != 1 {
		t.Fatalf("%d creations succeeded, want 1", won)
	}
}

func TestCreateTeamInvalidName(t *testing.T) {
	s, data := openStore(t)
	for _, name := range []string{"../escape", "Upper", "", "a/b"} {
		if err := s.CreateTeam(ctx, teamState(name, "lead")); err == nil {
			t.Errorf("CreateTeam(%q) succeeded", name)
		}
	}
	if names := dirNames(t, filepath.Join(data, "teams")); len(names) != 0 {
		t.Fatalf("teams directory holds %q", names)
	}
}

// fullState uses every part of TeamState, so a round trip proves nothing
// is lost on the way to disk and back.
func fullState(name string) *core.TeamState {
	st := teamState(name, "lead", "reader")
	st.Limits.InboxMessages = 12
	st.Members[0].Role = "coordinates"
	st.Members[0].TokenHash = strings.Repeat("ab", 32)
	st.Members[1].Turns = 2
	st.Members[1].Status = core.StatusClosed
	st.Members[1].History = []core.Entry{
		core.UserText("[team-message] {\"body\": \"当前\", \"id\": \"reader-1\", \"recipient\": \"reader\", \"sender\": \"lead\"}"),
		{Role: "assistant", Blocks: []core.Block{
			{Type: "text", Text: "Reading the file."},
			{Type: "tool_use", ID: "reader-t1-1", Name: "read_file", Input: json.RawMessage(`{"path":"expected.txt"}`)},
		}},
		{Role: "user", Blocks: []core.Block{
			{Type: "tool_result", ToolUseID: "reader-t1-1", Content: "42\n", IsError: true},
		}},
		{Role: "assistant", Text: "Done."},
	}
	reply := &core.Reply{Type: "plan_response", RequestID: "req-1", Approve: true, Feedback: "ok"}
	st.Requests = []core.Request{
		{ID: "req-1", Kind: core.KindPlan, Sender: "reader", Target: "lead", Payload: "run main.py", Status: core.RequestApproved, Reply: reply, Receipt: "reader-2"},
		{ID: "req-2", Kind: core.KindShutdown, Sender: "lead", Target: "reader", Payload: "stop", Status: core.RequestPending},
	}
	return st
}

func TestLoadTeamsRoundTrip(t *testing.T) {
	s, data := openStore(t)
	want := fullState("full")
	if err := s.CreateTeam(ctx, want); err != nil {
		t.Fatal(err)
	}
	other := createTeam(t, s, "another")
	other.Members[0].Turns = 1
	if err := s.SaveTeam(ctx, other); err != nil {
		t.Fatal(err)
	}

	// A fresh store over the same directory, as after a restart.
	s2, err := mail.Open(data)
	if err != nil {
		t.Fatal(err)
	}
	teams, err := s2.LoadTeams(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(teams) != 2 || teams[0].Name != "another" || teams[1].Name != "full" {
		t.Fatalf("LoadTeams = %+v", teams)
	}
	for i, w := range []*core.TeamState{other, want} {
		if teams[i].Err != nil {
			t.Fatalf("%s: %v", teams[i].Name, teams[i].Err)
		}
		if !reflect.DeepEqual(teams[i].State, w) {
			t.Errorf("%s:\n got %+v\nwant %+v", teams[i].Name, teams[i].State, w)
		}
	}
}

func TestLoadTeamsDamaged(t *testing.T) {
	s, data := openStore(t)
	createTeam(t, s, "good")
	createTeam(t, s, "broken")
	createTeam(t, s, "renamed")
	createTeam(t, s, "linked")
	teamsDir := filepath.Join(data, "teams")
	writeFile(t, filepath.Join(teamsDir, "broken", "state.json"), []byte(`{"name": "broken", `))
	writeFile(t, filepath.Join(teamsDir, "renamed", "state.json"), readFile(t, filepath.Join(teamsDir, "good", "state.json")))
	linked := filepath.Join(teamsDir, "linked", "state.json")
	writeFile(t, linked+".real", readFile(t, linked))
	if err := os.Remove(linked); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(linked+".real", linked); err != nil {
		t.Fatal(err)
	}
	// Not teams: a plain file, a name no team can have, a symlinked dir.
	writeFile(t, filepath.Join(teamsDir, "README"), []byte("x"))
	if err := os.Mkdir(filepath.Join(teamsDir, "Not-A-Team"), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(filepath.Join(teamsDir, "good"), filepath.Join(teamsDir, "alias")); err != nil {
		t.Fatal(err)
	}

	teams, err := s.LoadTeams(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, lt := range teams {
		names = append(names, lt.Name)
		damaged := lt.Name != "good"
		if damaged && (lt.Err == nil || lt.State != nil) {
			t.Errorf("%s: Err %v, State %v; want an error and no state", lt.Name, lt.Err, lt.State)
		}
		if !damaged && (lt.Err != nil || lt.State == nil || lt.State.Name != "good") {
			t.Errorf("good: Err %v, State %+v", lt.Err, lt.State)
		}
	}
	if want := []string{"broken", "good", "linked", "renamed"}; !reflect.DeepEqual(names, want) {
		t.Fatalf("LoadTeams names %q, want %q", names, want)
	}
}

// TestLoadTeamsCleansCrashLeftovers: temporary files a crash left behind are
// removed (only the store's own), and a team whose creation never finished
// is removed, because none of it was acknowledged.
func TestLoadTeamsCleansCrashLeftovers(t *testing.T) {
	s, data := openStore(t)
	createTeam(t, s, "team")
	send(t, s, "team", rules("reader", core.DefaultLimits()), core.Message{ID: "reader-1", Sender: "lead", Recipient: "reader", Body: "hi"})
	teamDir := filepath.Join(data, "teams", "team")
	inboxes := filepath.Join(teamDir, "inboxes")
	writeFile(t, filepath.Join(teamDir, ".mailroom-123.tmp"), []byte("{partial"))
	writeFile(t, filepath.Join(inboxes, ".mailroom-456.tmp"), []byte("{partial"))
	writeFile(t, filepath.Join(inboxes, "notes.txt"), []byte("not ours"))
	// Creations a crash interrupted: after mkdir, after the inboxes
	// directory, and with a temporary state file not yet renamed.
	for _, dir := range []string{"unfinished-a", "unfinished-b/inboxes", "unfinished-c/inboxes"} {
		if err := os.MkdirAll(filepath.Join(data, "teams", dir), 0o700); err != nil {
			t.Fatal(err)
		}
	}
	writeFile(t, filepath.Join(data, "teams", "unfinished-c", ".mailroom-789.tmp"), []byte("{"))
	// A team with letters but no state is damaged, not unfinished.
	writeFile(t, inboxPath(data, "lost", "reader"), []byte(validLine))

	teams, err := s.LoadTeams(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(teams) != 2 || teams[0].Name != "lost" || teams[0].Err == nil || teams[1].Name != "team" || teams[1].Err != nil {
		t.Fatalf("LoadTeams = %+v", teams)
	}
	if got := dirNames(t, teamDir); !reflect.DeepEqual(got, []string{"inboxes", "state.json"}) {
		t.Errorf("team directory holds %q", got)
	}
	if got := dirNames(t, inboxes); !reflect.DeepEqual(got, []string{"notes.txt", "reader.jsonl"}) {
		t.Errorf("inboxes directory holds %q", got)
	}
	if got := dirNames(t, filepath.Join(data, "teams")); !reflect.DeepEqual(got, []string{"lost", "team"}) {
		t.Errorf("teams directory holds %q", got)
	}
}

func TestSaveTeamReplacesState(t *testing.T) {
	s, _ := openStore(t)
	st := createTeam(t, s, "team")
	st.Members[1].Status = core.StatusRunning
	st.Members[1].Turns = 1
	if err := s.SaveTeam(ctx, st); err != nil {
		t.Fatal(err)
	}
	teams, err := s.LoadTeams(ctx)
	if err != nil || len(teams) != 1 || !reflect.DeepEqual(teams[0].State, st) {
		t.Fatalf("LoadTeams = %+v, %v", teams, err)
	}
}

// TestModes runs with a umask that would strip the owner's write bit: the
// store sets 0700 and 0600 itself.
func TestModes(t *testing.T) {
	data := t.TempDir()
	old := syscall.Umask(0o277)
	t.Cleanup(func() { syscall.Umask(old) })

	s, err := mail.Open(filepath.Join(data, "d"))
	if err != nil {
		t.Fatal(err)
	}
	st := createTeam(t, s, "team")
	send(t, s, "team", rules("reader", core.DefaultLimits()), core.Message{ID: "reader-1", Sender: "lead", Recipient: "reader", Body: "hi"})
	if err := s.SaveTeam(ctx, st); err != nil {
		t.Fatal(err)
	}
	release, err := mail.LockDir(filepath.Join(data, "d"))
	if err != nil {
		t.Fatal(err)
	}
	defer release()

	root := filepath.Join(data, "d")
	want := map[string]fs.FileMode{
		"":                                0o700 | fs.ModeDir,
		"teams":                           0o700 | fs.ModeDir,
		"teams/team":                      0o700 | fs.ModeDir,
		"teams/team/inboxes":              0o700 | fs.ModeDir,
		"teams/team/state.json":           0o600,
		"teams/team/inboxes/reader.jsonl": 0o600,
		"mailroom.lock":                   0o600,
	}
	for rel, mode := range want {
		fi, err := os.Lstat(filepath.Join(root, rel))
		if err != nil {
			t.Fatal(err)
		}
		if fi.Mode() != mode {
			t.Errorf("%s: mode %v, want %v", rel, fi.Mode(), mode)
		}
	}
}

func TestLockDir(t *testing.T) {
	data := filepath.Join(t.TempDir(), "data")
	release, err := mail.LockDir(data)
	if err != nil {
		t.Fatal(err)
	}
	_, err = mail.LockDir(data)
	if err == nil {
		t.Fatal("second lock succeeded")
	}
	if msg := err.Error(); !strings.Contains(msg, data) || !strings.Contains(msg, "another Mailroom server") {
		t.Fatalf("error %q does not name the directory and the other server", msg)
	}
	if !errors.Is(err, mail.ErrBusy) {
		t.Fatalf("errors.Is(%v, ErrBusy) = false, want true", err)
	}
	if err := release(); err != nil {
		t.Fatal(err)
	}
	release, err = mail.LockDir(data)
	if err != nil {
		t.Fatalf("lock after release: %v", err)
	}
	if err := release(); err != nil {
		t.Fatal(err)
	}
}

func TestLockDirNotADirectory(t *testing.T) {
	file := filepath.Join(t.TempDir(), "file")
	writeFile(t, file, nil)
	if _, err := mail.LockDir(file); err == nil {
		t.Fatal("LockDir on a file succeeded")
	}
}
