package mcpserver_test

import (
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"mailroom/internal/agent"
	"mailroom/internal/core"
	"mailroom/internal/mcpserver"
	"mailroom/internal/workspace"
)

// mainPy prints 42 and appends one x to counter.txt per run, so a test
// can tell how often the program ran.
const mainPy = `from pathlib import Path
print(42)
with open(Path(__file__).with_name("counter.txt"), "a", encoding="utf-8") as counter:
    counter.write("x")
`

// newWorkspaceEnv is newEnv whose server offers workspaces under a
// temporary root, with the team "shop" that has a workspace holding
// main.py, host_permission ask and the given limits.
func newWorkspaceEnv(t *testing.T, limits *core.Limits) (*env, string) {
	t.Helper()
	return newWorkspaceTeam(t, core.TeamSpec{Limits: limits, Members: []core.MemberSpec{
		{Name: "reader", Role: "reads the source"},
	}}, mainPy)
}

// newWorkspaceTeam is newEnv whose server offers workspaces under a
// temporary root, with the team "shop" of spec (its name and workspace
// set here), whose workspace holds program as main.py. It returns the
// env and the workspace's directory.
func newWorkspaceTeam(t *testing.T, spec core.TeamSpec, program string) (*env, string) {
	t.Helper()
	root := t.TempDir()
	e := newEnv(t, func(o *mcpserver.Options) { o.Workspaces = root })
	spec.Name, spec.Workspace = "shop", true
	_, created, err := e.svc.CreateTeam(t.Context(), spec)
	if err != nil {
		t.Fatal(err)
	}
	e.tokens["shop"] = map[string]string{}
	for _, m := range created {
		e.tokens["shop"][m.Name] = m.Token
	}
	ws := filepath.Join(root, "shop")
	if err := os.MkdirAll(ws, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(ws, "main.py"), []byte(program), 0o600); err != nil {
		t.Fatal(err)
	}
	return e, ws
}

// The MCP endpoint and the agent loop take their tools from one registry:
// for a team whose letters are at most 100 characters, tools/list and the
// agent's tool specs give the same descriptions and schemas, both stating
// 100, and neither enforces it with maxLength.
func TestToolsComeFromTheRegistry(t *testing.T) {
	limits := core.DefaultLimits()
	limits.BodyChars, limits.PayloadChars, limits.FeedbackChars = 100, 70, 30
	e, ws := newWorkspaceEnv(t, &limits)

	for _, member := range []string{"lead", "reader"} {
		res, err := e.member("shop", member).ListTools(t.Context(), nil)
		if err != nil {
			t.Fatal(err)
		}
		listed := map[string]*mcp.Tool{}
		for _, tool := range res.Tools {
			listed[tool.Name] = tool
		}
		want := agent.Offered(agent.Registry(agent.Env{Limits: limits, Workspace: ws}), agent.DoorMCP, member, true)
		if len(listed) != len(want) {
			t.Errorf("%s's tools/list has %d tools, want the registry's %d", member, len(listed), len(want))
		}
		for _, w := range want {
			got, ok := listed[w.Name]
			if !ok {
				t.Errorf("%s's tools/list lacks %s", member, w.Name)
				continue
			}
			schema, err := json.Marshal(got.InputSchema)
			if err != nil {
				t.Fatal(err)
			}
			if got.Description != w.Description || !sameJSON(t, schema, w.InputSchema) {
				t.Errorf("%s's %s = %q %s, want the registry's %q %s", member, w.Name, got.Description, schema, w.Description, w.InputSchema)
			}
			if strings.Contains(string(schema), "maxLength") {
				t.Errorf("%s's schema = %s, want no maxLength", w.Name, schema)
			}
		}
		// The tools a turn of the same member of the same team is
		// offered: each is offered over MCP too, with the same
		// description and input schema; review_plan, the lesson's name,
		// is reply_request's act and takes its input.
		for _, spec := range agent.WorkspaceTools(member, ws, limits).Specs() {
			name := spec.Name
			if name == agent.ToolReviewPlan {
				name = agent.ToolReplyRequest
			}
			got, ok := listed[name]
			if !ok {
				t.Errorf("%s: a turn offers %s, MCP does not offer %s", member, spec.Name, name)
				continue
			}
			schema, _ := json.Marshal(got.InputSchema)
			if !sameJSON(t, schema, spec.InputSchema) || (name == spec.Name && got.Description != spec.Description) {
				t.Errorf("%s: MCP has %s %q %s, a turn %s %q %s; want one registry entry", member, name, got.Description, schema, spec.Name, spec.Description, spec.InputSchema)
			}
		}
		if member == "reader" {
			send := listed[agent.ToolSendMessage]
			b, _ := json.Marshal(send.InputSchema)
			if !strings.Contains(string(b), "1 to 100 characters") || strings.Contains(string(b), "600") {
				t.Errorf("send_message schema = %s, want the team's 100, not the lesson's 600", b)
			}
			agentSend := agent.WorkspaceTools(member, ws, limits).Specs()[0]
			if agentSend.Name != agent.ToolSendMessage || !strings.Contains(string(agentSend.InputSchema), "1 to 100 characters") {
				t.Errorf("agent's first tool = %s %s, want send_message stating 100", agentSend.Name, agentSend.InputSchema)
			}
			plan := listed[agent.ToolSubmitPlan]
			if b, _ := json.Marshal(plan.InputSchema); !strings.Contains(string(b), `"plan"`) || !strings.Contains(string(b), "1 to 70 characters") {
				t.Errorf("MCP submit_plan schema = %s, want the field plan with the team's 70", b)
			}
		}
	}

	// The limit is core's to enforce: 101 characters reach core and are
	// refused with body_length, 100 are sent.
	reader := e.member("shop", "reader")
	wantRefusal(t, reader, "send_message", map[string]any{"to": "lead", "body": strings.Repeat("b", 101)}, "body_length")
	mustCall(t, reader, "send_message", map[string]any{"to": "lead", "body": strings.Repeat("b", 100)}, nil)
}

