package durable_test

import (
	"context"
	"errors"
	"sync"
	"testing"

	"github.com/switchboard-go/switchboard/durable"
	"github.com/switchboard-go/switchboard/durable/driver"
	"github.com/switchboard-go/switchboard/durable/record"
)

// TestBulkActionStartedTwiceAtOnce: two identical bulk actions started at once (a double click,
// a retried request, two operators) make one action; the other start is refused naming it,
// whichever instance starts it, and nothing of it is stored. Once the first has finished, an
// identical one may start. An action of another filter is not held back. Both started, on main,
// and both ran over the same letters.
func TestBulkActionStartedTwiceAtOnce(t *testing.T) {
	eachBackend(t, func(t *testing.T, b backend) {
		ctx := context.Background()
		e := newBulkEnv(t, b, durable.Config{})
		other := b.queue(t, durable.Config{}) // a second instance on the same database
		e.capture(t, "orders", "bad", 5)
		spec := durable.BulkActionSpec{Kind: record.BulkDiscard, Reason: "cleanup", Filter: durable.DeadLetterFilter{Source: "orders"}}
		const starts = 8
		var (
			wg      sync.WaitGroup
			mu      sync.Mutex
			started []record.BulkActionID
			refused []error
		)
		for i := range starts {
			q := e.q
			if i%2 == 1 {
				q = other
			}
			wg.Go(func() {
				a, err := q.StartBulkAction(ctx, spec, "alice")
				mu.Lock()
				defer mu.Unlock()
				if err != nil {
					refused = append(refused, err)
					return
				}
				started = append(started, a.ID)
			})
		}
		wg.Wait()
		if len(started) != 1 || len(refused) != starts-1 {
			t.Fatalf("%d started %v, %d refused %v; want one started", len(started), started, len(refused), refused)
		}
		for _, err := range refused {
			var active *driver.BulkActionActiveError
			if !errors.Is(err, durable.ErrBulkActionActive) || !errors.As(err, &active) || active.ID != int64(started[0]) {
				t.Fatalf("refusal %v; want ErrBulkActionActive naming action %d", err, started[0])
			}
		}
		if list := must[[]durable.BulkAction](t)(e.q.BulkActions(ctx, 0, 0)); len(list) != 1 {
			t.Fatalf("stored %d actions", len(list))
		}
		// Another filter is another action.
		spec2 := spec
		spec2.Filter.Source = "billing"
		second, err := e.q.StartBulkAction(ctx, spec2, "alice")
		if err != nil {
			t.Fatalf("an action of another filter: %v", err)
		}
		// Once both have ended, the same action may start again.
		for _, id := range []record.BulkActionID{started[0], second.ID} {
			if _, err := e.q.CancelBulkAction(ctx, id, "alice", "started by mistake"); err != nil {
				t.Fatal(err)
			}
		}
		if _, err := e.q.StartBulkAction(ctx, spec, "alice"); err != nil {
			t.Fatalf("after the first was cancelled: %v", err)
		}
	})
}
