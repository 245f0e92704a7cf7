package core

import (
	"encoding/json"
	"fmt"
)

// Event types and their payloads (Event.Data). The JSON shapes are the
// ones api/openapi.yaml documents for the event stream.
const (
	EventMessage    = "message"    // Message
	EventRequest    = "request"    // Request: a request opened
	EventReply      = "reply"      // Request: a reply recorded
	EventMatch      = "match"      // Request: a status changed by a match
	EventMember     = "member"     // MemberView, or []MemberView when a team is created
	EventTurn       = "turn"       // TurnEvent
	EventPermission = "permission" // Permission
	EventTeam       = "team"       // TeamView: a team's limits changed (UpdateLimits)
	EventRun        = "run"        // set by the HTTP layer (a scenario run)
	EventTask       = "task"       // Task: a task created or changed (tasks.go)
	EventAck        = "ack"        // AckEvent: a letter acknowledged (acks.go)
	// EventReservation (reservations.go) carries a Reservation.
	// EventResync says that events may have been missed: a Notifier
	// store delivers it once its listener is connected again after it
	// lost the database, since what other processes announced meanwhile
	// is not replayed. Its Team is empty and it has no Data. Core wakes
	// every waiter with it, so that each looks at the store again; the
	// event stream tells its clients to reload (its resync event).
	EventResync = "resync"
	// EventTeamDeleted announces that a team was deleted; Data is the
	// incarnation deleted (deletion.go), a string, or nil. It travels
	// between replicas like every event, so that every process ends the
	// connections it holds on that team (internal/live); the event
	// stream does not show it to clients.
	EventTeamDeleted = "team_deleted"
)

// Event is one committed state change, published after its unit of work
// committed.
type Event struct {
	// Type is one of the Event* constants.
	Type string `json:"type"`
	Team string `json:"team"`
	// Data is the typed payload of Type (see the Event* constants).
	Data any `json:"data"`
}

// UnmarshalJSON decodes an event with its payload typed by Type, so that
// an event that crossed processes (a store's Notifier) reaches
// subscribers as the same struct a local one is.
func (e *Event) UnmarshalJSON(b []byte) error {
	var raw struct {
		Type string          `json:"type"`
		Team string          `json:"team"`
		Data json.RawMessage `json:"data"`
	}
	if err := json.Unmarshal(b, &raw); err != nil {
		return err
	}
	e.Type, e.Team, e.Data = raw.Type, raw.Team, nil
	var err error
	decode := func(v any) any { err = json.Unmarshal(raw.Data, v); return v }
	switch raw.Type {
	case EventMessage:
		e.Data = *decode(&Message{}).(*Message)
	case EventRequest, EventReply, EventMatch:
		e.Data = *decode(&Request{}).(*Request)
	case EventMember:
		if len(raw.Data) > 0 && raw.Data[0] == '[' {
			e.Data = *decode(&[]MemberView{}).(*[]MemberView)
		} else {
			e.Data = *decode(&MemberView{}).(*MemberView)
		}
	case EventTurn:
		e.Data = *decode(&TurnEvent{}).(*TurnEvent)
	case EventPermission:
		e.Data = *decode(&Permission{}).(*Permission)
	case EventTeam:
		e.Data = *decode(&TeamView{}).(*TeamView)
	case EventTask:
		e.Data = *decode(&Task{}).(*Task)
	case EventReservation:
		e.Data = *decode(&Reservation{}).(*Reservation)
	case EventAck:
		e.Data = *decode(&AckEvent{}).(*AckEvent)
	default:
		var v any
		if len(raw.Data) > 0 {
			err = json.Unmarshal(raw.Data, &v)
		}
		e.Data = v
	}
	if err != nil {
		return fmt.Errorf("core: event %q: %w", raw.Type, err)
	}
	return nil
}

// Notifier is implemented by a Store whose teams other processes write
// too (several replicas on one database). The process's Live hands it
// every event core publishes (Announce, after the commit) so the store
// can tell the other processes, and Listen delivers the events the other processes
// announced; the process's Live (internal/live) feeds them to the same
// subscribers as its own, so waiting reads, the event stream and turn
// waits see other replicas' commits.
type Notifier interface {
	Announce(ev Event)
	// Listen calls deliver for every event another process announced,
	// until the returned stop is called. After its connection was lost
	// and is back, it delivers one EventResync before any later event.
	Listen(deliver func(Event)) (stop func())
}
