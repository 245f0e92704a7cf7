// Command server runs Mailroom: the REST API, the MCP endpoint, the live
// status page and the event stream over a file store (one data directory)
// or a PostgreSQL database shared by replicas.
//
// Usage:
//
//	server [flags]             serve (the default)
//	server COMMAND [ARGS]      a subcommand: the hook, the mail and admin
//	                           commands, healthcheck, scenario, import
//	server help [COMMAND]      every command with a line each, or one
//	                           command's usage, flags, environment, example
//	server --version           the module version and commit
//
// The subcommands are the table in commands.go.
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

// report prints err for a person, on one line, and returns the process
// exit code:
// 0 on success or -h, 2 on a usage error, 3 when the data directory is held
// by a server, 1 on any other failure.
func report(err error, stderr io.Writer) int {
	switch {
	case err == nil, errors.Is(err, flag.ErrHelp):
		return 0
	case errors.As(err, new(*usageError)):
		fmt.Fprintf(stderr, "mailroom: %s\n", oneLine(err.Error()))
		return exitUsage
	case errors.As(err, new(*busyError)):
		fmt.Fprintf(stderr, "mailroom: %s\n", oneLine(err.Error()))
		return exitBusy
	default:
		fmt.Fprintf(stderr, "mailroom: %s\n", oneLine(err.Error()))
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
	in := &invocation{getenv: getenv, stdin: os.Stdin, stdout: stdout, stderr: stderr}
	if len(args) > 0 && !strings.HasPrefix(args[0], "-") {
		if ok, err := runCommand(ctx, args, in); ok { // commands.go
			return err
		}
		return usageErrorf("unknown command %q; mailroom help lists the commands, and no command serves", args[0])
	}
	if len(args) == 1 && (args[0] == "--version" || args[0] == "-version") {
		_, err := fmt.Fprintln(stdout, version())
		return err
	}
	cfg, err := parseConfig(args, getenv, stderr)
	if err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return printOverview(stdout)
		}
		if errors.As(err, new(*usageError)) {
			return usageErrorf("%v; mailroom -h lists the flags", err)
		}
		return err
	}
	return serve(ctx, cfg, stdout, stderr)
}
