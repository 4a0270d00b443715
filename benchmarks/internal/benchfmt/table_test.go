package benchfmt

import (
	"strings"
	"testing"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

const sample = `goos: linux
goarch: amd64
pkg: github.com/switchboard-go/switchboard/benchmarks
cpu: Test CPU
BenchmarkDrain/postgres/noop/w=8/switchboard-2  1  164263 ns/op  38993 cpu-ns/item  6000 items/s  4916 B/op  76 allocs/op
BenchmarkDrain/postgres/noop/w=8/river-2        1  224948 ns/op  71544 cpu-ns/item  4000 items/s  7175 B/op  100 allocs/op
BenchmarkDrain/postgres/noop/w=8/floor-2        1   74994 ns/op  19500 cpu-ns/item 12000 items/s  1978 B/op  28 allocs/op
BenchmarkDrain/postgres/noop/w=8/switchboard-2  1  164263 ns/op  38993 cpu-ns/item  7000 items/s  4916 B/op  76 allocs/op
BenchmarkDrain/postgres/noop/w=8/switchboard-2  1  164263 ns/op  38993 cpu-ns/item  9000 items/s  4916 B/op  76 allocs/op
bench-load-start: 0.50, 0.40, 0.30
--- SKIP: BenchmarkDrain/sqlite
    drain_test.go:1: something
BenchmarkSend-2        29392747   11.00 ns/op   0 B/op   0 allocs/op
BenchmarkDirectCall-2  143820766   2.000 ns/op  0 B/op   0 allocs/op
BenchmarkBreaker/switchboard-2  1000  40.0 ns/op  0 B/op   0 allocs/op
BenchmarkBreaker/gobreaker-2  1000  50.0 ns/op  0 B/op   0 allocs/op
PASS
ok  	github.com/switchboard-go/switchboard/benchmarks	3.122s
`

func TestTable(t *testing.T) {
	var other strings.Builder
	r, err := Parse(strings.NewReader(sample), &other)
	if err != nil {
		t.Fatal(err)
	}
	if r.Failed {
		t.Error("a passing run parsed as failed")
	}
	if got := r.Meta["load-start"]; got != "0.50, 0.40, 0.30" {
		t.Errorf("load-start %q, want the bench-load-start line's", got)
	}
	if got := other.String(); !strings.Contains(got, "--- SKIP: BenchmarkDrain/sqlite") || strings.Contains(got, "Benchmark"+"Send") {
		t.Errorf("lines copied aside:\n%s", got)
	}
	if strings.Contains(other.String(), "bench-") {
		t.Errorf("a description line copied aside:\n%s", other.String())
	}
	var out strings.Builder
	Render(&out, r, "0.50, 0.40, 0.30", "1.00, 0.50, 0.30")
	table := out.String()
	for _, want := range []string{
		"at start: 0.50, 0.40, 0.30; at end: 1.00, 0.50, 0.30",
		"CPU: Test CPU", "Medians of 3 runs",
		// median of 6000, 7000, 9000 items/s is 7000: 1.75× River's 4000, 0.58× the floor's 12000.
		"| postgres, no-op handler, 8 workers | 7,000 | River 4,000; floor 12,000 | 1.75× River; 0.58× floor | 6,000–9,000 (3 runs) |",
		"| postgres, no-op handler, 8 workers | 39.0 µs | floor 19.5 µs; River 71.5 µs | 2.00× floor; 0.55× River |",
		"| `Send`, 0 behaviors | 11.0 ns | direct call 2.00 ns | 5.50× |",
		"No sqlite drain rows in this run: the run failed",
		"No drain rows through PgBouncer in this run: SWITCHBOARD_TEST_PGBOUNCER_DSN is not set",
		"No `Stream` of 3 items row",
		"| breaker, one goroutine | 40.0 ns, 0 allocs | sony/gobreaker 50.0 ns, 0 allocs | 0.80× sony/gobreaker |",
		"No failsafe-go figure in the breaker, one goroutine row",
		"| Drain/postgres/noop/w=8/switchboard | 7,000 | 38,993 | 164,263 | 4,916 | 76.0 |",
	} {
		if !strings.Contains(table, want) {
			t.Errorf("table lacks %q:\n%s", want, table)
		}
	}
}

func TestFailedRun(t *testing.T) {
	r, err := Parse(strings.NewReader("--- FAIL: BenchmarkDrain/sqlite\nFAIL\n"), nil)
	if err != nil {
		t.Fatal(err)
	}
	if !r.Failed {
		t.Error("a failed run parsed as passing")
	}
}

// TestFleetTables reads the drains through PgBouncer, the idle fleets and the pickups: each
// row beside what it is compared with in the same run, and a note for each row missing.
func TestFleetTables(t *testing.T) {
	const in = `BenchmarkDrain/postgres/insert/w=8/switchboard-2  1  200000 ns/op  5000 items/s
BenchmarkDrain/postgres/insert/w=8/switchboard-pgbouncer-2  1  400000 ns/op  2500 items/s
BenchmarkIdleFleet/direct/instances=10-2  1  80.00 conns  8.000 conns/instance  8.000 max-conns/instance  2.000 used-conns/instance  100.0 xact/s  10.00 xact/s/instance
BenchmarkIdleFleet/pgbouncer/instances=10-2  1  50.00 client-conns  5.000 client-conns/instance  5.000 conns  0.5000 conns/instance  150.0 xact/s  15.00 xact/s/instance
BenchmarkFleetPickup/direct/instances=50-2  1  20.00 claim-p50-ms  50.00 claims/item  40.00 mean-ms  30.00 p50-ms  90.00 p95-ms  8.000 wake-p50-ms
`
	table := rendered(t, in)
	for _, want := range []string{
		// 2,500 ÷ 5,000.
		"| postgres, one INSERT per item, 8 workers | 2,500 | 5,000 | 0.50× |",
		"| directly (LISTEN), 10 instances | 100 | 10.0 | 80.0 | 8.00 (at most 8.00; 2.00 used) |  |",
		// 15 ÷ 10 per instance.
		"| through PgBouncer (polling every 1 s), 10 instances | 150 | 15.0 (1.50× directly) | 5.00 | 0.50 | 50.0 (5.00) |",
		"| directly (LISTEN), 50 instances | 30.0 ms | 90.0 ms | 40.0 ms | 8.00 ms | 20.0 ms | 50.0 |",
		"No idle fleet row directly (LISTEN), 50 instances: BenchmarkIdleFleet/direct/instances=50 is missing from the run",
		"No pickup row through PgBouncer, polling every 100 ms, 50 instances: BenchmarkFleetPickup/pgbouncer/poll=100ms/instances=50 is missing",
	} {
		if !strings.Contains(table, want) {
			t.Errorf("table lacks %q:\n%s", want, table)
		}
	}
	var none strings.Builder
	Render(&none, &Results{values: map[string]map[string][]float64{}, Meta: map[string]string{}}, "", "")
	for _, want := range []string{"No idle-fleet rows in this run", "No pickup rows in this run"} {
		if !strings.Contains(none.String(), want) {
			t.Errorf("a run without fleet rows: the output lacks %q", want)
		}
	}
}

// The claim-at-depth rows are shown with their ratio to the 10,000 pending row of their engine,
// the recovered endpoint with the ratio of its two p99s; a deep row missing says how to run it.
func TestDepthTables(t *testing.T) {
	const in = `BenchmarkClaimDepth/postgres/pending=10000/finished=0-2  200  4000 µs/claim  8000 items/s
BenchmarkClaimDepth/postgres/pending=1000000/finished=0-2  200  4400 µs/claim  7200 items/s
BenchmarkRecoveredEndpoint/postgres-2  1  0 ns/op  2.000 p99-ratio  30.00 recovery-p99-ms  15.00 steady-p99-ms  812.0 backlog-ran
`
	table := rendered(t, in)
	for _, want := range []string{
		"| postgres, 10,000 pending, 0 finished | 4,000 | 8,000 | 1.00× |",
		"| postgres, 1,000,000 pending, 0 finished | 4,400 | 7,200 | 0.90× |",
		"No claim-at-depth row postgres, 10,000,000 pending, 0 finished: it runs with SWITCHBOARD_BENCH_DEEP=1",
		"| postgres | 15.0 ms | 30.0 ms | 2.00× | 812 |",
		"No recovered-endpoint row on sqlite",
	} {
		if !strings.Contains(table, want) {
			t.Errorf("table lacks %q:\n%s", want, table)
		}
	}
}

// rendered is what Render prints of the go test output in.
func rendered(t *testing.T, in string) string {
	t.Helper()
	r, err := Parse(strings.NewReader(in), nil)
	if err != nil {
		t.Fatal(err)
	}
	var out strings.Builder
	Render(&out, r, "1, 1, 1", "1, 1, 1")
	return out.String()
}

// TestServerCPUTable: the PostgreSQL drains' server CPU per item and Go + server, each the median
// of the runs (the sum's median is of the runs' sums), beside the floor's; no table without it.
func TestServerCPUTable(t *testing.T) {
	const in = `BenchmarkDrain/postgres/noop/w=8/switchboard-2  1  1 ns/op  40000 cpu-ns/item  6000 items/s  100000 server-cpu-ns/item
BenchmarkDrain/postgres/noop/w=8/floor-2        1  1 ns/op  20000 cpu-ns/item  9000 items/s  80000 server-cpu-ns/item
BenchmarkDrain/postgres/noop/w=8/switchboard-2  1  1 ns/op  10000 cpu-ns/item  6000 items/s  200000 server-cpu-ns/item
BenchmarkDrain/postgres/noop/w=8/floor-2        1  1 ns/op  20000 cpu-ns/item  9000 items/s  80000 server-cpu-ns/item
BenchmarkDrain/postgres/noop/w=8/switchboard-2  1  1 ns/op  30000 cpu-ns/item  6000 items/s  150000 server-cpu-ns/item
BenchmarkDrain/postgres/noop/w=8/floor-2        1  1 ns/op  20000 cpu-ns/item  9000 items/s  80000 server-cpu-ns/item
`
	r, err := Parse(strings.NewReader(in), &strings.Builder{})
	if err != nil {
		t.Fatal(err)
	}
	var out strings.Builder
	WriteServerCPU(&out, r)
	for _, want := range []string{
		// medians: server 150 µs against 80; Go + server of the runs 140, 210, 180 µs: 180.
		"| server, no-op handler, 8 workers | 150 µs | floor 80.0 µs | 1.88× floor |",
		"| Go + server, no-op handler, 8 workers | 180 µs | floor 100 µs | 1.80× floor |",
	} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("table lacks %q:\n%s", want, out.String())
		}
	}
	r, err = Parse(strings.NewReader(sample), &strings.Builder{})
	if err != nil {
		t.Fatal(err)
	}
	out.Reset()
	WriteServerCPU(&out, r)
	if out.Len() != 0 {
		t.Errorf("a table without server CPU figures:\n%s", out.String())
	}
}

