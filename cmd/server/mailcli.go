package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
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

// runInbox is `mailroom inbox [--unread] [--mark-read] [--wait N] [--json]`.
func runInbox(ctx context.Context, args []string, getenv func(string) string, stdout io.Writer) error {
	fs := flag.NewFlagSet("inbox", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	unread := fs.Bool("unread", false, "only the letters after the read cursor")
	markRead := fs.Bool("mark-read", false, "mark the letters shown read")
	wait := fs.Int("wait", 0, "seconds (0–600) to wait for a letter when there is none")
	asJSON := fs.Bool("json", false, "print the REST answer as JSON")
	if err := fs.Parse(args); err != nil {
		return cliError("inbox: %v (usage: inbox [--unread] [--mark-read] [--wait SECONDS] [--json])", err)
	}
	if fs.NArg() > 0 || *wait < 0 || *wait > hookMaxWait {
		return cliError("inbox: usage: inbox [--unread] [--mark-read] [--wait SECONDS (0 to %d)] [--json]", hookMaxWait)
	}
	mc, err := dialMember(ctx, getenv)
	if err != nil {
		return err
	}
	read := mc.all
	if *unread {
		read = mc.unread
	}
	letters, err := read(ctx, 0)
	if err != nil {
		return err
	}
	deadline := time.Now().Add(time.Duration(*wait) * time.Second)
	for len(letters) == 0 {
		left := int(time.Until(deadline).Round(time.Second) / time.Second)
		if left <= 0 {
			break
		}
		if letters, err = read(ctx, min(left, pollWait)); err != nil {
			return err
		}
	}
	if *markRead && len(letters) > 0 {
		if err := mc.markRead(ctx, letters[len(letters)-1].ID); err != nil {
			return err
		}
	}
	if *asJSON {
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
	for i, l := range letters {
		sep := "\n\n"
		if i == len(letters)-1 {
			sep = "\n"
		}
		if _, err := fmt.Fprint(stdout, letterParagraph(l), sep); err != nil {
			return err
		}
	}
	return nil
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

// runSend is `mailroom send --to NAME BODY`.
func runSend(ctx context.Context, args []string, getenv func(string) string, stdout io.Writer) error {
	fs := flag.NewFlagSet("send", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	to := fs.String("to", "", "the recipient's member name")
	if err := fs.Parse(args); err != nil {
		return cliError("send: %v (usage: send --to NAME BODY)", err)
	}
	if *to == "" || fs.NArg() == 0 {
		return cliError("send: usage: send --to NAME BODY")
	}
	body := strings.Join(fs.Args(), " ")
	mc, err := dialMember(ctx, getenv)
	if err != nil {
		return err
	}
	rctx, cancel := context.WithTimeout(ctx, hookRequestTimeout)
	defer cancel()
	res, err := mc.c.SendMessageWithResponse(rctx, mc.team, &client.SendMessageParams{}, client.SendMessageJSONRequestBody{To: *to, Body: body})
	if err != nil {
		return fmt.Errorf("send: %w", err)
	}
	if res.JSON201 == nil {
		return apiError("send", res.StatusCode(), res.Body)
	}
	_, err = fmt.Fprintln(stdout, res.JSON201.ID)
	return err
}
