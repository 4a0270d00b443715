package main

import (
	"bytes"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/switchboard-go/switchboard/benchmarks/internal/benchfmt"
)

// chartDir is the folder of the charts, beside benchmarks.md; the page links them relatively.
const chartDir = "benchmarks"

// quoted are the figures of Go mediators the module proxy does not serve, so that make bench
// cannot measure them: measured on a machine of the same kind, with the direct call measured
// in the same runs as their baseline.
var quoted = []struct {
	library               string
	zero, three, direct   float64
	zeroLabel, threeLabel string
}{
	{"go-mediatr", 7.9, 1216, 1.58, "7.9 ns", "1,216 ns"},
	{"eyazici90/go-mediator", 4.8, 80, 1.58, "4.8 ns", "80 ns"},
}

// writeDocs writes benchmarks.md and its charts into out, replacing the charts of earlier runs.
func writeDocs(r *benchfmt.Results, out string) error {
	dir := filepath.Join(out, chartDir)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	old, err := filepath.Glob(filepath.Join(dir, "*.svg"))
	if err != nil {
		return err
	}
	for _, f := range old {
		if err := os.Remove(f); err != nil {
			return err
		}
	}
	charts, err := writeCharts(r, dir)
	if err != nil {
		return err
	}
	path := filepath.Join(out, "benchmarks.md")
	prev, err := os.ReadFile(path)
	if err != nil && !os.IsNotExist(err) {
		return err
	}
	chaos, ok := benchfmt.ChaosSection(string(prev))
	if !ok {
		chaos = benchfmt.ChaosBegin + "\n\n" + ChaosNote + "\n\n" + benchfmt.ChaosEnd
	}
	var b bytes.Buffer
	page(&b, r, charts, chaos)
	return os.WriteFile(path, b.Bytes(), 0o644)
}

// meta is the run's description of key, or "unknown", for a cell of a Markdown table (a "|"
// escaped, which would end the cell).
func meta(r *benchfmt.Results, key string) string {
	if v := r.Meta[key]; v != "" {
		return strings.ReplaceAll(v, "|", `\|`)
	}
	return "unknown"
}

