package agent

import (
	"context"
	"encoding/json"
	"fmt"

	"mailroom/internal/core"
)

// The archive's tools (core/archive.go holds every rule): the caller's own
// inbox only, the same for a model's turn and an MCP client.

// The archive's tool names.
const (
	// ToolArchiveInbox moves the caller's read letters into its archive.
	ToolArchiveInbox = "archive_inbox"
	// ToolReadArchive reads the caller's archive.
	ToolReadArchive = "read_archive"
)

// defaultArchiveRead is how many letters read_archive returns when the
// call names no limit, as the REST route.
const defaultArchiveRead = 100

// archiveTools are the registry's tools of the archive.
func (r registry) archiveTools() []Tool {
	all := Offer{Lead: true, Teammates: true}
	return []Tool{
		{
			Name: ToolArchiveInbox, Doors: DoorAgent | DoorMCP, Offer: all, Handler: r.archiveInbox,
			Description: "Move the letters of your inbox you have read, up to and including the given one, into your archive: they no longer count against your inbox's limits and stay readable (read_archive). Only letters you have read (through your read cursor) can move; protocol letters still needed stay.",
			InputSchema: object(prop{name: "through", typ: "string", desc: "The id of a letter of your inbox you have read, e.g. reader-3.", required: true}),
		},
		{
			Name: ToolReadArchive, Doors: DoorAgent | DoorMCP, Offer: all, Handler: r.readArchive,
			Description: "Read your archived letters, oldest first.",
			InputSchema: object(
				prop{name: "after", typ: "string", desc: "Optional: the id of one of your letters; only archived letters after it are returned."},
				prop{name: "limit", typ: "integer", desc: fmt.Sprintf("Optional: at most this many letters, 1 to %d (default %d).", core.MaxArchivePage, defaultArchiveRead), min: 1, max: core.MaxArchivePage}),
		},
	}
}

// archiveOutput is the result of read_archive.
type archiveOutput struct {
	Letters []core.Message `json:"letters"`
}

func (r registry) archiveInbox(ctx context.Context, input json.RawMessage) (Result, error) {
	var in struct {
		Through *string `json:"through"`
	}
	if err := decode(ToolArchiveInbox, input, &in); err != nil {
		return Result{}, err
	}
	if in.Through == nil {
		return Result{}, toolErr(core.CodeValidation, "archive_inbox: through is required")
	}
	team, member, err := callerOf(ctx)
	if err != nil {
		return Result{}, err
	}
	res, err := r.env.Svc.ArchiveInbox(ctx, team, member, *in.Through)
	if err != nil {
		return Result{}, err
	}
	return Result{Value: res, Text: fmt.Sprintf("Archived %d letters; %d stay in your inbox.", res.Archived, res.InboxLength)}, nil
}

func (r registry) readArchive(ctx context.Context, input json.RawMessage) (Result, error) {
	var in struct {
		After string `json:"after"`
		Limit *int   `json:"limit"`
	}
	if err := decode(ToolReadArchive, input, &in); err != nil {
		return Result{}, err
	}
	limit := defaultArchiveRead
	if in.Limit != nil {
		limit = *in.Limit
	}
	team, member, err := callerOf(ctx)
	if err != nil {
		return Result{}, err
	}
	letters, err := r.env.Svc.ListArchive(ctx, team, member, in.After, limit)
	if err != nil {
		return Result{}, err
	}
	if letters == nil {
		letters = []core.Message{}
	}
	text := "No archived letters."
	if len(letters) > 0 {
		text = fmt.Sprintf("%d archived letters, the last %s.", len(letters), letters[len(letters)-1].ID)
	}
	return Result{Value: archiveOutput{Letters: letters}, Text: text}, nil
}
