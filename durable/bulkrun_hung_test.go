package durable_test

import (
	"context"
	"testing"
	"time"

	"github.com/switchboard-go/switchboard/durable"
	"github.com/switchboard-go/switchboard/durable/record"
)

// A database that hangs while a bulk replay runs, and a Shutdown whose context has ended: the
// replay's outcome, the action's release and the rest get what is left of ShutdownGrace, not a
// timeout of their own each, so Shutdown returns within about the grace.
func TestHungShutdownBoundsBulkWrites(t *testing.T) {
	dsn := pgDSN(t)
	if dsn == "" {
		t.Skipf("%s not set", pgDSNEnv)
	}
	hungLeakCheck(t)
	pg := hungProxiedPostgres(t, dsn)
	e := newBulkEnv(t, backend{name: "postgres", target: pg.target}, durable.Config{})
	ids := e.capture(t, "orders", "boom", 1)
	started := make(chan struct{}, 1)
	e.handle(func(ctx context.Context, _ *Work) error {
		pg.proxy.Freeze() // the database hangs while the handler runs
		started <- struct{}{}
		<-ctx.Done() // honours the shutdown's cancellation
		return ctx.Err()
	})
	ctx := context.Background()
	if _, err := e.q.StartBulkAction(ctx, durable.BulkActionSpec{Kind: record.BulkReplay, Rate: 1000}, "alice"); err != nil {
		t.Fatal(err)
	}
	const grace = 300 * time.Millisecond
	s, err := durable.NewScheduler(e.q, e.m, durable.SchedulerConfig{PollInterval: 5 * time.Millisecond, ShutdownGrace: grace})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Start(); err != nil {
		t.Fatal(err)
	}
	<-started
	sctx, cancel := context.WithCancel(ctx)
	cancel()
	began := time.Now()
	err = s.Shutdown(sctx)
	took := time.Since(began)
	pg.proxy.Thaw()
	t.Logf("Shutdown took %v with ShutdownGrace %v: %v", took.Round(time.Millisecond), grace, err)
	if took > 5*time.Second {
		t.Errorf("Shutdown took %v with an ended context, ShutdownGrace %v and a hung database: the bulk action's writes were not bounded by the grace", took, grace)
	}
	d, _, err := e.q.DeadLetter(ctx, ids[0])
	if err != nil || d.Status != record.DeadLetterFailed {
		t.Fatalf("the letter whose replay was cut off: %+v, %v; want it still failed", d, err)
	}
	pg.drain(t, e.q)
}
