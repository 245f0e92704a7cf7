package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"net/http"
	"runtime/debug"
	"strings"

	"mailroom/client"
)

// The common admin acts from a shell, on the generated client like the
// mail commands: `team create|show`, `permission list|allow|deny`,
// `mcp-config` and `--version`. MAILROOM_URL, and MAILROOM_ADMIN_TOKEN (or
// MAILROOM_TOKEN) for the admin acts; errors are one line on standard
// error and exit 1.

// memberFlags collects repeated --member NAME:ROLE.
type memberFlags []client.MemberCreate

func (m *memberFlags) String() string { return fmt.Sprint(len(*m)) }

func (m *memberFlags) Set(v string) error {
	name, role, _ := strings.Cut(v, ":")
	if name == "" {
		return fmt.Errorf("--member %q: want NAME or NAME:ROLE", v)
	}
	mc := client.MemberCreate{Name: name}
	if role != "" {
		mc.Role = &role
	}
	*m = append(*m, mc)
	return nil
}

// dialAdmin is the client with the admin token.
func dialAdmin(getenv func(string) string) (*client.ClientWithResponses, error) {
	base := strings.TrimRight(getenv("MAILROOM_URL"), "/")
	token := getenv("MAILROOM_ADMIN_TOKEN")
	if token == "" {
		token = getenv("MAILROOM_TOKEN")
	}
	if base == "" || token == "" {
		return nil, fmt.Errorf("MAILROOM_URL and MAILROOM_ADMIN_TOKEN (or MAILROOM_TOKEN) must be set")
	}
	c, err := client.NewClientWithResponses(base+"/api/v1", client.Bearer(token), client.WithHTTPClient(&http.Client{Timeout: hookRequestTimeout}))
	if err != nil {
		return nil, fmt.Errorf("MAILROOM_URL: %w", err)
	}
	return c, nil
}

// printJSON writes v as indented JSON.
func printJSON(w io.Writer, v any) error {
	data, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return err
	}
	_, err = fmt.Fprintf(w, "%s\n", data)
	return err
}

// oneName checks a command's single positional argument.
func oneName(cmd, what string, args []string) (string, error) {
	if len(args) != 1 {
		return "", cliError("%s: want one argument, the %s (mailroom %s -h)", cmd, what, cmd)
	}
	return args[0], nil
}

// defineTeamCreate is `mailroom team create NAME [--member NAME:ROLE]...
// [--workspace] [--model PROVIDER:NAME] [--json]`.
func defineTeamCreate(fs *flag.FlagSet, in *invocation) runFunc {
	var members memberFlags
	fs.Var(&members, "member", "a member, `NAME:ROLE` (repeated)")
	workspace := fs.Bool("workspace", false, "give the team a workspace")
	model := fs.String("model", "", "the team's `model`, PROVIDER:NAME")
	asJSON := fs.Bool("json", false, "print the REST answer as JSON")
	return func(ctx context.Context, args []string) error {
		name, err := oneName("team create", "team's name", args)
		if err != nil {
			return err
		}
		body := client.TeamCreate{Name: name}
		if len(members) > 0 {
			body.Members = (*[]client.MemberCreate)(&members)
		}
		if *workspace {
			body.Workspace = workspace
		}
		if *model != "" {
			provider, mname, ok := strings.Cut(*model, ":")
			if !ok || provider == "" || mname == "" {
				return cliError("team create: --model %q: want PROVIDER:NAME, e.g. openai:gpt-4", *model)
			}
			body.Model = &client.ModelSettings{Provider: client.ModelSettingsProvider(provider), Name: &mname}
		}
		c, err := dialAdmin(in.getenv)
		if err != nil {
			return err
		}
		res, err := c.CreateTeamWithResponse(ctx, body)
		if err != nil {
			return fmt.Errorf("team create: %w", err)
		}
		if res.JSON201 == nil {
			return apiError("team create", res.StatusCode(), res.Body)
		}
		if *asJSON {
			return printJSON(in.stdout, res.JSON201)
		}
		for _, m := range res.JSON201.Members {
			if _, err := fmt.Fprintf(in.stdout, "%s %s\n", m.Name, m.Token); err != nil {
				return err
			}
		}
		return nil
	}
}

