package benchfmt

import (
	"fmt"
	"io"
	"math"
	"slices"
	"strconv"
	"strings"
)

// System is one side of a comparison: a benchmark and the name the tables and charts give it.
type System struct {
	// Bench is the benchmark's name, without the GOMAXPROCS suffix.
	Bench string
	// Label names the system: "switchboard", "direct call", "gobreaker", ….
	Label string
}

// Case is an in-process comparison: switchboard's benchmark beside its peers' or baseline's.
type Case struct {
	// Label names the case in the tables and charts.
	Label string
	// Switchboard is switchboard's side.
	Switchboard System
	// Peers are the benchmarks switchboard's is divided by, in the order printed.
	Peers []System
	// Allocs adds allocations per op to the figures.
	Allocs bool
}

func sb(bench string) System { return System{bench, "switchboard"} }

var directCall = System{"BenchmarkDirectCall", "direct call"}

// peersOf is the systems of sub-benchmarks of prefix: pairs of sub-benchmark name and label.
func peersOf(prefix string, pairs ...string) []System {
	s := make([]System, 0, len(pairs)/2)
	for i := 0; i+1 < len(pairs); i += 2 {
		s = append(s, System{prefix + pairs[i], pairs[i+1]})
	}
	return s
}

// InProcess are the in-process comparisons of make bench, in the order printed.
var InProcess = []Case{
	{"`Send`, 0 behaviors", sb("BenchmarkSend"), []System{directCall}, false},
	{"`TypedSender.Send`, 0 behaviors", sb("BenchmarkTypedSend"), []System{directCall}, false},
	{"`Send`, 3 pass-through behaviors", sb("BenchmarkSendThreeBehaviors"), []System{directCall}, false},
	{"`Stream` of 3 items", sb("BenchmarkStream"), []System{{"BenchmarkStreamDirect", "ranging the sequence"}}, true},
	{"fallback + retry + breaker", sb("BenchmarkFallbackRetryBreaker/switchboard"),
		peersOf("BenchmarkFallbackRetryBreaker/", "failsafe-go", "failsafe-go"), true},
	{"fallback + retry + breaker + timeout", sb("BenchmarkFallbackRetryBreakerTimeout/switchboard"),
		peersOf("BenchmarkFallbackRetryBreakerTimeout/", "failsafe-go", "failsafe-go"), true},
	{"breaker, one goroutine", sb("BenchmarkBreaker/switchboard"),
		peersOf("BenchmarkBreaker/", "gobreaker", "sony/gobreaker", "failsafe-go", "failsafe-go"), true},
	{"breaker, parallel", sb("BenchmarkBreakerParallel/switchboard"),
		peersOf("BenchmarkBreakerParallel/", "gobreaker", "sony/gobreaker", "failsafe-go", "failsafe-go"), true},
	{"retry, success", sb("BenchmarkRetryLoop/success/switchboard"),
		peersOf("BenchmarkRetryLoop/success/", "backoff", "cenkalti/backoff", "retry-go", "avast/retry-go"), true},
	{"retry, fails once then succeeds (zero delay)", sb("BenchmarkRetryLoop/failonce/switchboard"),
		peersOf("BenchmarkRetryLoop/failonce/", "backoff", "cenkalti/backoff", "retry-go", "avast/retry-go"), true},
	{"keyed breaker, 1M keys (cap 10k)", sb("BenchmarkKeyedBreaker/switchboard"),
		[]System{{"BenchmarkKeyedBreaker/map", "bounded map"}}, true},
}

// The cases of the drain benchmarks (BenchmarkDrain/<engine>/<handler>/w=<workers>/<system>).
var (
	// Engines are the databases of the drains.
	Engines = []string{"postgres", "sqlite"}
	// Handlers are the drains' handlers: their names in the benchmarks and in the tables.
	Handlers = []struct{ Name, Label string }{{"noop", "no-op handler"}, {"insert", "one INSERT per item"}}
	// Workers are the drains' worker counts.
	Workers = []int{1, 8, 32}
	// DrainSystems are the drains' systems: their names in the benchmarks and in the tables
	// (switchboard through PgBouncer runs on PostgreSQL only).
	DrainSystems = []struct{ Name, Label string }{{"switchboard", "switchboard"}, {"river", "River"}, {"floor", "floor"},
		{BouncerSystem, "switchboard through PgBouncer"}}
)

