package e2e

import (
	"context"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// nodeDeadline bounds npm ci and the Node client; both normally take
// seconds.
const nodeDeadline = 5 * time.Minute

// TestMCPWithTypeScriptClient drives /mcp of the real binary with a client
// that is not Go: the TypeScript MCP SDK, in e2e/mcpclient. Lead and reader
// run the plan protocol in two sessions. Node.js and npm are required (CI
// installs them): their absence fails the test.
func TestMCPWithTypeScriptClient(t *testing.T) {
	node, err := exec.LookPath("node")
	if err != nil {
		t.Fatalf("node is required for the MCP end-to-end test: %v", err)
	}
	npm, err := exec.LookPath("npm")
	if err != nil {
		t.Fatalf("npm is required for the MCP end-to-end test: %v", err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), nodeDeadline)
	defer cancel()
	dir, err := filepath.Abs("mcpclient")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(dir, "node_modules")); err != nil {
		ci := exec.CommandContext(ctx, npm, "ci", "--no-audit", "--no-fund")
		ci.Dir = dir
		if out, err := ci.CombinedOutput(); err != nil {
			t.Fatalf("npm ci: %v\n%s", err, out)
		}
	}

	s := startServer(t, t.TempDir())
	defer s.stop()
	c := newClient(s.base)
	defer c.close()
	var created struct {
		Members []struct {
			Name  string `json:"name"`
			Token string `json:"token"`
		} `json:"members"`
	}
	body := map[string]any{"name": "mcp", "members": []map[string]string{{"name": "reader", "role": "reads the source"}}}
	if status, code, err := c.do(http.MethodPost, "/teams", adminToken, "", body, &created); err != nil || status != http.StatusCreated {
		t.Fatalf("create team: status %d, code %q, err %v", status, code, err)
	}
	tokens := map[string]string{}
	for _, m := range created.Members {
		tokens[m.Name] = m.Token
	}

	run := exec.CommandContext(ctx, node, "client.mjs")
	run.Dir = dir
	run.Env = append(os.Environ(), "MAILROOM_URL="+s.base, "LEAD_TOKEN="+tokens["lead"], "READER_TOKEN="+tokens["reader"])
	out, err := run.CombinedOutput()
	if err != nil {
		t.Fatalf("TypeScript client: %v\n%s\nserver log:\n%s", err, out, s.stderr.String())
	}
	if !strings.Contains(string(out), `"verdict":"approved"`) {
		t.Fatalf("TypeScript client output = %s, want the plan approved", out)
	}

	// The protocol really ran in the server: req-1 is approved.
	var req struct {
		Status string `json:"status"`
	}
	if status, _, err := c.do(http.MethodGet, "/teams/mcp/requests/req-1", adminToken, "", nil, &req); err != nil || status != http.StatusOK || req.Status != "approved" {
		t.Fatalf("req-1: status %d, %+v, err %v; want approved", status, req, err)
	}
}
