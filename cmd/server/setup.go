package main

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/BurntSushi/toml"
)

// `mailroom setup claude|codex [--dir DIR] [--url URL] [--dry-run]` writes
// Mailroom's MCP server and hooks into a project's own configuration
// files, merged with what is there: other servers, hooks and settings are
// kept, Mailroom's own entries replaced, never duplicated. No file gets a
// token: each names MAILROOM_TOKEN (docs/hooks.md, "mailroom setup").
//
// Codex runs a project's hooks only when the project is trusted and each
// hook approved in the user's own Codex config ($CODEX_HOME/config.toml,
// ~/.codex by default), so `setup codex` records both there and says so.

// hookCommand is the hook as the files name it: the binary on the PATH.
const hookCommand = "mailroom hook"

// stopWait is how long the Stop hook holds an idle agent for mail, and
// stopTimeout the host's bound on that hook (beyond the wait, the hook's
// own 2 s and the host's start-up of it).
const (
	stopWait    = 300
	stopTimeout = 330
	hookTimeout = 30
)

// hookSpec is one hook setup writes: the event and its command.
type hookSpec struct {
	event   string
	command string
	timeout int
}

// mailroomHooks are the hooks of both hosts. None has a matcher: both
// hosts then run it for every tool (Codex reads a matcher as a regular
// expression, where Claude Code's "*" is no valid one).
var mailroomHooks = []hookSpec{
	{"SessionStart", hookCommand, hookTimeout},
	{"UserPromptSubmit", hookCommand, hookTimeout},
	{"PostToolUse", hookCommand, hookTimeout},
	{"Stop", fmt.Sprintf("%s --wait %d", hookCommand, stopWait), stopTimeout},
}

// isMailroomHook tells setup's own hook commands from others': the
// mailroom binary (by any path) running its hook command.
func isMailroomHook(command string) bool {
	f := strings.Fields(command)
	return len(f) >= 2 && filepath.Base(f[0]) == "mailroom" && f[1] == "hook"
}

// fileChange is one file setup writes: its path, new content, what it
// holds of Mailroom's, and whether it differs from what is there.
type fileChange struct {
	path    string
	data    []byte
	mode    fs.FileMode
	what    string
	changed bool
}

// defineSetup is `mailroom setup claude|codex [--dir DIR] [--url URL] [--dry-run]`.
func defineSetup(fl *flag.FlagSet, in *invocation) runFunc {
	dir := fl.String("dir", ".", "the project's `directory`")
	url := fl.String("url", "", "the server's `URL` (default MAILROOM_URL)")
	dryRun := fl.Bool("dry-run", false, "print what would be written, write nothing")
	return func(ctx context.Context, args []string) error {
		if len(args) != 1 || (args[0] != "claude" && args[0] != "codex") {
			return cliError("setup: want one argument, claude or codex (mailroom setup -h)")
		}
		return runSetup(args[0], *dir, *url, *dryRun, in.getenv, in.stdout)
	}
}

// runSetup writes (or, dry, shows) Mailroom's MCP server and hooks into
// the config files host reads in dir.
func runSetup(host, dir, url string, dryRun bool, getenv func(string) string, stdout io.Writer) error {
	if url == "" {
		url = getenv("MAILROOM_URL")
	}
	if url == "" {
		return cliError("setup: the server's URL is unknown: set MAILROOM_URL or give --url")
	}
	abs, err := filepath.Abs(dir)
	if err != nil {
		return fmt.Errorf("setup: --dir: %w", err)
	}
	if st, err := os.Stat(abs); err != nil || !st.IsDir() {
		return cliError("setup: --dir %s is no directory", dir)
	}
	var changes []fileChange
	if host == "claude" {
		changes, err = claudeChanges(abs, mcpURL(url))
	} else {
		changes, err = codexChanges(abs, mcpURL(url), codexHome(getenv))
	}
	if err != nil {
		return err
	}
	// A token in the environment must not land in any file, whatever the
	// URL or the files already held.
	if tok := getenv(tokenEnv); len(tok) >= 8 {
		for _, c := range changes {
			if c.changed && bytes.Contains(c.data, []byte(tok)) {
				return cliError("setup: %s would hold the value of %s; nothing written", c.path, tokenEnv)
			}
		}
	}
	verb := "wrote"
	if dryRun {
		verb = "would write"
	} else {
		for _, c := range changes {
			if c.changed {
				if err := writeFileAtomic(c.path, c.data, c.mode); err != nil {
					return fmt.Errorf("setup: %w", err)
				}
			}
		}
	}
	for _, c := range changes {
		v := verb
		if !c.changed {
			v = "unchanged"
		}
		if _, err := fmt.Fprintf(stdout, "%s %s: %s\n", v, c.path, c.what); err != nil {
			return err
		}
	}
	if host == "codex" && !inGitRepository(abs) {
		// Codex's own message for it ("Not inside a trusted directory")
		// reads as if the trust setup just wrote had not worked.
		if _, err := fmt.Fprintf(stdout, "note: %s is in no git repository, and codex exec starts only in one (git init), or with --skip-git-repo-check\n", abs); err != nil {
			return err
		}
	}
	return nil
}

