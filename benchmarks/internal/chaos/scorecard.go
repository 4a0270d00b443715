package chaos

import (
	"fmt"
	"io"
	"strings"
	"time"
)

// Cell is one system's outcome in one scenario, judged by the pass rule: the scenario ran to
// its end without a timeout or error, no acknowledged job was lost, and the throughput got back
// to RecoveryShare of the clean phase's within the scenario's RecoveryBound after its last
// fault or pressure phase. Jobs run twice are shown but do not fail a cell: every system
// measured is at-least-once, and a duplicate after a kill is the price of not losing the job.
type Cell struct {
	// Scenario is the scenario's name.
	Scenario string
	// Class is its half of the scorecard.
	Class Class
	// Result is the run judged.
	Result Result
	// RecoveryBound is the scenario's, the recovery was judged against.
	RecoveryBound time.Duration
	// Pass is the verdict.
	Pass bool
	// Reasons say why a cell failed, one per broken rule; empty when it passed.
	Reasons []string
}

// Judge applies the pass rule to a run of scenario sc.
func Judge(sc Scenario, r Result) Cell {
	c := Cell{Scenario: sc.Name, Class: sc.Class, Result: r, RecoveryBound: sc.RecoveryBound}
	if r.Timeline.TimedOut {
		c.Reasons = append(c.Reasons, fmt.Sprintf("timed out after %v", sc.EffectiveTimeout()))
	} else if r.Err != nil {
		c.Reasons = append(c.Reasons, "error: "+r.Err.Error())
	}
	if n := len(r.Counts.Lost); n > 0 {
		c.Reasons = append(c.Reasons, fmt.Sprintf("%d lost", n))
	}
	switch {
	case !r.Recovered:
		c.Reasons = append(c.Reasons, "never recovered")
	case r.Recovery > sc.RecoveryBound:
		c.Reasons = append(c.Reasons, fmt.Sprintf("recovered in %v > %v", r.Recovery.Round(time.Second), sc.RecoveryBound))
	}
	c.Pass = len(c.Reasons) == 0
	return c
}

// Scorecard is one system's cells across the scenarios run.
type Scorecard struct {
	// System is the system's name.
	System string
	// Cells are its cells in the order run.
	Cells []Cell
}

// Score returns the cells of class passed and run: chaos n/5, pressure n/4 for a full run.
func (s Scorecard) Score(class Class) (passed, run int) {
	for _, c := range s.Cells {
		if c.Class == class {
			run++
			if c.Pass {
				passed++
			}
		}
	}
	return passed, run
}

// Cell returns s's cell of scenario, and whether s ran it.
func (s Scorecard) Cell(scenario string) (Cell, bool) {
	for _, c := range s.Cells {
		if c.Scenario == scenario {
			return c, true
		}
	}
	return Cell{}, false
}

// WriteMarkdown writes the scorecards side by side as a Markdown table: a row per scenario
// (in the order of the first scorecard's cells, then any others'), per system its verdict,
// recovery time, lost and run-twice counts, clean throughput and pickup p95 (and the worst
// phase's p95), and each other system's clean throughput and pickup p95 as ratios to the
// first's; then the chaos and pressure scores, and the pass rule.
func WriteMarkdown(w io.Writer, cards ...Scorecard) error {
	if len(cards) == 0 {
		return fmt.Errorf("chaos: WriteMarkdown: no scorecards")
	}
	var order []string
	seen := map[string]bool{}
	for _, s := range cards {
		for _, c := range s.Cells {
			if !seen[c.Scenario] {
				seen[c.Scenario] = true
				order = append(order, c.Scenario)
			}
		}
	}
	var b strings.Builder
	b.WriteString("| scenario |")
	sep := "|---|"
	for i, s := range cards {
		fmt.Fprintf(&b, " %s |", s.System)
		sep += "---|"
		if i > 0 {
			fmt.Fprintf(&b, " clean jobs/s %s ÷ %s | clean p95 %s ÷ %s |", s.System, cards[0].System, s.System, cards[0].System)
			sep += "--:|--:|"
		}
	}
	b.WriteString("\n" + sep + "\n")
	for _, name := range order {
		fmt.Fprintf(&b, "| %s |", name)
		first, firstOK := cards[0].Cell(name)
		for i, s := range cards {
			c, ok := s.Cell(name)
			if !ok {
				b.WriteString(" – |")
			} else {
				fmt.Fprintf(&b, " %s |", cellText(c))
			}
			if i > 0 {
				if ok && firstOK {
					fmt.Fprintf(&b, " %s | %s |", ratio(c.Result.CleanThroughput, first.Result.CleanThroughput),
						ratio(float64(c.Result.CleanPickup.P95), float64(first.Result.CleanPickup.P95)))
				} else {
					b.WriteString(" – | – |")
				}
			}
		}
		b.WriteString("\n")
	}
	for _, class := range []Class{Chaos, Pressure} {
		fmt.Fprintf(&b, "| **%s** |", class)
		for i, s := range cards {
			p, n := s.Score(class)
			fmt.Fprintf(&b, " **%d/%d** |", p, n)
			if i > 0 {
				b.WriteString(" | |")
			}
		}
		b.WriteString("\n")
	}
	fmt.Fprintf(&b, "\nA cell passes when the scenario ran to its end without a timeout, no acknowledged job "+
		"was lost, and throughput over a sliding %v window got back to %.0f %% of the clean phase's "+
		"within the scenario's recovery bound after its last fault or pressure phase. Jobs run twice "+
		"are shown, not failed: the systems are at-least-once.\n", RecoveryWindow, RecoveryShare*100)
	_, err := io.WriteString(w, b.String())
	return err
}

func cellText(c Cell) string {
	r := c.Result
	var parts []string
	// A figure a reason already gives (a slow recovery, jobs lost) is not repeated.
	if r.Recovered && r.Recovery <= c.RecoveryBound {
		parts = append(parts, fmt.Sprintf("recovered %v", r.Recovery.Round(time.Second)))
	}
	if len(r.Counts.Lost) == 0 {
		parts = append(parts, "lost 0")
	}
	if n := len(r.Counts.RunTwice); n > 0 {
		parts = append(parts, fmt.Sprintf("run twice %d (%d recorded as retries)", n, len(r.Counts.RecordedRetries)))
	}
	parts = append(parts, fmt.Sprintf("%.1f jobs/s", r.CleanThroughput))
	if r.CleanPickup.N > 0 {
		parts = append(parts, fmt.Sprintf("p95 %s (worst phase %s)", ms(r.CleanPickup.P95), ms(r.WorstPickup.P95)))
	}
	if c.Pass {
		return "✓ " + strings.Join(parts, ", ")
	}
	return "✗ " + strings.Join(c.Reasons, ", ") + "; " + strings.Join(parts, ", ")
}
