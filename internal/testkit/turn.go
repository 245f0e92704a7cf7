package testkit

import (
	"context"
	"testing"

	"mailroom/internal/core"
)

// WaitingTurn begins a turn of member of team that waits until it is
// cancelled, and returns once it runs; its result arrives on done when it
// ends. A failure to run it fails the test.
func WaitingTurn(t testing.TB, svc *core.Service, team, member string) (done <-chan core.TurnResult) {
	t.Helper()
	started := make(chan struct{})
	ended := make(chan core.TurnResult, 1)
	go func() {
		res, err := svc.RunTurn(context.Background(), team, member, func(ctx context.Context, _ []core.Entry) (core.TurnOutcome, error) {
			close(started)
			<-ctx.Done()
			return core.TurnOutcome{}, ctx.Err()
		})
		if err != nil {
			t.Error(err)
		}
		ended <- res
	}()
	<-started
	return ended
}
