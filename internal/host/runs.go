package host

import (
	"context"
	"path/filepath"
	"strings"

	"mailroom/internal/core"
	"mailroom/internal/scenario"
	"mailroom/internal/workspace"
)

// Run statuses of a run event.
const (
	RunRunning = "running"
	RunDone    = "done"
)

// RunEvent is the data of a `run` event: a run has created its team
// (running), or it is over (done, with ok).
type RunEvent struct {
	RunID    string `json:"run_id"`
	Scenario string `json:"scenario"`
	Team     string `json:"team"`
	Status   string `json:"status"`
	OK       *bool  `json:"ok,omitempty"`
}

// SubscribeRuns registers fn for the run events (core.EventRun with a
// RunEvent): runs are not a state of core, so their events reach the
// event stream from here, next to core's own. fn must not block.
func (h *Host) SubscribeRuns(fn func(core.Event)) (cancel func()) { return h.runSubs.Subscribe(fn) }

func (h *Host) publishRun(ev RunEvent) {
	h.runSubs.Publish(core.Event{Type: core.EventRun, Team: ev.Team, Data: ev})
}

// Runs reports whether this host runs scenarios (it has a data
// directory).
func (h *Host) Runs() bool { return h.runner != nil }

// runStarted is the runner's OnStart hook: the run's team exists now, so
// it may not be deleted under the run, and the page can switch to it
// while the run works.
func (h *Host) runStarted(runID, team string) {
	h.runMu.Lock()
	if h.runTeams == nil {
		h.runTeams = map[string]bool{}
	}
	h.runTeams[team] = true
	h.runMu.Unlock()
	h.publishRun(RunEvent{RunID: runID, Scenario: ScenarioOf(runID), Team: team, Status: RunRunning})
}

// runEnds forgets that a run works on team.
func (h *Host) runEnds(team string) {
	h.runMu.Lock()
	defer h.runMu.Unlock()
	delete(h.runTeams, team)
}

// RunScenario runs scenario name with opts until it ends or ctx does, and
// announces its start and its end. Without a data directory it is
// not_found.
func (h *Host) RunScenario(ctx context.Context, name string, opts scenario.Options) (scenario.Result, error) {
	if h.runner == nil {
		return scenario.Result{}, core.Errorf(core.CodeNotFound, "This server does not run scenarios.")
	}
	doc, err := h.runner.Run(ctx, name, opts)
	if doc.RunID != "" {
		h.runEnds(doc.Team)
		ok := doc.OK
		h.publishRun(RunEvent{RunID: doc.RunID, Scenario: doc.Scenario, Team: doc.Team, Status: RunDone, OK: &ok})
	}
	return doc, err
}

// GetRun returns a run's document; not_found without a data directory.
func (h *Host) GetRun(ctx context.Context, id string) (scenario.Result, error) {
	if h.runner == nil {
		return scenario.Result{}, core.Errorf(core.CodeNotFound, "No such run.")
	}
	return h.runner.Get(ctx, id)
}

// ScenarioOf names the scenario of a run id (<scenario>-<n>).
func ScenarioOf(runID string) string {
	for _, info := range scenario.Scenarios() {
		if strings.HasPrefix(runID, info.Name+"-") {
			return info.Name
		}
	}
	return ""
}

// DeleteTeam deletes a team with its inboxes, tokens and what this
// machine keeps of it: for a scenario run's team its run document, and
// its workspace. A team a scenario run works on, here or on another
// replica, is refused with member_unavailable.
func (h *Host) DeleteTeam(ctx context.Context, team string) error {
	if err := core.CheckAdmin(ctx); err != nil {
		return err
	}
	// Held across the deletion, so that no run can be announced on the
	// team between the check and the removal.
	h.runMu.Lock()
	defer h.runMu.Unlock()
	if h.runTeams[team] || h.runElsewhere(ctx, team) {
		return core.Errorf(core.CodeMemberUnavailable, "A scenario run is in progress on this team; delete it when the run is over.")
	}
	release := func() error {
		if h.runner != nil {
			// A run's id is its team's name, so the team takes the run's
			// document with it; any other team has no run directory.
			if err := h.runner.Delete(ctx, team); err != nil {
				return core.StorageError(err)
			}
		}
		return h.removeWorkspace(team)
	}
	return h.svc.DeleteTeam(ctx, team, release)
}

// runElsewhere reports whether the run of team (a run's id is its team's
// name) is in progress in another process: its document has no result
// and another replica's lease on it has not expired (RunInProgress).
// A run cannot begin on a team that exists already (each run creates its
// own), so the answer cannot change before the deletion. A document that
// cannot be read is no run in progress here: the deletion itself then
// meets the same store.
func (h *Host) runElsewhere(ctx context.Context, team string) bool {
	if h.runner == nil {
		return false
	}
	doc, err := h.svc.Runs().Get(ctx, team)
	return err == nil && h.leases.RunInProgress(doc)
}

// removeWorkspace deletes team's workspace directory, if any, all or
// nothing across a crash. It is part of deleting the team: once the
// directory is renamed aside the deletion has happened, and what could
// not be removed then is removed at the next start (workspace.Remove).
func (h *Host) removeWorkspace(team string) error {
	if h.workspaces == "" || !core.ValidName(team) {
		return nil
	}
	left, err := workspace.Remove(filepath.Join(h.workspaces, team))
	if err != nil {
		return core.StorageError(err)
	}
	if left != nil {
		h.log.Warn("removing a deleted team's workspace files failed; the next start removes them", "team", team, "err", left)
	}
	return nil
}

// RemoveTrash removes what deletions cut short (a crash, a file that
// resisted) left behind: the trash of deleted teams' workspaces and of
// deleted scenario runs. Each was renamed aside before any of its files
// was removed, so the deletion had already happened; removing the rest
// loses nothing (docs/durability.md). It is called once at start.
func (h *Host) RemoveTrash() {
	dirs := []string{h.workspaces}
	if h.dataDir != "" {
		// The runs directory of older versions, which kept their
		// workspaces there.
		dirs = append(dirs, filepath.Join(h.dataDir, "runs"))
	}
	for _, dir := range dirs {
		if dir == "" {
			continue
		}
		removed, err := workspace.RemoveTrash(dir)
		if len(removed) > 0 {
			h.log.Info("removed the files of deletions cut short", "dir", dir, "removed", len(removed))
		}
		if err != nil {
			h.log.Warn("removing the files of deletions cut short failed; the next start tries again", "dir", dir, "err", err)
		}
	}
}