// BouncerSystem is the drain system of switchboard through PgBouncer (transaction pooling).
const BouncerSystem = "switchboard-pgbouncer"

// DrainName is the name of a drain benchmark.
func DrainName(engine, handler string, w int, system string) string {
	return fmt.Sprintf("BenchmarkDrain/%s/%s/w=%d/%s", engine, handler, w, system)
}

// Render prints everything a run compares, as make bench shows it: the load average at start
// and end, the tables of WriteDrains, WriteCPU and WriteInProcess, what is missing, and
// WriteDetails.
func Render(w io.Writer, r *Results, loadStart, loadEnd string) {
	fmt.Fprintln(w, "## switchboard beside its peers and floors")
	fmt.Fprintln(w)
	fmt.Fprintf(w, "Load average (1, 5, 15 min) at start: %s; at end: %s.", loadStart, loadEnd)
	if r.CPU != "" {
		fmt.Fprintf(w, " CPU: %s.", r.CPU)
	}
	if n := r.Runs(); n > 1 {
		fmt.Fprintf(w, " Medians of %d runs.", n)
	}
	fmt.Fprintln(w)
	fmt.Fprintln(w)
	var notes []string
	notes = append(notes, WriteDrains(w, r)...)
	fmt.Fprintln(w)
	WriteCPU(w, r)
	fmt.Fprintln(w)
	WriteServerCPU(w, r)
	notes = append(notes, WriteBouncerDrains(w, r)...)
	notes = append(notes, WriteIdleFleet(w, r)...)
	notes = append(notes, WritePickup(w, r)...)
	notes = append(notes, WriteDepth(w, r)...)
	notes = append(notes, WriteFinished(w, r)...)
	notes = append(notes, WriteRecovery(w, r)...)
	notes = append(notes, WriteInProcess(w, r)...)
	fmt.Fprintln(w)
	for _, n := range notes {
		fmt.Fprintln(w, n)
	}
	if len(notes) > 0 {
		fmt.Fprintln(w)
	}
	fmt.Fprintln(w, "Drains: items/s from start to a stopped system with every outcome stored; Go CPU is this process's (user + system), the PostgreSQL server's excluded; the server's CPU, when the server runs on this machine, is its postmaster's and its processes' (from /proc), every session, the checkpointer and autovacuum included. One op is one item.")
	fmt.Fprintln(w)
	fmt.Fprintln(w, BouncerDrainNote)
	fmt.Fprintln(w)
	for _, n := range FleetNotes() {
		fmt.Fprintln(w, n)
		fmt.Fprintln(w)
	}
	fmt.Fprintln(w, DepthNote)
	fmt.Fprintln(w)
	fmt.Fprintln(w, FinishedNote)
	fmt.Fprintln(w)
	fmt.Fprintln(w, RecoveryNote)
	fmt.Fprintln(w)
	WriteDetails(w, r)
}

