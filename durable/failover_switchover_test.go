package durable_test

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/switchboard-go/switchboard/durable"
	"github.com/switchboard-go/switchboard/durable/internal/pgtest"
	"github.com/switchboard-go/switchboard/durable/postgres"
)

// TestQueueLeavesADemotedPrimary: a switchover that fences the old primary rather than killing
// it (default_transaction_read_only = on, reloaded, as a tool does before it promotes the
// standby) leaves the pool's connections open to a server that refuses every write with
// SQLSTATE 25006. The queue's pool must not keep them: each fails one call with a definite
// error (nothing stored) and is discarded, and the next connection, dialled through the
// multi-host DSN with target_session_attrs=read-write, reaches the new primary, where
// enqueues and the scheduler's claims go on. Before the fix, every call failed until the
// pool's idle timeout (5 minutes, never under steady traffic).
func TestQueueLeavesADemotedPrimary(t *testing.T) {
	t.Parallel()
	const maxConns = 3
	r := pgtest.StartReplicated(t)
	ctx := context.Background()
	q, err := durable.Open(ctx, postgres.Open(r.DSN, postgres.Config{MaxConns: maxConns}), durable.Config{Policy: fastPolicy})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = q.Close() })
	registerTypes(q)
	var ran atomic.Int64
	m := mediatorFor(t, handlers{work: func(context.Context, *Work) error { ran.Add(1); return nil }})
	start(t, q, m, durable.SchedulerConfig{Workers: 2, PollInterval: 50 * time.Millisecond})
	for i := range 20 { // the pool's connections are open to the primary
		must[durable.Enqueued](t)(q.Enqueue(ctx, &Work{N: i}))
	}
	eventually(t, 30*time.Second, "the first 20 items to run", func() bool { return ran.Load() == 20 })

	// The switchover: the old primary refuses writes, then the standby is promoted.
	old, err := pgx.Connect(ctx, r.Primary.DSN)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = old.Close(context.Background()) })
	if _, err := old.Exec(ctx, "ALTER SYSTEM SET default_transaction_read_only = on"); err != nil {
		t.Fatal(err)
	}
	if _, err := old.Exec(ctx, "SELECT pg_reload_conf()"); err != nil {
		t.Fatal(err)
	}
	eventually(t, 10*time.Second, "the old primary to refuse writes", func() bool {
		c, err := pgx.Connect(ctx, r.Primary.DSN)
		if err != nil {
			return false
		}
		defer func() { _ = c.Close(ctx) }()
		var ro string
		return c.QueryRow(ctx, "SHOW default_transaction_read_only").Scan(&ro) == nil && ro == "on"
	})
	r.Standby.Promote()

	// Each connection open to the old primary fails at most one call, definitely.
	var refused int
	deadline := time.Now().Add(30 * time.Second)
	for n := 20; n < 40; {
		_, err := q.Enqueue(ctx, &Work{N: n})
		if err == nil {
			n++
			continue
		}
		refused++
		pgErr, ok := errors.AsType[*pgconn.PgError](err)
		if errors.Is(err, durable.ErrOutcomeUnknown) || !ok || pgErr.Code != "25006" {
			t.Fatalf("an enqueue on the demoted primary: %v, want a definite error of SQLSTATE 25006 (read-only transaction)", err)
		}
		if time.Now().After(deadline) {
			t.Fatalf("enqueues still fail 30 s after the switchover (%d refused): %v", refused, err)
		}
	}
	t.Logf("%d enqueues refused by the demoted primary before the pool reached the new one", refused)
	if refused > maxConns {
		t.Errorf("%d enqueues refused, more than the pool's %d connections: a connection refused a write twice", refused, maxConns)
	}
	eventually(t, 30*time.Second, "the 20 items enqueued after the switchover to run", func() bool { return ran.Load() == 40 })
	var onNew int
	standby, err := pgx.Connect(ctx, r.Standby.DSN)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = standby.Close(context.Background()) })
	// A handler returns before its outcome is written: the last outcomes may still be on their
	// way when the last handler has run.
	var countErr error
	eventually(t, 30*time.Second, "the 40 outcomes to be written on the new primary", func() bool {
		countErr = standby.QueryRow(ctx, "SELECT count(*) FROM switchboard_items_all WHERE state = 'succeeded'").Scan(&onNew)
		return countErr == nil && onNew == 40
	})
	if countErr != nil || onNew != 40 {
		t.Fatalf("the new primary has %d succeeded items (%v), want 40", onNew, countErr)
	}
}