// defineTeamList is `mailroom team list [--json]`.
func defineTeamList(fs *flag.FlagSet, in *invocation) runFunc {
	asJSON := fs.Bool("json", false, "print the REST answer as JSON")
	return func(ctx context.Context, args []string) error {
		if len(args) > 0 {
			return cliError("team list: unexpected argument %q", args[0])
		}
		c, err := dialAdmin(in.getenv)
		if err != nil {
			return err
		}
		res, err := c.ListTeamsWithResponse(ctx)
		if err != nil {
			return fmt.Errorf("team list: %w", err)
		}
		if res.JSON200 == nil {
			return apiError("team list", res.StatusCode(), res.Body)
		}
		if *asJSON {
			return printJSON(in.stdout, res.JSON200)
		}
		if len(res.JSON200.Teams) == 0 {
			_, err := fmt.Fprintln(in.stdout, "No teams.")
			return err
		}
		var b strings.Builder
		for _, t := range res.JSON200.Teams {
			fmt.Fprintf(&b, "%-24s %3d members  created %s\n", escapeControls(t.Name), t.Members, t.CreatedAt.UTC().Format("2006-01-02 15:04:05 UTC"))
		}
		_, err = io.WriteString(in.stdout, b.String())
		return err
	}
}

// defineTeamShow is `mailroom team show NAME [--json]`.
func defineTeamShow(fs *flag.FlagSet, in *invocation) runFunc {
	asJSON := fs.Bool("json", false, "print the team's document (the REST answer) as JSON")
	return func(ctx context.Context, args []string) error {
		name, err := oneName("team show", "team's name", args)
		if err != nil {
			return err
		}
		c, err := dialAdmin(in.getenv)
		if err != nil {
			return err
		}
		res, err := c.GetTeamWithResponse(ctx, name)
		if err != nil {
			return fmt.Errorf("team show: %w", err)
		}
		if res.JSON200 == nil {
			return apiError("team show", res.StatusCode(), res.Body)
		}
		if *asJSON {
			return printJSON(in.stdout, res.JSON200)
		}
		_, err = io.WriteString(in.stdout, teamSummary(res.JSON200))
		return err
	}
}

// teamSummary is a team's document for a person: what it is, its
// members one line each, its requests. Text a member wrote (roles, the
// purpose, payloads) has its control characters escaped.
func teamSummary(t *client.Team) string {
	var b strings.Builder
	fmt.Fprintf(&b, "Team %s, created %s\n", escapeControls(t.Name), t.CreatedAt.UTC().Format("2006-01-02 15:04:05 UTC"))
	if t.Purpose != "" {
		fmt.Fprintf(&b, "Purpose: %s\n", oneLine(escapeControls(t.Purpose)))
	}
	model := string(t.Model.Provider)
	if t.Model.Name != nil {
		model += ":" + *t.Model.Name
	}
	ws := "no"
	if t.Workspace {
		ws = "yes"
	}
	fmt.Fprintf(&b, "Model: %s; workspace: %s; host permission: %s\n", model, ws, t.HostPermission)
	fmt.Fprintf(&b, "Tokens spent: %d in, %d out (limit %d); turns limit %d per member\n", t.Usage.InputTokens, t.Usage.OutputTokens, t.Limits.ModelTokens, t.Limits.Turns)
	if t.Damaged {
		b.WriteString("Damaged: its stored state failed validation at start; it is served read-only.\n")
	}
	fmt.Fprintf(&b, "\nMembers (%d):\n", len(t.Members))
	for _, m := range t.Members {
		wake := ""
		switch {
		case m.WakeHeld:
			wake = ", wake held"
		case m.Wake:
			wake = ", woken on mail"
		}
		if m.McpSessions > 0 {
			wake += fmt.Sprintf(", %d MCP sessions", m.McpSessions)
		}
		fmt.Fprintf(&b, "  %-12s %-10s inbox %d (%d unread), %d turns%s  %s\n", m.Name, m.Status, m.InboxLength, m.Unread, m.Turns, wake, oneLine(escapeControls(m.Role)))
	}
	if len(t.Requests) > 0 {
		fmt.Fprintf(&b, "\nRequests (%d):\n", len(t.Requests))
		for _, r := range t.Requests {
			fmt.Fprintf(&b, "  %-10s %-8s %s -> %s, %s\n", r.RequestID, r.Kind, r.Sender, r.Target, r.Status)
		}
	}
	return b.String()
}

