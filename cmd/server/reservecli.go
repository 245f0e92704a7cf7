package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"time"

	"mailroom/client"
)

// `mailroom reserve`, `release`, `reservations` and `guard`: a member's
// file reservations from a shell, and the git pre-commit hook that refuses
// a commit of paths other members hold (docs/api.md, "Agents that share a
// repository"). Same environment as the other member commands.

// defineReserve is `mailroom reserve PATTERN... [--shared] [--ttl 1h]
// [--reason TEXT]`.
func defineReserve(fs *flag.FlagSet, in *invocation) runFunc {
	shared := fs.Bool("shared", false, "a shared reservation: others may share the paths, not take them exclusively")
	ttl := fs.Duration("ttl", time.Hour, "how long it holds, 1m to 24h (e.g. 90m)")
	reason := fs.String("reason", "", "why, at most 200 characters (shown to the others)")
	return func(ctx context.Context, args []string) error {
		if len(args) == 0 {
			return cliError("reserve: usage: reserve PATTERN... [--shared] [--ttl 1h] [--reason TEXT]")
		}
		if *ttl%time.Second != 0 {
			return cliError("reserve: --ttl must be whole seconds, 1m to 24h")
		}
		mc, err := dialMember(ctx, in.getenv)
		if err != nil {
			return err
		}
		secs, exclusive := int(*ttl/time.Second), !*shared
		body := client.ReservationCreate{Paths: args, Exclusive: &exclusive, TTLSeconds: &secs}
		if *reason != "" {
			body.Reason = reason
		}
		rctx, cancel := context.WithTimeout(ctx, hookRequestTimeout)
		defer cancel()
		res, err := mc.c.CreateReservationWithResponse(rctx, mc.team, body)
		if err != nil {
			return fmt.Errorf("reserve: %w", err)
		}
		if res.JSON201 == nil {
			return apiError("reserve", res.StatusCode(), res.Body)
		}
		_, err = fmt.Fprintln(in.stdout, reservationLine(*res.JSON201))
		return err
	}
}

// reservationLine is one reservation as the commands print it.
func reservationLine(r client.Reservation) string {
	kind := "exclusive"
	if !r.Exclusive {
		kind = "shared"
	}
	line := fmt.Sprintf("%s\t%s\t%s\tuntil %s\t%s", r.ReservationID, r.Member, kind, r.ExpiresAt.UTC().Format(time.RFC3339), strings.Join(r.Paths, " "))
	if r.Reason != nil {
		line += "\t# " + oneLine(*r.Reason)
	}
	return line
}

// defineRelease is `mailroom release ID|--all`.
func defineRelease(fs *flag.FlagSet, in *invocation) runFunc {
	all := fs.Bool("all", false, "release every live reservation of the member")
	return func(ctx context.Context, args []string) error {
		if *all == (len(args) == 1) || len(args) > 1 {
			return cliError("release: usage: release ID (e.g. res-3) or release --all")
		}
		mc, err := dialMember(ctx, in.getenv)
		if err != nil {
			return err
		}
		ids := args
		if *all {
			mine, err := mc.reservations(ctx, &client.ListReservationsParams{Member: &mc.member})
			if err != nil {
				return err
			}
			ids = nil
			for _, r := range mine {
				ids = append(ids, r.ReservationID)
			}
		}
		for _, id := range ids {
			rctx, cancel := context.WithTimeout(ctx, hookRequestTimeout)
			res, err := mc.c.ReleaseReservationWithResponse(rctx, mc.team, id)
			cancel()
			if err != nil {
				return fmt.Errorf("release %s: %w", id, err)
			}
			if res.JSON200 == nil {
				return apiError("release "+id, res.StatusCode(), res.Body)
			}
			if _, err := fmt.Fprintf(in.stdout, "released %s\n", id); err != nil {
				return err
			}
		}
		if len(ids) == 0 {
			_, err = fmt.Fprintln(in.stdout, "No live reservations.")
		}
		return err
	}
}