// inGitRepository tells whether dir or a directory above it holds .git
// (a directory, or the file of a worktree).
func inGitRepository(dir string) bool {
	for {
		if _, err := os.Stat(filepath.Join(dir, ".git")); err == nil {
			return true
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return false
		}
		dir = parent
	}
}

// claudeChanges merges Mailroom into dir's .mcp.json (the server) and
// .claude/settings.json (the server enabled, its tools allowed, the hooks).
func claudeChanges(dir, url string) ([]fileChange, error) {
	mcpPath := filepath.Join(dir, ".mcp.json")
	mcp, old, mode, err := readJSONObject(mcpPath)
	if err != nil {
		return nil, err
	}
	servers, err := mcp.object("mcpServers")
	if err != nil {
		return nil, fmt.Errorf("setup: %s: %w", mcpPath, err)
	}
	servers.set(mcpServerName, claudeMCPServer(url))
	mcp.set("mcpServers", servers)
	mcpChange, err := jsonChange(mcpPath, mcp, old, mode,
		fmt.Sprintf("MCP server %q at %s, token from %s", mcpServerName, url, tokenRef))
	if err != nil {
		return nil, err
	}

	settingsPath := filepath.Join(dir, ".claude", "settings.json")
	settings, old, mode, err := readJSONObject(settingsPath)
	if err != nil {
		return nil, err
	}
	if err := addToList(settings, "enabledMcpjsonServers", mcpServerName); err != nil {
		return nil, fmt.Errorf("setup: %s: %w", settingsPath, err)
	}
	perms, err := settings.object("permissions")
	if err != nil {
		return nil, fmt.Errorf("setup: %s: %w", settingsPath, err)
	}
	if err := addToList(perms, "allow", "mcp__"+mcpServerName); err != nil {
		return nil, fmt.Errorf("setup: %s: permissions: %w", settingsPath, err)
	}
	settings.set("permissions", perms)
	if _, err := mergeHooks(settings); err != nil {
		return nil, fmt.Errorf("setup: %s: %w", settingsPath, err)
	}
	settingsChange, err := jsonChange(settingsPath, settings, old, mode,
		fmt.Sprintf("server %q enabled, its tools allowed (mcp__%s), hooks %s", mcpServerName, mcpServerName, hookSummary()))
	if err != nil {
		return nil, err
	}
	return []fileChange{mcpChange, settingsChange}, nil
}

// hookSummary names the hooks setup writes.
func hookSummary() string {
	var parts []string
	for _, h := range mailroomHooks {
		parts = append(parts, fmt.Sprintf("%s (%s)", h.event, h.command))
	}
	return strings.Join(parts, ", ")
}

// codexChanges merges Mailroom into dir's .codex/config.toml (the server,
// its tools approved) and .codex/hooks.json, and into the user's Codex
// config the records without which Codex skips both: the project trusted
// and each of Mailroom's hooks approved as written.
func codexChanges(dir, url, home string) ([]fileChange, error) {
	cfgPath := filepath.Join(dir, ".codex", "config.toml")
	cfg, mode, err := readTOML(cfgPath)
	if err != nil {
		return nil, err
	}
	newCfg, err := replaceTOMLTables(cfgPath, cfg, []string{"mcp_servers", mcpServerName}, codexMCPTable(url))
	if err != nil {
		return nil, err
	}
	cfgChange := fileChange{path: cfgPath, data: newCfg, mode: mode, changed: !bytes.Equal(cfg, newCfg),
		what: fmt.Sprintf("MCP server %q at %s, token from %s (bearer_token_env_var), its tools approved", mcpServerName, url, tokenEnv)}

	hooksPath := filepath.Join(dir, ".codex", "hooks.json")
	hooks, old, hmode, err := readJSONObject(hooksPath)
	if err != nil {
		return nil, err
	}
	placed, err := mergeHooks(hooks)
	if err != nil {
		return nil, fmt.Errorf("setup: %s: %w", hooksPath, err)
	}
	hooksChange, err := jsonChange(hooksPath, hooks, old, hmode, "hooks "+hookSummary())
	if err != nil {
		return nil, err
	}

	userPath := filepath.Join(home, "config.toml")
	user, umode, err := readTOML(userPath)
	if err != nil {
		return nil, err
	}
	if _, statErr := os.Stat(userPath); errors.Is(statErr, fs.ErrNotExist) {
		umode = 0o600
	}
	newUser, err := replaceTOMLTables(userPath, user, []string{"projects", dir}, "[projects."+tomlString(dir)+"]\ntrust_level = \"trusted\"\n")
	if err != nil {
		return nil, err
	}
	for _, p := range placed {
		key := codexHookKey(hooksPath, p)
		table := fmt.Sprintf("[hooks.state.%s]\nenabled = true\ntrusted_hash = %s\n", tomlString(key), tomlString(codexHookHash(p.spec)))
		if newUser, err = replaceTOMLTables(userPath, newUser, []string{"hooks", "state", key}, table); err != nil {
			return nil, err
		}
	}
	userChange := fileChange{path: userPath, data: newUser, mode: umode, changed: !bytes.Equal(user, newUser),
		what: fmt.Sprintf("your own Codex config: project %s trusted and Mailroom's %d hooks approved (Codex runs a project's hooks only then)", dir, len(placed))}
	return []fileChange{cfgChange, hooksChange, userChange}, nil
}