// WriteInProcess prints the table of the in-process cases, each switchboard's ns/op beside its
// peers' with the ratio switchboard ÷ peer, and returns a note for each case missing from r.
func WriteInProcess(w io.Writer, r *Results) (notes []string) {
	fmt.Fprintln(w, "| case | switchboard | peers / baseline (same run) | switchboard ÷ peer |")
	fmt.Fprintln(w, "| --- | ---: | ---: | ---: |")
	for _, c := range InProcess {
		v, ok := r.Get(c.Switchboard.Bench, "ns/op")
		if !ok {
			notes = append(notes, fmt.Sprintf("No %s row: %s is missing from the run.", c.Label, c.Switchboard.Bench))
			continue
		}
		var figures, ratios []string
		for _, p := range c.Peers {
			pv, ok := r.Get(p.Bench, "ns/op")
			if !ok {
				notes = append(notes, fmt.Sprintf("No %s figure in the %s row: %s is missing from the run.", p.Label, c.Label, p.Bench))
				continue
			}
			f := p.Label + " " + ns(pv)
			if c.Allocs {
				f += ", " + allocs(r, p.Bench)
			}
			figures = append(figures, f)
			ratios = append(ratios, ratio(v, pv)+" "+p.Label)
		}
		if len(figures) == 0 {
			continue
		}
		left := ns(v)
		if c.Allocs {
			left += ", " + allocs(r, c.Switchboard.Bench)
		}
		if len(c.Peers) == 1 && len(ratios) == 1 {
			ratios[0] = strings.TrimSuffix(ratios[0], " "+c.Peers[0].Label)
		}
		fmt.Fprintf(w, "| %s | %s | %s | %s |\n", c.Label, left, strings.Join(figures, "; "), strings.Join(ratios, "; "))
	}
	return notes
}

// WriteDrains prints the table of the drains' items/s, switchboard's beside River's and the
// floor's with the ratios, and returns a note for each engine missing from r.
func WriteDrains(w io.Writer, r *Results) (notes []string) {
	fmt.Fprintln(w, "| drain (items/s) | switchboard | River; floor (same run) | switchboard ÷ peer | switchboard's runs |")
	fmt.Fprintln(w, "| --- | ---: | ---: | ---: | ---: |")
	for _, e := range Engines {
		if !r.HasPrefix("BenchmarkDrain/" + e + "/") {
			why := "the run failed, or its -bench pattern left them out"
			if e == "postgres" {
				why = "SWITCHBOARD_TEST_PG_DSN is not set, " + why
			}
			notes = append(notes, fmt.Sprintf("No %s drain rows in this run: %s.", e, why))
			continue
		}
		for _, h := range Handlers {
			for _, n := range Workers {
				peerRow(w, r, fmt.Sprintf("%s, %s, %s", e, h.Label, plural(n, "worker")),
					e, h.Name, n, "items/s", count, ratePeers, runsOf(r, DrainName(e, h.Name, n, "switchboard"), "items/s"))
			}
		}
	}
	return notes
}

// runsOf is the spread of the runs of benchmark name in unit, "min–max (n runs)", or "one run".
func runsOf(r *Results, name, unit string) string {
	vs := r.values[name][unit]
	if len(vs) < 2 {
		return "one run"
	}
	return fmt.Sprintf("%s–%s (%d runs)", count(slices.Min(vs)), count(slices.Max(vs)), len(vs))
}

// WriteBouncerDrains prints the table of the PostgreSQL drains of switchboard through PgBouncer
// beside switchboard's directly, from the same run, followed by a blank line; it returns a note
// and prints nothing when r has none (nothing at all when r has no PostgreSQL drain).
func WriteBouncerDrains(w io.Writer, r *Results) (notes []string) {
	if !r.HasPrefix("BenchmarkDrain/postgres/") {
		return nil // WriteDrains says why
	}
	if !r.HasSuffix("/" + BouncerSystem) {
		return []string{"No drain rows through PgBouncer in this run: SWITCHBOARD_TEST_PGBOUNCER_DSN is not set, the run failed, or its -bench pattern left them out."}
	}
	fmt.Fprintln(w, "| drain through PgBouncer (items/s) | switchboard through PgBouncer | switchboard directly (same run) | through PgBouncer ÷ directly |")
	fmt.Fprintln(w, "| --- | ---: | ---: | ---: |")
	for _, h := range Handlers {
		for _, n := range Workers {
			v, ok := r.Get(DrainName("postgres", h.Name, n, BouncerSystem), "items/s")
			if !ok {
				continue
			}
			direct, figure := "", ""
			if d, ok := r.Get(DrainName("postgres", h.Name, n, "switchboard"), "items/s"); ok {
				direct, figure = count(d), ratio(v, d)
			}
			fmt.Fprintf(w, "| postgres, %s, %s | %s | %s | %s |\n", h.Label, plural(n, "worker"), count(v), direct, figure)
		}
	}
	fmt.Fprintln(w)
	return nil
}

