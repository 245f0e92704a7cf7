package agent

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"

	"mailroom/internal/core"
	"mailroom/internal/globs"
)

// The file reservations' tools (core/reservations.go holds every rule):
// the same for a model's turn and an MCP client, refused with the codes
// REST answers. A refused grant's message names each reservation it
// clashed with, its holder and expiry.

// Reservation tool names.
const (
	ToolReservePaths       = "reserve_paths"
	ToolReleaseReservation = "release_reservation"
	ToolListReservations   = "list_reservations"
	ToolCheckPaths         = "check_paths"
)

// reservationTools are the reservations' tools of the registry.
func (r registry) reservationTools() []Tool {
	all := Offer{Lead: true, Teammates: true}
	both := DoorAgent | DoorMCP
	return []Tool{
		{
			Name: ToolReservePaths, Doors: both, Offer: all, Handler: r.reservePaths,
			Description: fmt.Sprintf("Reserve files of the repository before you change them, so that teammates know and do not edit them at the same time. Patterns are globs relative to the repository root (* within a folder, ** across folders, {a,b} alternatives), 1 to %d of at most %d characters. All or nothing: when another member holds an overlapping reservation (exclusive, or yours is), nothing is reserved and the error names who holds what until when. The team holds at most %d live reservations.", globs.MaxPatterns, globs.MaxPatternChars, r.env.Limits.ReservationLimit()),
			InputSchema: object(
				prop{name: "paths", typ: "array", items: "string", desc: "Glob patterns, e.g. internal/store/** or cmd/main.go.", required: true},
				prop{name: "exclusive", typ: "boolean", desc: "Optional: false for a shared reservation (others may share the paths but not take them exclusively); true by default."},
				prop{name: "ttl_seconds", typ: "integer", desc: fmt.Sprintf("Optional: how long it holds, %d to %d seconds (default %d).", core.MinReservationTTL, core.MaxReservationTTL, core.DefaultReservationTTL), min: core.MinReservationTTL, max: core.MaxReservationTTL},
				prop{name: "reason", typ: "string", desc: fmt.Sprintf("Optional: why, at most %d characters.", core.MaxReservationReason)}),
		},
		{
			Name: ToolReleaseReservation, Doors: both, Offer: all, Handler: r.releaseReservation,
			Description: "Release a reservation once you are done with its files (yours; lead may release any).",
			InputSchema: object(prop{name: "reservation_id", typ: "string", desc: "The reservation's id, e.g. res-1.", required: true}),
		},
		{
			Name: ToolListReservations, Doors: both, Offer: all, Handler: r.listReservations,
			Description: "List your team's live reservations in id order, with holder, patterns and expiry; optionally only one member's, or those whose patterns match a file.",
			InputSchema: object(
				prop{name: "member", typ: "string", desc: "Optional: only this member's reservations."},
				prop{name: "path", typ: "string", desc: "Optional: a file path; only reservations that cover it."}),
		},
		{
			Name: ToolCheckPaths, Doors: both, Offer: all, Handler: r.checkPaths,
			Description: fmt.Sprintf("Check files (concrete paths, up to %d) before you change or commit them: returns each path another member's live reservation holds, with the reservation, its holder and whether it is exclusive.", core.MaxCheckPaths),
			InputSchema: object(prop{name: "paths", typ: "array", items: "string", desc: "File paths relative to the repository root.", required: true}),
		},
	}
}

type reservationOutput struct {
	Reservation core.Reservation `json:"reservation"`
}

type reservationsOutput struct {
	Reservations []core.Reservation `json:"reservations"`
}

type checkOutput struct {
	Conflicts []core.PathConflict `json:"conflicts"`
}

func reservationText(verb string, res core.Reservation) string {
	kind := "exclusive"
	if !res.Exclusive {
		kind = "shared"
	}
	return fmt.Sprintf("%s %s (%s, until %s): %s", verb, res.ID, kind, res.ExpiresAt.UTC().Format("2006-01-02T15:04:05Z"), strings.Join(res.Paths, " "))
}

func (r registry) reservePaths(ctx context.Context, input json.RawMessage) (Result, error) {
	var in struct {
		Paths      []string `json:"paths"`
		Exclusive  *bool    `json:"exclusive"`
		TTLSeconds *int     `json:"ttl_seconds"`
		Reason     *string  `json:"reason"`
	}
	if err := decode(ToolReservePaths, input, &in); err != nil {
		return Result{}, err
	}
	team, _, err := callerOf(ctx)
	if err != nil {
		return Result{}, err
	}
	res, err := r.env.Svc.Reserve(ctx, team, core.ReserveInput{Paths: in.Paths, Exclusive: in.Exclusive, TTLSeconds: in.TTLSeconds, Reason: in.Reason})
	if err != nil {
		return Result{}, err
	}
	return Result{Value: reservationOutput{Reservation: res}, Text: reservationText("Reserved", res)}, nil
}

func (r registry) releaseReservation(ctx context.Context, input json.RawMessage) (Result, error) {
	var in struct {
		ID *string `json:"reservation_id"`
	}
	if err := decode(ToolReleaseReservation, input, &in); err != nil {
		return Result{}, err
	}
	if in.ID == nil {
		return Result{}, toolErr(core.CodeValidation, "release_reservation: reservation_id is required")
	}
	team, _, err := callerOf(ctx)
	if err != nil {
		return Result{}, err
	}
	res, err := r.env.Svc.ReleaseReservation(ctx, team, *in.ID)
	if err != nil {
		return Result{}, err
	}
	return Result{Value: reservationOutput{Reservation: res}, Text: reservationText("Released", res)}, nil
}

func (r registry) listReservations(ctx context.Context, input json.RawMessage) (Result, error) {
	var in struct {
		Member string `json:"member"`
		Path   string `json:"path"`
	}
	if err := decode(ToolListReservations, input, &in); err != nil {
		return Result{}, err
	}
	team, _, err := callerOf(ctx)
	if err != nil {
		return Result{}, err
	}
	rs, err := r.env.Svc.ListReservations(ctx, team, core.ReservationFilter{Member: in.Member, Path: in.Path})
	if err != nil {
		return Result{}, err
	}
	return Result{Value: reservationsOutput{Reservations: rs}, Text: fmt.Sprintf("%d live reservations.", len(rs))}, nil
}

func (r registry) checkPaths(ctx context.Context, input json.RawMessage) (Result, error) {
	var in struct {
		Paths []string `json:"paths"`
	}
	if err := decode(ToolCheckPaths, input, &in); err != nil {
		return Result{}, err
	}
	team, _, err := callerOf(ctx)
	if err != nil {
		return Result{}, err
	}
	cs, err := r.env.Svc.CheckPaths(ctx, team, in.Paths)
	if err != nil {
		return Result{}, err
	}
	if len(cs) == 0 {
		return Result{Value: checkOutput{Conflicts: cs}, Text: "No other member holds these paths."}, nil
	}
	lines := make([]string, len(cs))
	for i, c := range cs {
		lines[i] = fmt.Sprintf("%s: %s of %s", c.Path, c.ReservationID, c.Member)
	}
	return Result{Value: checkOutput{Conflicts: cs}, Text: strings.Join(lines, "\n")}, nil
}