// codexHome is Codex's own directory: CODEX_HOME, else ~/.codex.
func codexHome(getenv func(string) string) string {
	if h := getenv("CODEX_HOME"); h != "" {
		return h
	}
	home := getenv("HOME")
	if home == "" {
		home, _ = os.UserHomeDir()
	}
	return filepath.Join(home, ".codex")
}

// placedHook is one of Mailroom's hooks where mergeHooks left it: its
// matcher group's index in the event's list (its handler is the group's
// only one).
type placedHook struct {
	spec  hookSpec
	group int
}

// codexEventLabels are Codex's keys of hook events in its trust records.
var codexEventLabels = map[string]string{
	"SessionStart":     "session_start",
	"UserPromptSubmit": "user_prompt_submit",
	"PostToolUse":      "post_tool_use",
	"Stop":             "stop",
}

// codexHookKey is the key of a hook's trust record in the user's Codex
// config: the hooks file's absolute path, the event's label, the group's
// and the handler's index.
func codexHookKey(hooksPath string, p placedHook) string {
	return fmt.Sprintf("%s:%s:%d:0", hooksPath, codexEventLabels[p.spec.event], p.group)
}

// codexHookHash is the hash Codex approves a command hook by: SHA-256 of
// the compact JSON, keys sorted, of the event's label and the hook's
// matcher group reduced to that one handler, unset fields left out and
// the timeout written out. A hook whose hash differs from its record is
// skipped by Codex as modified, so this must be Codex's own computation;
// the real-CLI tests in e2e check it.
func codexHookHash(h hookSpec) string {
	identity := map[string]any{
		"event_name": codexEventLabels[h.event],
		"hooks": []any{map[string]any{
			"type": "command", "command": h.command, "timeout": h.timeout, "async": false,
		}},
	}
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false) // serde_json escapes only what JSON requires
	_ = enc.Encode(identity) // maps of strings and numbers always encode
	sum := sha256.Sum256(bytes.TrimSuffix(b.Bytes(), []byte("\n")))
	return "sha256:" + hex.EncodeToString(sum[:])
}

