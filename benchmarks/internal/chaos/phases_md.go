package chaos

import (
	"fmt"
	"io"
	"strings"
	"time"
)

// WritePhases writes, for each scenario the first scorecard ran, a Markdown table of its phases
// (warmup left out) with each system's measures side by side: completed jobs/s, pickup p50,
// p95 and p99, jobs lost and run twice among those enqueued in the phase, how long after a fault
// or pressure phase the throughput took to recover, the phase's most frequent wait event and the
// hot tables' dead tuples and size at its end; and, for each other system, its jobs/s and pickup
// p95 as ratios to the first's.
func WritePhases(w io.Writer, cards ...Scorecard) error {
	if len(cards) == 0 {
		return fmt.Errorf("chaos: WritePhases: no scorecards")
	}
	var b strings.Builder
	for _, first := range cards[0].Cells {
		fmt.Fprintf(&b, "\n#### %s\n\n| phase |", first.Scenario)
		sep := "|---|"
		for i, s := range cards {
			fmt.Fprintf(&b, " %s jobs/s | %s pickup p50 / p95 / p99 | %s lost, twice | %s recovered | %s top wait | %s dead tuples, size |",
				s.System, s.System, s.System, s.System, s.System, s.System)
			sep += "--:|--:|--:|--:|---|--:|"
			if i > 0 {
				fmt.Fprintf(&b, " jobs/s %s ÷ %s | p95 %s ÷ %s |", s.System, cards[0].System, s.System, cards[0].System)
				sep += "--:|--:|"
			}
		}
		b.WriteString("\n" + sep + "\n")
		for _, p := range first.Result.Phases {
			label := p.Window.Phase.Label
			fmt.Fprintf(&b, "| %s (%s) |", label, p.Window.Phase.Kind)
			for i, s := range cards {
				c, ok := s.Cell(first.Scenario)
				q, found := c.Result.Phase(label)
				if !ok || !found {
					b.WriteString(" – | – | – | – | – | – |")
					if i > 0 {
						b.WriteString(" – | – |")
					}
					continue
				}
				fmt.Fprintf(&b, " %.1f | %s / %s / %s | %d, %d | %s | %s | %s |", q.Throughput,
					ms(q.Pickup.P50), ms(q.Pickup.P95), ms(q.Pickup.P99), q.Lost, q.RunTwice, recovered(q), topWait(q.Diagnostics), tables(q.Diagnostics))
				if i > 0 {
					fmt.Fprintf(&b, " %s | %s |", ratio(q.Throughput, p.Throughput), ratio(float64(q.Pickup.P95), float64(p.Pickup.P95)))
				}
			}
			b.WriteString("\n")
		}
	}
	_, err := io.WriteString(w, b.String())
	return err
}

// ms formats d in milliseconds; "–" when there was no sample.
func ms(d time.Duration) string {
	if d <= 0 {
		return "–"
	}
	return fmt.Sprintf("%.1f ms", float64(d)/float64(time.Millisecond))
}

// ratio formats a ÷ b; "–" when b is zero.
func ratio(a, b float64) string {
	if b == 0 {
		return "–"
	}
	return fmt.Sprintf("%.2f×", a/b)
}

func topWait(d Diagnostics) string {
	if len(d.WaitEvents) == 0 {
		return "–"
	}
	e := d.WaitEvents[0]
	return fmt.Sprintf("%s/%s (%d)", e.Type, e.Event, e.Samples)
}

// tables is the hot tables' dead tuples and size, summed over the tables.
func tables(d Diagnostics) string {
	if len(d.DeadTuples) == 0 {
		return "–"
	}
	var n, size int64
	for _, v := range d.DeadTuples {
		n += v
	}
	for _, v := range d.TableBytes {
		size += v
	}
	if len(d.TableBytes) == 0 {
		return fmt.Sprint(n)
	}
	return fmt.Sprintf("%d, %.1f MB", n, float64(size)/1e6)
}

// recovered is how long after the phase the throughput recovered, for a fault or pressure
// phase; "never" when it did not; "" for the others.
func recovered(p PhaseReport) string {
	if !p.Window.Phase.Faulty() && p.Window.Phase.Kind != HighLoad {
		return ""
	}
	if !p.Recovered {
		return "never"
	}
	return p.Recovery.Round(time.Second).String()
}
