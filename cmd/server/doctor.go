package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"io/fs"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"

	"github.com/BurntSushi/toml"

	"mailroom/client"
)

// `mailroom doctor [--dir DIR]` checks, one line each, what an agent's
// setup needs: the server at MAILROOM_URL answers, MAILROOM_TOKEN is a
// member's token, that member exists and is not closed, and the hooks of
// `mailroom setup` are in DIR for the agent (or agents) set up there. It
// exits 1 naming what is wrong.

// doctorCheck is one line of doctor's report.
type doctorCheck struct {
	name string
	err  error
	ok   string
}

// runDoctor is `mailroom doctor`.
func defineDoctor(fl *flag.FlagSet, in *invocation) runFunc {
	dir := fl.String("dir", ".", "the project's `directory`")
	return func(ctx context.Context, args []string) error {
		if len(args) > 0 {
			return cliError("doctor: takes no argument (mailroom doctor -h)")
		}
		return runDoctor(ctx, *dir, in.getenv, in.stdout)
	}
}

// runDoctor checks the URL, the token, its member and the hooks in dir.
func runDoctor(ctx context.Context, dir string, getenv func(string) string, stdout io.Writer) error {
	abs, err := filepath.Abs(dir)
	if err != nil {
		return fmt.Errorf("doctor: --dir: %w", err)
	}
	var checks []doctorCheck
	base := strings.TrimRight(getenv("MAILROOM_URL"), "/")
	urlCheck := doctorCheck{name: "url"}
	if base == "" {
		urlCheck.err = errors.New("MAILROOM_URL is not set (the server's URL, e.g. http://127.0.0.1:8080)")
	} else if err := checkHealth(ctx, base); err != nil {
		urlCheck.err = fmt.Errorf("%s does not answer: %v", base, err)
	} else {
		urlCheck.ok = base + " answers"
	}
	checks = append(checks, urlCheck)

	tokenCheck, memberCheck := doctorCheck{name: "token"}, doctorCheck{name: "member"}
	switch {
	case urlCheck.err != nil:
		tokenCheck.err = errors.New("not checked: no server")
		memberCheck.err = errors.New("not checked: no server")
	case getenv(tokenEnv) == "":
		tokenCheck.err = errors.New("MAILROOM_TOKEN is not set (a member token)")
		memberCheck.err = errors.New("not checked: no token")
	default:
		mc, err := dialMember(ctx, getenv)
		if err != nil {
			tokenCheck.err = err
			memberCheck.err = errors.New("not checked: the token is refused")
			break
		}
		tokenCheck.ok = fmt.Sprintf("MAILROOM_TOKEN is member %s of team %s", mc.member, mc.team)
		memberCheck.ok, memberCheck.err = checkMember(ctx, mc)
	}
	checks = append(checks, tokenCheck, memberCheck, checkHooks(abs, getenv))

	var failed []string
	for _, c := range checks {
		line := fmt.Sprintf("ok    %-6s %s\n", c.name, c.ok)
		if c.err != nil {
			failed = append(failed, c.name)
			line = fmt.Sprintf("FAIL  %-6s %s\n", c.name, oneLine(c.err.Error()))
		}
		if _, err := io.WriteString(stdout, line); err != nil {
			return err
		}
	}
	if len(failed) > 0 {
		return fmt.Errorf("doctor: %s not right (see above)", strings.Join(failed, ", "))
	}
	return nil
}

// checkHealth asks base's /healthz.
func checkHealth(ctx context.Context, base string) error {
	rctx, cancel := context.WithTimeout(ctx, hookRequestTimeout)
	defer cancel()
	req, err := http.NewRequestWithContext(rctx, http.MethodGet, base+"/healthz", nil)
	if err != nil {
		return err
	}
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	defer res.Body.Close()
	if res.StatusCode != http.StatusOK {
		return fmt.Errorf("/healthz answered HTTP %d", res.StatusCode)
	}
	return nil
}

// checkMember finds the token's member in its team and checks it is not
// closed.
func checkMember(ctx context.Context, mc *memberClient) (string, error) {
	rctx, cancel := context.WithTimeout(ctx, hookRequestTimeout)
	defer cancel()
	res, err := mc.c.GetTeamWithResponse(rctx, mc.team)
	if err != nil {
		return "", fmt.Errorf("read team %s: %w", mc.team, err)
	}
	if res.JSON200 == nil {
		return "", apiError("read team "+mc.team, res.StatusCode(), res.Body)
	}
	for _, m := range res.JSON200.Members {
		if m.Name != mc.member {
			continue
		}
		if m.Status == client.MemberStatus("closed") {
			return "", fmt.Errorf("member %s of team %s is closed: its mail is refused", mc.member, mc.team)
		}
		return fmt.Sprintf("member %s of team %s is %s, %d unread", mc.member, mc.team, m.Status, m.Unread), nil
	}
	return "", fmt.Errorf("team %s has no member %s", mc.team, mc.member)
}