// mergeHooks puts Mailroom's hooks into obj's "hooks" object (Claude
// Code's and Codex's shape: event → matcher groups → handlers). Others'
// groups and handlers stay where they are; a group that held only
// Mailroom's hook is replaced in place, so the indices of the others
// (which Codex's trust records name) do not move; Mailroom's handlers
// anywhere else are removed and its group appended.
func mergeHooks(obj *jsonObject) ([]placedHook, error) {
	hooks, err := obj.object("hooks")
	if err != nil {
		return nil, err
	}
	var placed []placedHook
	for _, h := range mailroomHooks {
		var groups []json.RawMessage
		if raw, ok := hooks.get(h.event); ok {
			if err := json.Unmarshal(raw, &groups); err != nil {
				return nil, fmt.Errorf("hooks.%s is not a list", h.event)
			}
		}
		handler := map[string]any{"type": "command", "command": h.command, "timeout": h.timeout}
		ours, err := json.Marshal(map[string]any{"hooks": []any{handler}})
		if err != nil {
			return nil, err
		}
		at := -1
		var kept []json.RawMessage
		for _, g := range groups {
			group, err := parseJSONObject(g)
			if err != nil {
				return nil, fmt.Errorf("hooks.%s: a matcher group is not an object", h.event)
			}
			var handlers []json.RawMessage
			if raw, ok := group.get("hooks"); ok {
				if err := json.Unmarshal(raw, &handlers); err != nil {
					return nil, fmt.Errorf("hooks.%s: a group's hooks is not a list", h.event)
				}
			}
			var others []json.RawMessage
			for _, hd := range handlers {
				var c struct {
					Command string `json:"command"`
				}
				if json.Unmarshal(hd, &c) == nil && isMailroomHook(c.Command) {
					continue
				}
				others = append(others, hd)
			}
			switch {
			case len(others) == len(handlers):
				kept = append(kept, g)
			case len(others) == 0 && at < 0:
				at = len(kept)
				kept = append(kept, ours)
			case len(others) == 0:
				// A second group of Mailroom's only: dropped.
			default:
				group.set("hooks", others)
				data, err := json.Marshal(group)
				if err != nil {
					return nil, err
				}
				kept = append(kept, data)
			}
		}
		if at < 0 {
			at = len(kept)
			kept = append(kept, ours)
		}
		hooks.set(h.event, kept)
		placed = append(placed, placedHook{spec: h, group: at})
	}
	obj.set("hooks", hooks)
	return placed, nil
}

// addToList adds s to obj's list of strings key, unless it is there.
func addToList(obj *jsonObject, key, s string) error {
	var list []json.RawMessage
	if raw, ok := obj.get(key); ok {
		if err := json.Unmarshal(raw, &list); err != nil {
			return fmt.Errorf("%s is not a list", key)
		}
	}
	for _, v := range list {
		var have string
		if json.Unmarshal(v, &have) == nil && have == s {
			return nil
		}
	}
	data, _ := json.Marshal(s) // a string always encodes
	obj.set(key, append(list, data))
	return nil
}

// jsonObject is a JSON object that keeps its keys in the order they came
// and every value it was not asked to change as it was.
type jsonObject struct {
	keys []string
	vals map[string]json.RawMessage
}

// parseJSONObject reads one JSON object; duplicate keys are refused.
func parseJSONObject(data []byte) (*jsonObject, error) {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	if t, err := dec.Token(); err != nil || t != json.Delim('{') {
		return nil, errors.New("not a JSON object")
	}
	o := &jsonObject{vals: map[string]json.RawMessage{}}
	for dec.More() {
		t, err := dec.Token()
		if err != nil {
			return nil, err
		}
		key, _ := t.(string)
		var v json.RawMessage
		if err := dec.Decode(&v); err != nil {
			return nil, err
		}
		if _, dup := o.vals[key]; dup {
			return nil, fmt.Errorf("key %q comes twice", key)
		}
		o.keys = append(o.keys, key)
		o.vals[key] = v
	}
	if _, err := dec.Token(); err != nil {
		return nil, err
	}
	if _, err := dec.Token(); err != io.EOF {
		return nil, errors.New("text after the JSON object")
	}
	return o, nil
}

func (o *jsonObject) get(key string) (json.RawMessage, bool) {
	v, ok := o.vals[key]
	return v, ok
}

// set puts v (marshalled) at key, in place if key is there, else last.
func (o *jsonObject) set(key string, v any) {
	data, err := json.Marshal(v)
	if err != nil {
		panic(fmt.Sprintf("setup: a value of %q does not encode: %v", key, err)) // only our own values come here
	}
	if _, ok := o.vals[key]; !ok {
		o.keys = append(o.keys, key)
	}
	o.vals[key] = data
}

// object returns the object at key (a new empty one when key is absent).
func (o *jsonObject) object(key string) (*jsonObject, error) {
	raw, ok := o.vals[key]
	if !ok || string(raw) == "null" {
		return &jsonObject{vals: map[string]json.RawMessage{}}, nil
	}
	obj, err := parseJSONObject(raw)
	if err != nil {
		return nil, fmt.Errorf("%s is not an object", key)
	}
	return obj, nil
}

// MarshalJSON writes the object with its keys in order.
func (o *jsonObject) MarshalJSON() ([]byte, error) {
	var b bytes.Buffer
	b.WriteByte('{')
	for i, k := range o.keys {
		if i > 0 {
			b.WriteByte(',')
		}
		kd, _ := json.Marshal(k) // a string always encodes
		b.Write(kd)
		b.WriteByte(':')
		b.Write(o.vals[k])
	}
	b.WriteByte('}')
	return b.Bytes(), nil
}