// TestFinishedTable: the drain beside finished items, each row beside the same drain alone in
// the same run; a note when the run has none.
func TestFinishedTable(t *testing.T) {
	const in = `BenchmarkDrain/postgres/noop/w=32/switchboard-2  1  1 ns/op  8000 items/s
BenchmarkDrain/postgres/noop/w=32/floor-2  1  1 ns/op  10000 items/s
BenchmarkDrainBesideFinished/postgres/noop/w=32/switchboard-2  1  1 ns/op  7600 items/s
BenchmarkDrainBesideFinished/postgres/noop/w=32/floor-2  1  1 ns/op  10000 items/s
`
	r, err := Parse(strings.NewReader(in), &strings.Builder{})
	if err != nil {
		t.Fatal(err)
	}
	var out strings.Builder
	if notes := WriteFinished(&out, r); len(notes) != 0 {
		t.Errorf("notes %q", notes)
	}
	for _, want := range []string{
		"| postgres, no-op handler, 32 workers, switchboard | 7,600 | 8,000 | 0.95× |",
		"| postgres, no-op handler, 32 workers, floor | 10,000 | 10,000 | 1.00× |",
	} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("table lacks %q:\n%s", want, out.String())
		}
	}
	r, err = Parse(strings.NewReader(sample), &strings.Builder{})
	if err != nil {
		t.Fatal(err)
	}
	if notes := WriteFinished(&strings.Builder{}, r); len(notes) != 1 {
		t.Errorf("notes of a run without the rows: %q", notes)
	}
}