// reservations lists the team's live reservations.
func (m *memberClient) reservations(ctx context.Context, params *client.ListReservationsParams) ([]client.Reservation, error) {
	rctx, cancel := context.WithTimeout(ctx, hookRequestTimeout)
	defer cancel()
	res, err := m.c.ListReservationsWithResponse(rctx, m.team, params)
	if err != nil {
		return nil, fmt.Errorf("reservations: %w", err)
	}
	if res.JSON200 == nil {
		return nil, apiError("reservations", res.StatusCode(), res.Body)
	}
	return res.JSON200.Reservations, nil
}

// defineReservations is `mailroom reservations [--json]`.
func defineReservations(fs *flag.FlagSet, in *invocation) runFunc {
	asJSON := fs.Bool("json", false, "print the REST answer as JSON")
	return func(ctx context.Context, args []string) error {
		if len(args) > 0 {
			return cliError("reservations: usage: reservations [--json]")
		}
		mc, err := dialMember(ctx, in.getenv)
		if err != nil {
			return err
		}
		rs, err := mc.reservations(ctx, &client.ListReservationsParams{})
		if err != nil {
			return err
		}
		if *asJSON {
			data, err := json.Marshal(client.ReservationList{Reservations: rs})
			if err != nil {
				return err
			}
			_, err = fmt.Fprintf(in.stdout, "%s\n", data)
			return err
		}
		if len(rs) == 0 {
			_, err := fmt.Fprintln(in.stdout, "No live reservations.")
			return err
		}
		var b strings.Builder
		for _, r := range rs {
			b.WriteString(reservationLine(r) + "\n")
		}
		_, err = io.WriteString(in.stdout, b.String())
		return err
	}
}

// guardTimeout bounds the guard's calls: a commit should not hang on a
// server that does not answer; past it the guard counts the server as
// unreachable.
const guardTimeout = 5 * time.Second

// guardMarker marks the lines `guard install` adds to a hook, so that a
// second install finds them and adds nothing.
const guardMarker = "# mailroom guard:"

// defineGuard is `mailroom guard [--strict]`: the pre-commit check.
func defineGuard(fs *flag.FlagSet, in *invocation) runFunc {
	strict := fs.Bool("strict", false, "refuse the commit (exit 1) also when the server cannot be asked")
	return func(ctx context.Context, args []string) error {
		if len(args) > 0 {
			return cliError("guard: usage: guard [--strict] (or guard install)")
		}
		return runGuard(ctx, in, *strict)
	}
}

// gitOutput runs git with args and returns its standard output; a
// failure says what git said, on one line.
func gitOutput(ctx context.Context, args ...string) ([]byte, error) {
	cmd := exec.CommandContext(ctx, "git", args...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		if msg := strings.TrimSpace(stderr.String()); msg != "" {
			return nil, errors.New(oneLine(msg))
		}
		return nil, err
	}
	return out, nil
}

// inRepository fails with one clear line outside a git work tree.
func inRepository(ctx context.Context, what string) error {
	out, err := gitOutput(ctx, "rev-parse", "--is-inside-work-tree")
	if err != nil || strings.TrimSpace(string(out)) != "true" {
		return cliError("%s: not inside a git repository (run it from a repository's work tree)", what)
	}
	return nil
}

