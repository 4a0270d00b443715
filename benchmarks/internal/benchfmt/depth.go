package benchfmt

import (
	"fmt"
	"io"
)

// DepthRows are the rows of the claim at depth (BenchmarkClaimDepth of package durable): the
// engine, the pending items and the finished ones the table holds, and whether the row needs
// SWITCHBOARD_BENCH_DEEP=1.
var DepthRows = []struct {
	Engine            string
	Pending, Finished int
	Deep              bool
}{
	{"postgres", 10_000, 0, false},
	{"postgres", 1_000_000, 0, false},
	{"postgres", 10_000_000, 0, true},
	{"postgres", 10_000, 50_000_000, true},
	{"sqlite", 10_000, 0, false},
	{"sqlite", 1_000_000, 0, false},
}

// DepthName is the name of a claim-at-depth benchmark.
func DepthName(engine string, pending, finished int) string {
	return fmt.Sprintf("BenchmarkClaimDepth/%s/pending=%d/finished=%d", engine, pending, finished)
}

// RecoveryName is the name of the recovered endpoint's benchmark (BenchmarkRecoveredEndpoint of
// package durable) on engine.
func RecoveryName(engine string) string { return "BenchmarkRecoveredEndpoint/" + engine }

// WriteDepth prints the table of the claim at depth, followed by a blank line: per row the
// claim's round trip with its completion, the items per second that makes, and the ratio of the
// latter to the row of 10,000 pending items of the same engine (below 1: slower at depth). It
// returns a note for each row missing from r, or one note and no table when r has none.
func WriteDepth(w io.Writer, r *Results) (notes []string) {
	if !r.HasPrefix("BenchmarkClaimDepth/") {
		return []string{"No claim-at-depth rows in this run: `make bench` runs them from package durable (`BenchmarkClaimDepth`); the run failed, or its -bench pattern left them out."}
	}
	fmt.Fprintln(w, "| claim at depth: 32 items over 10 fairness keys, claimed and completed | µs per claim | items/s | ÷ 10,000 pending |")
	fmt.Fprintln(w, "| --- | ---: | ---: | ---: |")
	for _, d := range DepthRows {
		name := DepthName(d.Engine, d.Pending, d.Finished)
		rate, ok := r.Get(name, "items/s")
		label := fmt.Sprintf("%s, %s pending, %s finished", d.Engine, count(float64(d.Pending)), count(float64(d.Finished)))
		if !ok {
			why := "skipped or failed: see the run's output"
			if d.Deep {
				why = "it runs with SWITCHBOARD_BENCH_DEEP=1 (tens of GB, many minutes of seeding)"
			} else if d.Engine == "postgres" {
				why += "; the PostgreSQL rows need SWITCHBOARD_TEST_PG_DSN"
			}
			notes = append(notes, fmt.Sprintf("No claim-at-depth row %s: %s.", label, why))
			continue
		}
		vs := ""
		if base, ok := r.Get(DepthName(d.Engine, 10_000, 0), "items/s"); ok {
			vs = ratio(rate, base)
		}
		fmt.Fprintf(w, "| %s | %s | %s | %s |\n", label, cell(r, name, "µs/claim"), count(rate), vs)
	}
	fmt.Fprintln(w)
	return notes
}

