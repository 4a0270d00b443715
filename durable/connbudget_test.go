package durable_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/switchboard-go/switchboard/behaviors/breaker"
	"github.com/switchboard-go/switchboard/behaviors/ratelimit"
	"github.com/switchboard-go/switchboard/durable"
	"github.com/switchboard-go/switchboard/durable/internal/pgtest"
	"github.com/switchboard-go/switchboard/durable/postgres"
	"github.com/switchboard-go/switchboard/durable/record"
	"github.com/switchboard-go/switchboard/mediator"
)

// An instance on a budget of one or two connections does everything it does on more, only
// slower: no engine call holds a connection while it asks for another, so nothing waits for
// itself. Under a burst of enqueues, a draining scheduler with a concurrency limit on the
// items' key, a breaker store with a subscriber and a rate-limit store in use, every item
// succeeds; the instance never holds more connections than its budget, and with two it
// listens on exactly one.
func TestSmallBudgetsDrain(t *testing.T) {
	dsn := pgDSN(t)
	if dsn == "" {
		t.Skipf("%s not set", pgDSNEnv)
	}
	for _, budget := range []int{1, 2} {
		t.Run(map[int]string{1: "one", 2: "two"}[budget], func(t *testing.T) {
			app := "budget-" + randomSuffix()
			target, err := pgtest.WithParam(pgtest.Schema(t, dsn, "budget_"), "application_name", app)
			if err != nil {
				t.Fatal(err)
			}
			ctx := context.Background()
			q := openQueue(t, postgres.Open(target, postgres.Config{MaxConns: budget}), durable.Config{Policy: fastPolicy, Workers: 8, PollInterval: 20 * time.Millisecond})
			if _, err := q.SetConcurrencyLimit(ctx, "api", 3, "ops"); err != nil {
				t.Fatal(err)
			}
			bs := newBreakerStore(t, q, "budget", durable.BreakerStoreConfig{})
			stop := bs.Subscribe(func(breaker.Shared) {})
			t.Cleanup(stop)
			permits, err := durable.NewRateLimitStore(q, durable.RateLimitStoreConfig{Name: "budget", Instance: "i1"})
			if err != nil {
				t.Fatal(err)
			}
			limiter := ratelimit.New(ratelimit.Config{Rate: 1000, Key: func(any) string { return "api" }, Store: permits})
			t.Cleanup(func() { _ = limiter.Close() })
			var (
				mu    sync.Mutex
				calls = map[int]int{}
			)
			startScheduler(t, must[*durable.Scheduler](t)(durable.NewScheduler(q, mediatorFor(t, handlers{work: func(ctx context.Context, w *Work) error {
				if _, _, err := bs.Transition(ctx, breaker.Transition{Key: "api", To: breaker.StateClosed, Owner: "i1"}); err != nil {
					return err
				}
				mu.Lock()
				calls[w.N]++
				mu.Unlock()
				return nil
			}}, func(m *mediator.Mediator) { m.Use(limiter) }), durable.SchedulerConfig{})))

			db := pgtest.Open(t, dsn)
			held := func() (conns, listening int) {
				if err := db.QueryRowContext(ctx, `SELECT COUNT(*), COUNT(*) FILTER (WHERE query LIKE 'LISTEN%')
					FROM pg_stat_activity WHERE application_name = $1`, app).Scan(&conns, &listening); err != nil {
					t.Fatal(err)
				}
				return conns, listening
			}
			most := 0
			sampled := make(chan struct{})
			done := make(chan struct{})
			go func() { // measuring: pg_stat_activity every few milliseconds until the drain ends
				defer close(sampled)
				tick := time.NewTicker(5 * time.Millisecond)
				defer tick.Stop()
				for {
					select {
					case <-done:
						return
					case <-tick.C:
						if c, _ := held(); c > most {
							most = c
						}
					}
				}
			}()
			const n = 200
			ids := make([]record.ItemID, n)
			var wg sync.WaitGroup
			for i := range n {
				wg.Go(func() {
					ids[i] = must[durable.Enqueued](t)(q.Enqueue(ctx, &Work{N: i}, durable.WithBreakerKey("api"))).ID
				})
			}
			wg.Wait()
			for _, id := range ids {
				waitState(t, q, id, record.StateSucceeded)
			}
			close(done)
			<-sampled
			if most > budget {
				t.Errorf("the instance held %d connections at once, over its budget of %d", most, budget)
			}
			if _, listening := held(); budget == 2 && listening != 1 || budget == 1 && listening != 0 {
				t.Errorf("%d connections listen with a budget of %d; want %d", listening, budget, budget-1)
			}
			mu.Lock()
			defer mu.Unlock()
			for i := range n {
				if calls[i] != 1 {
					t.Errorf("item %d ran %d times", i, calls[i])
				}
			}
			t.Logf("budget %d: %d items, at most %d connections", budget, n, most)
		})
	}
}
