package main

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/BurntSushi/toml"
)

// secretToken stands for a member token in the environment of setup: it
// must never land in a file.
const secretToken = "mr_secret_member_token_0123456789"

// runSetupIn runs `setup args...` with MAILROOM_URL, MAILROOM_TOKEN and
// CODEX_HOME=home, returning stdout and the error.
func runSetupIn(t *testing.T, home string, args ...string) (string, error) {
	t.Helper()
	env := map[string]string{"MAILROOM_URL": "http://127.0.0.1:8080", tokenEnv: secretToken, "CODEX_HOME": home, "HOME": t.TempDir()}
	var out, errOut bytes.Buffer
	err := run(context.Background(), append([]string{"setup"}, args...), func(k string) string { return env[k] }, &out, &errOut)
	return out.String(), err
}

func writeFile(t *testing.T, path, data string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(data), 0o644); err != nil {
		t.Fatal(err)
	}
}

func readFile(t *testing.T, path string) string {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return string(data)
}

// snapshot is every file under dir, by path relative to it.
func snapshot(t *testing.T, dir string) map[string]string {
	t.Helper()
	files := map[string]string{}
	err := filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		rel, _ := filepath.Rel(dir, p)
		files[rel] = readFile(t, p)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return files
}

// hookCommands lists the commands of event in a hooks file's JSON, group
// by group.
func hookCommands(t *testing.T, data, event string) []string {
	t.Helper()
	var doc struct {
		Hooks map[string][]struct {
			Matcher *string `json:"matcher"`
			Hooks   []struct {
				Command string `json:"command"`
			} `json:"hooks"`
		} `json:"hooks"`
	}
	if err := json.Unmarshal([]byte(data), &doc); err != nil {
		t.Fatalf("hooks file %q: %v", data, err)
	}
	var cmds []string
	for _, g := range doc.Hooks[event] {
		if g.Matcher != nil && *g.Matcher == "*" {
			t.Errorf("%s: a group has matcher \"*\", which is no regular expression", event)
		}
		for _, h := range g.Hooks {
			cmds = append(cmds, h.Command)
		}
	}
	return cmds
}

