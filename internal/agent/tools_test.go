package agent

import (
	"encoding/json"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"mailroom/internal/core"
	"mailroom/internal/workspace"
)

func TestReadFileStaysInWorkspace(t *testing.T) {
	ws := newWorkspace(t)
	outside := filepath.Join(t.TempDir(), "secret.txt")
	if err := os.WriteFile(outside, []byte("secret"), 0o600); err != nil {
		t.Fatal(err)
	}
	must := func(err error) {
		if err != nil {
			t.Fatal(err)
		}
	}
	must(os.Symlink(outside, filepath.Join(ws, "out-abs")))
	rel, err := filepath.Rel(ws, outside)
	must(err)
	must(os.Symlink(rel, filepath.Join(ws, "out-rel")))
	must(os.Symlink("main.py", filepath.Join(ws, "alias.py")))
	must(os.Mkdir(filepath.Join(ws, "sub"), 0o700))
	must(os.WriteFile(filepath.Join(ws, "sub", "note.txt"), []byte("note"), 0o600))
	must(os.WriteFile(filepath.Join(ws, "big.txt"), []byte(strings.Repeat("a", workspace.MaxReadBytes+1)), 0o600))
	must(os.WriteFile(filepath.Join(ws, "cap.txt"), []byte(strings.Repeat("a", workspace.MaxReadBytes)), 0o600))
	// A FIFO no one writes to blocked read_file's thread for good.
	must(syscall.Mkfifo(filepath.Join(ws, "fifo"), 0o600))

	h := host{set: ToolSet{Names: []string{ToolReadFile}, Workspace: ws}}
	read := func(h host, path string) toolResult {
		input, err := json.Marshal(map[string]string{"path": path})
		if err != nil {
			t.Fatal(err)
		}
		return h.call(t.Context(), ToolReadFile, input)
	}
	tests := []struct {
		path    string
		want    string // content on success
		refusal string // substring of the refusal
	}{
		{path: "main.py", want: mainPy},
		{path: "./sub/note.txt", want: "note"},
		{path: "alias.py", want: mainPy},
		{path: "cap.txt", want: strings.Repeat("a", workspace.MaxReadBytes)},
		{path: "../x", refusal: ".. component"},
		{path: "sub/../main.py", refusal: ".. component"},
		{path: `sub\..\main.py`, refusal: ".. component"},
		{path: "/etc/passwd", refusal: "absolute paths"},
		{path: outside, refusal: "absolute paths"},
		{path: "out-abs", refusal: "cannot be opened"},
		{path: "out-rel", refusal: "cannot be opened"},
		{path: "missing.txt", refusal: "does not exist"},
		{path: "sub", refusal: "not a regular file"},
		{path: "fifo", refusal: "not a regular file"},
		{path: "big.txt", refusal: "larger than"},
		{path: "", refusal: "non-empty"},
	}
	for _, tc := range tests {
		t.Run(tc.path, func(t *testing.T) {
			got := read(h, tc.path)
			if tc.refusal == "" {
				if got.isError || got.content != tc.want {
					t.Fatalf("read %q = %+v", tc.path, got)
				}
				return
			}
			if !got.isError || !strings.Contains(got.content, tc.refusal) || strings.Contains(got.content, "secret") {
				t.Fatalf("read %q = %+v, want a refusal containing %q", tc.path, got, tc.refusal)
			}
		})
	}
	if got := read(host{set: ToolSet{Names: []string{ToolReadFile}}}, "main.py"); !got.isError {
		t.Fatalf("read without a workspace = %+v", got)
	}
}

