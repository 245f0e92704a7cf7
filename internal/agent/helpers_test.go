package agent

import (
	"context"
	"os"
	"path/filepath"
	"sync"
	"testing"

	"mailroom/internal/core"
	"mailroom/internal/testkit"
)

const testTeam = "demo"

// mainPy is the fixed program the tests run: it prints 42 and counts.
const mainPy = `from pathlib import Path

with open(Path(__file__).with_name("counter.txt"), "a", encoding="utf-8") as counter:
    counter.write("x")
print(42)
`

// newService opens a real file store in a temp dir and creates the lesson
// team (lead, reader, reviewer) with the lesson limits.
func newService(t *testing.T) *core.Service {
	t.Helper()
	svc := testkit.OpenService(t, t.TempDir())
	if _, _, err := svc.CreateTeam(t.Context(), core.TeamSpec{Name: testTeam, Members: []core.MemberSpec{
		{Name: "lead", Role: "summarise read-only evidence"},
		{Name: "reader", Role: "read the source"},
		{Name: "reviewer", Role: "read the expected value"},
	}}); err != nil {
		t.Fatal(err)
	}
	return svc
}

// newWorkspace writes main.py and expected.txt into a fresh directory.
func newWorkspace(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	for name, body := range map[string]string{"main.py": mainPy, "expected.txt": "42\n"} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

func member(t *testing.T, svc *core.Service, name string) core.MemberView {
	t.Helper()
	return testkit.MemberOf(t, svc, testTeam, name)
}

func inbox(t *testing.T, svc *core.Service, name string) []core.Message {
	t.Helper()
	msgs, err := svc.Inbox(t.Context(), testTeam, name)
	if err != nil {
		t.Fatal(err)
	}
	return msgs
}

func wantCode(t *testing.T, err error, code core.Code) {
	t.Helper()
	if got := core.ErrorCode(err); got != code {
		t.Fatalf("error = %v (code %q), want %q", err, got, code)
	}
}

// gateModel holds its first request until released, so a test knows for
// certain that a turn is running (the member is active) without sleeping.
type gateModel struct {
	next    Model
	entered chan struct{}
	release chan struct{}
	once    sync.Once
}

func newGateModel(next Model) *gateModel {
	return &gateModel{next: next, entered: make(chan struct{}), release: make(chan struct{})}
}

func (g *gateModel) Respond(ctx context.Context, req Request) (Response, error) {
	g.once.Do(func() { close(g.entered) })
	select {
	case <-g.release:
	case <-ctx.Done():
		return Response{}, ctx.Err()
	}
	return g.next.Respond(ctx, req)
}

// toolUses returns the tool_use blocks of a history, in order.
func toolUses(h []core.Entry) []core.Block {
	var out []core.Block
	for _, e := range h {
		for _, b := range e.Blocks {
			if b.Type == "tool_use" {
				out = append(out, b)
			}
		}
	}
	return out
}

func hasText(h []core.Entry, text string) bool {
	for _, e := range h {
		if e.Role == "user" && e.Blocks == nil && e.Text == text {
			return true
		}
	}
	return false
}