// TestSetupClaudeMerges: setup claude keeps others' servers, settings and
// hooks, adds its own once, writes no token, and a second run changes
// nothing.
func TestSetupClaudeMerges(t *testing.T) {
	dir, home := t.TempDir(), t.TempDir()
	writeFile(t, filepath.Join(dir, ".mcp.json"), `{"mcpServers": {"docs": {"command": "docs-server"}, "mailroom": {"type": "http", "url": "http://old/mcp", "headers": {"Authorization": "Bearer `+secretToken+`"}}}}`)
	writeFile(t, filepath.Join(dir, ".claude", "settings.json"), `{
  "model": "opus",
  "permissions": {"allow": ["Bash(ls:*)"], "deny": ["Read(.env)"]},
  "enabledMcpjsonServers": ["docs"],
  "hooks": {
    "PostToolUse": [{"matcher": "Edit|Write", "hooks": [{"type": "command", "command": "gofmt -l ."}]},
                    {"hooks": [{"type": "command", "command": "/usr/local/bin/mailroom hook"}]}],
    "Notification": [{"hooks": [{"type": "command", "command": "notify-send hi"}]}]
  }
}`)
	out, err := runSetupIn(t, home, "claude", "--dir", dir)
	if err != nil {
		t.Fatalf("setup claude: %v", err)
	}
	if !strings.Contains(out, "wrote "+filepath.Join(dir, ".mcp.json")) || !strings.Contains(out, "wrote "+filepath.Join(dir, ".claude", "settings.json")) {
		t.Errorf("stdout %q, want a line per file written", out)
	}
	first := snapshot(t, dir)
	for p, data := range first {
		if strings.Contains(data, secretToken) {
			t.Errorf("%s holds the token: %s", p, data)
		}
	}
	var mcp struct {
		MCPServers map[string]map[string]any `json:"mcpServers"`
	}
	if err := json.Unmarshal([]byte(first[".mcp.json"]), &mcp); err != nil {
		t.Fatal(err)
	}
	if mcp.MCPServers["docs"]["command"] != "docs-server" {
		t.Errorf(".mcp.json lost the docs server: %s", first[".mcp.json"])
	}
	want := map[string]any{"type": "http", "url": "http://127.0.0.1:8080/mcp", "headers": map[string]any{"Authorization": "Bearer ${MAILROOM_TOKEN}"}}
	if got, _ := json.Marshal(mcp.MCPServers["mailroom"]); string(got) != string(mustJSON(want)) {
		t.Errorf("mailroom server %s, want %s", got, mustJSON(want))
	}
	settings := first[filepath.Join(".claude", "settings.json")]
	var s struct {
		Model       string   `json:"model"`
		Enabled     []string `json:"enabledMcpjsonServers"`
		Permissions struct {
			Allow []string `json:"allow"`
			Deny  []string `json:"deny"`
		} `json:"permissions"`
	}
	if err := json.Unmarshal([]byte(settings), &s); err != nil {
		t.Fatal(err)
	}
	if s.Model != "opus" || strings.Join(s.Enabled, ",") != "docs,mailroom" ||
		strings.Join(s.Permissions.Allow, ",") != "Bash(ls:*),mcp__mailroom" || strings.Join(s.Permissions.Deny, ",") != "Read(.env)" {
		t.Errorf("settings %s: want model, docs and mailroom enabled, the allow and deny lists kept with mcp__mailroom added", settings)
	}
	for event, want := range map[string]string{
		"SessionStart":     "mailroom hook",
		"UserPromptSubmit": "mailroom hook",
		"PostToolUse":      "gofmt -l .,mailroom hook",
		"Stop":             "mailroom hook --wait 300",
		"Notification":     "notify-send hi",
	} {
		if got := strings.Join(hookCommands(t, settings, event), ","); got != want {
			t.Errorf("%s hooks %q, want %q", event, got, want)
		}
	}
	if !strings.HasPrefix(settings, "{\n  \"model\": \"opus\",\n  \"permissions\"") {
		t.Errorf("settings keys reordered:\n%s", settings)
	}

	out, err = runSetupIn(t, home, "claude", "--dir", dir)
	if err != nil {
		t.Fatalf("second setup claude: %v", err)
	}
	if strings.Contains(out, "wrote") || strings.Count(out, "unchanged ") != 2 {
		t.Errorf("second run stdout %q, want two unchanged lines", out)
	}
	if second := snapshot(t, dir); !equalMaps(first, second) {
		t.Errorf("second run changed files:\n%v\nthen\n%v", first, second)
	}
}

func mustJSON(v any) []byte {
	data, err := json.Marshal(v)
	if err != nil {
		panic(err)
	}
	return data
}

func equalMaps(a, b map[string]string) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if b[k] != v {
			return false
		}
	}
	return true
}