// runGuard checks the staged paths: exit 1 naming each one an exclusive
// reservation of another member holds; shared ones are noted and let
// through. A server that cannot be asked is a warning (exit 0), or with
// strict a failure.
func runGuard(ctx context.Context, in *invocation, strict bool) error {
	if err := inRepository(ctx, "guard"); err != nil {
		return err
	}
	out, err := gitOutput(ctx, "diff", "--cached", "--name-only", "-z")
	if err != nil {
		return cliError("guard: git diff --cached: %v", err)
	}
	var paths []string
	for p := range strings.SplitSeq(string(out), "\x00") {
		if p != "" {
			paths = append(paths, p)
		}
	}
	if len(paths) == 0 {
		return nil
	}
	unreachable := func(err error) error {
		if strict {
			return cliError("guard: cannot check the staged paths (--strict): %v", err)
		}
		fmt.Fprintf(in.stderr, "mailroom guard: warning: cannot check the staged paths, committing anyway: %s\n", oneLine(err.Error()))
		return nil
	}
	gctx, cancel := context.WithTimeout(ctx, guardTimeout)
	defer cancel()
	mc, err := dialMember(gctx, in.getenv)
	if err != nil {
		if reachable(err) {
			return cliError("guard: %v", err)
		}
		return unreachable(err)
	}
	var held []client.PathConflict
	for start := 0; start < len(paths); start += guardBatch {
		batch := paths[start:min(start+guardBatch, len(paths))]
		res, err := mc.c.CheckPathsWithResponse(gctx, mc.team, client.PathCheck{Paths: batch})
		if err != nil {
			return unreachable(err)
		}
		if res.JSON200 == nil {
			err := apiError("check the staged paths", res.StatusCode(), res.Body)
			if res.StatusCode() >= 500 {
				return unreachable(err)
			}
			return cliError("guard: %v", err)
		}
		held = append(held, res.JSON200.Conflicts...)
	}
	var b strings.Builder
	blocked := map[string]bool{}
	for _, c := range held {
		if c.Exclusive {
			blocked[c.Path] = true
			fmt.Fprintf(&b, "mailroom guard: %s is reserved by %s (%s)\n", c.Path, c.Member, c.ReservationID)
		} else {
			fmt.Fprintf(&b, "mailroom guard: note: %s is shared-reserved by %s (%s)\n", c.Path, c.Member, c.ReservationID)
		}
	}
	_, _ = io.WriteString(in.stderr, b.String())
	if len(blocked) > 0 {
		return cliError("guard: %d staged paths are reserved by other members; commit refused (ask them, or wait for the reservations to end)", len(blocked))
	}
	return nil
}

// guardBatch is how many paths one check asks about (the server's bound).
const guardBatch = 1000

// reachable tells a refusal the server answered (a token it does not
// know) from a server that could not be asked: no answer, an answer of
// 5xx (a server stopping or without its store), or no URL and token set
// for this shell.
func reachable(err error) bool {
	var ue *url.Error
	if errors.As(err, &ue) || errors.Is(err, context.DeadlineExceeded) {
		return false
	}
	msg := err.Error()
	return !strings.Contains(msg, "must be set") && !serverFailed.MatchString(msg)
}

// serverFailed matches apiError's text for an answer of 5xx.
var serverFailed = regexp.MustCompile(`: (HTTP )?5\d\d\b`)

// defineGuardInstall is `mailroom guard install`: the guard in the
// repository's pre-commit hook, keeping what the hook already does.
func defineGuardInstall(fs *flag.FlagSet, in *invocation) runFunc {
	strict := fs.Bool("strict", false, "install the guard with --strict")
	return func(ctx context.Context, args []string) error {
		if len(args) > 0 {
			return cliError("guard install: usage: guard install [--strict]")
		}
		if err := inRepository(ctx, "guard install"); err != nil {
			return err
		}
		out, err := gitOutput(ctx, "rev-parse", "--git-path", "hooks")
		if err != nil {
			return cliError("guard install: find the hooks directory: %v", err)
		}
		dir, err := filepath.Abs(strings.TrimSpace(string(out)))
		if err != nil {
			return err
		}
		self, err := os.Executable()
		if err != nil {
			return cliError("guard install: find this program: %v", err)
		}
		line := shellQuote(self) + " guard"
		if *strict {
			line += " --strict"
		}
		path := filepath.Join(dir, "pre-commit")
		old, err := os.ReadFile(path)
		if err != nil && !errors.Is(err, os.ErrNotExist) {
			return cliError("guard install: read %s: %v", path, err)
		}
		if bytes.Contains(old, []byte(guardMarker)) {
			_, err := fmt.Fprintf(in.stdout, "The guard is already in %s.\n", path)
			return err
		}
		text := string(old)
		if text == "" {
			text = "#!/bin/sh\n"
		} else if !strings.HasSuffix(text, "\n") {
			text += "\n"
		}
		text += guardMarker + " refuse a commit of paths other members reserved\n" + line + " || exit 1\n"
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return cliError("guard install: %v", err)
		}
		if err := os.WriteFile(path, []byte(text), 0o755); err != nil {
			return cliError("guard install: write %s: %v", path, err)
		}
		if err := os.Chmod(path, 0o755); err != nil { // an existing hook keeps its mode on write
			return cliError("guard install: %v", err)
		}
		_, err = fmt.Fprintf(in.stdout, "The guard is in %s.\n", path)
		return err
	}
}