// defineTeamDelete is `mailroom team delete NAME`.
func defineTeamDelete(fs *flag.FlagSet, in *invocation) runFunc {
	return func(ctx context.Context, args []string) error {
		name, err := oneName("team delete", "team's name", args)
		if err != nil {
			return err
		}
		c, err := dialAdmin(in.getenv)
		if err != nil {
			return err
		}
		res, err := c.DeleteTeamWithResponse(ctx, name)
		if err != nil {
			return fmt.Errorf("team delete: %w", err)
		}
		if res.StatusCode() != http.StatusNoContent {
			return apiError("team delete", res.StatusCode(), res.Body)
		}
		_, err = fmt.Fprintf(in.stdout, "Deleted team %s.\n", name)
		return err
	}
}

// definePermissionList is `mailroom permission list TEAM`.
func definePermissionList(fs *flag.FlagSet, in *invocation) runFunc {
	return func(ctx context.Context, args []string) error {
		team, err := oneName("permission list", "team's name", args)
		if err != nil {
			return err
		}
		c, err := dialAdmin(in.getenv)
		if err != nil {
			return err
		}
		res, err := c.ListPermissionsWithResponse(ctx, team)
		if err != nil {
			return fmt.Errorf("permission list: %w", err)
		}
		if res.JSON200 == nil {
			return apiError("permission list", res.StatusCode(), res.Body)
		}
		return printJSON(in.stdout, res.JSON200)
	}
}

// definePermissionDecide is `mailroom permission allow|deny TEAM ID`.
func definePermissionDecide(allow bool) func(fs *flag.FlagSet, in *invocation) runFunc {
	verb := "deny"
	if allow {
		verb = "allow"
	}
	return func(fs *flag.FlagSet, in *invocation) runFunc {
		return func(ctx context.Context, args []string) error {
			if len(args) != 2 {
				return cliError("permission %s: want two arguments, TEAM and the permission's ID (mailroom permission %s -h)", verb, verb)
			}
			c, err := dialAdmin(in.getenv)
			if err != nil {
				return err
			}
			res, err := c.DecidePermissionWithResponse(ctx, args[0], args[1], client.PermissionDecision{Allow: allow})
			if err != nil {
				return fmt.Errorf("permission %s: %w", verb, err)
			}
			if res.JSON200 == nil {
				return apiError("permission "+verb, res.StatusCode(), res.Body)
			}
			return printJSON(in.stdout, res.JSON200)
		}
	}
}

// defineMCPConfig is `mailroom mcp-config --team T --member M [--host H]`.
func defineMCPConfig(fs *flag.FlagSet, in *invocation) runFunc {
	team := fs.String("team", "", "the member's `team`")
	member := fs.String("member", "", "the `member`")
	host := fs.String("host", "claude", "the coding agent: claude, codex, cursor or vscode")
	return func(ctx context.Context, args []string) error {
		if len(args) > 0 || *team == "" || *member == "" {
			return cliError("mcp-config: usage: mcp-config --team TEAM --member MEMBER [--host claude|codex|cursor|vscode]")
		}
		return runMCPConfig(ctx, in.getenv, in.stdout, *team, *member, *host)
	}
}

// version is the module's version and the commit the binary was built
// from, as the Go toolchain recorded them.
func version() string {
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		return "mailroom (no build information)"
	}
	rev, modified := "unknown", ""
	for _, s := range bi.Settings {
		switch s.Key {
		case "vcs.revision":
			rev = s.Value
		case "vcs.modified":
			if s.Value == "true" {
				modified = " (modified)"
			}
		}
	}
	return fmt.Sprintf("mailroom %s, commit %s%s, %s", bi.Main.Version, rev, modified, bi.GoVersion)
}
