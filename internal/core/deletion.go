package core

import (
	"context"
	"strconv"
	"time"
)

// Deleting a team always wins (docs/api.md, "Deletion always wins"): the
// team's running turns are cancelled and its pending wakes dropped before
// it is removed, so that members that keep mailing each other cannot hold
// it. And nothing started for one team ever acts on a later team of the
// same name: a claimed turn and a pending wake remember the incarnation
// of the team they were made for, and refuse any other.

// DeleteTurnWait bounds how long a deletion waits for the team's cancelled
// turns to end (a running tool finishes first) before it removes the team
// anyway; a turn still running then commits nothing, since its team is
// gone (Turn.update).
const DeleteTurnWait = 3 * time.Second

// teamIncarnation names one life of a team: its creation time and lead's
// token hash, both set when the team is created and never changed, so a
// team deleted and created again by the same name has another.
func teamIncarnation(st *TeamState) string {
	inc := strconv.FormatInt(st.CreatedAt.UnixNano(), 10)
	if len(st.Members) > 0 {
		inc += "/" + st.Members[0].TokenHash
	}
	return inc
}

// teamReplaced is the refusal of a unit of work on a team that is not the
// incarnation it was begun on: that team was deleted.
func teamReplaced() error {
	return Errorf(CodeNotFound, "The team was deleted.")
}

// waitTurns waits until every one of turns has ended, at most wait and no
// longer than ctx allows.
func waitTurns(ctx context.Context, turns []*Turn, wait time.Duration) {
	timer := time.NewTimer(wait)
	defer timer.Stop()
	for _, tr := range turns {
		select {
		case <-tr.done:
		case <-timer.C:
			return
		case <-ctx.Done():
			return
		}
	}
}

// requestCancel asks the turn to stop at its next boundary, ending
// cancelled; it does not wait.
func (tr *Turn) requestCancel() {
	tr.mu.Lock()
	tr.cancelRequested = true
	if tr.cancel != nil {
		tr.cancel(errTurnCancelled)
	}
	tr.mu.Unlock()
}

// update runs fn as a unit of work on the turn's team, refused with
// not_found when the team is no longer the incarnation the turn was
// claimed on: it was deleted (and perhaps created again by the same name)
// while the turn ran, and nothing of the turn may reach the new team.
func (tr *Turn) update(ctx context.Context, fn func(u *unit) error) error {
	return tr.s.update(ctx, tr.team, func(u *unit) error {
		if teamIncarnation(u.st) != tr.inc {
			return teamReplaced()
		}
		return fn(u)
	})
}