// BouncerDrainNote says what the drain through PgBouncer measures.
const BouncerDrainNote = "Drain through PgBouncer: switchboard's PostgreSQL drain with the queue's pool through PgBouncer in transaction pooling mode (`postgres.Config{TransactionPooling: true}`: no prepared statements, no `LISTEN`), on a database of its own (PgBouncer 1.18 refuses a `search_path`); the seed and the handlers' inserts reach that database directly, as in the direct drain, so the ratio is the queue's own path."

// WriteCPU prints the table of the drains' Go CPU time per item beside the floor's and River's.
func WriteCPU(w io.Writer, r *Results) {
	fmt.Fprintln(w, "| Go CPU per item | switchboard | floor; River (same run) | switchboard ÷ peer |")
	fmt.Fprintln(w, "| --- | ---: | ---: | ---: |")
	for _, e := range Engines {
		for _, h := range Handlers {
			for _, n := range Workers {
				peerRow(w, r, fmt.Sprintf("%s, %s, %s", e, h.Label, plural(n, "worker")),
					e, h.Name, n, "cpu-ns/item", micros, cpuPeers)
			}
		}
	}
}

// ServerCPUUnit is the drains' unit of the PostgreSQL server's CPU time per item.
const ServerCPUUnit = "server-cpu-ns/item"

// WriteServerCPU prints the table of the PostgreSQL drains' server CPU time per item, and the
// sum of the server's and the Go process's, beside the floor's and River's, followed by a blank
// line; nothing when r has no server CPU figure (the server is on another machine).
func WriteServerCPU(w io.Writer, r *Results) {
	if !r.HasUnit(ServerCPUUnit) {
		return
	}
	fmt.Fprintln(w, "| PostgreSQL CPU per item | switchboard | floor; River (same run) | switchboard ÷ peer |")
	fmt.Fprintln(w, "| --- | ---: | ---: | ---: |")
	for _, h := range Handlers {
		for _, n := range Workers {
			peerRow(w, r, fmt.Sprintf("server, %s, %s", h.Label, plural(n, "worker")), "postgres", h.Name, n, ServerCPUUnit, micros, cpuPeers)
		}
	}
	for _, h := range Handlers {
		for _, n := range Workers {
			peerRow(w, r, fmt.Sprintf("Go + server, %s, %s", h.Label, plural(n, "worker")), "postgres", h.Name, n, goAndServerUnit, micros, cpuPeers)
		}
	}
	fmt.Fprintln(w)
}

// goAndServerUnit is the sum of a drain's cpu-ns/item and ServerCPUUnit (Results.Get).
const goAndServerUnit = "cpu-ns/item+" + ServerCPUUnit

// A drain row's peers, in the order the row names them.
var (
	ratePeers = []struct{ system, label string }{{"river", "River"}, {"floor", "floor"}}
	cpuPeers  = []struct{ system, label string }{{"floor", "floor"}, {"river", "River"}}
)

// peerRow prints the row of a drain case's unit: switchboard's figure, its peers', and the
// ratios of switchboard's to each; nothing when switchboard's is missing.
func peerRow(w io.Writer, r *Results, caseLabel, engine, handler string, n int, unit string, format func(float64) string,
	peers []struct{ system, label string }, more ...string) {
	v, ok := r.Get(DrainName(engine, handler, n, "switchboard"), unit)
	if !ok {
		return
	}
	var figures, ratios []string
	for _, p := range peers {
		pv, ok := r.Get(DrainName(engine, handler, n, p.system), unit)
		if !ok {
			continue
		}
		figures = append(figures, p.label+" "+format(pv))
		ratios = append(ratios, ratio(v, pv)+" "+p.label)
	}
	fmt.Fprintf(w, "| %s | %s | %s | %s |", caseLabel, format(v), strings.Join(figures, "; "), strings.Join(ratios, "; "))
	for _, m := range more {
		fmt.Fprintf(w, " %s |", m)
	}
	fmt.Fprintln(w)
}