func TestRunMainGates(t *testing.T) {
	tests := []struct {
		name     string
		setup    func(t *testing.T, svc *core.Service) // protocol steps before the call
		allow    bool
		planID   string
		refused  string
		reason   string
		wantRuns bool
	}{
		{name: "no plan", allow: true, refused: GatePlan, reason: "submitted no plan"},
		{name: "pending, no reply", allow: true, refused: GatePlan, reason: "no reply yet",
			setup: func(t *testing.T, svc *core.Service) { openPlan(t, svc, "reader") }},
		{name: "replied but not matched", allow: true, refused: GatePlan, reason: "has not matched",
			setup: func(t *testing.T, svc *core.Service) { openPlan(t, svc, "reader"); replyPlan(t, svc, "req-1", true) }},
		{name: "rejected", allow: true, refused: GatePlan, reason: "rejected",
			setup: func(t *testing.T, svc *core.Service) {
				openPlan(t, svc, "reader")
				replyPlan(t, svc, "req-1", false)
				consume(t, svc, "reader")
			}},
		{name: "another member's approval", allow: true, planID: "req-1", refused: GatePlan, reason: "not a plan submitted by reader",
			setup: func(t *testing.T, svc *core.Service) {
				openPlan(t, svc, "reviewer")
				replyPlan(t, svc, "req-1", true)
				consume(t, svc, "reviewer")
			}},
		{name: "approved, host denies", allow: false, refused: GateHost, reason: "denied",
			setup: approvedPlan},
		{name: "approved, host allows", allow: true, wantRuns: true, setup: approvedPlan},
		{name: "approved by id, host allows", allow: true, planID: "req-1", wantRuns: true, setup: approvedPlan},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			svc := newService(t)
			ws := newWorkspace(t)
			if tc.setup != nil {
				tc.setup(t, svc)
			}
			h := host{svc: svc, team: testTeam, member: "reader", set: ToolSet{Names: []string{ToolRunMain}, Workspace: ws, AllowRun: tc.allow, PlanID: tc.planID}}
			got := h.call(t.Context(), ToolRunMain, json.RawMessage(`{}`))
			counter, err := os.ReadFile(filepath.Join(ws, "counter.txt"))
			if tc.wantRuns {
				if got.isError || got.content != "42\n" || !got.ran || string(counter) != "x" {
					t.Fatalf("run = %+v, counter %q", got, counter)
				}
				return
			}
			prefix := map[string]string{GatePlan: "plan gate: ", GateHost: "host permission: "}[tc.refused]
			if !got.isError || got.ran || got.refused != tc.refused || !strings.HasPrefix(got.content, prefix) || !strings.Contains(got.content, tc.reason) {
				t.Fatalf("run = %+v, want refused by %s (%q)", got, tc.refused, tc.reason)
			}
			if !errors.Is(err, fs.ErrNotExist) {
				t.Fatalf("a refused run left a counter file: %q, %v", counter, err)
			}
		})
	}
}

func openPlan(t *testing.T, svc *core.Service, sender string) {
	t.Helper()
	if _, err := svc.OpenRequest(core.AsMember(t.Context(), testTeam, sender), core.OpenInput{Team: testTeam, Target: "lead", Kind: core.KindPlan, Payload: "Read the expected value, then run main.py."}); err != nil {
		t.Fatal(err)
	}
}

func replyPlan(t *testing.T, svc *core.Service, id string, approve bool) {
	t.Helper()
	if _, err := svc.Reply(core.AsMember(t.Context(), testTeam, "lead"), core.ReplyInput{Team: testTeam, RequestID: id, Approve: approve, Feedback: ""}); err != nil {
		t.Fatal(err)
	}
}

func consume(t *testing.T, svc *core.Service, member string) {
	t.Helper()
	if _, err := svc.Consume(core.AsMember(t.Context(), testTeam, member), testTeam); err != nil {
		t.Fatal(err)
	}
}

func approvedPlan(t *testing.T, svc *core.Service) {
	openPlan(t, svc, "reader")
	replyPlan(t, svc, "req-1", true)
	consume(t, svc, "reader")
}

func TestToolResultsForBadCalls(t *testing.T) {
	svc := newService(t)
	h := host{svc: svc, team: testTeam, member: "reader", set: DefaultTools("reader")}
	tests := []struct {
		name  string
		tool  string
		input string
		want  string
	}{
		{"unknown recipient", ToolSendMessage, `{"to":"nobody","body":"hi"}`, "unknown_member: "},
		{"empty body", ToolSendMessage, `{"to":"lead","body":"   "}`, "body_length: "},
		{"smuggled sender", ToolSendMessage, `{"to":"lead","body":"hi","sender":"lead"}`, "send_message: "},
		{"missing body", ToolSendMessage, `{"to":"lead"}`, "required"},
		{"not an object", ToolSendMessage, `"hi"`, "send_message: "},
		{"tool not offered", ToolReviewPlan, `{"request_id":"req-1","approve":true}`, "unknown tool"},
		{"tool that does not exist", "bash", `{}`, "unknown tool"},
		{"empty plan", ToolSubmitPlan, `{"plan":" "}`, "body_length: "},
		{"the field of another door", ToolSubmitPlan, `{"payload":"x"}`, `submit_plan: "payload" is not a field of this input.`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got := h.call(t.Context(), tc.tool, json.RawMessage(tc.input))
			if !got.isError || !strings.Contains(got.content, tc.want) {
				t.Fatalf("%s(%s) = %+v, want an error containing %q", tc.tool, tc.input, got, tc.want)
			}
		})
	}
	if got := inbox(t, svc, "lead"); len(got) != 0 {
		t.Fatalf("bad calls stored letters: %+v", got)
	}

	lead := host{svc: svc, team: testTeam, member: "lead", set: DefaultTools("lead")}
	openPlan(t, svc, "reader")
	for _, tc := range []struct{ input, want string }{
		{`{"request_id":"req-1","approve":"true"}`, "review_plan: "},
		{`{"request_id":"req-9","approve":true}`, "not_found: "},
		{`{"request_id":"req-1","approve":true,"feedback":"fine"}`, `"status":"queued"`},
		{`{"request_id":"req-1","approve":true,"feedback":"fine"}`, `"status":"already_sent"`},
		{`{"request_id":"req-1","approve":false,"feedback":"fine"}`, "reply_conflict: "},
	} {
		got := lead.call(t.Context(), ToolReviewPlan, json.RawMessage(tc.input))
		if !strings.Contains(got.content, tc.want) {
			t.Fatalf("review_plan(%s) = %+v, want %q", tc.input, got, tc.want)
		}
	}
	if got := inbox(t, svc, "reader"); len(got) != 1 || got[0].Sender != "lead" {
		t.Fatalf("reader inbox = %+v, want one reply from lead", got)
	}
}

