package store

import (
	"context"
	"testing"
	"time"
)

// Two instances' rows of a minute and the fleet's gauges are kept apart and read back in
// minute and instance order; a row written again replaces its outcomes (a retried flush does
// not count twice); the gauges are written once a minute, the second writer not even asked;
// the retention's delete leaves the minutes from its bound on.
func TestHistoryWriteReadPrune(t *testing.T) {
	eachBackend(t, func(t *testing.T, b backend) {
		s := b.open(t)
		ctx := context.Background()
		m0 := time.Date(2027, 1, 1, 3, 0, 0, 0, time.UTC)
		m1 := m0.Add(time.Minute)
		if err := s.WriteHistory(ctx, []HistoryRow{
			{Minute: m0, Instance: "a", Outcomes: map[string]int64{"succeeded": 3, "dead": 1}},
			{Minute: m0, Instance: "b", Outcomes: map[string]int64{"succeeded": 2},
				Breakers: map[string]BreakerState{"pay": BreakerHalfOpen}},
			{Minute: m1, Instance: "a", Outcomes: map[string]int64{"retried": 9}, Breakers: map[string]BreakerState{"pay": BreakerOpen}, BreakersOmitted: 4},
		}); err != nil {
			t.Fatal(err)
		}
		// The flush of m1 retried: the row is replaced, not added to.
		if err := s.WriteHistory(ctx, []HistoryRow{{Minute: m1, Instance: "a", Outcomes: map[string]int64{"retried": 9},
			Breakers: map[string]BreakerState{"pay": BreakerOpen}, BreakersOmitted: 4}}); err != nil {
			t.Fatal(err)
		}
		asked := 0
		gauges := func(context.Context) (HistoryGauges, error) {
			asked++
			return HistoryGauges{Items: map[string]int64{"pending": 40}, DeadLetters: map[string]int64{"failed": 7}}, nil
		}
		if wrote, err := s.WriteHistoryGauges(ctx, m0, gauges); err != nil || !wrote {
			t.Fatalf("first gauges of the minute: wrote %v, %v", wrote, err)
		}
		if wrote, err := s.WriteHistoryGauges(ctx, m0, gauges); err != nil || wrote || asked != 1 {
			t.Fatalf("second gauges of the minute: wrote %v, %v, gauges asked %d times, want once", wrote, err, asked)
		}
		rows, err := s.History(ctx, m0)
		if err != nil {
			t.Fatal(err)
		}
		if len(rows) != 4 {
			t.Fatalf("history: %d rows, want 4: %+v", len(rows), rows)
		}
		want := []struct {
			minute   time.Time
			instance string
		}{{m0, ""}, {m0, "a"}, {m0, "b"}, {m1, "a"}}
		for i, w := range want {
			if !rows[i].Minute.Equal(w.minute) || rows[i].Instance != w.instance {
				t.Fatalf("row %d: %s %q, want %s %q", i, rows[i].Minute, rows[i].Instance, w.minute, w.instance)
			}
		}
		if g := rows[0].Gauges; g == nil || g.Items["pending"] != 40 || g.DeadLetters["failed"] != 7 {
			t.Fatalf("fleet row's gauges: %+v", g)
		}
		if rows[1].Gauges != nil || rows[1].Outcomes["succeeded"] != 3 || rows[1].Outcomes["dead"] != 1 || rows[1].Breakers != nil {
			t.Fatalf("instance a's row of m0: %+v", rows[1])
		}
		if rows[2].Breakers["pay"] != BreakerHalfOpen {
			t.Fatalf("instance b's breakers: %+v", rows[2].Breakers)
		}
		if rows[3].Outcomes["retried"] != 9 || rows[3].Breakers["pay"] != BreakerOpen || rows[3].BreakersOmitted != 4 {
			t.Fatalf("instance a's row of m1 after the retried write: %+v", rows[3])
		}
		if rows, err := s.History(ctx, m1); err != nil || len(rows) != 1 {
			t.Fatalf("history since m1: %+v, %v", rows, err)
		}
		n, err := s.PruneHistory(ctx, m1)
		if err != nil || n != 3 {
			t.Fatalf("prune before m1: %d rows, %v; want 3", n, err)
		}
		if rows, err := s.History(ctx, time.Time{}); err != nil || len(rows) != 1 || !rows[0].Minute.Equal(m1) {
			t.Fatalf("history after the prune: %+v, %v", rows, err)
		}
	})
}
