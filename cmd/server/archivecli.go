package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"math"

	"mailroom/client"
)

// `mailroom archive`: the member moves the letters it has read out of its
// inbox, or reads its archive (docs/api.md, "Mail that stays useful",
// Archive). The server decides what may move; this only asks.

// archiveUsage is the one line a misuse of archive prints.
const archiveUsage = "archive: usage: archive [ID] [--json], or archive --list [--after ID] [--limit N] [--json]"

// defineArchive is `mailroom archive [ID]` and `mailroom archive --list
// [--after ID] [--limit N]`.
func defineArchive(fs *flag.FlagSet, in *invocation) runFunc {
	list := fs.Bool("list", false, "print the archived letters, oldest first, instead of archiving")
	after := fs.String("after", "", "with --list: only the archived letters after this letter `id`")
	limit := fs.Int("limit", 0, "with --list: at most `n` letters, 1 to 1000 (default 100)")
	asJSON := fs.Bool("json", false, "print the REST answer as JSON")
	return func(ctx context.Context, args []string) error {
		listing := *after != "" || *limit != 0
		if len(args) > 1 || *list && len(args) > 0 || listing && !*list {
			return cliError("%s", archiveUsage)
		}
		mc, err := dialMember(ctx, in.getenv)
		if err != nil {
			return err
		}
		if *list {
			return mc.printArchive(ctx, in, *after, *limit, *asJSON)
		}
		through := ""
		if len(args) == 1 {
			through = args[0]
		} else if through, err = mc.readThrough(ctx); err != nil {
			return err
		}
		res, err := mc.archive(ctx, through)
		if err != nil {
			return err
		}
		if *asJSON {
			return printJSON(in.stdout, res)
		}
		_, err = fmt.Fprintf(in.stdout, "Through %s: %d archived, %d left in the inbox.\n", safeWord(through), res.Archived, res.InboxLength)
		return err
	}
}

// readThrough is the id of the last letter the member has read, from its
// member document; an error when it has read none.
func (m *memberClient) readThrough(ctx context.Context) (string, error) {
	rctx, cancel := context.WithTimeout(ctx, hookRequestTimeout)
	defer cancel()
	res, err := m.c.GetTeamWithResponse(rctx, m.team)
	if err != nil {
		return "", fmt.Errorf("archive: read team %s: %w", m.team, err)
	}
	if res.JSON200 == nil {
		return "", apiError("archive", res.StatusCode(), res.Body)
	}
	for _, mv := range res.JSON200.Members {
		if mv.Name == m.member {
			if mv.ReadThrough == nil {
				return "", errors.New("archive: no letter is read yet, so none can be archived; mark letters read first (mailroom inbox --mark-read)")
			}
			return *mv.ReadThrough, nil
		}
	}
	return "", fmt.Errorf("archive: team %s has no member %s", m.team, m.member)
}

// archive moves the member's read letters through the letter through into
// its archive.
func (m *memberClient) archive(ctx context.Context, through string) (*client.ArchiveResult, error) {
	rctx, cancel := context.WithTimeout(ctx, hookRequestTimeout)
	defer cancel()
	res, err := m.c.ArchiveInboxWithResponse(rctx, m.team, m.member, client.ArchiveInboxJSONRequestBody{Through: through})
	if err != nil {
		return nil, fmt.Errorf("archive: %w", err)
	}
	if res.JSON200 == nil {
		return nil, apiError("archive", res.StatusCode(), res.Body)
	}
	return res.JSON200, nil
}

// printArchive prints a page of the member's archive: quoted as the
// inbox prints letters, or the REST answer as JSON.
func (m *memberClient) printArchive(ctx context.Context, in *invocation, after string, limit int, asJSON bool) error {
	params := &client.GetArchiveParams{}
	if after != "" {
		params.After = &after
	}
	if limit != 0 {
		params.Limit = &limit
	}
	rctx, cancel := context.WithTimeout(ctx, hookRequestTimeout)
	defer cancel()
	res, err := m.c.GetArchiveWithResponse(rctx, m.team, m.member, params)
	if err != nil {
		return fmt.Errorf("archive: %w", err)
	}
	if res.JSON200 == nil {
		return apiError("archive", res.StatusCode(), res.Body)
	}
	if asJSON {
		return printJSON(in.stdout, res.JSON200)
	}
	if len(res.JSON200.Letters) == 0 {
		_, err := fmt.Fprintln(in.stdout, "No archived letters.")
		return err
	}
	text, _ := renderLetters(res.JSON200.Letters, len(res.JSON200.Letters), math.MaxInt)
	_, err = fmt.Fprintln(in.stdout, text)
	return err
}
