package app_test

import (
	"context"
	"log/slog"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"mailroom/internal/agent"
	"mailroom/internal/app"
	"mailroom/internal/core"
	"mailroom/internal/host"
	"mailroom/internal/mail"
	"mailroom/internal/providertest"
)

// slowCancel returns a cancelled request's error only after a while.
type slowCancel struct{ base http.RoundTripper }

func (s slowCancel) RoundTrip(r *http.Request) (*http.Response, error) {
	resp, err := s.base.RoundTrip(r)
	if r.Context().Err() != nil {
		time.Sleep(500 * time.Millisecond)
	}
	return resp, err
}

// TestShutdownEndsWakeBeforeStoreCloses: a woken turn waiting on its
// model when the server stops is cancelled, records its end, and only
// then, once every goroutine the server started has returned, is the
// store closed; nothing the server started writes after that.
func TestShutdownEndsWakeBeforeStoreCloses(t *testing.T) {
	const key = "sk-shutdown-test"
	fake := providertest.NewAnthropic(t, key)
	fake.Push(providertest.Reply{Stall: true}) // the model never answers
	env := map[string]string{agent.EnvAnthropicKey: key, agent.EnvAnthropicBase: fake.URL()}

	// A model request that is cancelled takes a while to return, as a
	// connection being torn down may: the turn ends well after the stop.
	slowClient := &http.Client{Transport: slowCancel{fake.Client().Transport}}

	store, err := mail.Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	var (
		mu    sync.Mutex
		order []string
		// atClose is the reader's turn as the store held it when it was
		// closed.
		atClose []core.TurnDoc
	)
	note := func(s string) {
		mu.Lock()
		defer mu.Unlock()
		order = append(order, s)
	}
	var svc *core.Service
	a, err := app.New(t.Context(), store, app.Options{
		AdminToken: "shutdown-admin",
		Logger:     slog.New(slog.DiscardHandler),
		Models: host.ModelOptions{
			Lookup:   func(name string) (string, bool) { v, ok := env[name]; return v, ok },
			Provider: agent.ProviderOptions{MaxRetries: -1, HTTPClient: slowClient, RequestTimeout: time.Minute},
		},
		CloseStore: func() error {
			docs, err := svc.Turns(core.AsAdmin(context.Background()), "crew")
			if err != nil {
				t.Errorf("the turns before the store closed: %v", err)
			}
			mu.Lock()
			atClose = docs
			mu.Unlock()
			note("store closed")
			return store.Close()
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	svc = a.Service()
	svc.Subscribe(func(ev core.Event) {
		if te, ok := ev.Data.(core.TurnEvent); ok && ev.Type == core.EventTurn && te.Status != core.TurnRunning {
			note("turn ended " + te.Status)
		}
	})
	limits := core.DefaultLimits()
	limits.WakeDelayMS = 0
	admin := core.AsAdmin(t.Context())
	if _, _, err := svc.CreateTeam(admin, core.TeamSpec{Name: "crew", Limits: &limits,
		Model:   &core.ModelSettings{Provider: agent.ProviderAnthropic, Name: "claude-test"},
		Members: []core.MemberSpec{{Name: "lead"}, {Name: "reader", Wake: true}}}); err != nil {
		t.Fatal(err)
	}
	if _, err := svc.Send(core.AsMember(t.Context(), "crew", "lead"), core.SendInput{Team: "crew", To: "reader", Body: "read this"}); err != nil {
		t.Fatal(err)
	}
	// The woken turn is in its model request, which never answers.
	deadline := time.Now().Add(30 * time.Second)
	for len(fake.Requests()) == 0 {
		if time.Now().After(deadline) {
			t.Fatal("the woken turn made no model request")
		}
		time.Sleep(5 * time.Millisecond)
	}

	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	begin := time.Now()
	if err := a.Shutdown(ctx); err != nil {
		t.Fatalf("Shutdown = %v, want nil", err)
	}
	if took := time.Since(begin); took > 10*time.Second {
		t.Errorf("Shutdown took %v: it waited for the stalled model instead of cancelling the turn", took)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(order) != 2 || !strings.HasPrefix(order[0], "turn ended ") || order[1] != "store closed" {
		t.Fatalf("order = %q, want the woken turn's end, then the store closed", order)
	}
	if len(atClose) != 1 || atClose[0].Member != "reader" || atClose[0].Status == core.TurnRunning {
		t.Fatalf("turns when the store closed = %+v, want reader's one turn ended", atClose)
	}
	if atClose[0].Trigger.Kind != core.TriggerMail {
		t.Errorf("the turn's trigger = %q, want mail (a woken turn)", atClose[0].Trigger.Kind)
	}
	// A second Shutdown does nothing (the store is not closed twice).
	if err := a.Shutdown(ctx); err != nil || len(order) != 2 {
		t.Errorf("a second Shutdown = %v with order %q, want nil and nothing more", err, order)
	}
}
