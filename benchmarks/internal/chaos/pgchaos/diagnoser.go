package pgchaos

import (
	"context"
	"sort"
	"sync"
	"time"

	"github.com/switchboard-go/switchboard/benchmarks/internal/chaos"
)

// SamplePeriod is how often the Diagnoser samples what the systems' backends wait on: often
// enough that a phase of a minute gathers a few hundred samples, seldom enough to cost the
// server nothing measurable.
const SamplePeriod = 250 * time.Millisecond

// Diagnoser samples pg_stat_activity for the systems' backends from Start until ctx ends, and
// answers each phase's diagnostics from its samples and the hot tables' statistics.
type Diagnoser struct {
	s Server

	mu      sync.Mutex
	samples []sample
}

type sample struct {
	at         time.Time
	typ, event string
}

// NewDiagnoser returns a Diagnoser of s; call Run to sample.
func NewDiagnoser(s Server) *Diagnoser {
	if s.Clock == nil {
		s.Clock = chaos.RealClock
	}
	return &Diagnoser{s: s}
}

// Run samples until ctx ends. A sample the server does not answer (it is down) is skipped.
func (d *Diagnoser) Run(ctx context.Context) {
	for ctx.Err() == nil {
		rows, err := d.s.DB.QueryContext(ctx, `SELECT COALESCE(wait_event_type, 'CPU'), COALESCE(wait_event, 'running')
	FROM pg_stat_activity WHERE datname = current_database() AND application_name LIKE $1 || '%' AND state = 'active'`, d.s.AppName)
		if err == nil {
			at := d.s.Clock.Now()
			var got []sample
			for rows.Next() {
				s := sample{at: at}
				if rows.Scan(&s.typ, &s.event) == nil {
					got = append(got, s)
				}
			}
			_ = rows.Close()
			d.mu.Lock()
			d.samples = append(d.samples, got...)
			d.mu.Unlock()
		}
		select {
		case <-ctx.Done():
		case <-d.s.Clock.After(SamplePeriod):
		}
	}
}

// Diagnose returns the phase's diagnostics: the hot tables' dead tuples and sizes now, and the
// wait events sampled in w, the five most frequent first.
func (d *Diagnoser) Diagnose(ctx context.Context, w chaos.Window) (chaos.Diagnostics, error) {
	out := chaos.Diagnostics{DeadTuples: map[string]int64{}, TableBytes: map[string]int64{}}
	for _, t := range d.s.HotTables {
		var dead, size int64
		err := d.s.DB.QueryRowContext(ctx, `SELECT COALESCE((SELECT n_dead_tup FROM pg_stat_user_tables
	WHERE relid = to_regclass($1)), 0), COALESCE(pg_total_relation_size(to_regclass($1)), 0)`, t).Scan(&dead, &size)
		if err != nil {
			return out, err
		}
		out.DeadTuples[t], out.TableBytes[t] = dead, size
	}
	counts := map[[2]string]int{}
	d.mu.Lock()
	for _, s := range d.samples {
		if w.Contains(s.at) {
			counts[[2]string{s.typ, s.event}]++
		}
	}
	d.mu.Unlock()
	for k, n := range counts {
		out.WaitEvents = append(out.WaitEvents, chaos.WaitEvent{Type: k[0], Event: k[1], Samples: n})
	}
	sort.Slice(out.WaitEvents, func(i, j int) bool {
		a, b := out.WaitEvents[i], out.WaitEvents[j]
		if a.Samples != b.Samples {
			return a.Samples > b.Samples
		}
		return a.Type+a.Event < b.Type+b.Event
	})
	if len(out.WaitEvents) > 5 {
		out.WaitEvents = out.WaitEvents[:5]
	}
	return out, nil
}
