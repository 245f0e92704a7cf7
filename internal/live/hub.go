// Package live holds what one server process knows of the moment beside
// core: the bus its committed events are published on (and other
// replicas' events arrive on), the MCP sessions open with it and its
// members' last MCP requests, the teams its long-lived connections
// follow, the reads held for mail per token and the readers and turns
// waiting for a letter or a decision.
//
// None of it is a team's state, none of it is stored, and it holds no
// rule: every read and check it makes goes through core.Service, whose
// units of work stay one snapshot in, one change-set out. It is a package
// of its own, beside core, so that core keeps only the rules and the
// doors (internal/httpapi, internal/mcpserver) share one such state
// without importing each other; internal/app wires it. It starts no
// goroutine: the goroutines that run work (the waker, lease renewals) are
// internal/runtime's.
package live

import (
	"context"
	"log/slog"
	"sync"
	"time"

	"mailroom/internal/core"
)

// Observer receives events. It is called after the event's unit of work
// committed, from the goroutine that committed it; it must not block and
// must not call back into the Service.
type Observer func(core.Event)

// Options configure a Hub.
type Options struct {
	// Logger receives what the hub logs; nil discards it.
	Logger *slog.Logger
	// MaxHeldReadsPerToken bounds the waiting reads of one token
	// (HoldRead); 0 means MaxHeldReadsPerToken.
	MaxHeldReadsPerToken int
}

// Hub is one process's live state around core (see the package doc). It
// is core's core.Live: core publishes every committed event to it, reads
// members' presence from it and waits on it for decisions.
type Hub struct {
	svc *core.Service
	// work is the process's core.Work, whose turns of a team deleted on
	// another replica end here (teamDeleted).
	work     core.Work
	notifier core.Notifier // nil unless the store is one
	log      *slog.Logger

	bus      Bus
	waiters  waiters       // readers waiting for mail (waiters.go)
	sessions sessionCounts // open MCP sessions (sessions.go)
	seen     seenTimes     // members' last MCP requests (mcpseen.go)
	lives    teamLives     // teams followed by connections (teamlife.go)
	holds    heldReads     // reads waiting for mail, per token (heldreads.go)

	mu sync.Mutex
	// observerCancel ends the subscription SetObserver made.
	observerCancel func()
	stopListen     func()
}

// New returns the hub of a process over store, whose events it announces
// to the other processes when store is a core.Notifier. It serves once
// Bind gave it the Service (Open does both).
func New(store core.Store, opts Options) *Hub {
	h := &Hub{log: opts.Logger, holds: heldReads{max: opts.MaxHeldReadsPerToken}}
	h.notifier, _ = store.(core.Notifier)
	if h.holds.max <= 0 {
		h.holds.max = MaxHeldReadsPerToken
	}
	if h.log == nil {
		h.log = slog.New(slog.DiscardHandler)
	}
	h.bus.Subscribe(h.wakeWaiters)
	return h
}

// Bind gives the hub the Service whose events it carries and the Work
// that Service was built with (core.Options.Work); call it once, before
// serving.
func (h *Hub) Bind(svc *core.Service, work core.Work) { h.svc, h.work = svc, work }

// Open builds core over store with a new hub as its core.Live, opens it
// (core.Service.Open: a Starter store loads and repairs its teams) and,
// with a Notifier store, starts delivering the other processes' events.
func Open(ctx context.Context, store core.Store, copts core.Options, opts Options) (*core.Service, *Hub, error) {
	if opts.Logger == nil {
		opts.Logger = copts.Logger
	}
	h := New(store, opts)
	copts.Live = h
	if copts.Work == nil {
		// Made here rather than left to core, so that the hub ends the
		// turns of the same table core claims them in.
		copts.Work = &core.LocalWork{}
	}
	svc := core.NewService(store, copts)
	h.Bind(svc, copts.Work)
	if err := svc.Open(ctx); err != nil {
		return nil, nil, err
	}
	h.Listen()
	return svc, h, nil
}

// Listen starts delivering the events other processes announced, when
// the store is a Notifier; later calls do nothing.
func (h *Hub) Listen() {
	if h.notifier == nil {
		return
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.stopListen == nil {
		h.stopListen = h.notifier.Listen(h.publishLocal)
	}
}

// Publish announces a committed event: to this process's subscribers, and
// to the other processes when the store is a Notifier. Core calls it
// after every commit (core.Live).
func (h *Hub) Publish(ev core.Event) {
	h.publishLocal(ev)
	if h.notifier != nil {
		h.notifier.Announce(ev)
	}
}

// Subscribe registers fn for every event published after a commit, this
// process's and, with a Notifier store, the other processes'. cancel
// ends the calls.
func (h *Hub) Subscribe(fn func(core.Event)) (cancel func()) { return h.bus.Subscribe(fn) }

// SetObserver replaces the observer; wiring code sets it once before serving.
func (h *Hub) SetObserver(o Observer) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.observerCancel != nil {
		h.observerCancel()
		h.observerCancel = nil
	}
	if o != nil {
		h.observerCancel = h.bus.Subscribe(o)
	}
}

// Presence is member's MCP sessions open with this process and the time
// of its last MCP request as this process knows it (core.Live), which a
// member's document shows.
func (h *Hub) Presence(team, member string) (sessions int, lastSeen *time.Time) {
	return h.sessions.count(team, member), h.seen.of(team, member)
}

// wakeWaiters is subscribed to the bus first: a stored letter wakes the
// readers of its recipient's inbox, a decided permission the turn that
// waits for it, and a resync (events from other processes may have been
// missed) every waiter, each of which reads the store again and waits on
// if nothing it waits for has happened. A deleted team ends what this
// process holds of it (teamDeleted).
func (h *Hub) wakeWaiters(ev core.Event) {
	switch ev.Type {
	case core.EventTeamDeleted:
		h.teamDeleted(ev.Team, ev.Data)
	case core.EventResync:
		h.waiters.wakeAll()
	case core.EventMessage:
		if m, ok := ev.Data.(core.Message); ok {
			h.waiters.wake(inboxKey{team: ev.Team, member: m.Recipient})
		}
	case core.EventPermission:
		if p, ok := ev.Data.(core.Permission); ok && p.Status != core.PermissionPending {
			h.waiters.wake(permissionKey(ev.Team, p.ID))
		}
	}
}

// teamDeleted is the hub's handling of a deleted team, run from the bus
// before any other subscriber sees the event: the team's followers are
// ended, core ends the work of it this process does (its turns
// cancelled, its wakes dropped) and its MCP session counts and times are
// dropped, so that a new team of the same name starts with none.
func (h *Hub) teamDeleted(team string, data any) {
	h.lives.end(team)
	h.seen.drop(team)
	// A deletion on another replica: what this process does for that
	// incarnation of the team ends too.
	inc, _ := data.(string)
	if h.work != nil {
		core.EndTeamWork(h.work, team, inc)
	}
	h.sessions.drop(team)
}
