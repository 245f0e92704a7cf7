package httpapi

import (
	"context"

	"mailroom/internal/core"
)

// The reservation routes (docs/api.md, "Agents that share a repository"):
// each converts the request, makes one core call (core/reservations.go
// holds every rule and right) and converts the answer back.

// CreateReservation grants the token's member a reservation, or refuses
// it whole (a reservation_conflict names the conflicts, problemFor).
func (s *Server) CreateReservation(ctx context.Context, req CreateReservationRequestObject) (CreateReservationResponseObject, error) {
	b := req.Body
	r, err := s.svc.Reserve(ctx, req.Team, core.ReserveInput{Paths: b.Paths, Exclusive: b.Exclusive, TTLSeconds: b.TTLSeconds, Reason: b.Reason})
	if err != nil {
		return nil, err
	}
	return CreateReservation201JSONResponse(reservationOf(r)), nil
}

// ListReservations lists the team's reservations, filtered.
func (s *Server) ListReservations(ctx context.Context, req ListReservationsRequestObject) (ListReservationsResponseObject, error) {
	p := req.Params
	f := core.ReservationFilter{Member: deref(p.Member), Path: deref(p.Path)}
	if p.All != nil {
		f.All = *p.All
	}
	rs, err := s.svc.ListReservations(ctx, req.Team, f)
	if err != nil {
		return nil, err
	}
	out := ListReservations200JSONResponse{Reservations: make([]Reservation, 0, len(rs))}
	for _, r := range rs {
		out.Reservations = append(out.Reservations, reservationOf(r))
	}
	return out, nil
}

// CheckPaths names the concrete paths other members' live reservations
// hold.
func (s *Server) CheckPaths(ctx context.Context, req CheckPathsRequestObject) (CheckPathsResponseObject, error) {
	cs, err := s.svc.CheckPaths(ctx, req.Team, req.Body.Paths)
	if err != nil {
		return nil, err
	}
	out := CheckPaths200JSONResponse{Conflicts: make([]PathConflict, 0, len(cs))}
	for _, c := range cs {
		out.Conflicts = append(out.Conflicts, PathConflict{Path: c.Path, ReservationID: c.ReservationID, Member: c.Member, Exclusive: c.Exclusive})
	}
	return out, nil
}

// RenewReservation gives the holder's live reservation a new expiry.
func (s *Server) RenewReservation(ctx context.Context, req RenewReservationRequestObject) (RenewReservationResponseObject, error) {
	r, err := s.svc.RenewReservation(ctx, req.Team, req.ReservationID, req.Body.TTLSeconds)
	if err != nil {
		return nil, err
	}
	return RenewReservation200JSONResponse(reservationOf(r)), nil
}

// ReleaseReservation releases a live reservation.
func (s *Server) ReleaseReservation(ctx context.Context, req ReleaseReservationRequestObject) (ReleaseReservationResponseObject, error) {
	r, err := s.svc.ReleaseReservation(ctx, req.Team, req.ReservationID)
	if err != nil {
		return nil, err
	}
	return ReleaseReservation200JSONResponse(reservationOf(r)), nil
}

func reservationOf(r core.Reservation) Reservation {
	return Reservation{ReservationID: r.ID, Member: r.Member, Paths: r.Paths, Exclusive: r.Exclusive, Reason: r.Reason,
		CreatedAt: r.CreatedAt, ExpiresAt: r.ExpiresAt, ReleasedAt: r.ReleasedAt}
}

func reservationConflictOf(c core.ReservationConflict) ReservationConflict {
	return ReservationConflict{ReservationID: c.ReservationID, Member: c.Member, Paths: c.Paths, ExpiresAt: c.ExpiresAt}
}