// readJSONObject reads the JSON object in path: an absent file is an
// empty object; a file that is no JSON object is an error naming it (and
// nothing is written).
func readJSONObject(path string) (*jsonObject, []byte, fs.FileMode, error) {
	data, mode, err := readFileMode(path)
	if err != nil {
		return nil, nil, 0, err
	}
	if len(bytes.TrimSpace(data)) == 0 {
		return &jsonObject{vals: map[string]json.RawMessage{}}, data, mode, nil
	}
	obj, err := parseJSONObject(data)
	if err != nil {
		return nil, nil, 0, cliError("setup: %s is not valid JSON (%v); fix it or move it away, nothing written", path, err)
	}
	return obj, data, mode, nil
}

// readFileMode reads path and its mode; an absent file is empty, 0644.
func readFileMode(path string) ([]byte, fs.FileMode, error) {
	data, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, 0o644, nil
	}
	if err != nil {
		return nil, 0, fmt.Errorf("setup: %w", err)
	}
	st, err := os.Stat(path)
	if err != nil {
		return nil, 0, fmt.Errorf("setup: %w", err)
	}
	return data, st.Mode().Perm(), nil
}

// jsonChange is the change of path to obj, indented by two spaces.
func jsonChange(path string, obj *jsonObject, old []byte, mode fs.FileMode, what string) (fileChange, error) {
	raw, err := json.Marshal(obj)
	if err != nil {
		return fileChange{}, err
	}
	var b bytes.Buffer
	if err := json.Indent(&b, raw, "", "  "); err != nil {
		return fileChange{}, err
	}
	b.WriteByte('\n')
	return fileChange{path: path, data: b.Bytes(), mode: mode, what: what, changed: !bytes.Equal(old, b.Bytes())}, nil
}

// readTOML reads a TOML file and checks that it parses; absent is empty.
func readTOML(path string) ([]byte, fs.FileMode, error) {
	data, mode, err := readFileMode(path)
	if err != nil {
		return nil, 0, err
	}
	var v map[string]any
	if err := toml.Unmarshal(data, &v); err != nil {
		return nil, 0, cliError("setup: %s is not valid TOML (%s); fix it or move it away, nothing written", path, oneLine(err.Error()))
	}
	return data, mode, nil
}

// replaceTOMLTables returns data with the tables named key (and those
// under it) taken out and table appended. The rest of the file stays as
// it was, comments included. If the key is also defined another way
// (inline, or by dotted keys), the result would not parse: that is an
// error naming the file, and nothing is written.
func replaceTOMLTables(path string, data []byte, key []string, table string) ([]byte, error) {
	lines := strings.SplitAfter(string(data), "\n")
	var out strings.Builder
	skipping := false
	for _, line := range lines {
		if h, ok := tomlHeader(line); ok {
			skipping = len(h) >= len(key) && slices.Equal(h[:len(key)], key)
		}
		if !skipping {
			out.WriteString(line)
		}
	}
	s := strings.TrimRight(out.String(), "\n")
	if s != "" {
		s += "\n\n"
	}
	s += table
	var v map[string]any
	if err := toml.Unmarshal([]byte(s), &v); err != nil {
		return nil, cliError("setup: %s defines %s in a way setup cannot replace (%s); nothing written", path, strings.Join(key, "."), oneLine(err.Error()))
	}
	return []byte(s), nil
}

// tomlHeader parses a table header line ([a.b."c"] or [[a.b]]) into its
// keys; ok is false for any other line.
func tomlHeader(line string) ([]string, bool) {
	s := strings.TrimSpace(line)
	if !strings.HasPrefix(s, "[") {
		return nil, false
	}
	// The header is the document's own: parse "<header>\n" alone, with a
	// value under it, and read back the one key path it defines.
	end := strings.LastIndex(s, "]")
	if end < 0 {
		return nil, false
	}
	header := s[:end+1]
	md, err := toml.Decode(header+"\n", new(map[string]any))
	if err != nil {
		return nil, false
	}
	keys := md.Keys()
	if len(keys) == 0 {
		return nil, false
	}
	return keys[len(keys)-1], true
}

// writeFileAtomic replaces path with data (mode perm), through a
// temporary file renamed over it, so a reader never sees half a file;
// the directory is made when missing.
func writeFileAtomic(path string, data []byte, perm fs.FileMode) error {
	dir := filepath.Dir(path)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	f, err := os.CreateTemp(dir, "."+filepath.Base(path)+".*")
	if err != nil {
		return err
	}
	defer os.Remove(f.Name()) // after a rename there is nothing left to remove
	if _, err := f.Write(data); err != nil {
		f.Close()
		return err
	}
	if err := f.Chmod(perm); err != nil {
		f.Close()
		return err
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	return os.Rename(f.Name(), path)
}
