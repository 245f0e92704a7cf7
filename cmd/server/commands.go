package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"sort"
	"strings"
)

// The command table: every subcommand of `mailroom` is one entry of
// commands, which is all `mailroom help`, `mailroom CMD -h` and the
// dispatch read. A new subcommand is one more entry (and its define
// function); nothing else needs to change.

// invocation is what a command reads and writes besides its arguments.
type invocation struct {
	getenv         func(string) string
	stdin          io.Reader
	stdout, stderr io.Writer
}

// runFunc runs a command once its flags are parsed; args are its
// positional arguments, wherever they stood among the flags.
type runFunc func(ctx context.Context, args []string) error

// exitRule says how a command's failure becomes the exit status.
type exitRule int

const (
	// exitsConventional: 2 for a usage mistake, 3 for a data directory a
	// server holds, 1 for any other failure (report).
	exitsConventional exitRule = iota
	// exitsOne: any failure, a usage mistake included, is exit 1: the
	// mail and admin commands, which agents run and whose contract is
	// "one line on standard error, exit 1" (docs/hooks.md).
	exitsOne
	// exitsZero: a failure is one line on standard error and exit 0; a
	// Claude Code hook that fails must not break the session.
	exitsZero
)

// command is one subcommand of `mailroom`.
type command struct {
	name    string   // the words after `mailroom`: "inbox", "team create"
	args    string   // its positional arguments in the synopsis, e.g. "NAME"
	summary string   // one line, for `mailroom help`
	env     []string // the environment variables it reads (envHelp says what each is)
	example string   // command lines, one per line
	exits   exitRule
	// define adds the command's flags to fs and returns what runs it once
	// fs has parsed the arguments. Help calls it too, to list the flags,
	// with an environment that is empty (no secret becomes a default).
	define func(fs *flag.FlagSet, in *invocation) runFunc
	// raw, in place of define, is a command that parses its own flags
	// (and prints them for -h on its stderr argument).
	raw func(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error
}

// commands is every subcommand, in the order `mailroom help` lists them.
var commands = []command{
	{name: "hook", summary: "Claude Code hook: the member's unread letters for the event on standard input",
		env: memberEnv, exits: exitsZero, define: defineHook,
		example: `echo '{"hook_event_name":"PostToolUse"}' | mailroom hook
mailroom hook --wait 300   # as the Stop hook: idle up to 5 minutes for a letter`},
	{name: "inbox", summary: "print the member's letters (quoted, as the hook shows them) or their JSON",
		env: memberEnv, exits: exitsOne, define: defineInbox,
		example: `mailroom inbox --unread --mark-read
mailroom inbox --wait 60 --json`},
	{name: "send", args: "NAME BODY|-", summary: "send a letter as the member and print its id (BODY - reads standard input)",
		env: memberEnv, exits: exitsOne, define: defineSend,
		example: `mailroom send lead "tests pass; ready for review"
git diff --stat | mailroom send lead -
mailroom send --in-reply-to lead-3 --ack reviewer "please re-run the tests"`},
	{name: "ack", args: "ID done|blocked|rejected", summary: "acknowledge a letter of the member's inbox that asked for it, with an outcome",
		env: memberEnv, exits: exitsOne, define: defineAck,
		example: `mailroom ack reader-3 done --note "tests pass"
mailroom ack reader-4 blocked --note "needs the API key"`},
	{name: "archive", args: "[ID]", summary: "move the member's read letters through ID (default: its read cursor) out of the inbox; --list reads the archive",
		env: memberEnv, exits: exitsOne, define: defineArchive,
		example: `mailroom archive            # every letter read so far
mailroom archive reader-12
mailroom archive --list --after reader-3 --limit 20`},
	{name: "reserve", args: "PATTERN...", summary: "reserve files (glob patterns) for the member; refused whole when another member holds any",
		env: memberEnv, exits: exitsOne, define: defineReserve,
		example: `mailroom reserve 'internal/store/**' cmd/main.go --ttl 2h --reason "store rework"
mailroom reserve 'docs/**' --shared`},
	{name: "release", args: "ID|--all", summary: "release one of the member's reservations, or all of them",
		env: memberEnv, exits: exitsOne, define: defineRelease,
		example: `mailroom release res-3
mailroom release --all`},
	{name: "reservations", summary: "the team's live reservations: id, holder, kind, expiry, patterns",
		env: memberEnv, exits: exitsOne, define: defineReservations,
		example: `mailroom reservations
mailroom reservations --json`},
	{name: "guard", summary: "git pre-commit check: exit 1 naming each staged path another member reserved",
		env: memberEnv, exits: exitsOne, define: defineGuard,
		example: `mailroom guard            # the server unreachable: a warning, exit 0
mailroom guard --strict   # then exit 1`},
	{name: "guard install", summary: "add the guard to the repository's pre-commit hook, keeping the hook's content",
		env: memberEnv, exits: exitsOne, define: defineGuardInstall,
		example: `mailroom guard install`},
	searchCommand, // searchcli.go
	{name: "team create", args: "NAME", summary: "create a team and print each member's token",
		env: adminEnv, exits: exitsOne, define: defineTeamCreate,
		example: `mailroom team create lab --member reader:"reads the source" --workspace`},
	{name: "team list", summary: "list the teams, newest first",
		env: adminEnv, exits: exitsOne, define: defineTeamList,
		example: `mailroom team list`},
	{name: "team show", args: "NAME", summary: "a team's members, model, limits and requests (--json: the document)",
		env: adminEnv, exits: exitsOne, define: defineTeamShow,
		example: `mailroom team show lab
mailroom team show lab --json`},
	{name: "team delete", args: "NAME", summary: "delete a team with its mail, turns and workspace",
		env: adminEnv, exits: exitsOne, define: defineTeamDelete,
		example: `mailroom team delete lab`},
	{name: "permission list", args: "TEAM", summary: "the team's host permissions (run_main asking a person), as JSON",
		env: adminEnv, exits: exitsOne, define: definePermissionList,
		example: `mailroom permission list lab`},
	{name: "permission allow", args: "TEAM ID", summary: "allow a pending permission",
		env: adminEnv, exits: exitsOne, define: definePermissionDecide(true),
		example: `mailroom permission allow lab perm-1`},
	{name: "permission deny", args: "TEAM ID", summary: "deny a pending permission",
		env: adminEnv, exits: exitsOne, define: definePermissionDecide(false),
		example: `mailroom permission deny lab perm-1`},
	{name: "mcp-config", summary: "the block (or command) that connects a coding agent to /mcp as the member",
		env: memberEnv, exits: exitsOne, define: defineMCPConfig,
		example: `MAILROOM_TOKEN=$READER_TOKEN mailroom mcp-config --team lab --member reader --host codex`},
	{name: "setup", args: "claude|codex", summary: "write Mailroom's MCP server and hooks into a project's config files (no token)",
		env: []string{"MAILROOM_URL", "MAILROOM_TOKEN", "CODEX_HOME"}, exits: exitsOne, define: defineSetup,
		example: `MAILROOM_URL=http://127.0.0.1:8080 mailroom setup claude --dir . --dry-run`},
	{name: "doctor", summary: "check the URL, the token, its member and the hooks of a project, one line each",
		env: memberEnv, exits: exitsOne, define: defineDoctor,
		example: `mailroom doctor --dir .`},
	{name: "healthcheck", summary: "exit 0 when a server answers /healthz (for containers without curl)",
		env: []string{"MAILROOM_ADDR"}, exits: exitsConventional, define: defineHealthcheck,
		example: `mailroom healthcheck --addr 127.0.0.1:8080`},
	{name: "scenario", args: "agent-teams|team-protocols", summary: "run a lesson scenario without a server and print its result",
		env: []string{"MAILROOM_LOG_LEVEL", "ANTHROPIC_API_KEY", "OPENAI_API_KEY", "OPENAI_BASE_URL"}, exits: exitsConventional, raw: runScenario,
		example: `mailroom scenario team-protocols --plan reject
mailroom scenario agent-teams --model openai:gpt-4.1-mini`},
	{name: "import", summary: "copy a file-store data directory into an empty PostgreSQL database",
		env: []string{"MAILROOM_DATA", "MAILROOM_DATABASE_URL"}, exits: exitsConventional, raw: runImport,
		example: `mailroom import --data ./data --database-url postgres://mailroom:PASSWORD@db:5432/mailroom`},
}

// memberEnv and adminEnv are the environments of the member and the
// admin commands.
var (
	memberEnv = []string{"MAILROOM_URL", "MAILROOM_TOKEN"}
	adminEnv  = []string{"MAILROOM_URL", "MAILROOM_ADMIN_TOKEN", "MAILROOM_TOKEN"}
)

// envHelp describes the environment variables commands read.
var envHelp = map[string]string{
	"MAILROOM_URL":          "the server's URL, e.g. http://127.0.0.1:8080",
	"MAILROOM_TOKEN":        "a member's token (the admin commands use it when MAILROOM_ADMIN_TOKEN is unset)",
	"MAILROOM_ADMIN_TOKEN":  "the admin token",
	"MAILROOM_ADDR":         "the server's host:port (default " + defaultAddr + ")",
	"MAILROOM_DATA":         "the file store's data directory (default " + defaultDataDir + ")",
	"MAILROOM_DATABASE_URL": "a PostgreSQL URL",
	"MAILROOM_LOG_LEVEL":    "debug, info, warn or error",
	"ANTHROPIC_API_KEY":     "credentials of --model anthropic:…",
	"OPENAI_API_KEY":        "credentials of --model openai:…",
	"OPENAI_BASE_URL":       "an OpenAI-compatible server for --model openai:…, e.g. http://localhost:11434/v1",
}

// isHelp is a request for help in place of a flag.
func isHelp(arg string) bool { return arg == "-h" || arg == "-help" || arg == "--help" }

// lookup finds the command named by the first words of args (the longest
// name wins) and returns it with the arguments after its name.
func lookup(args []string) (*command, []string) {
	var best *command
	words := 0
	for i := range commands {
		name := strings.Fields(commands[i].name)
		if len(name) > len(args) || len(name) <= words {
			continue
		}
		match := true
		for j, w := range name {
			if args[j] != w {
				match = false
				break
			}
		}
		if match {
			best, words = &commands[i], len(name)
		}
	}
	if best == nil {
		return nil, args
	}
	return best, args[words:]
}

// group is the commands whose name begins with word and more ("team"
// gives team create, team list, ...).
func group(word string) []*command {
	var g []*command
	for i := range commands {
		if strings.HasPrefix(commands[i].name, word+" ") {
			g = append(g, &commands[i])
		}
	}
	return g
}

// runCommand runs the subcommand args name; ok is false when args name
// none (then the caller serves, or reports the unknown command).
func runCommand(ctx context.Context, args []string, in *invocation) (ok bool, err error) {
	if len(args) == 0 {
		return false, nil
	}
	if args[0] == "help" {
		return true, help(args[1:], in.stdout)
	}
	c, rest := lookup(args)
	if c == nil {
		g := group(args[0])
		if len(g) == 0 {
			return false, nil
		}
		if len(args) > 1 && isHelp(args[1]) {
			return true, printGroup(in.stdout, args[0], g)
		}
		names := make([]string, len(g))
		for i, c := range g {
			names[i] = strings.TrimPrefix(c.name, args[0]+" ")
		}
		what := "a verb is missing"
		if len(args) > 1 {
			what = fmt.Sprintf("unknown verb %q", args[1])
		}
		return true, g[0].exits.apply(args[0], usageErrorf("%s: %s; want %s (mailroom %s -h)", args[0], what, strings.Join(names, ", "), args[0]), in.stderr)
	}
	return true, c.execute(ctx, rest, in)
}

// execute parses args into the command's flags and runs it.
func (c *command) execute(ctx context.Context, args []string, in *invocation) error {
	if c.raw != nil {
		for _, a := range args {
			if a == "--" {
				break
			}
			if isHelp(a) {
				return c.printHelp(in.stdout)
			}
		}
		return c.exits.apply(c.name, c.raw(ctx, args, in.getenv, in.stdout, in.stderr), in.stderr)
	}
	fs := flag.NewFlagSet("mailroom "+c.name, flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	run := c.define(fs, in)
	pos, err := parseInterspersed(fs, args)
	switch {
	case errors.Is(err, flag.ErrHelp):
		return c.printHelp(in.stdout)
	case err != nil:
		err = usageErrorf("%s: %v (mailroom %s -h)", c.name, err, c.name)
	default:
		err = run(ctx, pos)
	}
	return c.exits.apply(c.name, err, in.stderr)
}

// apply turns a command's error into what report makes of it under the
// rule.
func (r exitRule) apply(name string, err error, stderr io.Writer) error {
	if err == nil {
		return nil
	}
	switch r {
	case exitsOne:
		if errors.As(err, new(*usageError)) {
			return errors.New(err.Error()) // exit 1, not 2
		}
	case exitsZero:
		fmt.Fprintf(stderr, "mailroom %s: %s\n", name, oneLine(err.Error()))
		return nil
	}
	return err
}

// parseInterspersed parses args into fs with flags allowed after the
// positional arguments (`send bob hi --to x` as `send --to x bob hi`);
// after "--" every argument is positional.
func parseInterspersed(fs *flag.FlagSet, args []string) ([]string, error) {
	var pos []string
	for {
		if err := fs.Parse(args); err != nil {
			return nil, err
		}
		rest := fs.Args()
		if len(rest) == 0 {
			return pos, nil
		}
		if used := len(args) - len(rest); used > 0 && args[used-1] == "--" {
			return append(pos, rest...), nil
		}
		pos = append(pos, rest[0])
		args = rest[1:]
	}
}

// noEnv is the environment help defines flags under, so that a default
// shown is the built-in one and never a token from the environment.
func noEnv(string) string { return "" }

// help is `mailroom help [COMMAND]`.
func help(topic []string, w io.Writer) error {
	topic = strings.Fields(strings.Join(topic, " ")) // "team create" as one argument too
	if len(topic) == 0 {
		return printOverview(w)
	}
	if c, rest := lookup(topic); c != nil && len(rest) == 0 {
		return c.printHelp(w)
	}
	if g := group(topic[0]); len(g) > 0 && len(topic) == 1 {
		return printGroup(w, topic[0], g)
	}
	return usageErrorf("help: no command %q; mailroom help lists them", strings.Join(topic, " "))
}

// printOverview is `mailroom -h`: every command with its line, then the
// server's flags.
func printOverview(w io.Writer) error {
	var b strings.Builder
	b.WriteString(`Mailroom hosts teams of AI agents: their mail, turns, tasks and workspace.

Usage:
  mailroom [flags]                  run the server (flags below)
  mailroom COMMAND [ARGS] [flags]   run a command (flags may follow the arguments)
  mailroom help COMMAND             a command's usage, flags, environment and example
                                    (also: mailroom COMMAND -h)
  mailroom --version                the version and commit

Commands:
`)
	width := 0
	for _, c := range commands {
		width = max(width, len(c.name))
	}
	for _, c := range commands {
		fmt.Fprintf(&b, "  %-*s  %s\n", width, c.name, c.summary)
	}
	b.WriteString("\nServer flags (each also an environment variable, which the flag overrides):\n")
	fs, _ := serveFlags(noEnv)
	writeFlags(&b, fs)
	_, err := io.WriteString(w, b.String())
	return err
}

// printGroup is `mailroom team -h`: the commands of one group.
func printGroup(w io.Writer, word string, g []*command) error {
	var b strings.Builder
	fmt.Fprintf(&b, "Usage: mailroom %s VERB [ARGS] [flags]\n\nVerbs:\n", word)
	width := 0
	for _, c := range g {
		width = max(width, len(c.name))
	}
	for _, c := range g {
		fmt.Fprintf(&b, "  %-*s  %s\n", width, c.name, c.summary)
	}
	fmt.Fprintf(&b, "\nmailroom %s VERB -h tells more of each.\n", word)
	_, err := io.WriteString(w, b.String())
	return err
}

// printHelp is `mailroom CMD -h`: usage, flags, environment, example.
func (c *command) printHelp(w io.Writer) error {
	fs := flag.NewFlagSet("mailroom "+c.name, flag.ContinueOnError)
	var rawFlags strings.Builder
	if c.raw != nil {
		// Its own usage text lists its flags.
		_ = c.raw(context.Background(), []string{"-h"}, noEnv, &rawFlags, &rawFlags)
	} else {
		c.define(fs, &invocation{getenv: noEnv, stdin: strings.NewReader(""), stdout: io.Discard, stderr: io.Discard})
	}
	var b strings.Builder
	synopsis := "mailroom " + c.name
	if c.args != "" {
		synopsis += " " + c.args
	}
	n := 0
	fs.VisitAll(func(*flag.Flag) { n++ })
	if n > 0 {
		synopsis += " [flags]"
	}
	fmt.Fprintf(&b, "Usage: %s\n\n%s.\n", synopsis, strings.ToUpper(c.summary[:1])+c.summary[1:])
	if n > 0 {
		b.WriteString("\nFlags (before or after the arguments; -- ends them):\n")
		writeFlags(&b, fs)
	}
	if rawFlags.Len() > 0 {
		b.WriteString("\n" + rawFlags.String())
	}
	if len(c.env) > 0 {
		b.WriteString("\nEnvironment:\n")
		width := 0
		for _, e := range c.env {
			width = max(width, len(e))
		}
		for _, e := range c.env {
			fmt.Fprintf(&b, "  %-*s  %s\n", width, e, envHelp[e])
		}
	}
	switch c.exits {
	case exitsOne:
		b.WriteString("\nExit status: 0 on success; 1 on any failure, with one line on standard error.\n")
	case exitsZero:
		b.WriteString("\nExit status: always 0; a failure is one line on standard error and no output.\n")
	default:
		b.WriteString("\nExit status: 0 on success, 2 on a usage mistake, 1 on any other failure.\n")
	}
	if c.example != "" {
		b.WriteString("\nExample:\n")
		for line := range strings.SplitSeq(c.example, "\n") {
			fmt.Fprintf(&b, "  %s\n", line)
		}
	}
	_, err := io.WriteString(w, b.String())
	return err
}

// writeFlags lists fs's flags, in name order, GNU style (--name).
func writeFlags(b *strings.Builder, fs *flag.FlagSet) {
	var flags []*flag.Flag
	fs.VisitAll(func(f *flag.Flag) { flags = append(flags, f) })
	sort.Slice(flags, func(i, j int) bool { return flags[i].Name < flags[j].Name })
	for _, f := range flags {
		arg, usage := flag.UnquoteUsage(f)
		line := "  --" + f.Name
		if arg != "" {
			line += " " + arg
		}
		fmt.Fprintf(b, "%s\n      %s", line, usage)
		if f.DefValue != "" && f.DefValue != "false" && f.DefValue != "0" && f.DefValue != "[]" {
			fmt.Fprintf(b, " (default %s)", f.DefValue)
		}
		b.WriteString("\n")
	}
}