// WriteDetails prints every benchmark's figures, one row each: one table per set of units, in
// the order the benchmarks ran (the drains' items/s and time per item, the fleets' own units,
// the in-process time per call), so that no row has columns of other units.
func WriteDetails(w io.Writer, r *Results) {
	if len(r.Order) == 0 {
		fmt.Fprintln(w, "No benchmark results in the input.")
		return
	}
	standard := []string{"items/s", "cpu-ns/item", "ns/op", "B/op", "allocs/op"}
	type group struct {
		units []string
		names []string
	}
	var groups []*group
	byKey := map[string]*group{}
	for _, n := range r.Order {
		var units, extra []string
		for _, u := range standard {
			if _, ok := r.values[n][u]; ok {
				units = append(units, u)
			}
		}
		for u := range r.values[n] {
			if !slices.Contains(standard, u) {
				extra = append(extra, u)
			}
		}
		slices.Sort(extra)
		units = append(units, extra...)
		key := strings.Join(units, " ")
		g := byKey[key]
		if g == nil {
			g = &group{units: units}
			byKey[key] = g
			groups = append(groups, g)
		}
		g.names = append(g.names, n)
	}
	for i, g := range groups {
		if i > 0 {
			fmt.Fprintln(w)
		}
		fmt.Fprintln(w, "| benchmark | "+strings.Join(g.units, " | ")+" |")
		fmt.Fprintln(w, "| --- |"+strings.Repeat(" ---: |", len(g.units)))
		for _, n := range g.names {
			cells := make([]string, len(g.units))
			for i, u := range g.units {
				if v, ok := r.Get(n, u); ok {
					cells[i] = Number(v)
				}
			}
			fmt.Fprintf(w, "| %s | %s |\n", strings.TrimPrefix(n, "Benchmark"), strings.Join(cells, " | "))
		}
	}
}

func allocs(r *Results, name string) string {
	v, ok := r.Get(name, "allocs/op")
	if !ok {
		return "allocs unknown"
	}
	return plural(int(math.Round(v)), "alloc")
}

func plural(n int, word string) string {
	if n == 1 {
		return "1 " + word
	}
	return strconv.Itoa(n) + " " + word + "s"
}

// ratio is a ÷ b, as the tables print it: two decimals, three below 0.1 so that small ratios
// keep two significant digits.
func ratio(a, b float64) string {
	if b == 0 {
		return "n/a"
	}
	q := a / b
	if q < 0.1 {
		return strconv.FormatFloat(q, 'f', 3, 64) + "×"
	}
	return strconv.FormatFloat(q, 'f', 2, 64) + "×"
}

// count is a rate, rounded, with thousands separators.
func count(v float64) string { return group(strconv.FormatInt(int64(math.Round(v)), 10)) }

func micros(nanos float64) string { return Number(nanos/1000) + " µs" }

func ns(v float64) string { return Number(v) + " ns" }

// Number prints v with three significant digits below 1000, grouped digits above.
func Number(v float64) string {
	switch a := math.Abs(v); {
	case a >= 1000:
		return count(v)
	case a >= 100:
		return strconv.FormatFloat(v, 'f', 0, 64)
	case a >= 10:
		return strconv.FormatFloat(v, 'f', 1, 64)
	default:
		return strconv.FormatFloat(v, 'f', 2, 64)
	}
}

func group(digits string) string {
	neg := strings.HasPrefix(digits, "-")
	digits = strings.TrimPrefix(digits, "-")
	var b strings.Builder
	for i, c := range digits {
		if i > 0 && (len(digits)-i)%3 == 0 {
			b.WriteByte(',')
		}
		b.WriteRune(c)
	}
	if neg {
		return "-" + b.String()
	}
	return b.String()
}
