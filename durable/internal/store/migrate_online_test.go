package store

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"
)

// onlineSince is the first migration that must run online on a large table: the ones after it
// change the items table a fleet is writing to.
const onlineSince = 25

// TestMigrationsRunOnlineOnAMillionItems (PostgreSQL): the migrations from onlineSince on,
// applied to a table of a million items (finished ones, and pending ones being enqueued
// meanwhile), complete within seconds and never hold the table from an enqueue for a second or
// more: a migration that rewrote the table, or built an index without CONCURRENTLY, would hold
// the enqueues for as long as it ran. An enqueuer inserts an item every few milliseconds on its
// own connection during the migration; its slowest insert is the lock's cost.
func TestMigrationsRunOnlineOnAMillionItems(t *testing.T) {
	dsn := pgDSN(t)
	if dsn == "" {
		t.Skipf("%s not set", pgDSNEnv)
	}
	ctx := context.Background()
	b := postgresBackend(t, dsn)
	db := b.pool(t)
	ms, err := Migrations(Postgres)
	if err != nil {
		t.Fatal(err)
	}
	var before []Migration
	for _, m := range ms {
		if m.Version < onlineSince {
			before = append(before, m)
		}
	}
	if len(before) == len(ms) {
		t.Fatalf("no migration from %d on: move onlineSince", onlineSince)
	}
	if err := Apply(ctx, db, Postgres, before, nil); err != nil {
		t.Fatal(err)
	}
	const rows = 1_000_000
	if _, err := db.ExecContext(ctx, `INSERT INTO switchboard_items (name, payload, state, attempts, next_at, created_at, updated_at, fair_key)
		SELECT 'test.work', '\x7b7d'::bytea, CASE WHEN g % 100 = 0 THEN 'pending' ELSE 'succeeded' END, 1, g, g, g, 'test.work'
		FROM generate_series(1, $1::int) g`, rows); err != nil {
		t.Fatal(err)
	}
	if _, err := db.ExecContext(ctx, "VACUUM (ANALYZE) switchboard_items"); err != nil {
		t.Fatal(err)
	}

	enq := b.pool(t)
	enq.SetMaxOpenConns(1)
	stop := make(chan struct{})
	var (
		wg       sync.WaitGroup
		slowest  time.Duration
		inserts  int
		enqueErr error
	)
	wg.Go(func() {
		tick := time.NewTicker(2 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-stop:
				return
			case <-tick.C:
			}
			start := time.Now()
			_, err := enq.ExecContext(ctx, `INSERT INTO switchboard_items (name, payload, state, next_at, created_at, updated_at, fair_key, token)
				VALUES ('test.work', '\x7b7d'::bytea, 'pending', 0, 0, 0, 'test.work', $1)`, fmt.Sprint("tok-", time.Now().UnixNano()))
			if err != nil {
				enqueErr = err
				return
			}
			slowest, inserts = max(slowest, time.Since(start)), inserts+1
		}
	})
	start := time.Now()
	err = Apply(ctx, db, Postgres, ms, nil)
	took := time.Since(start)
	if err != nil {
		close(stop)
		wg.Wait()
		t.Fatal(err)
	}
	// The items that finished before migration 0029 are moved out of the claim's table by the
	// pruner, a batch a transaction, while the enqueues go on.
	moveStart, moved := time.Now(), 0
	for {
		n, busy, err := New(db, Postgres, false).MoveFinished(ctx)
		if err != nil || busy {
			close(stop)
			wg.Wait()
			t.Fatalf("move finished items: %d moved, busy %v, %v", moved, busy, err)
		}
		if moved += n; n < PruneBatch {
			break
		}
	}
	moveTook := time.Since(moveStart)
	close(stop)
	wg.Wait()
	if want := rows - rows/100; moved != want {
		t.Errorf("moved %d finished items, want %d", moved, want)
	}
	var live int
	if err := db.QueryRowContext(ctx, `SELECT COUNT(*) FROM switchboard_items WHERE state <> 'pending'`).Scan(&live); err != nil || live != 0 {
		t.Errorf("%d finished items left in the claim's table, %v", live, err)
	}
	if enqueErr != nil {
		t.Fatalf("an enqueue failed during the migrations: %v", enqueErr)
	}
	// The store enqueues and claims on the migrated table.
	st := New(db, Postgres, false)
	if _, _, err := st.Enqueue(ctx, NewItem{Name: "test.work", Payload: []byte(`{}`), Now: time.Now(), NextAt: time.Now()}); err != nil {
		t.Fatalf("enqueue after the migrations: %v", err)
	}
	t.Logf("migrations %d to %d on %d items: %v, then %d finished items moved in %v; %d enqueues meanwhile, the slowest %v",
		onlineSince, ms[len(ms)-1].Version, rows, took, moved, moveTook, inserts, slowest)
	if took > 10*time.Second || slowest >= time.Second {
		t.Errorf("migrations took %v and held an enqueue %v: they must run online (well under a second's hold)", took, slowest)
	}
}
