package core

import "sync"

// TurnTable is which turns this process runs, by team and member, and
// which teams it is deleting: the bookkeeping every Work keeps for core
// (internal/runtime's Work embeds it). One lock covers both, so that a
// turn is either claimed before a deletion marks its team (and the
// deletion finds it) or refused. Its zero value is empty and ready.
type TurnTable struct {
	mu      sync.Mutex
	byTeam  map[string]map[string]*Turn // team → member → turn
	deletes map[string]int              // team → deletions in progress
}

// TurnClaimed registers tr unless its team is being deleted here
// (Work.TurnClaimed).
func (t *TurnTable) TurnClaimed(tr *Turn) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.deletes[tr.team] > 0 {
		return false
	}
	if t.byTeam == nil {
		t.byTeam = map[string]map[string]*Turn{}
	}
	members := t.byTeam[tr.team]
	if members == nil {
		members = map[string]*Turn{}
		t.byTeam[tr.team] = members
	}
	members[tr.Member()] = tr
	return true
}

// TurnEnded forgets tr, unless its member runs another turn here by now
// (Work.TurnEnded).
func (t *TurnTable) TurnEnded(tr *Turn) {
	t.mu.Lock()
	defer t.mu.Unlock()
	members := t.byTeam[tr.team]
	if members[tr.Member()] != tr {
		return
	}
	delete(members, tr.Member())
	if len(members) == 0 {
		delete(t.byTeam, tr.team)
	}
}

// TurnRunning reports whether a turn of member of team runs here
// (Work.TurnRunning).
func (t *TurnTable) TurnRunning(team, member string) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.byTeam[team][member] != nil
}

// TeamTurns is the turns of team that run here (Work.TeamTurns).
func (t *TurnTable) TeamTurns(team string) []*Turn {
	t.mu.Lock()
	defer t.mu.Unlock()
	turns := make([]*Turn, 0, len(t.byTeam[team]))
	for _, tr := range t.byTeam[team] {
		turns = append(turns, tr)
	}
	return turns
}

// DeletionBegan marks team as being deleted here until end is called
// (Work.DeletionBegan).
func (t *TurnTable) DeletionBegan(team string) (end func()) {
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

// LocalWork is the Work of a Service built without a runtime (tools and
// tests that use core alone, and Options.Work left nil): it keeps the
// turn table, as any Work must for the rules to hold, and renews no lease
// and drops no wake.
type LocalWork struct{ TurnTable }

// TurnBegan does nothing: no lease is renewed (Work.TurnBegan).
func (*LocalWork) TurnBegan(*Turn) {}

// TeamWorkEnds does nothing: there are no wakes to drop
// (Work.TeamWorkEnds).
func (*LocalWork) TeamWorkEnds(string, string) {}

// EndTeamWork ends what this process does for incarnation inc of team
// ("" any), as w keeps it: the runtime is told first (Work.TeamWorkEnds,
// which drops the team's pending wakes), then the turns of it this
// process runs are cancelled (they end cancelled at their next boundary)
// and returned. It never blocks on a turn. A deletion here calls it
// before the team is removed; the process's Live calls it for a deletion
// on another replica (EventTeamDeleted).
func EndTeamWork(w Work, team, inc string) []*Turn {
	w.TeamWorkEnds(team, inc)
	var turns []*Turn
	for _, tr := range w.TeamTurns(team) {
		if inc == "" || tr.inc == inc {
			turns = append(turns, tr)
		}
	}
	for _, tr := range turns {
		tr.requestCancel()
	}
	return turns
}
