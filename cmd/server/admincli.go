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

// runTeam is `mailroom team create NAME ...` and `mailroom team show NAME`.
func runTeam(ctx context.Context, args []string, getenv func(string) string, stdout io.Writer) error {
	const usage = "usage: team create NAME [--member NAME:ROLE]... [--workspace] [--model PROVIDER:NAME] [--json] | team show NAME"
	if len(args) < 2 {
		return cliError("team: %s", usage)
	}
	verb, name := args[0], args[1]
	c, err := dialAdmin(getenv)
	if err != nil {
		return err
	}
	switch verb {
	case "show":
		if len(args) != 2 {
			return cliError("team: %s", usage)
		}
		res, err := c.GetTeamWithResponse(ctx, name)
		if err != nil {
			return fmt.Errorf("team show: %w", err)
		}
		if res.JSON200 == nil {
			return apiError("team show", res.StatusCode(), res.Body)
		}
		return printJSON(stdout, res.JSON200)
	case "create":
		fs := flag.NewFlagSet("team create", flag.ContinueOnError)
		fs.SetOutput(io.Discard)
		var members memberFlags
		fs.Var(&members, "member", "a member, NAME:ROLE (repeated)")
		workspace := fs.Bool("workspace", false, "give the team a workspace")
		model := fs.String("model", "", "the team's model, PROVIDER:NAME")
		asJSON := fs.Bool("json", false, "print the REST answer as JSON")
		if err := fs.Parse(args[2:]); err != nil || fs.NArg() > 0 {
			return cliError("team create: %s", usage)
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
		res, err := c.CreateTeamWithResponse(ctx, body)
		if err != nil {
			return fmt.Errorf("team create: %w", err)
		}
		if res.JSON201 == nil {
			return apiError("team create", res.StatusCode(), res.Body)
		}
		if *asJSON {
			return printJSON(stdout, res.JSON201)
		}
		for _, m := range res.JSON201.Members {
			if _, err := fmt.Fprintf(stdout, "%s %s\n", m.Name, m.Token); err != nil {
				return err
			}
		}
		return nil
	}
	return cliError("team: %s", usage)
}

// runPermission is `mailroom permission list TEAM` and `allow|deny TEAM ID`.
func runPermission(ctx context.Context, args []string, getenv func(string) string, stdout io.Writer) error {
	const usage = "usage: permission list TEAM | permission allow TEAM ID | permission deny TEAM ID"
	if len(args) < 2 {
		return cliError("permission: %s", usage)
	}
	c, err := dialAdmin(getenv)
	if err != nil {
		return err
	}
	switch {
	case args[0] == "list" && len(args) == 2:
		res, err := c.ListPermissionsWithResponse(ctx, args[1])
		if err != nil {
			return fmt.Errorf("permission list: %w", err)
		}
		if res.JSON200 == nil {
			return apiError("permission list", res.StatusCode(), res.Body)
		}
		return printJSON(stdout, res.JSON200)
	case (args[0] == "allow" || args[0] == "deny") && len(args) == 3:
		res, err := c.DecidePermissionWithResponse(ctx, args[1], args[2], client.PermissionDecision{Allow: args[0] == "allow"})
		if err != nil {
			return fmt.Errorf("permission %s: %w", args[0], err)
		}
		if res.JSON200 == nil {
			return apiError("permission "+args[0], res.StatusCode(), res.Body)
		}
		return printJSON(stdout, res.JSON200)
	}
	return cliError("permission: %s", usage)
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
