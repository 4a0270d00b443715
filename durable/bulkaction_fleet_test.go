package durable_test

import (
	"context"
	"database/sql"
	"fmt"
	"os"
	"testing"
	"time"

	_ "github.com/jackc/pgx/v5/stdlib"

	"github.com/switchboard-go/switchboard/durable"
	"github.com/switchboard-go/switchboard/durable/record"
	"github.com/switchboard-go/switchboard/mediator"
)

// Child mode "bulk": a scheduler that takes up bulk actions; its Work handler inserts a row
// naming its letter into bulk_runs (an effect the parent counts) and succeeds. Lease and
// ReplayLease come from childLeaseEnv. It stops gracefully on SIGTERM.
func runBulkChild() int {
	ctx := context.Background()
	kind, target := os.Getenv(childBackendEnv), os.Getenv(childTargetEnv)
	lease, err := time.ParseDuration(os.Getenv(childLeaseEnv))
	if err != nil {
		fmt.Fprintln(os.Stderr, "child:", err)
		return 2
	}
	q, err := durable.Open(ctx, targetDriver(kind, target), durable.Config{Policy: fastPolicy, ReplayLease: lease})
	if err != nil {
		fmt.Fprintln(os.Stderr, "child:", err)
		return 2
	}
	defer q.Close()
	registerTypes(q)
	db, err := sql.Open("pgx", target)
	if err != nil {
		fmt.Fprintln(os.Stderr, "child:", err)
		return 2
	}
	defer db.Close()
	m := mediator.New(nil, mediator.Config{})
	mediator.HandleFunc(m, func(ctx context.Context, w *Work) (mediator.Void, error) {
		d, _ := durable.FromContext(ctx, w)
		_, err := db.ExecContext(ctx, "INSERT INTO bulk_runs (letter) VALUES ($1)", int64(d.DeadLetter))
		return mediator.Void{}, err
	})
	mediator.HandleFunc(m, func(context.Context, *Keyed) (mediator.Void, error) { return mediator.Void{}, nil })
	mediator.HandleFunc(m, func(context.Context, *Unique) (mediator.Void, error) { return mediator.Void{}, nil })
	if err := m.Build(); err != nil {
		fmt.Fprintln(os.Stderr, "child:", err)
		return 2
	}
	return serveChild(q, m, durable.SchedulerConfig{Lease: lease, PollInterval: 20 * time.Millisecond})
}