// TestDrainRunsSpread: the drain table's last column gives the range of switchboard's runs from
// two runs on, and says "one run" for one.
func TestDrainRunsSpread(t *testing.T) {
	for _, c := range []struct{ in, want string }{
		{"BenchmarkDrain/postgres/noop/w=8/switchboard-2 1 1 ns/op 6000 items/s\n", "| one run |"},
		{"BenchmarkDrain/postgres/noop/w=8/switchboard-2 1 1 ns/op 6000 items/s\nBenchmarkDrain/postgres/noop/w=8/switchboard-2 1 1 ns/op 6500 items/s\n",
			"| 6,000–6,500 (2 runs) |"},
	} {
		r, err := Parse(strings.NewReader(c.in), &strings.Builder{})
		if err != nil {
			t.Fatal(err)
		}
		var out strings.Builder
		WriteDrains(&out, r)
		if !strings.Contains(out.String(), c.want) {
			t.Errorf("table lacks %q:\n%s", c.want, out.String())
		}
	}
}

func TestChaosSectionIsReplacedBetweenItsMarkers(t *testing.T) {
	page := "# Benchmarks\n\n## Chaos and pressure\n\n" + ChaosBegin + "\n\nnot run yet\n\n" + ChaosEnd + "\n\n## Next\n"
	got, err := ReplaceChaosSection(page, "| scorecard |\n")
	if err != nil {
		t.Fatal(err)
	}
	want := "# Benchmarks\n\n## Chaos and pressure\n\n" + ChaosBegin + "\n\n| scorecard |\n\n" + ChaosEnd + "\n\n## Next\n"
	if got != want {
		t.Errorf("replaced page:\n%s\nwant:\n%s", got, want)
	}
	if s, ok := ChaosSection(got); !ok || !strings.Contains(s, "| scorecard |") {
		t.Errorf("ChaosSection = %q, %v", s, ok)
	}
	if _, err := ReplaceChaosSection("# Benchmarks\n", "x"); err == nil || !strings.Contains(err.Error(), "no chaos section") {
		t.Errorf("a page without the section: error %v", err)
	}
	if _, ok := ChaosSection("x " + ChaosBegin + " no end"); ok {
		t.Error("an unclosed section was found")
	}
}
