package agent

import (
	"context"
	"encoding/json"
	"fmt"

	"mailroom/internal/core"
)

// ToolSearchMail finds letters of the caller's team (docs/api.md,
// "Search"), at both doors.
const ToolSearchMail = "search_mail"

// searchTools are the search tools of the registry.
func (r registry) searchTools() []Tool {
	return []Tool{{
		Name: ToolSearchMail, Doors: DoorAgent | DoorMCP, Offer: Offer{Lead: true, Teammates: true}, Handler: r.searchMail,
		Description: fmt.Sprintf("Search the letters you sent or received, best first, before asking again what was already said. Every word and \"quoted phrase\" of q must occur in a letter (case does not matter). At most %d results (default %d), each with a snippet.", core.MaxSearchLimit, core.DefaultSearchLimit),
		InputSchema: object(
			prop{name: "q", typ: "string", desc: fmt.Sprintf("Words and \"quoted phrases\", at most %d characters.", core.MaxSearchQuery), required: true},
			prop{name: "from", typ: "string", desc: "Optional: only letters this member sent."},
			prop{name: "to", typ: "string", desc: "Optional: only letters this member received."},
			prop{name: "limit", typ: "integer", desc: fmt.Sprintf("Optional: at most this many results, 1 to %d (default %d).", core.MaxSearchLimit, core.DefaultSearchLimit), min: 1, max: core.MaxSearchLimit}),
	}}
}

type searchOutput struct {
	Results []core.SearchResult `json:"results"`
}

func (r registry) searchMail(ctx context.Context, input json.RawMessage) (Result, error) {
	var in struct {
		Q     string `json:"q"`
		From  string `json:"from"`
		To    string `json:"to"`
		Limit int    `json:"limit"`
	}
	if err := decode(ToolSearchMail, input, &in); err != nil {
		return Result{}, err
	}
	team, _, err := callerOf(ctx)
	if err != nil {
		return Result{}, err
	}
	found, err := r.env.Svc.Search(ctx, core.SearchInput{Team: team, Q: in.Q, From: in.From, To: in.To, Limit: in.Limit})
	if err != nil {
		return Result{}, err
	}
	if found == nil {
		found = []core.SearchResult{}
	}
	text := "No letters found."
	if len(found) > 0 {
		text = fmt.Sprintf("%d letters found, the best %s.", len(found), found[0].Letter.ID)
	}
	return Result{Value: searchOutput{Results: found}, Text: text}, nil
}