// TestSetupCodexMerges: setup codex writes the project's config.toml and
// hooks.json and the user's trust records, keeping what others wrote
// (comments included), and a second run changes nothing.
func TestSetupCodexMerges(t *testing.T) {
	dir, home := t.TempDir(), t.TempDir()
	userCfg := "# my settings\nmodel = \"gpt-5\"\n\n[projects.\"/elsewhere\"]\ntrust_level = \"trusted\"\n\n[mcp_servers.github]\nurl = \"https://example.com/mcp\"\n"
	writeFile(t, filepath.Join(home, "config.toml"), userCfg)
	writeFile(t, filepath.Join(dir, ".codex", "config.toml"), "# project\n[mcp_servers.mailroom]\nurl = \"http://old/mcp\"\n\n[mcp_servers.mailroom.http_headers]\nAuthorization = \"Bearer "+secretToken+"\"\n\n[mcp_servers.docs]\ncommand = \"docs-server\"\n")
	writeFile(t, filepath.Join(dir, ".codex", "hooks.json"), `{"hooks": {"PostToolUse": [{"matcher": "^Bash$", "hooks": [{"type": "command", "command": "audit"}]}]}}`)

	out, err := runSetupIn(t, home, "codex", "--dir", dir)
	if err != nil {
		t.Fatalf("setup codex: %v", err)
	}
	if !strings.Contains(out, "your own Codex config") || strings.Count(out, "wrote ") != 3 {
		t.Errorf("stdout %q, want three files written, the user's config named as such", out)
	}
	if !strings.Contains(out, "note: "+dir+" is in no git repository") {
		t.Errorf("stdout %q, want a note that codex exec wants a git repository", out)
	}
	files := snapshot(t, dir)
	for p, data := range files {
		if strings.Contains(data, secretToken) {
			t.Errorf("%s holds the token: %s", p, data)
		}
	}
	var project struct {
		MCPServers map[string]map[string]any `toml:"mcp_servers"`
	}
	cfg := files[filepath.Join(".codex", "config.toml")]
	if _, err := toml.Decode(cfg, &project); err != nil {
		t.Fatalf("project config %q: %v", cfg, err)
	}
	m := project.MCPServers["mailroom"]
	if project.MCPServers["docs"]["command"] != "docs-server" || m["url"] != "http://127.0.0.1:8080/mcp" ||
		m["bearer_token_env_var"] != "MAILROOM_TOKEN" || m["default_tools_approval_mode"] != "approve" || m["http_headers"] != nil ||
		!strings.HasPrefix(cfg, "# project\n") {
		t.Errorf("project config:\n%s\nwant docs kept, mailroom replaced (url, bearer_token_env_var, approval), the comment kept", cfg)
	}
	hooks := files[filepath.Join(".codex", "hooks.json")]
	if got := strings.Join(hookCommands(t, hooks, "PostToolUse"), ","); got != "audit,mailroom hook" {
		t.Errorf("PostToolUse hooks %q, want audit kept and mailroom's added", got)
	}
	if got := strings.Join(hookCommands(t, hooks, "Stop"), ","); got != "mailroom hook --wait 300" {
		t.Errorf("Stop hooks %q", got)
	}
	user := readFile(t, filepath.Join(home, "config.toml"))
	if !strings.HasPrefix(user, userCfg) || strings.Contains(user, secretToken) {
		t.Errorf("user config:\n%s\nwant what was there kept, no token", user)
	}
	var u struct {
		Projects map[string]map[string]string `toml:"projects"`
		Hooks    struct {
			State map[string]struct {
				Enabled     bool   `toml:"enabled"`
				TrustedHash string `toml:"trusted_hash"`
			} `toml:"state"`
		} `toml:"hooks"`
	}
	if _, err := toml.Decode(user, &u); err != nil {
		t.Fatal(err)
	}
	if u.Projects[dir]["trust_level"] != "trusted" || u.Projects["/elsewhere"]["trust_level"] != "trusted" {
		t.Errorf("projects %v, want %s and /elsewhere trusted", u.Projects, dir)
	}
	hooksPath := filepath.Join(dir, ".codex", "hooks.json")
	for _, key := range []string{"session_start:0:0", "user_prompt_submit:0:0", "post_tool_use:1:0", "stop:0:0"} {
		st, ok := u.Hooks.State[hooksPath+":"+key]
		if !ok || !st.Enabled || !strings.HasPrefix(st.TrustedHash, "sha256:") || len(st.TrustedHash) != len("sha256:")+64 {
			t.Errorf("hooks.state for %s: %+v (present %v), want enabled with a sha256 hash", key, st, ok)
		}
	}
	if len(u.Hooks.State) != 4 {
		t.Errorf("%d hook records, want 4", len(u.Hooks.State))
	}

	out, err = runSetupIn(t, home, "codex", "--dir", dir)
	if err != nil || strings.Contains(out, "wrote") {
		t.Fatalf("second setup codex: %v, stdout %q; want nothing written", err, out)
	}
	if again := snapshot(t, dir); !equalMaps(files, again) || readFile(t, filepath.Join(home, "config.toml")) != user {
		t.Errorf("second run changed files")
	}
}

