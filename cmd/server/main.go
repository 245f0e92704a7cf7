// Command server runs Mailroom: the REST API, the MCP endpoint, the live
// status page and the event stream over a file store (one data directory)
// or a PostgreSQL database shared by replicas.
//
// Usage:
//
//	server [flags]                 serve (the default)
//	server healthcheck [--addr A]  exit 0 when a server at A answers /healthz
//	server scenario NAME [flags]   run a lesson scenario and print its result
//	server import --data DIR --database-url URL
//	                               copy a file-store data directory into an
//	                               empty PostgreSQL database
//	server hook [--wait N]         a Claude Code hook: unread mail for the
//	                               event on stdin (docs/hooks.md)
//	server inbox [--unread] [--mark-read] [--wait N] [--json]
//	server send --to NAME BODY     a member's mail from a shell
//	                               (MAILROOM_URL, MAILROOM_TOKEN)
//	server team create|show, permission list|allow|deny, mcp-config
//	                               the common admin acts (MAILROOM_URL,
//	                               MAILROOM_ADMIN_TOKEN)
//	server setup claude|codex [--dir D] [--dry-run]
//	                               Mailroom's MCP server and hooks in a
//	                               project's config files (docs/hooks.md)
//	server doctor [--dir D]        check URL, token, member and hooks
//	server --version               the module version and commit
//
// Every serve flag has an environment variable (MAILROOM_ADDR, MAILROOM_DATA,
// MAILROOM_ADMIN_TOKEN, MAILROOM_LOG_LEVEL, MAILROOM_MAX_TEAMS,
// MAILROOM_MODEL, MAILROOM_WORKSPACES, MAILROOM_STORE, MAILROOM_DATABASE_URL,
// MAILROOM_LEASE); a flag wins over its variable.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"
	"syscall"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	go func() {
		// After the first signal, restore the default handling so that a
		// second Ctrl-C ends a shutdown that hangs.
		<-ctx.Done()
		stop()
	}()
	err := run(ctx, os.Args[1:], os.Getenv, os.Stdout, os.Stderr)
	stop()
	os.Exit(report(err, os.Stderr))
}

// Exit codes, documented in the README's "Scenarios": scripts tell a run
// that failed from a command they got wrong and from a data directory that
// a server holds (which calls for the server's API instead, not a retry).
const (
	exitFailed = 1
	exitUsage  = 2
	exitBusy   = 3
)

// report prints err for a person and returns the process exit code:
// 0 on success or -h, 2 on a usage error, 3 when the data directory is held
// by a server, 1 on any other failure.
func report(err error, stderr io.Writer) int {
	switch {
	case err == nil, errors.Is(err, flag.ErrHelp):
		return 0
	case errors.As(err, new(*usageError)):
		fmt.Fprintf(stderr, "mailroom: %v\n", err)
		fmt.Fprintf(stderr, "Run with -h for the list of flags.\n")
		return exitUsage
	case errors.As(err, new(*busyError)):
		fmt.Fprintf(stderr, "mailroom: %v\n", err)
		return exitBusy
	default:
		fmt.Fprintf(stderr, "mailroom: %v\n", err)
		return exitFailed
	}
}

// busyError is a data directory another process holds; it exits with
// status 3.
type busyError struct{ msg string }

func (e *busyError) Error() string { return e.msg }

// usageError is a mistake on the command line; it exits with status 2,
// as flag parsing errors conventionally do.
type usageError struct{ msg string }

func (e *usageError) Error() string { return e.msg }

func usageErrorf(format string, args ...any) error {
	return &usageError{msg: fmt.Sprintf(format, args...)}
}

// run is the whole program with its operating-system dependencies passed in,
// so tests can drive it. args excludes the program name. It returns when ctx
// is cancelled (after a clean shutdown) or on the first error.
func run(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	if len(args) > 0 && !strings.HasPrefix(args[0], "-") {
		switch args[0] {
		case "healthcheck":
			return runHealthcheck(ctx, args[1:], getenv, stdout, stderr)
		case "scenario":
			return runScenario(ctx, args[1:], getenv, stdout, stderr)
		case "import":
			return runImport(ctx, args[1:], getenv, stdout, stderr)
		case "hook":
			return runHook(ctx, args[1:], getenv, os.Stdin, stdout, stderr) // hook.go
		case "inbox":
			return runInbox(ctx, args[1:], getenv, stdout) // mailcli.go
		case "send":
			return runSend(ctx, args[1:], getenv, stdout)
		case "team":
			return runTeam(ctx, args[1:], getenv, stdout) // admincli.go
		case "permission":
			return runPermission(ctx, args[1:], getenv, stdout)
		case "mcp-config":
			return runMCPConfig(ctx, args[1:], getenv, stdout) // mcpconfig.go
		case "setup":
			return runSetup(ctx, args[1:], getenv, stdout) // setup.go
		case "doctor":
			return runDoctor(ctx, args[1:], getenv, stdout) // doctor.go
		default:
			return usageErrorf("unknown command %q; the commands are healthcheck, scenario, import, hook, inbox, send, team, permission, mcp-config, setup and doctor, and no command serves", args[0])
		}
	}
	if len(args) == 1 && (args[0] == "--version" || args[0] == "-version") {
		_, err := fmt.Fprintln(stdout, version())
		return err
	}
	cfg, err := parseConfig(args, getenv, stderr)
	if err != nil {
		return err
	}
	return serve(ctx, cfg, stdout, stderr)
}