func sameJSON(t *testing.T, a, b []byte) bool {
	t.Helper()
	var x, y any
	if err := json.Unmarshal(a, &x); err != nil {
		t.Fatalf("%s: %v", a, err)
	}
	if err := json.Unmarshal(b, &y); err != nil {
		t.Fatalf("%s: %v", b, err)
	}
	xb, _ := json.Marshal(x)
	yb, _ := json.Marshal(y)
	return string(xb) == string(yb)
}

// A member of a team with a workspace is offered read_file and (a
// teammate) run_main over MCP; a team without one offers neither.
func TestWorkspaceToolsOffered(t *testing.T) {
	e, _ := newWorkspaceEnv(t, nil)
	has := func(names []string, name string) bool { return slices.Contains(names, name) }
	reader, lead := toolNames(t, e.member("shop", "reader")), toolNames(t, e.member("shop", "lead"))
	if !has(reader, "read_file") || !has(reader, "run_main") {
		t.Errorf("shop reader's tools = %v, want read_file and run_main", reader)
	}
	if !has(lead, "read_file") || has(lead, "run_main") {
		t.Errorf("shop lead's tools = %v, want read_file and no run_main (lead sends no plan to lead)", lead)
	}
	if demo := toolNames(t, e.member("demo", "reader")); has(demo, "read_file") || has(demo, "run_main") {
		t.Errorf("demo reader's tools = %v, want no workspace tools: demo has no workspace", demo)
	}
}

