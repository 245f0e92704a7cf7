package e2e

import (
	"bufio"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// readmeWalkSections are the README sections whose sh blocks make one walk
// against a server with a scripted model: each block builds on the ones
// before it (BASE, ADMIN, the demo team's tokens), as a newcomer pastes
// them. Blocks that start a server, a model or a container are left out
// (the test is the server).
var readmeWalkSections = []string{
	"Curl walkthrough",
	"Using the API from your own agents",
	"Teammate turns",
	"Files to work on, and the host's permission",
	"Scenarios",
	"Agents outside Mailroom (MCP)",
}

// readmeWalkRefusals are the answers of the walk that are not 2xx, as the
// README says they are: the permission of a team whose program nothing has
// asked to run yet, and a scenario run on a model without its credentials.
// Any other answer outside 2xx fails the test.
var readmeWalkRefusals = []string{
	"404 POST /api/v1/teams/bench/permissions/perm-1",
	"409 POST /api/v1/scenarios/team-protocols/runs",
}

// readmeBlocks returns the ```sh blocks of the named sections of a
// Markdown document, in order. A section runs from its heading to the next
// heading of any level that is not inside a code block.
func readmeBlocks(doc string, sections []string) []string {
	want := map[string]bool{}
	for _, s := range sections {
		want[s] = true
	}
	var (
		blocks  []string
		section string
		lang    string
		inBlock bool
		buf     []string
	)
	heading := regexp.MustCompile(`^#+ (.*)$`)
	for _, line := range strings.Split(doc, "\n") {
		if fence, ok := strings.CutPrefix(line, "```"); ok {
			if inBlock && want[section] && lang == "sh" {
				blocks = append(blocks, strings.Join(buf, "\n"))
			}
			inBlock, lang, buf = !inBlock, strings.TrimSpace(fence), nil
			continue
		}
		if inBlock {
			buf = append(buf, line)
			continue
		}
		if m := heading.FindStringSubmatch(line); m != nil {
			section = m[1]
		}
	}
	return blocks
}

// TestReadmeWalk runs the README's walks as written, with bash, curl and
// jq, against the real binary started as the Quick start starts it (no
// admin token configured: the walk reads data/admin.token). Only the
// address is the test's own. Every answer must be 2xx but the refusals the
// README announces, so the README cannot drift from the service.
func TestReadmeWalk(t *testing.T) {
	for _, tool := range []string{"bash", "curl", "jq"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Fatalf("%s is not on PATH; the README's walk needs it (.ci/run installs it)", tool)
		}
	}
	readme, err := os.ReadFile(filepath.Join("..", "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	var walk []string
	for _, b := range readmeBlocks(string(readme), readmeWalkSections) {
		if strings.Contains(b, "go run ") || strings.Contains(b, "docker ") {
			continue
		}
		walk = append(walk, b)
	}
	if len(walk) < 10 {
		t.Fatalf("found %d sh blocks in the README's walk sections %q, want at least 10: were sections renamed?", len(walk), readmeWalkSections)
	}

	dir := t.TempDir()
	// An empty MAILROOM_ADMIN_TOKEN: the server generates its token and
	// keeps it in data/admin.token, as for a newcomer.
	s := startServer(t, filepath.Join(dir, "data"), "MAILROOM_ADMIN_TOKEN=")

	// curl reports every answer's status on standard error, after the
	// README's own output options, which it does not change.
	script := "set -euo pipefail\n" +
		`curl() { command curl --write-out '%{stderr}HTTP %{http_code} %{method} %{url_effective}\n' "$@"; }` + "\n" +
		strings.ReplaceAll(strings.Join(walk, "\n"), "http://127.0.0.1:8080", s.base)
	cmd := exec.Command("bash", "-c", script)
	cmd.Dir = dir
	cmd.Env = []string{"PATH=" + os.Getenv("PATH"), "HOME=" + dir}
	var stdout, stderr strings.Builder
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("the README's walk failed: %v\nstderr:\n%s\nstdout:\n%s", err, stderr.String(), stdout.String())
	}

	refusals := map[string]int{}
	for _, r := range readmeWalkRefusals {
		refusals[r]++
	}
	answers := 0
	sc := bufio.NewScanner(strings.NewReader(stderr.String()))
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) != 4 || f[0] != "HTTP" {
			continue
		}
		answers++
		code, method, path := f[1], f[2], strings.TrimPrefix(f[3], s.base)
		if strings.HasPrefix(code, "2") {
			continue
		}
		key := code + " " + method + " " + path
		if refusals[key] == 0 {
			t.Errorf("the walk got %s for %s %s, want 2xx (or a refusal the README announces)", code, method, path)
			continue
		}
		refusals[key]--
	}
	for key, n := range refusals {
		if n > 0 {
			t.Errorf("the walk never got %q, which the README announces", key)
		}
	}
	if answers < 20 {
		t.Errorf("the walk made %d requests, want at least 20", answers)
	}
	// What the README says the reader sees at its key steps.
	for _, want := range []string{
		`"status": "approved"`,        // the request after reader consumed lead's reply
		`"text": "Reported to lead."`, // the turn
		`print(6 * 7)`,                // the workspace file read back
		`"send_message"`,              // tools/list over MCP by hand
		`"id": "lead-`,                // the letter sent over MCP
	} {
		if !strings.Contains(stdout.String(), want) {
			t.Errorf("the walk's output lacks %s\nstdout:\n%s", want, stdout.String())
		}
	}
	if t.Failed() {
		t.Logf("statuses:\n%s", stderr.String())
	}
}
