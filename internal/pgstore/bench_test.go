package pgstore_test

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"mailroom/internal/core"
	"mailroom/internal/pgstore"
	"mailroom/internal/pgtest"
	"mailroom/internal/testkit"
)

// BenchmarkSend measures a send through core on PostgreSQL, without
// HTTP: n clients, each sending to its own team, on one store. Beside the
// time per send it reports what each send cost the database (the CPU of
// the cluster's processes, and the WAL it wrote) and this process (its
// CPU, the store's and core's work and the events' delivery back through
// LISTEN):
//
//	go test -run '^$' -bench Send -benchtime 5s ./internal/pgstore/
func BenchmarkSend(b *testing.B) {
	for _, n := range []int{1, 64} {
		b.Run(fmt.Sprintf("clients=%d", n), func(b *testing.B) { benchSend(b, n) })
	}
}

func benchSend(b *testing.B, n int) {
	ctx := context.Background()
	cluster := pgtest.Shared(b)
	url := pgtest.New(b)
	s, err := pgstore.Open(ctx, url, pgstore.Options{MaxConns: 32})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { s.Close() })
	svc := testkit.Serve(b, s, core.Options{})
	limits := core.DefaultLimits()
	limits.InboxMessages = 1 << 20
	limits.InboxBytes = 1 << 28
	actx := make([]context.Context, n)
	for i := range n {
		team := fmt.Sprintf("bench-%02d", i)
		if _, _, err := svc.CreateTeam(core.AsAdmin(ctx), core.TeamSpec{Name: team, Limits: &limits,
			Members: []core.MemberSpec{{Name: "a", Role: "sends"}}}); err != nil {
			b.Fatal(err)
		}
		actx[i] = core.WithPrincipal(ctx, core.Principal{Team: team, Member: "a"})
		if _, err := svc.Send(actx[i], core.SendInput{Team: team, To: core.LeadName, Body: "warm up"}); err != nil {
			b.Fatal(err)
		}
	}
	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		b.Fatal(err)
	}
	defer conn.Close(ctx)
	lsn := func() int64 {
		var v int64
		if err := conn.QueryRow(ctx, `SELECT pg_current_wal_lsn() - '0/0'`).Scan(&v); err != nil {
			b.Fatal(err)
		}
		return v
	}
	server := func() time.Duration {
		v, err := cluster.ServerCPU()
		if err != nil {
			b.Fatal(err)
		}
		return v
	}
	wal0, srv0, cpu0 := lsn(), server(), testkit.ProcessCPU(b)
	b.ResetTimer()
	var next atomic.Int64
	var wg sync.WaitGroup
	errs := make(chan error, n)
	for i := range n {
		wg.Go(func() {
			for next.Add(1) <= int64(b.N) {
				if _, err := svc.Send(actx[i], core.SendInput{Team: fmt.Sprintf("bench-%02d", i), To: core.LeadName, Body: "hello"}); err != nil {
					errs <- err
					return
				}
			}
		})
	}
	wg.Wait()
	b.StopTimer()
	cpu, srv, wal := testkit.ProcessCPU(b)-cpu0, server()-srv0, lsn()-wal0
	close(errs)
	for err := range errs {
		b.Fatal(err)
	}
	per := func(d time.Duration) float64 { return float64(d.Microseconds()) / float64(b.N) }
	b.ReportMetric(per(srv), "db-µs/op")
	b.ReportMetric(per(cpu), "go-µs/op")
	b.ReportMetric(float64(wal)/float64(b.N), "wal-B/op")
}
