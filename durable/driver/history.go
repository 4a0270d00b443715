package driver

import (
	"context"
	"time"
)

// HistoryStore is the optional capability behind durable.Queue.History, the dashboard's
// charts of the last day: each running scheduler writes one row a minute (its outcomes and
// the breaker states it saw), and one instance a minute the fleet's gauges. Without it the
// schedulers record nothing and Queue.History reports that the driver lacks it.
type HistoryStore interface {
	// WriteHistory stores rows, each replacing the row of its minute and instance if there is
	// one, so that a write retried after an unknown outcome does not count twice.
	WriteHistory(ctx context.Context, rows []HistoryRow) error

	// WriteHistoryGauges stores the fleet's gauges of minute unless some instance stored them
	// already: it calls gauges only when the minute has none (a concurrent writer may still
	// win; its gauges are kept), and reports whether it stored them.
	WriteHistoryGauges(ctx context.Context, minute time.Time, gauges func(ctx context.Context) (HistoryGauges, error)) (bool, error)

	// History returns the rows of the minutes from since on, the fleet's rows (Instance "")
	// included, in minute and instance order.
	History(ctx context.Context, since time.Time) ([]HistoryRow, error)

	// PruneHistory deletes the rows of the minutes before before and returns how many.
	PruneHistory(ctx context.Context, before time.Time) (int, error)
}

// HistoryRow is one minute of one instance's history, or of the fleet's (Instance "").
type HistoryRow struct {
	Minute   time.Time // the minute's start, UTC
	Instance string    // the scheduler's instance id; "" for the fleet's gauges
	// Outcomes counts the claims that settled in the minute by record.Settled word; empty in
	// the fleet's row.
	Outcomes map[string]int64
	// Gauges are the fleet's counts at the minute's end; only in the fleet's row.
	Gauges *HistoryGauges
	// Breakers is the worst state (BreakerOpen over BreakerHalfOpen) of each breaker key that
	// was not closed during the minute; keys always closed are left out, and past
	// HistoryBreakerKeys keys BreakersOmitted counts the rest.
	Breakers        map[string]BreakerState
	BreakersOmitted int
}

// HistoryGauges are the fleet's counts at one moment: items per state, dead letters per
// status.
type HistoryGauges struct {
	Items       map[string]int64 `json:"items"`
	DeadLetters map[string]int64 `json:"dead_letters"`
}

// HistoryBreakerKeys is the most breaker keys one history row keeps: the open ones first, then
// in key order. It bounds a row when a dependency with many keys fails at once; the chart
// shows far fewer rows anyway.
const HistoryBreakerKeys = 50