func TestRunMainProgramEnvironment(t *testing.T) {
	t.Setenv("MAILROOM_TEST_SECRET", "must not leak")
	tests := []struct {
		name    string
		program string
		check   func(t *testing.T, got toolResult)
	}{
		{
			name:    "environment holds PATH only",
			program: "import os\nprint(' '.join(sorted(os.environ)))\n",
			check: func(t *testing.T, got toolResult) {
				if got.isError || !got.ran {
					t.Fatalf("run = %+v", got)
				}
				// python3 may be a launcher (pyenv) or coerce the locale
				// (PEP 538) and add variables of its own; what matters is
				// that nothing of the server's environment gets through.
				for _, k := range strings.Fields(got.content) {
					if k == "MAILROOM_TEST_SECRET" || k == "HOME" || k == "USER" {
						t.Fatalf("the program saw %s in its environment: %q", k, got.content)
					}
				}
			},
		},
		{
			name:    "working directory is the workspace",
			program: "import os\nprint(os.path.exists('expected.txt'))\n",
			check: func(t *testing.T, got toolResult) {
				if got.isError || got.content != "True\n" {
					t.Fatalf("run = %+v", got)
				}
			},
		},
		{
			name:    "non-zero exit is an error result",
			program: "print('partial')\nraise SystemExit(3)\n",
			check: func(t *testing.T, got toolResult) {
				if !got.isError || !got.ran || !strings.Contains(got.content, "status 3") || !strings.Contains(got.content, "partial") {
					t.Fatalf("run = %+v", got)
				}
				if strings.Contains(got.content, "stderr") {
					t.Fatalf("run = %+v; want no stderr quoted when the program wrote none", got)
				}
			},
		},
		{
			name:    "a failure quotes the traceback's end",
			program: "print('before')\n1 / 0\n",
			check: func(t *testing.T, got toolResult) {
				if !got.isError || !got.ran || !strings.Contains(got.content, "status 1") || !strings.Contains(got.content, "stderr: ") || !strings.Contains(got.content, "ZeroDivisionError: division by zero") {
					t.Fatalf("run = %+v; want status 1 and the traceback's last line", got)
				}
			},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			svc := newService(t)
			ws := newWorkspace(t)
			if err := os.WriteFile(filepath.Join(ws, "main.py"), []byte(tc.program), 0o600); err != nil {
				t.Fatal(err)
			}
			approvedPlan(t, svc)
			h := host{svc: svc, team: testTeam, member: "reader", set: ToolSet{Names: []string{ToolRunMain}, Workspace: ws, AllowRun: true}}
			tc.check(t, h.call(t.Context(), ToolRunMain, json.RawMessage(`{}`)))
		})
	}
	t.Run("main.py must be a regular file", func(t *testing.T) {
		svc := newService(t)
		ws := newWorkspace(t)
		other := filepath.Join(t.TempDir(), "evil.py")
		if err := os.WriteFile(other, []byte("print('evil')\n"), 0o600); err != nil {
			t.Fatal(err)
		}
		if err := os.Remove(filepath.Join(ws, "main.py")); err != nil {
			t.Fatal(err)
		}
		if err := os.Symlink(other, filepath.Join(ws, "main.py")); err != nil {
			t.Fatal(err)
		}
		approvedPlan(t, svc)
		h := host{svc: svc, team: testTeam, member: "reader", set: ToolSet{Names: []string{ToolRunMain}, Workspace: ws, AllowRun: true}}
		if got := h.call(t.Context(), ToolRunMain, json.RawMessage(`{}`)); !got.isError || got.ran {
			t.Fatalf("run through a symlinked main.py = %+v", got)
		}
	})
}
