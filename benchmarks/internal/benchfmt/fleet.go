package benchfmt

import (
	"fmt"
	"io"
	"strings"
)

// The ways to PostgreSQL of the fleet benchmarks: their names in the benchmarks and in the tables.
var (
	// FleetVias are BenchmarkIdleFleet's: directly, the instances LISTEN; through PgBouncer
	// (transaction pooling) they poll at the default PollInterval, 1 s.
	FleetVias = []struct{ Name, Label string }{
		{"direct", "directly (LISTEN)"},
		{"pgbouncer", "through PgBouncer (polling every 1 s)"},
	}
	// FleetSizes are BenchmarkIdleFleet's instance counts.
	FleetSizes = []int{1, 10, 50}
	// PickupCases are BenchmarkFleetPickup's rows: the benchmark's case and its label.
	PickupCases = []struct{ Name, Label string }{
		{"direct/instances=2", "directly (LISTEN), 2 instances"},
		{"direct/instances=50", "directly (LISTEN), 50 instances"},
		{"pgbouncer/poll=100ms/instances=50", "through PgBouncer, polling every 100 ms, 50 instances"},
		{"pgbouncer/poll=1s/instances=50", "through PgBouncer, polling every 1 s (the default), 50 instances"},
	}
)

// IdleFleetName is the name of an idle-fleet benchmark.
func IdleFleetName(via string, n int) string {
	return fmt.Sprintf("BenchmarkIdleFleet/%s/instances=%d", via, n)
}

// PickupName is the name of a pickup benchmark of PickupCases.
func PickupName(c string) string { return "BenchmarkFleetPickup/" + c }

// WriteIdleFleet prints the table of the idle fleets, followed by a blank line: the database's
// transactions per second and the connections held, for the fleet and per instance; it returns
// a note for each row missing from r, or one note and no table when r has none.
func WriteIdleFleet(w io.Writer, r *Results) (notes []string) {
	if !r.HasPrefix("BenchmarkIdleFleet/") {
		return []string{"No idle-fleet rows in this run: " + fleetMissing + "."}
	}
	fmt.Fprintln(w, "| idle fleet | transactions/s | per instance | connections to PostgreSQL | per instance | connections to PgBouncer (per instance) |")
	fmt.Fprintln(w, "| --- | ---: | ---: | ---: | ---: | ---: |")
	for _, v := range FleetVias {
		for _, n := range FleetSizes {
			name := IdleFleetName(v.Name, n)
			rate, ok := r.Get(name, "xact/s")
			if !ok {
				notes = append(notes, missingFleetRow("idle fleet", v.Label+", "+plural(n, "instance"), name, v.Name))
				continue
			}
			perRate := cell(r, name, "xact/s/instance")
			if v.Name != "direct" {
				if d, ok := r.Get(IdleFleetName("direct", n), "xact/s/instance"); ok {
					if p, ok := r.Get(name, "xact/s/instance"); ok {
						perRate += " (" + ratio(p, d) + " directly)"
					}
				}
			}
			perConns := cell(r, name, "conns/instance")
			if most, ok := r.Get(name, "max-conns/instance"); ok {
				perConns += fmt.Sprintf(" (at most %s; %s used)", Number(most), cell(r, name, "used-conns/instance"))
			}
			clients := ""
			if c, ok := r.Get(name, "client-conns"); ok {
				clients = fmt.Sprintf("%s (%s)", Number(c), cell(r, name, "client-conns/instance"))
			}
			fmt.Fprintf(w, "| %s, %s | %s | %s | %s | %s | %s |\n", v.Label, plural(n, "instance"),
				Number(rate), perRate, cell(r, name, "conns"), perConns, clients)
		}
	}
	fmt.Fprintln(w)
	return notes
}

// WritePickup prints the table of the pickups across instances, followed by a blank line, and
// returns a note for each row missing from r, or one note and no table when r has none.
func WritePickup(w io.Writer, r *Results) (notes []string) {
	if !r.HasPrefix("BenchmarkFleetPickup/") {
		return []string{"No pickup rows in this run: " + fleetMissing + "."}
	}
	fmt.Fprintln(w, "| pickup: Enqueue on one instance to the handler's start on another | p50 | p95 | mean | until the claim (p50) | the claim (p50) | claims per item |")
	fmt.Fprintln(w, "| --- | ---: | ---: | ---: | ---: | ---: | ---: |")
	for _, c := range PickupCases {
		name := PickupName(c.Name)
		if _, ok := r.Get(name, "p50-ms"); !ok {
			notes = append(notes, missingFleetRow("pickup", c.Label, name, strings.SplitN(c.Name, "/", 2)[0]))
			continue
		}
		ms := func(unit string) string {
			if v, ok := r.Get(name, unit); ok {
				return Number(v) + " ms"
			}
			return ""
		}
		fmt.Fprintf(w, "| %s | %s | %s | %s | %s | %s | %s |\n", c.Label, ms("p50-ms"), ms("p95-ms"), ms("mean-ms"),
			ms("wake-p50-ms"), ms("claim-p50-ms"), cell(r, name, "claims/item"))
	}
	fmt.Fprintln(w)
	return notes
}

// missingFleetRow is the note of a fleet row missing from a run whose other rows are there.
func missingFleetRow(table, label, name, via string) string {
	why := "skipped or failed: see the run's output"
	if via == "direct" {
		why += "; a fleet reached directly runs only where the server has room for 10 connections per instance (the default budget)"
	} else {
		why += "; the PgBouncer rows need SWITCHBOARD_TEST_PGBOUNCER_DSN"
	}
	return fmt.Sprintf("No %s row %s: %s is missing from the run (%s).", table, label, name, why)
}

// fleetMissing says why the fleet rows may be missing.
const fleetMissing = "they need SWITCHBOARD_TEST_PG_DSN (and SWITCHBOARD_TEST_PGBOUNCER_DSN for the PgBouncer rows), " +
	"or the run failed, or its -bench pattern left them out"

// cell is the figure of name in unit, or "" when r has none.
func cell(r *Results, name, unit string) string {
	if v, ok := r.Get(name, unit); ok {
		return Number(v)
	}
	return ""
}

// FleetNotes are the sentences under the fleet tables saying what they measure.
func FleetNotes() []string {
	return []string{
		"Idle fleet: N instances (each its own `durable.Open`, pool and `InstanceID`, the default connection budget) with nothing to do, each running a scheduler at the default settings and a `BreakerStore` with a subscriber, on a database of their own; over a window of 5 s after they settled, the database's transactions per second (`pg_stat_database`: every statement the queue sends is one) and the connections held (`pg_stat_activity`, sampled every 250 ms; directly, each instance's by its `application_name`, with the most one instance held and how many of its connections ran a statement in the window; through PgBouncer, PgBouncer's server connections to PostgreSQL and the instances' connections to PgBouncer).",
		"Pickup: one instance enqueues an item due now, once the outcome of the one before is stored, and another instance's scheduler runs it; the time from the start of `Enqueue` to the start of its handler. \"Until the claim\" is the part up to the start of the claim that took the item, \"the claim\" that claim's round trip, and claims per item the claims the whole fleet made per item (every woken scheduler claims).",
	}
}
