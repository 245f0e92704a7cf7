package core

import "sync"

// noWork is the Work of a Service built without a runtime (tools and
// tests that use core alone): it keeps which turns run and which teams
// are being deleted, as any Work must for the rules to hold, and renews
// no lease and drops no wake.
type noWork struct {
	mu       sync.Mutex
	running  map[turnRef]*Turn
	deleting map[string]int
}

type turnRef struct{ team, member string }

func (w *noWork) TurnClaimed(tr *Turn) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.deleting[tr.team] > 0 {
		return false
	}
	if w.running == nil {
		w.running = map[turnRef]*Turn{}
	}
	w.running[turnRef{tr.team, tr.Member()}] = tr
	return true
}

func (w *noWork) TurnBegan(*Turn) {}

func (w *noWork) TurnEnded(tr *Turn) {
	ref := turnRef{tr.team, tr.Member()}
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.running[ref] == tr {
		delete(w.running, ref)
	}
}

func (w *noWork) TurnRunning(team, member string) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.running[turnRef{team, member}] != nil
}

func (w *noWork) TeamTurns(team string) []*Turn {
	w.mu.Lock()
	defer w.mu.Unlock()
	var turns []*Turn
	for ref, tr := range w.running {
		if ref.team == team {
			turns = append(turns, tr)
		}
	}
	return turns
}

func (w *noWork) DeletionBegan(team string) (end func()) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.deleting == nil {
		w.deleting = map[string]int{}
	}
	w.deleting[team]++
	return func() {
		w.mu.Lock()
		defer w.mu.Unlock()
		if w.deleting[team]--; w.deleting[team] <= 0 {
			delete(w.deleting, team)
		}
	}
}

func (w *noWork) TeamWorkEnds(string, string) {}
