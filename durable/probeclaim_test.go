package durable_test

import (
	"context"
	"path/filepath"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"go.uber.org/zap/zaptest"

	"github.com/switchboard-go/switchboard/behaviors"
	"github.com/switchboard-go/switchboard/behaviors/breaker"
	"github.com/switchboard-go/switchboard/behaviors/retry"
	"github.com/switchboard-go/switchboard/durable"
	"github.com/switchboard-go/switchboard/durable/record"
	"github.com/switchboard-go/switchboard/mediator"
)

// bubbleBreakerStore is a breaker.Store in memory on the bubble's clock (a BreakerStore on
// SQLite decides by the database's clock, which a synctest bubble does not move), with the
// contract's compare-and-swap: a claim of the probes applies once the open time, or the
// previous holder's claim, has run out.
type bubbleBreakerStore struct {
	mu   sync.Mutex
	rows map[string]breaker.Shared
}

func (s *bubbleBreakerStore) Transition(_ context.Context, t breaker.Transition) (breaker.Shared, bool, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	now := time.Now()
	row, ok := s.rows[t.Key]
	if !ok {
		row = breaker.Shared{Key: t.Key, State: breaker.StateClosed}
	}
	row.Now = now
	allowed := row.Epoch == t.From
	if allowed && t.To == breaker.StateHalfOpen {
		allowed = row.Epoch == 0 || row.State == breaker.StateOpen && !now.Before(row.OpenUntil) ||
			row.State == breaker.StateHalfOpen && !now.Before(row.ProbeUntil)
	}
	if !allowed {
		return row, false, nil
	}
	row.Epoch++
	row.State, row.Failures, row.By = t.To, t.Failures, t.Owner
	row.ProbeOwner, row.ProbeClaim, row.ProbeUntil = "", "", time.Time{}
	switch t.To {
	case breaker.StateOpen:
		row.OpenedAt, row.OpenUntil = now, now.Add(t.OpenFor)
	case breaker.StateHalfOpen:
		row.ProbeOwner, row.ProbeClaim, row.ProbeUntil, row.LastProbeAt = t.Owner, t.Claim, now.Add(t.ProbeFor), now
	}
	s.rows[t.Key] = row
	return row, true, nil
}

func (s *bubbleBreakerStore) Load(context.Context) ([]breaker.Shared, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []breaker.Shared
	for _, row := range s.rows {
		if row.State != breaker.StateClosed {
			row.Now = time.Now()
			out = append(out, row)
		}
	}
	return out, nil
}

func (s *bubbleBreakerStore) Subscribe(func(breaker.Shared)) (stop func()) { return func() {} }

func (s *bubbleBreakerStore) row(key string) breaker.Shared {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.rows[key]
}

// A fleet's shared breaker is half-open, its probes claimed by an instance that then died (or
// whose probe's verdict never reached the store): nothing will decide it, and no state change
// comes. The items this instance claims meanwhile are refused and parked on the breaker; once
// the dead instance's claim runs out (ProbeUntil) this instance takes the probes over, and the
// items are delivered then, a tenth of the probe timeout after at most, not a Recheck (a
// minute) later.
func TestBubbleItemsParkedBehindADeadInstancesProbeGoWhenItsClaimRunsOut(t *testing.T) {
	path := filepath.Join(t.TempDir(), "q.db")
	synctest.Test(t, func(t *testing.T) {
		ctx := context.Background()
		const probeFor = 2 * time.Second
		begin := time.Now()
		st := &bubbleBreakerStore{rows: map[string]breaker.Shared{"k": {Key: "k", State: breaker.StateHalfOpen, Epoch: 6,
			OpenedAt: begin.Add(-time.Second), ProbeOwner: "dead", ProbeClaim: "claim-of-the-dead", ProbeUntil: begin.Add(probeFor),
			LastProbeAt: begin, By: "dead"}}}
		reg := breaker.NewRegistry(breaker.Config{Key: func(any) string { return "k" }, Store: st, Instance: "this",
			OpenDuration: time.Second, ProbeTimeout: probeFor})
		q := bubbleQueue(t, path, retry.Policy{MaxAttempts: 5, BaseDelay: time.Second, Jitter: behaviors.Off})
		var (
			mu        sync.Mutex
			delivered = map[int]time.Duration{}
		)
		m := mediatorFor(t, handlers{work: func(ctx context.Context, w *Work) error {
			mu.Lock()
			delivered[w.N] = time.Since(begin)
			mu.Unlock()
			return nil
		}}, func(m *mediator.Mediator) { m.Use(breaker.New(reg)) })
		const n = 6
		var ids []record.ItemID
		for i := range n {
			ids = append(ids, must[durable.Enqueued](t)(q.Enqueue(ctx, &Work{N: i})).ID)
		}
		s := must[*durable.Scheduler](t)(durable.NewScheduler(q, m, durable.SchedulerConfig{Workers: 2, PollInterval: 100 * time.Millisecond,
			Breakers: reg, Logger: zaptest.NewLogger(t)}))
		if err := s.Start(); err != nil {
			t.Fatal(err)
		}
		defer func() {
			if err := s.Shutdown(ctx); err != nil {
				t.Error(err)
			}
		}()
		s.Wake()
		// The claim runs out at 2 s; the items parked behind it are due by then and a tenth of
		// the probe timeout, and are claimed at the next poll; the probe closes the breaker
		// and frees the rest.
		time.Sleep(probeFor + probeFor/10 + time.Second)
		synctest.Wait()
		mu.Lock()
		got := len(delivered)
		mu.Unlock()
		if got != n {
			var states []string
			for _, id := range ids {
				it := item(t, q, id)
				states = append(states, string(it.State)+" due "+it.NextAt.Sub(begin).String())
			}
			t.Fatalf("%d of %d items delivered %v after the dead instance's claim ran out; items %v; the breaker %+v",
				got, n, time.Since(begin)-probeFor, states, st.row("k"))
		}
		for i, at := range delivered {
			if at < probeFor {
				t.Errorf("item %d delivered at %v, while the dead instance's claim still held the probes", i, at)
			}
		}
		if row := st.row("k"); row.State != breaker.StateClosed || row.By != "this" {
			t.Errorf("the breaker in the store: %+v; want closed by this instance's probe", row)
		}
	})
}