// read_file reads the team's workspace and nothing outside it.
func TestReadFileOverMCP(t *testing.T) {
	e, ws := newWorkspaceEnv(t, nil)
	outside := filepath.Join(t.TempDir(), "secret.txt")
	if err := os.WriteFile(outside, []byte("secret"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(outside, filepath.Join(ws, "out")); err != nil {
		t.Fatal(err)
	}
	reader := e.member("shop", "reader")
	var file struct {
		Path    string `json:"path"`
		Content string `json:"content"`
	}
	res := call(t, reader, "read_file", map[string]any{"path": "main.py"}, &file)
	if res.IsError || file.Path != "main.py" || file.Content != mainPy || textOf(res) != mainPy {
		t.Fatalf("read_file main.py = %+v (text %q), want its content", file, textOf(res))
	}
	for _, tc := range []struct{ path, code string }{
		{"../shop/main.py", "validation_failed"},
		{"/etc/passwd", "validation_failed"},
		{"out", "validation_failed"},
		{"missing.txt", "not_found"},
	} {
		wantRefusal(t, reader, "read_file", map[string]any{"path": tc.path}, tc.code)
	}
	wantRefusal(t, reader, "read_file", map[string]any{"path": "main.py", "root": "/"}, "validation_failed")
}

// run_main over MCP passes the same gates as the agent's: refused by the
// plan gate before lead approves the plan; then it waits for the host's
// permission (host_permission ask), which the admin grants through core,
// and the program runs exactly once.
func TestRunMainOverMCP(t *testing.T) {
	e, ws := newWorkspaceEnv(t, nil)
	reader, lead := e.member("shop", "reader"), e.member("shop", "lead")

	wantRefusal(t, reader, "run_main", map[string]any{}, string(agent.CodePlanGate))
	mustCall(t, reader, "submit_plan", map[string]any{"plan": "run main.py once"}, nil)
	wantRefusal(t, reader, "run_main", map[string]any{}, string(agent.CodePlanGate))
	mustCall(t, lead, "reply_request", map[string]any{"request_id": "req-1", "approve": true}, nil)
	mustCall(t, reader, "check_replies", map[string]any{}, nil)

	type answer struct {
		res *mcp.CallToolResult
		err error
	}
	done := make(chan answer, 1)
	go func() {
		res, err := reader.CallTool(t.Context(), &mcp.CallToolParams{Name: "run_main", Arguments: map[string]any{}})
		done <- answer{res, err}
	}()
	admin := core.AsAdmin(t.Context())
	var pending core.Permission
	for pending.ID == "" {
		perms, err := e.svc.Permissions(admin, "shop")
		if err != nil {
			t.Fatal(err)
		}
		for _, p := range perms {
			if p.Status == core.PermissionPending {
				pending = p
			}
		}
		select {
		case a := <-done:
			t.Fatalf("run_main answered before a permission was asked: %+v, %v", a.res, a.err)
		case <-time.After(5 * time.Millisecond): // polls the permission list; not an assertion
		}
	}
	if pending.Member != "reader" || pending.Tool != "run_main" || pending.PlanRequestID != "req-1" {
		t.Fatalf("permission = %+v, want reader's run_main under req-1", pending)
	}
	if _, err := os.Stat(filepath.Join(ws, "counter.txt")); err == nil {
		t.Fatal("the program ran before the permission was answered")
	}
	if _, err := e.svc.DecidePermission(admin, "shop", pending.ID, true); err != nil {
		t.Fatal(err)
	}
	a := <-done
	if a.err != nil || a.res.IsError {
		t.Fatalf("run_main = %+v, %v; want the program's output", a.res, a.err)
	}
	var out struct {
		Output string `json:"output"`
	}
	decodeContent(t, a.res, &out)
	if out.Output != "42\n" {
		t.Errorf("run_main output = %q, want %q", out.Output, "42\n")
	}
	counter, err := os.ReadFile(filepath.Join(ws, "counter.txt"))
	if err != nil || string(counter) != "x" {
		t.Fatalf("counter.txt = %q, %v; want one x: the program ran once", counter, err)
	}
}

// One program runs per team at a time: a second run_main while the first
// runs is refused with run_in_progress, whichever member asks.
func TestRunMainOneAtATime(t *testing.T) {
	// The program says it started, then waits for the test's word.
	prog := "import os, time\nopen('started', 'w').close()\nwhile not os.path.exists('stop'):\n    time.sleep(0.01)\nprint('finished')\n"
	e, ws := newWorkspaceTeam(t, core.TeamSpec{HostPermission: core.HostAllow,
		Members: []core.MemberSpec{{Name: "reader", Role: "runs the program"}}}, prog)
	reader, lead := e.member("shop", "reader"), e.member("shop", "lead")
	mustCall(t, reader, "submit_plan", map[string]any{"plan": "run main.py"}, nil)
	mustCall(t, lead, "reply_request", map[string]any{"request_id": "req-1", "approve": true}, nil)
	mustCall(t, reader, "check_replies", map[string]any{}, nil)
	type answer struct {
		res *mcp.CallToolResult
		err error
	}
	done := make(chan answer, 1)
	go func() {
		res, err := reader.CallTool(t.Context(), &mcp.CallToolParams{Name: "run_main", Arguments: map[string]any{}})
		done <- answer{res, err}
	}()
	for {
		if _, err := os.Stat(filepath.Join(ws, "started")); err == nil {
			break
		}
		select {
		case a := <-done:
			t.Fatalf("the first run_main answered before its program started: %+v, %v", a.res, a.err)
		case <-time.After(5 * time.Millisecond): // polls for the file; not an assertion
		}
	}
	second := e.connect(e.tokens["shop"]["reader"], nil)
	wantRefusal(t, second, "run_main", map[string]any{}, string(workspace.CodeRunInProgress))
	if err := os.WriteFile(filepath.Join(ws, "stop"), nil, 0o600); err != nil {
		t.Fatal(err)
	}
	a := <-done
	if a.err != nil || a.res.IsError || !strings.Contains(textOf(a.res), "finished") {
		t.Fatalf("the first run_main = %+v, %v; want its output", a.res, a.err)
	}
}
