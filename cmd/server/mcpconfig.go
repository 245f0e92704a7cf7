package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"strings"
)

// `mailroom mcp-config` prints what connects a coding agent to Mailroom's
// MCP endpoint. None of what it prints holds a token: every host is told
// to read it from the MAILROOM_TOKEN environment variable, so a member's
// token never lands in a file someone may commit or a shell history
// (docs/api.md, "mcp-config").

// Names shared by mcp-config, setup and doctor.
const (
	// mcpServerName is Mailroom's entry in every host's list of servers.
	mcpServerName = "mailroom"
	// tokenEnv names the variable every configuration reads the token from.
	tokenEnv = "MAILROOM_TOKEN"
	// tokenRef is the reference Claude Code expands in .mcp.json; printed
	// on a command line it stays in single quotes, so the shell keeps it.
	tokenRef = "${" + tokenEnv + "}"
)

// mcpURL is the MCP endpoint of the server at base.
func mcpURL(base string) string { return strings.TrimRight(base, "/") + "/mcp" }

// claudeMCPServer is Mailroom's entry of .mcp.json (Claude Code expands
// the ${MAILROOM_TOKEN} reference when it starts the server).
func claudeMCPServer(url string) map[string]any {
	return map[string]any{"type": "http", "url": url, "headers": map[string]any{"Authorization": "Bearer " + tokenRef}}
}

// codexMCPTable is the [mcp_servers.mailroom] table of a Codex
// config.toml. bearer_token_env_var makes Codex send the variable's value;
// default_tools_approval_mode "approve" lets Mailroom's tools run without
// a prompt, which `codex exec` (approval policy "never") requires: without
// it every call answers "MCP tool call requires approval".
func codexMCPTable(url string) string {
	return fmt.Sprintf("[mcp_servers.%s]\nurl = %s\nbearer_token_env_var = %s\ndefault_tools_approval_mode = \"approve\"\n",
		mcpServerName, tomlString(url), tomlString(tokenEnv))
}

// runMCPConfig is `mailroom mcp-config --team T --member M [--host H]`:
// the configuration block (or command) that connects host's agent to
// Mailroom's MCP endpoint as the member whose token is MAILROOM_TOKEN.
// The token is checked against --team and --member, never printed.
func runMCPConfig(ctx context.Context, getenv func(string) string, stdout io.Writer, team, member, host string) error {
	switch host {
	case "claude", "codex", "cursor", "vscode":
	default:
		return cliError("mcp-config: --host %q: want claude, codex, cursor or vscode", host)
	}
	mc, err := dialMember(ctx, getenv)
	if err != nil {
		return err
	}
	if mc.team != team || mc.member != member {
		return cliError("mcp-config: MAILROOM_TOKEN is %s of team %s, not %s of team %s", mc.member, mc.team, member, team)
	}
	_, err = io.WriteString(stdout, mcpConfigText(host, mcpURL(getenv("MAILROOM_URL"))))
	return err
}

// mcpConfigText is what mcp-config prints for host (one of the four it
// knows), url being the MCP endpoint.
func mcpConfigText(host, url string) string {
	switch host {
	case "claude":
		// Single quotes: the shell passes ${MAILROOM_TOKEN} on as written
		// and Claude Code expands it each time it connects.
		return fmt.Sprintf("claude mcp add --transport http %s %s --header 'Authorization: Bearer %s'\n", mcpServerName, shellQuote(url), tokenRef)
	case "codex":
		return "# ~/.codex/config.toml, or .codex/config.toml of a trusted project (mailroom setup codex writes it);\n" +
			"# Codex sends the token from MAILROOM_TOKEN in its environment.\n" + codexMCPTable(url)
	case "cursor":
		return "// .cursor/mcp.json; Cursor reads the token from MAILROOM_TOKEN in its environment\n" + indentJSON(map[string]any{"mcpServers": map[string]any{mcpServerName: map[string]any{
			"url": url, "headers": map[string]any{"Authorization": "Bearer ${env:" + tokenEnv + "}"}}}})
	default: // vscode
		return "// .vscode/mcp.json; VS Code reads the token from MAILROOM_TOKEN in its environment\n" + indentJSON(map[string]any{"servers": map[string]any{mcpServerName: map[string]any{
			"type": "http", "url": url, "headers": map[string]any{"Authorization": "Bearer ${env:" + tokenEnv + "}"}}}})
	}
}

// indentJSON is v as indented JSON with a final newline, & < > left as
// they are (they are no HTML here).
func indentJSON(v any) string {
	var b strings.Builder
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	enc.SetIndent("", "  ")
	_ = enc.Encode(v) // maps of strings always encode
	return b.String()
}

// shellQuote is s as one word for a POSIX shell: as is when it holds only
// characters no shell treats specially, else in single quotes.
func shellQuote(s string) string {
	if s != "" && strings.Trim(s, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-_./:@%+=,") == "" {
		return s
	}
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}

// tomlString is s as a TOML basic string.
func tomlString(s string) string {
	var b strings.Builder
	b.WriteByte('"')
	for _, r := range s {
		switch {
		case r == '"' || r == '\\':
			b.WriteByte('\\')
			b.WriteRune(r)
		case r < 0x20 || r == 0x7f:
			fmt.Fprintf(&b, `\u%04X`, r)
		default:
			b.WriteRune(r)
		}
	}
	b.WriteByte('"')
	return b.String()
}
