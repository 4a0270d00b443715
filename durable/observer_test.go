package durable_test

import (
	"context"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/switchboard-go/switchboard/behaviors/breaker"
	"github.com/switchboard-go/switchboard/durable"
	"github.com/switchboard-go/switchboard/durable/record"
	"github.com/switchboard-go/switchboard/mediator"
)

// queueEvents is an observer of a queue's claims, settled claims, dead letters and breaker
// state changes, attached to the mediator alone.
type queueEvents struct {
	mu      sync.Mutex
	claims  int
	settled []string
	dead    []string
	changes []string
}

func (o *queueEvents) OnClaim(time.Duration, int, error) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.claims++
}

func (o *queueEvents) OnSettled(name string, outcome record.Settled) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.settled = append(o.settled, name+" "+outcome)
}

func (o *queueEvents) OnDead(_ context.Context, d record.DeadLetter) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.dead = append(o.dead, d.Error)
}

func (o *queueEvents) OnStateChange(c breaker.StateChange) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.changes = append(o.changes, c.To.String())
}

// An observer attached to the mediator the queue is started with (Observe) hears the
// queue's claims, settled claims and dead letters, and the state changes of the breakers
// guarding its items, with nothing listed in the queue's Config.
func TestStartAttachesTheMediatorsObservers(t *testing.T) {
	t.Parallel()
	reg := breaker.NewRegistry(breaker.Config{FailureThreshold: 1, Key: func(any) string { return "work" }})
	q := sqliteBackend(t).queue(t, durable.Config{Policy: fastPolicy, Breakers: reg, PollInterval: 5 * time.Millisecond})
	obs := &queueEvents{}
	m := mediatorFor(t, handlers{work: func(_ context.Context, w *Work) error {
		if w.N == 2 {
			return errPermanent
		}
		return nil
	}}, func(m *mediator.Mediator) { m.Observe(obs) })
	if err := q.Start(m); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = q.Shutdown(context.Background()) })
	ok := must[durable.Enqueued](t)(q.Enqueue(context.Background(), &Work{N: 1})).ID
	waitState(t, q, ok, record.StateSucceeded)
	bad := must[durable.Enqueued](t)(q.Enqueue(context.Background(), &Work{N: 2})).ID
	waitState(t, q, bad, record.StateDead)
	reg.Declare("work")
	if err := reg.Trip("work"); err != nil { // an operator's: the queue's registry tells the observer
		t.Fatal(err)
	}
	eventually(t, 10*time.Second, "the observer to hear both items settle and the dead letter", func() bool {
		obs.mu.Lock()
		defer obs.mu.Unlock()
		return len(obs.settled) == 2 && len(obs.dead) == 1
	})
	obs.mu.Lock()
	defer obs.mu.Unlock()
	if obs.claims < 2 || !slices.Equal(obs.settled, []string{"test.work succeeded", "test.work dead"}) || obs.dead[0] != errPermanent.Error() ||
		!slices.Equal(obs.changes, []string{"open"}) {
		t.Fatalf("heard %d claims, settled %q, dead %q, breaker changes %q", obs.claims, obs.settled, obs.dead, obs.changes)
	}
}