// A replay by filter of 3,000 letters on PostgreSQL, run by a child process that is killed
// (SIGKILL) mid-run; a second process takes the action over once its lease has run out and
// finishes it. Every letter is replayed, none skipped; none ran twice except those whose replay
// was in flight at the kill (their handler may have run, their outcome was not recorded: they
// are replayed again, as the handler's idempotence allows); the totals add up to the letters.
func TestFleetBulkReplaySurvivesSIGKILL(t *testing.T) {
	eachPostgres(t, func(t *testing.T, b backend) {
		// Enough that the kill falls mid-run with a third replayed and many leased; 10,000
		// made it the longest test of the suite (108 s with -race) for the same checks.
		const n = 3_000
		ctx := context.Background()
		e := newBulkEnv(t, b, durable.Config{})
		e.capture(t, "orders", "endpoint down", 1)
		db := b.pool(t)
		for _, stmt := range []string{
			"CREATE TABLE bulk_runs (letter BIGINT NOT NULL)",
			fmt.Sprintf(`INSERT INTO switchboard_dead_letters (source, name, item_key, payload, error, status, retry_count, created_at, updated_at)
		SELECT source, name, item_key, payload, error, 'failed', 0, created_at, updated_at FROM switchboard_dead_letters, generate_series(1, %d)`, n-1),
			// Other letters, which the filter leaves alone.
			`INSERT INTO switchboard_dead_letters (source, name, item_key, payload, error, status, retry_count, created_at, updated_at)
		SELECT 'invoices', name, item_key, payload, error, 'failed', 0, created_at, updated_at FROM switchboard_dead_letters WHERE id <= 50`,
		} {
			if _, err := db.ExecContext(ctx, stmt); err != nil {
				t.Fatal(err)
			}
		}
		a, err := e.q.StartBulkAction(ctx, durable.BulkActionSpec{Kind: record.BulkReplay, Filter: durable.DeadLetterFilter{Source: "orders"},
			Rate: 100_000, MaxInFlight: 16}, "alice")
		if err != nil || a.Matched != n {
			t.Fatalf("start: %+v, %v", a, err)
		}
		// A replay's lease is renewed every third of it, each renewal given a third to answer, and
		// an outcome not written while the lease is held is unknown. With one-second leases, 17
		// replays of a fresh-clone CI run on a loaded machine (a third of the letters took 74 s)
		// ended unknown; three seconds leave the database room, at two seconds more of the second
		// process's wait.
		lease := 3 * time.Second
		extra := childLeaseEnv + "=" + lease.String()
		began := time.Now()
		// The first process's connections carry an application name, so that after the kill the
		// test can wait until the database has ended them (see below).
		const firstApp = "switchboard-bulk-first"
		// Through PgBouncer the server connections outlive the process and serve the next
		// client still named as it was: there the wait is for those with a statement or a
		// transaction begun before the kill (killed: the database's clock then).
		var killed time.Time
		firstConns := func(sinceKill bool) (conns int) {
			q, args := "SELECT COUNT(*) FROM pg_stat_activity WHERE application_name = $1", []any{firstApp}
			if sinceKill {
				q += " AND state IS DISTINCT FROM 'idle' AND COALESCE(xact_start, query_start) < $2"
				args = append(args, killed)
			}
			if err := db.QueryRowContext(ctx, q, args...).Scan(&conns); err != nil {
				t.Fatal(err)
			}
			return conns
		}
		first := startChild(t, b, "bulk", extra, "PGAPPNAME="+firstApp)
		firstID := first.line(t, "READY")[1]
		// The bounds leave room for a loaded machine.
		e.waitActionFor(t, 3*time.Minute, a.ID, "the first process to replay a third of the letters", func(a durable.BulkAction) bool { return a.Totals.Replayed >= n/3 })
		if firstConns(false) == 0 {
			t.Fatalf("no connection is named %s: the wait for the killed process's connections would wait for nothing", firstApp)
		}
		first.kill(t)
		if err := db.QueryRowContext(ctx, "SELECT clock_timestamp()").Scan(&killed); err != nil {
			t.Fatal(err)
		}
		// A statement the process sent before it died still runs to its commit (a letter leased
		// then, say): the leases are read once its connections are gone. (Read at once, a lease
		// committed after the read had a letter abandoned that the read had not seen leased.)
		eventually(t, time.Minute, "the killed process's connections to end", func() bool { return firstConns(b.pooled) == 0 })
		// The letters whose replay the killed process held: in flight at the kill.
		inFlight := map[int64]bool{}
		rows, err := db.QueryContext(ctx, "SELECT id FROM switchboard_dead_letters WHERE status = 'failed' AND replay_owner IS NOT NULL")
		if err != nil {
			t.Fatal(err)
		}
		for rows.Next() {
			var id int64
			if err := rows.Scan(&id); err != nil {
				t.Fatal(err)
			}
			inFlight[id] = true
		}
		if err := rows.Close(); err != nil {
			t.Fatal(err)
		}
		mid := must[durable.BulkAction](t)(e.q.BulkAction(ctx, a.ID))
		if mid.State.Finished() || mid.Totals.Replayed == n || len(inFlight) > 16 {
			t.Fatalf("at the kill: %+v, %d letters in flight", mid, len(inFlight))
		}
		t.Logf("killed after %v at %d replayed, cursor %d, %d letters leased", time.Since(began).Round(time.Millisecond), mid.Totals.Replayed, mid.Cursor, len(inFlight))
		restarted := time.Now()

		second := startChild(t, b, "bulk", extra)
		secondID := second.line(t, "READY")[1]
		done := e.waitActionFor(t, 5*time.Minute, a.ID, "the second process to finish the action", finished)
		t.Logf("the second process finished the action %v after it started", time.Since(restarted).Round(time.Millisecond))
		second.stop(t)
		if done.State != record.BulkDone || done.Totals != (record.BulkActionTotals{Replayed: n}) || done.Totals.Settled() != done.Matched {
			t.Fatalf("action %+v", done)
		}
		var notReplayed, other int
		if err := db.QueryRowContext(ctx, "SELECT COUNT(*) FROM switchboard_dead_letters WHERE source = 'orders' AND status <> 'replayed'").Scan(&notReplayed); err != nil {
			t.Fatal(err)
		}
		if err := db.QueryRowContext(ctx, "SELECT COUNT(*) FROM switchboard_dead_letters WHERE source = 'invoices' AND status = 'failed' AND retry_count = 0").Scan(&other); err != nil {
			t.Fatal(err)
		}
		if notReplayed != 0 || other != 50 {
			t.Fatalf("%d letters of the filter not replayed; %d of 50 others untouched", notReplayed, other)
		}
		// Handler runs per letter: every letter at least once; twice only if in flight at the kill.
		runs := map[int64]int{}
		rows, err = db.QueryContext(ctx, "SELECT letter, COUNT(*) FROM bulk_runs GROUP BY letter")
		if err != nil {
			t.Fatal(err)
		}
		for rows.Next() {
			var id int64
			var c int
			if err := rows.Scan(&id, &c); err != nil {
				t.Fatal(err)
			}
			runs[id] = c
		}
		if err := rows.Close(); err != nil {
			t.Fatal(err)
		}
		// In flight at the kill: the letters the killed process had leased and whose outcome it
		// never recorded, each given an abandoned replay when its lease ran out.
		abandoned := map[int64]bool{}
		rows, err = db.QueryContext(ctx, "SELECT dead_letter_id FROM switchboard_dead_letter_events WHERE outcome = 'abandoned'")
		if err != nil {
			t.Fatal(err)
		}
		for rows.Next() {
			var id int64
			if err := rows.Scan(&id); err != nil {
				t.Fatal(err)
			}
			if abandoned[id] || !inFlight[id] {
				t.Errorf("letter %d: an abandoned replay, but it was not leased at the kill (or twice abandoned)", id)
			}
			abandoned[id] = true
		}
		if err := rows.Close(); err != nil {
			t.Fatal(err)
		}
		twice := 0
		for id, c := range runs {
			switch {
			case c == 2 && abandoned[id]:
				twice++
			case c != 1:
				t.Errorf("letter %d: %d handler runs (in flight at the kill: %v)", id, c, abandoned[id])
			}
		}
		if len(runs) != n {
			t.Fatalf("%d letters' handlers ran, want %d", len(runs), n)
		}
		// Every letter's last event is the action's replay.
		var named int
		if err := db.QueryRowContext(ctx, "SELECT COUNT(*) FROM switchboard_dead_letter_events WHERE bulk_action_id = $1 AND outcome = 'replayed'", int64(a.ID)).Scan(&named); err != nil {
			t.Fatal(err)
		}
		if named != n {
			t.Fatalf("%d replayed events name the action, want %d", named, n)
		}
		t.Logf("in flight at the kill: %d letters (%d leased just after it), of which %d had run their handler (and ran it again); instances %s then %s",
			len(abandoned), len(inFlight), twice, firstID, secondID)
	})
}
