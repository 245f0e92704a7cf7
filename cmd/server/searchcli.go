package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"strings"

	"mailroom/client"
)

// searchCommand is the command table's entry for `mailroom search`.
var searchCommand = command{name: "search", args: "WORDS...", summary: "search the letters the member sent or received, best first",
	env: memberEnv, exits: exitsOne, define: defineSearch,
	example: `mailroom search quarterly report --from lead
mailroom search '"exact phrase"' --limit 5 --json`}

// defineSearch is `mailroom search WORDS... [--from NAME] [--to NAME]
// [--limit N] [--json]`: the arguments, joined by spaces, are the query
// (docs/api.md, "Search").
func defineSearch(fs *flag.FlagSet, in *invocation) runFunc {
	from := fs.String("from", "", "only letters this member `name` sent")
	to := fs.String("to", "", "only letters this member `name` received")
	limit := fs.Int("limit", 0, "at most this many results, 1 to 100 (default 20)")
	asJSON := fs.Bool("json", false, "print the REST answer as JSON")
	return func(ctx context.Context, args []string) error {
		if len(args) == 0 {
			return cliError("search: usage: search WORDS... [--from NAME] [--to NAME] [--limit N] [--json]")
		}
		p := client.SearchMailParams{Q: strings.Join(args, " ")}
		if *from != "" {
			p.From = from
		}
		if *to != "" {
			p.To = to
		}
		if *limit != 0 {
			p.Limit = limit
		}
		return runSearch(ctx, in.getenv, in.stdout, &p, *asJSON)
	}
}

// runSearch prints the letters found: one line each, id, sender →
// recipient and the snippet.
func runSearch(ctx context.Context, getenv func(string) string, stdout io.Writer, p *client.SearchMailParams, asJSON bool) error {
	mc, err := dialMember(ctx, getenv)
	if err != nil {
		return err
	}
	rctx, cancel := context.WithTimeout(ctx, hookRequestTimeout)
	defer cancel()
	res, err := mc.c.SearchMailWithResponse(rctx, mc.team, p)
	if err != nil {
		return fmt.Errorf("search: %w", err)
	}
	if res.JSON200 == nil {
		return apiError("search", res.StatusCode(), res.Body)
	}
	if asJSON {
		data, err := json.Marshal(res.JSON200)
		if err != nil {
			return err
		}
		_, err = fmt.Fprintf(stdout, "%s\n", data)
		return err
	}
	if len(res.JSON200.Results) == 0 {
		_, err := fmt.Fprintln(stdout, "No letters found.")
		return err
	}
	var b strings.Builder
	for _, r := range res.JSON200.Results {
		fmt.Fprintf(&b, "%s  %s → %s  %s\n", r.Letter.ID, r.Letter.Sender, r.Letter.Recipient, r.Snippet)
	}
	_, err = io.WriteString(stdout, b.String())
	return err
}