// checkHooks looks for setup's hooks in dir: Claude Code's, Codex's, or
// both, each complete, and the mailroom command they run on the PATH.
func checkHooks(dir string, getenv func(string) string) doctorCheck {
	c := doctorCheck{name: "hooks"}
	claudePath := filepath.Join(dir, ".claude", "settings.json")
	codexPath := filepath.Join(dir, ".codex", "hooks.json")
	var found, problems []string
	if n, err := countHooks(claudePath); err != nil {
		problems = append(problems, err.Error())
	} else if n > 0 {
		if n < len(mailroomHooks) {
			problems = append(problems, fmt.Sprintf("Claude Code: %s has %d of Mailroom's %d hooks; run mailroom setup claude", claudePath, n, len(mailroomHooks)))
		} else {
			found = append(found, "Claude Code")
		}
	}
	if n, err := countHooks(codexPath); err != nil {
		problems = append(problems, err.Error())
	} else if n > 0 {
		switch {
		case n < len(mailroomHooks):
			problems = append(problems, fmt.Sprintf("Codex: %s has %d of Mailroom's %d hooks; run mailroom setup codex", codexPath, n, len(mailroomHooks)))
		default:
			if err := checkCodexTrust(dir, codexPath, getenv); err != nil {
				problems = append(problems, err.Error())
			} else {
				found = append(found, "Codex")
			}
		}
	}
	if len(problems) == 0 && len(found) == 0 {
		c.err = fmt.Errorf("no hooks of Mailroom in %s (neither %s nor %s); run mailroom setup claude or mailroom setup codex there", dir, claudePath, codexPath)
		return c
	}
	if _, err := exec.LookPath("mailroom"); err != nil {
		problems = append(problems, "the hooks run `mailroom`, which is not on the PATH")
	}
	if len(problems) > 0 {
		c.err = errors.New(strings.Join(problems, "; "))
		return c
	}
	c.ok = fmt.Sprintf("installed for %s in %s", strings.Join(found, " and "), dir)
	return c
}

// countHooks counts the events of mailroomHooks that have a mailroom
// hook in the hooks file at path (0 when there is no file).
func countHooks(path string) (int, error) {
	data, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return 0, nil
	}
	if err != nil {
		return 0, err
	}
	var doc struct {
		Hooks map[string][]struct {
			Hooks []struct {
				Command string `json:"command"`
			} `json:"hooks"`
		} `json:"hooks"`
	}
	if err := json.Unmarshal(data, &doc); err != nil {
		return 0, fmt.Errorf("%s is not a hooks file (%v)", path, err)
	}
	n := 0
	for _, h := range mailroomHooks {
	groups:
		for _, g := range doc.Hooks[h.event] {
			for _, hd := range g.Hooks {
				if isMailroomHook(hd.Command) {
					n++
					break groups
				}
			}
		}
	}
	return n, nil
}

// checkCodexTrust checks the user's Codex config trusts dir and approves
// Mailroom's hooks in hooksPath as they are written now.
func checkCodexTrust(dir, hooksPath string, getenv func(string) string) error {
	userPath := filepath.Join(codexHome(getenv), "config.toml")
	data, err := os.ReadFile(userPath)
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return err
	}
	var cfg struct {
		Projects map[string]struct {
			TrustLevel string `toml:"trust_level"`
		} `toml:"projects"`
		Hooks struct {
			State map[string]struct {
				TrustedHash string `toml:"trusted_hash"`
			} `toml:"state"`
		} `toml:"hooks"`
	}
	if _, err := toml.NewDecoder(bytes.NewReader(data)).Decode(&cfg); err != nil {
		return fmt.Errorf("codex: %s is not valid TOML (%s)", userPath, oneLine(err.Error()))
	}
	if cfg.Projects[dir].TrustLevel != "trusted" {
		return fmt.Errorf("codex: %s does not trust %s, so Codex skips its hooks; run mailroom setup codex", userPath, dir)
	}
	hooks, _, _, err := readJSONObject(hooksPath)
	if err != nil {
		return err
	}
	placed, err := mergeHooks(hooks) // where setup would put them: where they are
	if err != nil {
		return err
	}
	for _, p := range placed {
		if cfg.Hooks.State[codexHookKey(hooksPath, p)].TrustedHash != codexHookHash(p.spec) {
			return fmt.Errorf("codex: %s does not approve Mailroom's %s hook as written, so Codex skips it; run mailroom setup codex", userPath, p.spec.event)
		}
	}
	return nil
}
