package durable

import (
	"cmp"
	"context"
	"slices"
	"sync"
	"time"

	"go.uber.org/zap"

	"github.com/switchboard-go/switchboard/behaviors"
	"github.com/switchboard-go/switchboard/behaviors/breaker"
	"github.com/switchboard-go/switchboard/durable/driver"
	"github.com/switchboard-go/switchboard/durable/internal/dbhealth"
	"github.com/switchboard-go/switchboard/durable/internal/store"
)

// historyPending is the most finished minutes a recorder keeps while its database refuses
// them: an hour, older minutes dropped first (and logged). Each flush tries them all again.
const historyPending = 60

// historyRecorder is one scheduler's part of the history (Queue.History): it counts the
// outcomes the claim loop settles and the states of the breakers guarding the items, minute
// by minute by the queue's clock, and once a minute writes the minutes finished (and, if no
// instance did yet, the fleet's gauges of the minute that just ended). A flush runs on its own
// goroutine: the claim loop only takes a short lock to count.
type historyRecorder struct {
	st       driver.HistoryStore
	clock    behaviors.Clock
	instance string
	logger   *zap.Logger
	storeCtx func() (context.Context, context.CancelFunc)
	health   *dbhealth.Health
	gauges   func(ctx context.Context) (driver.HistoryGauges, error)

	mu      sync.Mutex
	cur     *historyAcc
	states  []map[string]breaker.State // per registry listened to: its keys not closed now
	pending []driver.HistoryRow        // finished minutes not yet written
	removes []func()                   // the listeners' removals
}

// historyAcc is what one minute has gathered so far.
type historyAcc struct {
	minute   time.Time
	outcomes map[string]int64
	breakers map[string]breaker.State // the worst state of each key not closed in the minute
}

// listen follows the state changes of regs, starting from the keys not closed now.
func (h *historyRecorder) listen(regs []*breaker.Registry) {
	h.mu.Lock()
	defer h.mu.Unlock()
	for i, r := range regs {
		now := map[string]breaker.State{}
		for _, snap := range r.Snapshot() {
			if snap.State != breaker.StateClosed {
				now[snap.Key] = snap.State
			}
		}
		h.states = append(h.states, now)
		h.removes = append(h.removes, r.AddListener(func(c breaker.StateChange) { h.changed(i, c) }))
	}
	if h.cur == nil {
		h.cur = h.newAcc(h.clock.Now().UTC().Truncate(time.Minute)) // with the keys not closed now
	}
}

// stopListening removes the breaker listeners.
func (h *historyRecorder) stopListening() {
	h.mu.Lock()
	removes := h.removes
	h.removes = nil
	h.mu.Unlock()
	for _, remove := range removes {
		remove()
	}
}

// changed notes a state change of registry i's breaker: a state other than closed, however
// short, is the minute's if it is worse than what the minute saw of the key.
func (h *historyRecorder) changed(i int, c breaker.StateChange) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.rollLocked(h.clock.Now())
	if c.To == breaker.StateClosed {
		delete(h.states[i], c.Key)
		return
	}
	h.states[i][c.Key] = c.To
	h.cur.breakers[c.Key] = worse(h.cur.breakers[c.Key], c.To)
}

// stateRank orders the states by how bad they are: open, then half-open, then closed.
func stateRank(s breaker.State) int {
	switch s {
	case breaker.StateOpen:
		return 2
	case breaker.StateHalfOpen:
		return 1
	}
	return 0
}

// worse returns the worse of two states.
func worse(a, b breaker.State) breaker.State {
	if stateRank(b) > stateRank(a) {
		return b
	}
	return a
}

// settled counts the completions of batch the store took, by how each claim ended.
func (h *historyRecorder) settled(batch []store.Completion, results []error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.rollLocked(h.clock.Now())
	for i, c := range batch {
		if results[i] == nil {
			h.cur.outcomes[settledOutcome(c)]++
		}
	}
}

