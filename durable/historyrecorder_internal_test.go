package durable

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"go.uber.org/zap"

	"github.com/switchboard-go/switchboard/behaviors/breaker"
	"github.com/switchboard-go/switchboard/durable/driver"
	"github.com/switchboard-go/switchboard/durable/internal/dbhealth"
	"github.com/switchboard-go/switchboard/durable/internal/store"
)

// historyClock is a clock moved by hand.
type historyClock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *historyClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *historyClock) After(d time.Duration) (<-chan time.Time, func() bool) {
	t := time.NewTimer(d)
	return t.C, t.Stop
}

func (c *historyClock) set(t time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = t
}

// memHistory is a driver.HistoryStore in memory whose writes fail while failing is set.
type memHistory struct {
	failing bool
	rows    map[string]driver.HistoryRow // by minute and instance
	gauges  []time.Time
}

func (m *memHistory) WriteHistory(_ context.Context, rows []driver.HistoryRow) error {
	if m.failing {
		return errors.New("database down")
	}
	for _, r := range rows {
		m.rows[r.Minute.Format(time.RFC3339)+"/"+r.Instance] = r
	}
	return nil
}

func (m *memHistory) WriteHistoryGauges(ctx context.Context, minute time.Time, g func(context.Context) (driver.HistoryGauges, error)) (bool, error) {
	m.gauges = append(m.gauges, minute)
	return true, nil
}

func (m *memHistory) History(context.Context, time.Time) ([]driver.HistoryRow, error) {
	return nil, nil
}
func (m *memHistory) PruneHistory(context.Context, time.Time) (int, error) { return 0, nil }

func (m *memHistory) row(t *testing.T, minute time.Time) driver.HistoryRow {
	t.Helper()
	r, ok := m.rows[minute.Format(time.RFC3339)+"/i1"]
	if !ok {
		t.Fatalf("no row of minute %s; rows %v", minute, m.rows)
	}
	return r
}

// A minute's outcomes are counted by how each claim settled (a completion the store refused
// is not); a half-open of 300 ms inside a minute is that minute's state of the key, an open
// the worst state of the minute it happened in and of each minute it lasts into; a key closed
// all minute is absent; a failed flush keeps its minutes for the next one, which writes them
// with their own counts; Shutdown's flush writes the minute in progress.
func TestHistoryRecorderMinutes(t *testing.T) {
	t0 := time.Date(2030, 1, 2, 3, 4, 0, 0, time.UTC)
	clock := &historyClock{now: t0.Add(5 * time.Second)}
	mem := &memHistory{rows: map[string]driver.HistoryRow{}}
	h := &historyRecorder{st: mem, clock: clock, instance: "i1", logger: zap.NewNop(),
		storeCtx: func() (context.Context, context.CancelFunc) { return context.WithCancel(context.Background()) },
		health:   &dbhealth.Health{Log: zap.NewNop()}}
	reg := breaker.NewRegistry(breaker.Config{})
	h.listen([]*breaker.Registry{reg})

	// Minute 0: two successes, a dead item, a completion the store refused.
	h.settled([]store.Completion{{State: store.StateSucceeded}, {State: store.StateSucceeded}, {State: store.StateDead}, {State: store.StateSucceeded}},
		[]error{nil, nil, nil, errors.New("lease lost")})
	// Minute 1: a half-open of 300 ms.
	clock.set(t0.Add(time.Minute + 20*time.Second))
	h.changed(0, breaker.StateChange{Key: "pay", From: breaker.StateClosed, To: breaker.StateHalfOpen})
	clock.set(t0.Add(time.Minute + 20300*time.Millisecond))
	h.changed(0, breaker.StateChange{Key: "pay", From: breaker.StateHalfOpen, To: breaker.StateClosed})
	// Minute 2: the database is down; "mail" opens and stays open into minute 3.
	clock.set(t0.Add(2*time.Minute + time.Second))
	mem.failing = true
	h.flush(false)
	if len(mem.rows) != 0 {
		t.Fatalf("rows written while the database failed: %v", mem.rows)
	}
	h.changed(0, breaker.StateChange{Key: "mail", From: breaker.StateClosed, To: breaker.StateOpen})
	h.settled([]store.Completion{{State: store.StatePending, Outcome: store.OutcomeFailed}}, []error{nil})
	clock.set(t0.Add(3*time.Minute + time.Second))
	mem.failing = false
	h.flush(false)

	r0 := mem.row(t, t0)
	if r0.Outcomes["succeeded"] != 2 || r0.Outcomes["dead"] != 1 || len(r0.Outcomes) != 2 || len(r0.Breakers) != 0 {
		t.Fatalf("minute 0: %+v; want 2 succeeded, 1 dead, no breakers", r0)
	}
	if r1 := mem.row(t, t0.Add(time.Minute)); r1.Breakers["pay"] != driver.BreakerHalfOpen || len(r1.Outcomes) != 0 {
		t.Fatalf("minute 1: %+v; want pay half-open, no outcomes", r1)
	}
	if r2 := mem.row(t, t0.Add(2*time.Minute)); r2.Breakers["mail"] != driver.BreakerOpen || len(r2.Breakers) != 1 || r2.Outcomes["retried"] != 1 {
		t.Fatalf("minute 2: %+v; want mail open, one retried", r2)
	}
	if len(mem.gauges) != 1 || !mem.gauges[0].Equal(t0.Add(2*time.Minute)) {
		t.Fatalf("gauges written for %v; want minute 2 once (not while the database failed)", mem.gauges)
	}
	// Shutdown's flush: minute 3 in progress, "mail" still open from before it.
	h.flush(true)
	if r3 := mem.row(t, t0.Add(3*time.Minute)); r3.Breakers["mail"] != driver.BreakerOpen {
		t.Fatalf("minute 3: %+v; want mail open since minute 2", r3)
	}
}

// A minute keeps at most driver.HistoryBreakerKeys keys, the open ones first, and counts the
// rest.
func TestHistoryRecorderBoundsKeys(t *testing.T) {
	a := &historyAcc{minute: time.Unix(0, 0).UTC(), breakers: map[string]breaker.State{}}
	for i := range driver.HistoryBreakerKeys + 10 {
		a.breakers[string(rune('A'+i%26))+string(rune('a'+i/26))] = breaker.StateHalfOpen
	}
	a.breakers["zz-open"] = breaker.StateOpen
	r := a.row("i1")
	if len(r.Breakers) != driver.HistoryBreakerKeys || r.BreakersOmitted != 11 {
		t.Fatalf("%d keys kept, %d omitted; want %d and 11", len(r.Breakers), r.BreakersOmitted, driver.HistoryBreakerKeys)
	}
	if r.Breakers["zz-open"] != driver.BreakerOpen {
		t.Fatal("the open key, last by name, was left out; the open keys come first")
	}
}
