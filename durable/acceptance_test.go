package durable_test

import (
	"context"
	"database/sql"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/switchboard-go/switchboard/behaviors/retry"
	"github.com/switchboard-go/switchboard/durable"
	istore "github.com/switchboard-go/switchboard/durable/internal/store"
	"github.com/switchboard-go/switchboard/durable/record"
)

// seed inserts n Work items due now with multi-row inserts, much faster than n Enqueue calls.
func seed(t testing.TB, store *istore.Store, n int, now time.Time) {
	t.Helper()
	ph := func(i int) string {
		if store.Engine().String() == "postgres" {
			return fmt.Sprintf("$%d", i)
		}
		return "?"
	}
	const chunk = 1000
	for off := 0; off < n; off += chunk {
		size := min(chunk, n-off)
		var b strings.Builder
		b.WriteString("INSERT INTO switchboard_items (name, payload, state, next_at, created_at, updated_at) VALUES ")
		args := make([]any, 0, size)
		for i := range size {
			if i > 0 {
				b.WriteString(", ")
			}
			fmt.Fprintf(&b, "('test.work', %s, 'pending', %d, %[2]d, %[2]d)", ph(i+1), now.UnixMicro())
			args = append(args, []byte(fmt.Sprintf(`{"n":%d}`, off+i)))
		}
		if _, err := store.DB().Exec(b.String(), args...); err != nil {
			t.Fatal(err)
		}
	}
}

// TestThreeInstancesFailTwiceThenSucceed runs three scheduler instances, each with its own
// pool, over one database. Every item's handler fails twice and then succeeds. No item may be
// lost, none may succeed twice, and every item's attempt rows must tell the same story.
func TestThreeInstancesFailTwiceThenSucceed(t *testing.T) {
	eachBackendAndBouncer(t, func(t *testing.T, b backend) {
		n := 10_000
		if b.name == "sqlite" {
			// Three processes' pools take turns at SQLite's single write lock, backing off while
			// it is busy: the same check, with fewer items.
			n = 300
		}
		policy := retry.Policy{MaxAttempts: 5, BaseDelay: time.Millisecond, Multiplier: 2, MaxDelay: 10 * time.Millisecond}
		var (
			successes sync.Map // item id → *atomic.Int32
			calls     atomic.Int64
		)
		stores := make([]*istore.Store, 3)
		queues := make([]*durable.Queue, 3)
		for i := range stores {
			queues[i] = b.queue(t, durable.Config{Policy: policy})
			stores[i] = durable.StoreOf(queues[i])
		}
		seed(t, stores[0], n, time.Now())
		m := mediatorFor(t, handlers{work: func(ctx context.Context, w *Work) error {
			calls.Add(1)
			d, _ := durable.FromContext(ctx, w)
			if d.Attempt <= 2 {
				return retryableErr{fmt.Sprintf("failure %d", d.Attempt)}
			}
			c, _ := successes.LoadOrStore(d.ItemID, new(atomic.Int32))
			c.(*atomic.Int32).Add(1)
			return nil
		}})
		instances := map[string]bool{}
		begin := time.Now()
		for i, q := range queues {
			id := fmt.Sprintf("instance-%d", i)
			instances[id] = true
			start(t, q, m, durable.SchedulerConfig{InstanceID: id, Workers: 8, BatchSize: 100, PollInterval: 5 * time.Millisecond})
		}
		eventually(t, 5*time.Minute, "every item to succeed", func() bool {
			return stats(t, queues[0]).Counts[record.StateSucceeded] == int64(n)
		})
		t.Logf("%s: %d items, %d dispatches in %s", b.name, n, calls.Load(), time.Since(begin).Round(time.Millisecond))

		st := stats(t, queues[0])
		if st.Counts[record.StatePending]+st.Counts[record.StateRunning]+st.Counts[record.StateDead] != 0 {
			t.Fatalf("stats %+v", st.Counts)
		}
		var distinct int
		successes.Range(func(k, v any) bool {
			distinct++
			if c := v.(*atomic.Int32).Load(); c != 1 {
				t.Errorf("item %v succeeded %d times", k, c)
			}
			return true
		})
		if distinct != n {
			t.Fatalf("%d items succeeded in the handler, want %d", distinct, n)
		}
		if got := calls.Load(); got != int64(3*n) {
			t.Errorf("%d dispatches, want %d", got, 3*n)
		}
		checkAllAttemptRows(t, stores[0], n, instances)
	})
}

// checkAllAttemptRows reads every attempt at once (the rows, and the successes recorded on
// their items) and checks each item has exactly 1:failed 2:failed 3:succeeded, made by known
// instances, and an attempt count of 3.
func checkAllAttemptRows(t *testing.T, store *istore.Store, n int, instances map[string]bool) {
	t.Helper()
	rows, err := store.DB().Query(`SELECT i.id, i.attempts, a.attempt, a.outcome, a.instance, a.error
		FROM switchboard_items_all i JOIN switchboard_attempts a ON a.item_id = i.id
		UNION ALL
		SELECT i.id, i.attempts, i.attempts, 'succeeded', i.success_instance, NULL
		FROM switchboard_items_all i WHERE i.success_id IS NOT NULL
		ORDER BY 1, 3`)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	type row struct {
		attempt          int
		outcome, instanc string
		errText          sql.NullString
	}
	byItem := map[int64][]row{}
	count := map[int64]int{}
	for rows.Next() {
		var id int64
		var itemAttempts int
		var r row
		if err := rows.Scan(&id, &itemAttempts, &r.attempt, &r.outcome, &r.instanc, &r.errText); err != nil {
			t.Fatal(err)
		}
		byItem[id] = append(byItem[id], r)
		count[id] = itemAttempts
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	if len(byItem) != n {
		t.Fatalf("%d items have attempt rows, want %d", len(byItem), n)
	}
	bad := 0
	for id, rs := range byItem {
		ok := len(rs) == 3 && count[id] == 3 &&
			rs[0].attempt == 1 && rs[0].outcome == "failed" && rs[0].errText.String == "failure 1" &&
			rs[1].attempt == 2 && rs[1].outcome == "failed" && rs[1].errText.String == "failure 2" &&
			rs[2].attempt == 3 && rs[2].outcome == "succeeded" && !rs[2].errText.Valid
		for _, r := range rs {
			ok = ok && instances[r.instanc]
		}
		if !ok {
			bad++
			if bad <= 5 {
				t.Errorf("item %d: attempts %d, rows %+v", id, count[id], rs)
			}
		}
	}
	if bad > 0 {
		t.Fatalf("%d items with inconsistent attempt rows", bad)
	}
}
