package durable

import (
	"context"
	"fmt"
	"time"

	"github.com/switchboard-go/switchboard/behaviors/breaker"
	"github.com/switchboard-go/switchboard/durable/driver"
	"github.com/switchboard-go/switchboard/durable/record"
)

// HistoryMinute is one minute of the queue's history (Queue.History), merged over the
// instances whose schedulers ran in it.
type HistoryMinute struct {
	Minute time.Time // the minute's start, UTC
	// Instances is how many instances' schedulers wrote the minute: 0 for a minute that has
	// only the fleet's gauges.
	Instances int
	// Outcomes counts the claims that settled in the minute, summed over the instances, by
	// how each ended (the words of Config.OnSettled: succeeded, retried, dead, refused, …);
	// a word no claim ended with is absent.
	Outcomes map[record.Settled]int64
	// Items and DeadLetters are the fleet's counts at the minute's end (Stats' Counts and
	// DeadLetters), sampled by one instance a minute; nil when no instance did (none ran, or
	// the database failed then).
	Items       map[record.ItemState]int64
	DeadLetters map[record.DeadLetterStatus]int
	// Breakers is the worst state (open over half-open) each breaker key guarding the items
	// was in during the minute on any instance, however briefly: a half-open of 300 ms shows.
	// Keys closed all minute are absent. An instance keeps at most driver.HistoryBreakerKeys
	// keys a minute, the open ones first; BreakersOmitted sums those it left out.
	Breakers        map[string]breaker.State
	BreakersOmitted int
}

// History returns the queue's history from since on (the zero time: all that is kept), one
// HistoryMinute per minute some instance wrote, oldest first. Each running scheduler writes
// its minute once the minute is over (and the minute in progress at Shutdown), so the last
// minute or two may be missing or partial; the rows are kept Config.HistoryRetention. It fails
// with ErrNoHistory when the queue's driver keeps no history (driver.HistoryStore).
func (q *Queue) History(ctx context.Context, since time.Time) ([]HistoryMinute, error) {
	hs, ok := q.store.(driver.HistoryStore)
	if !ok {
		return nil, fmt.Errorf("%w: the queue's driver (executor %T) does not implement driver.HistoryStore", ErrNoHistory, q.store)
	}
	rows, err := hs.History(ctx, since)
	if err != nil {
		return nil, err
	}
	var out []HistoryMinute
	for _, r := range rows {
		if len(out) == 0 || !out[len(out)-1].Minute.Equal(r.Minute) {
			out = append(out, HistoryMinute{Minute: r.Minute, Outcomes: map[record.Settled]int64{}})
		}
		mergeHistoryRow(&out[len(out)-1], r)
	}
	return out, nil
}

// mergeHistoryRow adds one instance's row (or the fleet's) to its minute.
func mergeHistoryRow(m *HistoryMinute, r driver.HistoryRow) {
	if r.Instance != "" {
		m.Instances++
	}
	for k, n := range r.Outcomes {
		m.Outcomes[k] += n
	}
	if g := r.Gauges; g != nil {
		m.Items = make(map[record.ItemState]int64, len(g.Items))
		for k, n := range g.Items {
			m.Items[record.ItemState(k)] = n
		}
		m.DeadLetters = make(map[record.DeadLetterStatus]int, len(g.DeadLetters))
		for k, n := range g.DeadLetters {
			m.DeadLetters[record.DeadLetterStatus(k)] = int(n)
		}
	}
	for k, st := range r.Breakers {
		s, ok := sharedBreakerState(st)
		if !ok || s == breaker.StateClosed {
			continue
		}
		if m.Breakers == nil {
			m.Breakers = map[string]breaker.State{}
		}
		m.Breakers[k] = worse(m.Breakers[k], s)
	}
	m.BreakersOmitted += r.BreakersOmitted
}

// historyGauges samples the fleet's counts for the history (Stats, by name).
func (q *Queue) historyGauges(ctx context.Context) (driver.HistoryGauges, error) {
	items, letters, err := q.Counts(ctx)
	if err != nil {
		return driver.HistoryGauges{}, err
	}
	return driver.HistoryGauges{Items: items, DeadLetters: letters}, nil
}