// WriteRecovery prints the table of a recovered endpoint's backlog beside the other keys' load,
// followed by a blank line: the other keys' pickup p99 without the backlog and while it comes
// due, their ratio, and the backlog items that ran meanwhile. It returns a note when r has no
// row.
func WriteRecovery(w io.Writer, r *Results) (notes []string) {
	if !r.HasPrefix("BenchmarkRecoveredEndpoint/") {
		return []string{"No recovered-endpoint rows in this run: `make bench` runs them from package durable (`BenchmarkRecoveredEndpoint`); the run failed, or its -bench pattern left them out."}
	}
	fmt.Fprintln(w, "| a recovered endpoint: 10,000 parked items come due beside 9 keys at 200 items/s | other keys' pickup p99, steady | during the recovery | ratio | backlog items run meanwhile |")
	fmt.Fprintln(w, "| --- | ---: | ---: | ---: | ---: |")
	for _, engine := range []string{"postgres", "sqlite"} {
		name := RecoveryName(engine)
		steady, ok := r.Get(name, "steady-p99-ms")
		if !ok {
			notes = append(notes, fmt.Sprintf("No recovered-endpoint row on %s: %s is missing from the run.", engine, name))
			continue
		}
		rec, _ := r.Get(name, "recovery-p99-ms")
		fmt.Fprintf(w, "| %s | %s ms | %s ms | %s | %s |\n", engine, Number(steady), Number(rec), ratio(rec, steady), cell(r, name, "backlog-ran"))
	}
	fmt.Fprintln(w)
	return notes
}

// DepthNote says what the claim at depth measures.
const DepthNote = "Claim at depth: a table holding the given pending items, all due, spread over 10 fairness keys (and, in the finished row, that many succeeded items with an attempt row each); each op claims 32 items with the store's fair claim and completes them as succeeded, in two round trips. The claim's cost should not grow with the table: the ratio is the rate at that depth divided by the rate at 10,000 pending items."

// RecoveryNote says what the recovered-endpoint row measures.
const RecoveryNote = "Recovered endpoint: 10,000 items parked on one key's open breaker while items of nine other keys arrive at 200 a second, 8 workers, each item taking 1 ms; 3 s of that load, then the breaker closes and all 10,000 come due at once while the load goes on for 3 s more. The other keys' pickup p99 (enqueue to handler start) in each phase: the fair claim keeps the second within a small multiple of the first, where a claim in due order would make them wait for the backlog."

// FinishedName is the name of BenchmarkDrainBesideFinished's row of a system at w workers.
func FinishedName(w int, system string) string {
	return fmt.Sprintf("BenchmarkDrainBesideFinished/postgres/noop/w=%d/%s", w, system)
}

// WriteFinished prints the table of the PostgreSQL no-op drains beside a million finished
// items, each beside the same drain on a table of its pending items alone in the same run, and
// the ratio of the two, followed by a blank line. It returns a note when r has no row.
func WriteFinished(w io.Writer, r *Results) (notes []string) {
	if !r.HasPrefix("BenchmarkDrainBesideFinished/") {
		return []string{"No drain rows beside finished items in this run: SWITCHBOARD_TEST_PG_DSN is not set, the run failed, or its -bench pattern left them out."}
	}
	fmt.Fprintln(w, "| drain beside 1,000,000 finished items (items/s) | beside them | alone (same run) | beside ÷ alone |")
	fmt.Fprintln(w, "| --- | ---: | ---: | ---: |")
	for _, n := range Workers {
		for _, sys := range []string{"switchboard", "floor"} {
			v, ok := r.Get(FinishedName(n, sys), "items/s")
			if !ok {
				continue
			}
			alone, figure := "", ""
			if a, ok := r.Get(DrainName("postgres", "noop", n, sys), "items/s"); ok {
				alone, figure = count(a), ratio(v, a)
			}
			fmt.Fprintf(w, "| postgres, no-op handler, %s, %s | %s | %s | %s |\n", plural(n, "worker"), sys, count(v), alone, figure)
		}
	}
	fmt.Fprintln(w)
	return notes
}

// FinishedNote says what the drain beside finished items measures.
const FinishedNote = "Drain beside finished items: the PostgreSQL no-op drain of switchboard and of the floor with 1,000,000 succeeded items in the table (as the scheduler leaves them, the success recorded on each; vacuumed and analyzed before the drain, as autovacuum would have by then), beside the same drain on a table of its pending items alone in the same run. The work a retention keeps should not slow the claim or the completion: the ratio should be about 1."