// TestSetupCodexInRepository: in a git repository (here a subdirectory
// of one) setup codex adds no note about it.
func TestSetupCodexInRepository(t *testing.T) {
	repo := t.TempDir()
	if err := os.Mkdir(filepath.Join(repo, ".git"), 0o755); err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(repo, "sub")
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	out, err := runSetupIn(t, t.TempDir(), "codex", "--dir", dir)
	if err != nil || strings.Contains(out, "note:") {
		t.Errorf("setup codex in a repository: %v, stdout %q; want no note", err, out)
	}
}

// TestSetupDryRunWritesNothing: --dry-run says what it would write and
// leaves the directory and the user's Codex config as they were.
func TestSetupDryRunWritesNothing(t *testing.T) {
	for _, host := range []string{"claude", "codex"} {
		dir, home := t.TempDir(), t.TempDir()
		out, err := runSetupIn(t, home, host, "--dir", dir, "--dry-run")
		if err != nil {
			t.Fatalf("setup %s --dry-run: %v", host, err)
		}
		if !strings.Contains(out, "would write") || strings.Contains(out, "wrote") {
			t.Errorf("setup %s --dry-run stdout %q, want 'would write' lines", host, out)
		}
		if files := snapshot(t, dir); len(files) != 0 {
			t.Errorf("setup %s --dry-run wrote %v", host, files)
		}
		if files := snapshot(t, home); len(files) != 0 {
			t.Errorf("setup %s --dry-run wrote into CODEX_HOME: %v", host, files)
		}
	}
}

// TestSetupRefusesBrokenFiles: a file setup must merge into that does not
// parse is named in one line, and no file is written.
func TestSetupRefusesBrokenFiles(t *testing.T) {
	for _, tc := range []struct {
		host, file, data, want string
	}{
		{"claude", ".claude/settings.json", `{"hooks": {`, "settings.json is not valid JSON"},
		{"claude", ".mcp.json", `{"mcpServers": []}`, "mcpServers is not an object"},
		{"claude", ".claude/settings.json", `{"hooks": {"Stop": {"hooks": []}}}`, "hooks.Stop is not a list"},
		{"codex", ".codex/config.toml", "[mcp_servers\nurl=", "config.toml is not valid TOML"},
		{"codex", ".codex/config.toml", "mcp_servers = { mailroom = { url = \"x\" } }\n", "cannot replace"},
		{"codex", ".codex/hooks.json", `[]`, "hooks.json is not valid JSON"},
	} {
		dir, home := t.TempDir(), t.TempDir()
		writeFile(t, filepath.Join(dir, tc.file), tc.data)
		before := snapshot(t, dir)
		out, err := runSetupIn(t, home, tc.host, "--dir", dir)
		if err == nil || !strings.Contains(err.Error(), tc.want) || strings.Contains(err.Error(), "\n") || out != "" {
			t.Errorf("%s with %s %q: err %v, stdout %q; want one line naming %q", tc.host, tc.file, tc.data, err, out, tc.want)
		}
		if after := snapshot(t, dir); !equalMaps(before, after) || len(snapshot(t, home)) != 0 {
			t.Errorf("%s with broken %s: files changed to %v", tc.host, tc.file, after)
		}
	}
}

// TestMCPConfigHasNoToken: what mcp-config prints names MAILROOM_TOKEN,
// and the Claude command keeps the reference in single quotes.
func TestMCPConfigHasNoToken(t *testing.T) {
	url := "http://127.0.0.1:8080/mcp"
	want := map[string]string{
		"claude": "claude mcp add --transport http mailroom http://127.0.0.1:8080/mcp --header 'Authorization: Bearer ${MAILROOM_TOKEN}'\n",
		"codex":  "bearer_token_env_var = \"MAILROOM_TOKEN\"\ndefault_tools_approval_mode = \"approve\"\n",
		"cursor": `"Authorization": "Bearer ${env:MAILROOM_TOKEN}"`,
		"vscode": `"Authorization": "Bearer ${env:MAILROOM_TOKEN}"`,
	}
	for host, w := range want {
		if got := mcpConfigText(host, url); !strings.Contains(got, w) || !strings.Contains(got, url) {
			t.Errorf("%s: got %q, want it to hold %q", host, got, w)
		}
	}
}
