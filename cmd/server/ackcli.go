package main

import (
	"context"
	"flag"
	"fmt"

	"mailroom/client"
)

// Threads and acknowledgements on the command line (docs/api.md, "Mail
// that stays useful"): `mailroom send --in-reply-to ID --ack` and
// `mailroom ack ID OUTCOME`.

// sendOptions are send's flags beside the recipient and the body.
type sendOptions struct {
	inReplyTo string
	ack       bool
}

// body is the request body of a send with opts.
func (o sendOptions) body(to, text string) client.SendMessageJSONRequestBody {
	b := client.SendMessageJSONRequestBody{To: to, Body: text}
	if o.inReplyTo != "" {
		in := o.inReplyTo
		b.InReplyTo = &in
	}
	if o.ack {
		yes := true
		b.AckRequired = &yes
	}
	return b
}

// letterNotes ends a letter's header line in the hook's text: what it
// answers, and how to acknowledge it when its sender asked for that.
func letterNotes(l client.Message) string {
	s := ""
	if l.InReplyTo != nil {
		s = fmt.Sprintf(", in reply to %s (thread %s)", safeWord(*l.InReplyTo), safeWord(l.ThreadID))
	}
	s += "."
	if l.AckRequired != nil && *l.AckRequired {
		id := safeWord(l.ID)
		s += fmt.Sprintf(" Its sender asks for an acknowledgement: once you have acted on it, run `mailroom ack %s done|blocked|rejected --note TEXT` or call the ack_letter tool (id %q).", id, id)
	}
	return s
}

// defineAck is `mailroom ack ID OUTCOME [--note TEXT]`.
func defineAck(fs *flag.FlagSet, in *invocation) runFunc {
	note := fs.String("note", "", "what happened, at most 600 characters")
	return func(ctx context.Context, args []string) error {
		if len(args) != 2 {
			return cliError("ack: usage: ack ID done|blocked|rejected [--note TEXT]")
		}
		mc, err := dialMember(ctx, in.getenv)
		if err != nil {
			return err
		}
		rctx, cancel := context.WithTimeout(ctx, hookRequestTimeout)
		defer cancel()
		body := client.AckLetterJSONRequestBody{Outcome: client.AckInputOutcome(args[1])}
		if *note != "" {
			body.Note = note
		}
		res, err := mc.c.AckLetterWithResponse(rctx, mc.team, mc.member, args[0], body)
		if err != nil {
			return fmt.Errorf("ack: %w", err)
		}
		if res.JSON200 == nil {
			return apiError("ack", res.StatusCode(), res.Body)
		}
		_, err = fmt.Fprintf(in.stdout, "%s %s\n", res.JSON200.ID, args[1])
		return err
	}
}
