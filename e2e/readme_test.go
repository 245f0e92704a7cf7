package e2e

import (
	"bufio"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"mailroom/internal/providertest"
)

// readmeSkippedSections are the README sections whose sh blocks are not part
// of the walk: they start containers or replicas on PostgreSQL, which need
// a Docker engine or a database the walk does not have.
var readmeSkippedSections = map[string]bool{
	"Docker":                 true,
	"Replicas on PostgreSQL": true,
}

// startsServer reports whether a README block starts a server or a model
// (go run, go build, ollama, docker): the test itself is the server, started
// with what those blocks put in its environment.
func startsServer(block string) bool {
	for _, s := range []string{"go run ", "go build ", "ollama ", "docker "} {
		if strings.Contains(block, s) {
			return true
		}
	}
	return false
}

// readmeWalkRefusals are the answers of the walk that are not 2xx, as the
// README says they are: the permissions of teams whose program nothing has
// asked to run yet. Any other answer outside 2xx fails the test.
var readmeWalkRefusals = []string{
	"404 POST /api/v1/teams/lab/permissions/perm-1",
	"404 POST /api/v1/teams/bench/permissions/perm-1",
}

// readmeBlocks returns the ```sh blocks of a Markdown document in order,
// but those of the skipped sections. A section runs from its heading to the
// next heading of any level that is not inside a code block.
func readmeBlocks(doc string, skipped map[string]bool) []string {
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
			if inBlock && !skipped[section] && lang == "sh" {
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

// TestReadmeWalk runs the README top to bottom as written, every sh block
// in order in one shell (a team created twice or a variable renamed between
// sections fails it), with bash, curl and jq, against the real binary
// started as the Quick start starts it (no admin token configured: the walk
// reads data/admin.token) with the environment the model sections give it.
// Only the address is the test's own. Every answer must be 2xx but the
// refusals the README announces, so the README cannot drift from the
// service.
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
	for _, b := range readmeBlocks(string(readme), readmeSkippedSections) {
		if startsServer(b) {
			continue
		}
		walk = append(walk, b)
	}
	if len(walk) < 15 {
		t.Fatalf("found %d sh blocks to run in the README, want at least 15: were sections renamed?", len(walk))
	}

	// The models the README's sections start the server with (an
	// Anthropic key, a local OpenAI-compatible server) are fakes of their
	// wire formats that answer every request with a short text.
	const modelKey = "sk-ant-readme-walk"
	anthropic := providertest.NewAnthropic(t, modelKey)
	openai := providertest.NewOpenAI(t, "")
	for range 400 {
		anthropic.Push(providertest.AnthropicText("Done.", providertest.AnthropicUsage{InputTokens: 10, OutputTokens: 2}))
		openai.Push(providertest.OpenAIText("Done.", providertest.OpenAIUsage{PromptTokens: 10, CompletionTokens: 2}))
	}

	dir := t.TempDir()
	// The CLI section runs the binary as ./mailroom, as built by its go
	// build line, in the directory the walk runs in.
	if err := os.Symlink(serverBin, filepath.Join(dir, "mailroom")); err != nil {
		t.Fatal(err)
	}
	// An empty MAILROOM_ADMIN_TOKEN: the server generates its token and
	// keeps it in data/admin.token, as for a newcomer.
	s := startServer(t, filepath.Join(dir, "data"), "MAILROOM_ADMIN_TOKEN=",
		"ANTHROPIC_API_KEY="+modelKey, "ANTHROPIC_BASE_URL="+anthropic.URL(),
		"OPENAI_BASE_URL="+openai.URL())

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
		`would be refused`,            // the commit guard naming reader's reservation
	} {
		if !strings.Contains(stdout.String(), want) {
			t.Errorf("the walk's output lacks %s\nstdout:\n%s", want, stdout.String())
		}
	}
	if t.Failed() {
		t.Logf("statuses:\n%s", stderr.String())
	}
}
