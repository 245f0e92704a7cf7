package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"math"
	"strings"
	"time"

	"mailroom/client"
)

// `mailroom inbox` and `mailroom send`: a member's mail from a shell, for
// agents without hooks (docs/hooks.md). Same environment as the hook
// (MAILROOM_URL, MAILROOM_TOKEN); errors are one line on standard error
// and exit 1.

// cliError is a failure of inbox or send: report prints it on one line
// and exits 1, usage mistakes included (these commands are run by agents,
// which read one line better than a usage text).
func cliError(format string, args ...any) error {
	return fmt.Errorf(format, args...)
}

// defineInbox is `mailroom inbox [--unread] [--mark-read] [--wait N] [--json]`.
func defineInbox(fs *flag.FlagSet, in *invocation) runFunc {
	unread := fs.Bool("unread", false, "only the letters after the read cursor")
	markRead := fs.Bool("mark-read", false, "mark the letters shown read")
	wait := fs.Int("wait", 0, "`seconds` (0–600) to wait for a letter when there is none")
	asJSON := fs.Bool("json", false, "print the REST answer as JSON")
	return func(ctx context.Context, args []string) error {
		if len(args) > 0 || *wait < 0 || *wait > hookMaxWait {
			return cliError("inbox: usage: inbox [--unread] [--mark-read] [--wait SECONDS (0 to %d)] [--json]", hookMaxWait)
		}
		return runInbox(ctx, in.getenv, in.stdout, *unread, *markRead, *wait, *asJSON)
	}
}

// runInbox prints the member's letters.
func runInbox(ctx context.Context, getenv func(string) string, stdout io.Writer, unread, markRead bool, wait int, asJSON bool) error {
	mc, err := dialMember(ctx, getenv)
	if err != nil {
		return err
	}
	read := mc.all
	if unread {
		read = mc.unread
	}
	letters, err := read(ctx, 0)
	if err != nil {
		return err
	}
	deadline := time.Now().Add(time.Duration(wait) * time.Second)
	for len(letters) == 0 {
		left := int(time.Until(deadline).Round(time.Second) / time.Second)
		if left <= 0 {
			break
		}
		if letters, err = read(ctx, min(left, pollWait)); err != nil {
			return err
		}
	}
	if markRead && len(letters) > 0 {
		if err := mc.markRead(ctx, letters[len(letters)-1].ID); err != nil {
			return err
		}
	}
	if asJSON {
		if letters == nil {
			letters = []client.Message{}
		}
		data, err := json.Marshal(client.Inbox{Messages: letters})
		if err != nil {
			return err
		}
		_, err = fmt.Fprintf(stdout, "%s\n", data)
		return err
	}
	if len(letters) == 0 {
		_, err := fmt.Fprintln(stdout, "No letters.")
		return err
	}
	text, _ := renderLetters(letters, len(letters), math.MaxInt)
	_, err = fmt.Fprintln(stdout, text)
	return err
}

// all returns every letter of the member's inbox; with wait, a read that
// finds none is held until one arrives (after the last letter there is).
func (m *memberClient) all(ctx context.Context, wait int) ([]client.Message, error) {
	if wait == 0 {
		return m.inbox(ctx, &client.GetInboxParams{}, 0)
	}
	// Nothing yet (the caller asked once without a wait): any letter is new.
	return m.inbox(ctx, &client.GetInboxParams{Wait: &wait}, wait)
}

// sendMaxInput bounds a body read from standard input (`send NAME -`);
// the team's body_chars bounds what the server takes.
const sendMaxInput = 8 << 20

// defineSend is `mailroom send [--to] NAME BODY|-`: the recipient is --to
// or the first argument; the body is the other arguments, or standard
// input when it is "-".
func defineSend(fs *flag.FlagSet, in *invocation) runFunc {
	to := fs.String("to", "", "the recipient's member `name` (or the first argument)")
	var opts sendOptions
	fs.StringVar(&opts.inReplyTo, "in-reply-to", "", "the `id` of the letter this one answers (it joins that letter's thread)")
	fs.BoolVar(&opts.ack, "ack", false, "ask the recipient to acknowledge the letter (mailroom ack)")
	return func(ctx context.Context, args []string) error {
		const usage = "send: usage: send NAME BODY (or BODY - to read standard input; --to NAME also names the recipient)"
		recipient := *to
		if recipient == "" && len(args) > 0 {
			recipient, args = args[0], args[1:]
		}
		if recipient == "" || len(args) == 0 {
			return cliError("%s", usage)
		}
		body := strings.Join(args, " ")
		if len(args) == 1 && args[0] == "-" {
			data, err := io.ReadAll(io.LimitReader(in.stdin, sendMaxInput+1))
			if err != nil {
				return cliError("send: read the body from standard input: %v", err)
			}
			if len(data) > sendMaxInput {
				return cliError("send: the body on standard input is over %d MiB", sendMaxInput>>20)
			}
			body = string(data)
		}
		return runSend(ctx, in.getenv, in.stdout, recipient, body, opts)
	}
}

// runSend sends body to recipient and prints the letter's id.
func runSend(ctx context.Context, getenv func(string) string, stdout io.Writer, to, body string, opts sendOptions) error {
	mc, err := dialMember(ctx, getenv)
	if err != nil {
		return err
	}
	rctx, cancel := context.WithTimeout(ctx, hookRequestTimeout)
	defer cancel()
	res, err := mc.c.SendMessageWithResponse(rctx, mc.team, &client.SendMessageParams{}, opts.body(to, body))
	if err != nil {
		return fmt.Errorf("send: %w", err)
	}
	if res.JSON201 == nil {
		return apiError("send", res.StatusCode(), res.Body)
	}
	_, err = fmt.Fprintln(stdout, res.JSON201.ID)
	return err
}