// page prints docs/benchmarks.md; charts are the SVG files written, by chart, and chaos the
// section make chaos wrote, markers included, carried over from the page replaced.
func page(w io.Writer, r *benchfmt.Results, charts charts, chaos string) {
	p := func(format string, args ...any) { fmt.Fprintf(w, format+"\n", args...) }
	p("# Benchmarks")
	p("")
	p("<!-- Written by benchmarks/cmd/benchdocs from benchmarks/.bench.out; `make bench` regenerates it. -->")
	p("")
	p("Every figure on this page comes from one run of the command below on the machine described, except the figures of other mediators under \"Quoted figures\", which this run did not measure. Each switchboard figure stands beside its peer's or baseline's from the same process, so a ratio compares two measurements of the same run on the same machine; figures from other runs or machines are not comparable with these. The code of every benchmark is in [benchmarks/](../benchmarks), described in its package documentation (benchmarks/doc.go).")
	p("")
	p("## The run")
	p("")
	p("| | |")
	p("| --- | --- |")
	p("| command | `%s` |", meta(r, "command"))
	p("| date | %s (to %s) |", meta(r, "date"), meta(r, "date-end"))
	p("| CPUs (`nproc`) | %s |", meta(r, "nproc"))
	model := meta(r, "cpu-model")
	if r.CPU != "" && r.CPU != model {
		model += " (go test: " + r.CPU + ")"
	}
	p("| CPU model (/proc/cpuinfo) | %s |", model)
	p("| Go | %s |", meta(r, "go"))
	p("| PostgreSQL | %s |", meta(r, "postgres"))
	p("| PgBouncer | %s |", meta(r, "pgbouncer"))
	p("| load average (1, 5, 15 min) at start | %s |", meta(r, "load-start"))
	p("| load average (1, 5, 15 min) at end | %s |", meta(r, "load-end"))
	runs := r.Runs()
	p("| runs of each benchmark | %d%s |", runs, map[bool]string{true: " (each figure is their median)", false: ""}[runs > 1])
	p("")
	p("A load average above the number of CPUs means other work shared the machine during the run, and the figures say less.")
	p("")
	p("## How to read the tables")
	p("")
	p("**In process.** Each row is one call on one goroutine (the \"parallel\" breaker row: `GOMAXPROCS` goroutines calling at once, time per call over all of them), in nanoseconds per call; the rows of the resilience behaviors, `Stream` and the keyed breaker also give allocations per call. The ratio is switchboard's time divided by the other system's: below 1 switchboard's call takes less time, above 1 more. The direct call is the handler called through its interface with nothing around it, the least any dispatch can cost; `Send` ÷ direct call is what the mediator adds to a call. The peers are configured for the same work as switchboard's behaviors (3 attempts, a breaker with its library's defaults, a 1 s timeout never reached). The retry rows run with zero delay between attempts, so that the fail-once row measures each loop's own work (classifying the error, asking the backoff, calling again) rather than a sleep.")
	p("")
	p("**Drains.** A drain fills a database with due items, untimed, then runs them with 1, 8 or 32 workers until every outcome is stored and the system has stopped. It is measured in items per second, not time per call, because its cost is the database round trips that the workers overlap: the rate is what a queue of waiting work sees. The ratio is switchboard's rate divided by the other's: above 1 switchboard drains faster. The floor is no framework at all: a plain loop issuing switchboard's own claim and completion statements on the same tables, every round trip as full as the workers allow and nothing else running, so switchboard ÷ floor says what the scheduler's own work costs beside those statements alone. It is a baseline, not an upper bound: with one worker the floor waits for each item before its next claim, which a scheduler that claims ahead need not do, and a row where switchboard is above 1× shows the scheduler arranging the same statements better than the plain loop does. Go CPU per item is this process's user and system time (the PostgreSQL server is another process and is not counted; SQLite runs inside this one and is): below 1 switchboard spends less CPU per item than the other. PostgreSQL CPU per item is the server's, read from /proc when it runs on this machine: its postmaster's and every process of it, each session, the checkpointer and autovacuum included, and beside it Go + server, the whole cost of an item on the machine.")
	p("")
	if !r.HasPrefix("BenchmarkDrain/postgres/") {
		if strings.HasPrefix(r.Meta["postgres"], "PostgreSQL") {
			p("The PostgreSQL rows are missing from this run, though a server answered: the run failed, or its -bench pattern left them out.")
		} else {
			p("The PostgreSQL rows are missing from this run: they need `SWITCHBOARD_TEST_PG_DSN`, a server where the run may create and drop schemas, and are skipped without it.")
		}
		p("")
	}
	p("## In process")
	p("")
	var notes []string
	notes = append(notes, benchfmt.WriteInProcess(w, r)...)
	p("")
	if charts.inProcess != "" {
		p("![ns per call of each in-process case, per system, log scale](%s/%s)", chartDir, charts.inProcess)
		p("")
	}
	p("### Quoted figures: other Go mediators")
	p("")
	p("These mediators are not served by the Go module proxy, so this run could not measure them. The figures are quoted from runs on a machine of the same kind as this one, not measured by this run; their ratios are to the direct call measured in those runs (1.58 ns), not to this run's.")
	p("")
	p("| library (quoted, not measured by this run) | `Send`, 0 behaviors | ÷ direct call | `Send`, 3 behaviors | ÷ direct call |")
	p("| --- | ---: | ---: | ---: | ---: |")
	for _, q := range quoted {
		p("| %s | %s | %s | %s | %s |", q.library, q.zeroLabel, times(q.zero/q.direct), q.threeLabel, times(q.three/q.direct))
	}
	p("| direct call (quoted) | 1.58 ns | | | |")
	p("")
	p("## The durable drain")
	p("")
	notes = append(notes, benchfmt.WriteDrains(w, r)...)
	p("")
	for _, c := range charts.drains {
		p("![items/s by workers, %s](%s/%s)", c.title, chartDir, c.file)
		p("")
	}
	benchfmt.WriteCPU(w, r)
	p("")
	benchfmt.WriteServerCPU(w, r)
	p("### Through PgBouncer")
	p("")
	p("%s The ratio is the rate through PgBouncer divided by the direct one of the same run: below 1 the drain through PgBouncer is slower.", benchfmt.BouncerDrainNote)
	p("")
	notes = append(notes, benchfmt.WriteBouncerDrains(w, r)...)
	p("## An idle fleet")
	p("")
	p("What a fleet with nothing to do costs the database, by instance count, directly (the instances `LISTEN`) and through PgBouncer in transaction pooling mode (no `LISTEN`: the schedulers poll at the default `PollInterval`, 1 s). Each instance is its own `durable.Open`, with its own pool at the default budget (`postgres.Config.MaxConns` 10) and `InstanceID`, running a scheduler at the default settings and a `BreakerStore` (defaults) with one subscriber, on a database of their own. After the fleet settled (3 s), a window of 5 s counts the database's transactions per second, from `pg_stat_database` (the queue sends its statements outside transactions, so each is one; read from another database so that the reads are not counted; through PgBouncer, PgBouncer's own statements count too), and the connections held, from `pg_stat_activity` sampled every 250 ms: directly, each instance's by its `application_name`, with the most one instance held in a sample and how many of its connections ran a statement in the window (the listening one runs none); through PgBouncer, PgBouncer's server connections to PostgreSQL, and the instances' client connections to PgBouncer (its `SHOW CLIENTS`). An idle instance keeps the connections its start opened at once until they have been idle for `postgres.Config.IdleTimeout` (5 minutes), so the connections held in the first minutes are more than the used ones it needs later.")
	p("")
	notes = append(notes, benchfmt.WriteIdleFleet(w, r)...)
	p("## Pickup across instances")
	p("")
	p("How long an item due now waits when one instance enqueues it and another instance's scheduler runs it: from the start of `Enqueue` to the start of its handler, over 200 items, each enqueued once the outcome of the one before is stored (every scheduler idle again). The instance that enqueues runs no scheduler, so another always picks the item up; the others run one at the default settings but the poll interval. Directly, the enqueue's notification wakes every other scheduler and all of them claim at once; through PgBouncer, without notifications, the first poll of any of them after the commit finds it. \"Until the claim\" is the median time to the start of the claim that took the item (the insert, the notification or the poll, the wake), \"the claim\" the median of that claim's round trip, and claims per item the claims the whole fleet made per item.")
	p("")
	notes = append(notes, benchfmt.WritePickup(w, r)...)
	p("## The claim at depth")
	p("")
	p("%s", benchfmt.DepthNote)
	p("")
	notes = append(notes, benchfmt.WriteDepth(w, r)...)
	p("## The drain beside finished work")
	p("")
	p("%s", benchfmt.FinishedNote)
	p("")
	notes = append(notes, benchfmt.WriteFinished(w, r)...)
	p("## Fairness: a recovered endpoint's backlog")
	p("")
	p("%s", benchfmt.RecoveryNote)
	p("")
	notes = append(notes, benchfmt.WriteRecovery(w, r)...)
	p("## Chaos and pressure")
	p("")
	p("%s", chaos)
	p("")
	if len(notes) > 0 {
		p("## Missing from this run")
		p("")
		for _, n := range notes {
			p("- %s", n)
		}
		p("")
	}
	p("## Every benchmark of the run")
	p("")
	p("Per item for the drains (one op is one item), per call for the rest.")
	p("")
	benchfmt.WriteDetails(w, r)
}

// ChaosNote stands in the chaos section of a page make chaos has not written to yet: the
// scorecard runs for tens of minutes on a server of its own, apart from make bench.
const ChaosNote = "The chaos and pressure scorecard of switchboard beside River, by the method of the public " +
	"PostgreSQL job-queue benchmark (five chaos scenarios, four pressure cells; 0 lost, no timeout and " +
	"throughput back to 90 % of the clean phase's within the scenario's bound to pass), goes here: " +
	"`make chaos` writes it from a run of its own, with the per-phase tables on [chaos.md](chaos.md)."

func times(v float64) string { return strconv.FormatFloat(v, 'f', 1, 64) + "×" }

// label is a case's label without Markdown, for a chart.
func label(s string) string { return strings.ReplaceAll(s, "`", "") }