// rollLocked makes the minute of now the current one: the minutes before it are finished and
// wait to be written; each new minute starts with the keys not closed at its start. After a
// gap of more than historyPending minutes (a clock that jumped) it starts at now's minute.
func (h *historyRecorder) rollLocked(now time.Time) {
	m := now.UTC().Truncate(time.Minute)
	if h.cur == nil {
		h.cur = h.newAcc(m)
		return
	}
	for h.cur.minute.Before(m) {
		h.pending = append(h.pending, h.cur.row(h.instance))
		next := h.cur.minute.Add(time.Minute)
		if m.Sub(next) > historyPending*time.Minute {
			next = m
		}
		h.cur = h.newAcc(next)
	}
	if n := len(h.pending) - historyPending; n > 0 {
		h.logger.Warn("durable: dropped minutes of history the database did not take", zap.String("instance", h.instance),
			zap.Int("minutes", n), zap.Time("from", h.pending[0].Minute))
		h.pending = slices.Delete(h.pending, 0, n)
	}
}

func (h *historyRecorder) newAcc(m time.Time) *historyAcc {
	a := &historyAcc{minute: m, outcomes: map[string]int64{}, breakers: map[string]breaker.State{}}
	for _, now := range h.states {
		for k, st := range now {
			a.breakers[k] = worse(a.breakers[k], st)
		}
	}
	return a
}

// row is the minute as stored: at most driver.HistoryBreakerKeys keys, the open ones first,
// then in key order.
func (a *historyAcc) row(instance string) driver.HistoryRow {
	r := driver.HistoryRow{Minute: a.minute, Instance: instance, Outcomes: a.outcomes}
	if len(a.breakers) == 0 {
		return r
	}
	keys := make([]string, 0, len(a.breakers))
	for k := range a.breakers {
		keys = append(keys, k)
	}
	slices.SortFunc(keys, func(x, y string) int {
		return cmp.Or(cmp.Compare(stateRank(a.breakers[y]), stateRank(a.breakers[x])), cmp.Compare(x, y))
	})
	if len(keys) > driver.HistoryBreakerKeys {
		r.BreakersOmitted = len(keys) - driver.HistoryBreakerKeys
		keys = keys[:driver.HistoryBreakerKeys]
	}
	r.Breakers = make(map[string]driver.BreakerState, len(keys))
	for _, k := range keys {
		r.Breakers[k], _ = storedBreakerState(a.breakers[k])
	}
	return r
}

// run flushes at the start of every minute of the queue's clock (the system's, in
// production) until end is closed, and then once more with the minute in progress.
func (h *historyRecorder) run(end <-chan struct{}) {
	defer h.stopListening()
	for {
		now := h.clock.Now()
		t := time.NewTimer(now.Truncate(time.Minute).Add(time.Minute).Sub(now))
		select {
		case <-end:
			t.Stop()
			h.flush(true)
			return
		case <-t.C:
			h.flush(false)
		}
	}
}

// flush writes the finished minutes (with last, the minute in progress too: the scheduler
// stops), keeping them for the next flush when the database fails, and the fleet's gauges of
// the minute that just ended unless another instance wrote them.
func (h *historyRecorder) flush(last bool) {
	h.mu.Lock()
	now := h.clock.Now()
	h.rollLocked(now)
	rows := h.pending
	h.pending = nil
	if last {
		rows = append(rows, h.cur.row(h.instance))
		h.cur = h.newAcc(h.cur.minute)
	}
	h.mu.Unlock()
	ctx, cancel := h.storeCtx()
	err := h.st.WriteHistory(ctx, rows)
	cancel()
	h.health.Note("write history", err)
	if err != nil {
		h.mu.Lock()
		h.pending = append(rows, h.pending...)
		h.mu.Unlock()
		return
	}
	if last {
		return
	}
	ctx, cancel = h.storeCtx()
	_, err = h.st.WriteHistoryGauges(ctx, now.UTC().Truncate(time.Minute).Add(-time.Minute), h.gauges)
	cancel()
	h.health.Note("write history gauges", err)
}
