package runtime

import (
	"sync"

	"mailroom/internal/core"
)

// turnTable is which turns this process runs, by team and member, and
// which teams it is deleting: the process's bookkeeping that core asks
// of its Work. One lock covers both, so that a turn is either claimed
// before a deletion marks its team (and the deletion finds it) or
// refused.
type turnTable struct {
	mu      sync.Mutex
	byTeam  map[string]map[string]*core.Turn // team → member → turn
	deletes map[string]int                   // team → deletions in progress
}

// TurnClaimed registers tr unless its team is being deleted here
// (core.Work).
func (w *Work) TurnClaimed(tr *core.Turn) bool {
	t := &w.table
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.deletes[tr.Team()] > 0 {
		return false
	}
	if t.byTeam == nil {
		t.byTeam = map[string]map[string]*core.Turn{}
	}
	members := t.byTeam[tr.Team()]
	if members == nil {
		members = map[string]*core.Turn{}
		t.byTeam[tr.Team()] = members
	}
	members[tr.Member()] = tr
	return true
}

// TurnEnded forgets tr, unless its member runs another turn here by now
// (core.Work).
func (w *Work) TurnEnded(tr *core.Turn) {
	t := &w.table
	t.mu.Lock()
	defer t.mu.Unlock()
	members := t.byTeam[tr.Team()]
	if members[tr.Member()] != tr {
		return
	}
	delete(members, tr.Member())
	if len(members) == 0 {
		delete(t.byTeam, tr.Team())
	}
}

// TurnRunning reports whether a turn of member of team runs here
// (core.Work).
func (w *Work) TurnRunning(team, member string) bool {
	t := &w.table
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.byTeam[team][member] != nil
}

// TeamTurns is the turns of team that run here (core.Work).
func (w *Work) TeamTurns(team string) []*core.Turn {
	t := &w.table
	t.mu.Lock()
	defer t.mu.Unlock()
	turns := make([]*core.Turn, 0, len(t.byTeam[team]))
	for _, tr := range t.byTeam[team] {
		turns = append(turns, tr)
	}
	return turns
}

// DeletionBegan marks team as being deleted here until end is called
// (core.Work).
func (w *Work) DeletionBegan(team string) (end func()) {
	t := &w.table
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.deletes == nil {
		t.deletes = map[string]int{}
	}
	t.deletes[team]++
	return func() {
		t.mu.Lock()
		defer t.mu.Unlock()
		if t.deletes[team]--; t.deletes[team] <= 0 {
			delete(t.deletes, team)
		}
	}
}
