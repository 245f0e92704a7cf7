package core

import (
	"encoding/json"
	"fmt"
	"sync"
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

// Publisher announces committed events.
type Publisher interface {
	Publish(ev Event)
}

// Subscriber registers a function called with every event; cancel stops
// the calls. fn is called from the publishing goroutine: it must not
// block and must not call back into the Service.
type Subscriber interface {
	Subscribe(fn func(Event)) (cancel func())
}

// Notifier is implemented by a Store whose teams other processes write
// too (several replicas on one database). Core hands it every event it
// publishes (Announce, after the commit) so the store can tell the other
// processes, and Listen delivers the events the other processes
// announced; core feeds them into the same Bus as its own, so waiting
// reads, the event stream and turn waits see other replicas' commits.
type Notifier interface {
	Announce(ev Event)
	// Listen calls deliver for every event another process announced,
	// until the returned stop is called. After its connection was lost
	// and is back, it delivers one EventResync before any later event.
	Listen(deliver func(Event)) (stop func())
}

// Bus is the in-process Publisher and Subscriber. The zero value is ready.
//
// Subscribers are called in the order they subscribed. Core subscribes
// its waiters first (NewService), so that every later subscriber, such as the
// HTTP layer that rings the reads it holds, finds an inbox's channel
// already closed when it sees the letter's event; called in another order,
// a held read that looked at its channel between the two would wait on to
// its deadline.
type Bus struct {
	mu   sync.RWMutex
	next int
	subs []subscriber
}

// subscriber is one registered function and the id cancel removes.
type subscriber struct {
	id int
	fn func(Event)
}

// Publish calls every subscriber with ev, in the order they subscribed.
func (b *Bus) Publish(ev Event) {
	b.mu.RLock()
	subs := b.subs // never modified in place: Subscribe and cancel copy
	b.mu.RUnlock()
	for _, s := range subs {
		s.fn(ev)
	}
}

// Subscribe registers fn after every subscriber so far; cancel unregisters
// it.
func (b *Bus) Subscribe(fn func(Event)) (cancel func()) {
	b.mu.Lock()
	defer b.mu.Unlock()
	id := b.next
	b.next++
	b.subs = append(b.subs[:len(b.subs):len(b.subs)], subscriber{id, fn})
	return func() {
		b.mu.Lock()
		defer b.mu.Unlock()
		for i, s := range b.subs {
			if s.id == id {
				b.subs = append(b.subs[:i:i], b.subs[i+1:]...)
				return
			}
		}
	}
}
