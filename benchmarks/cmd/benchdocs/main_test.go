package main

import (
	"bytes"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"go.uber.org/goleak"

	"github.com/switchboard-go/switchboard/benchmarks/internal/benchfmt"
	"github.com/switchboard-go/switchboard/benchmarks/internal/svgchart"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// sample is the output of a short run of make bench's benchmarks: the drains with the no-op
// handler on both engines at one iteration (and through PgBouncer), the idle fleets (but the
// one of 50 instances directly) and the pickups, the in-process rows at 1,000 iterations, one
// run each, between the lines of benchdocs -meta start and -meta end.
const sample = "testdata/sample.out"

func TestPage(t *testing.T) {
	out := t.TempDir()
	// A chart of an earlier run whose rows this run lacks must not stay behind.
	stale := filepath.Join(out, chartDir, "drain-postgres-insert.svg")
	writeFile(t, stale, "<svg/>")
	md := generated(t, sample, out)
	for _, want := range []string{
		// The run.
		"| command | `make bench` |",
		"| CPUs (`nproc`) | 2 |",
		"| CPU model (/proc/cpuinfo) | AMD EPYC |",
		"| Go | go1.26.8 linux/amd64 |",
		"| PostgreSQL | PostgreSQL 15.18 (Debian 15.18-0+deb12u1) |",
		"| PgBouncer | PgBouncer 1.18.0 (transaction pooling) |",
		"| load average (1, 5, 15 min) at start | 7.25, 5.49, 2.76 |",
		"| load average (1, 5, 15 min) at end | 8.88, 6.41, 3.33 |",
		"| date | 2026-12-02 14:32 UTC (to 2026-12-02 14:33 UTC) |",
		// In process: 18.11 ÷ 3.145 = 5.76; 33.51 ÷ 161.6 = 0.21 and ÷ 689.9 = 0.049.
		"| `Send`, 0 behaviors | 18.1 ns | direct call 3.15 ns | 5.76× |",
		"| `Send`, 3 pass-through behaviors | 84.4 ns | direct call 3.15 ns | 26.85× |",
		"| breaker, one goroutine | 33.5 ns, 0 allocs | sony/gobreaker 162 ns, 0 allocs; failsafe-go 690 ns, 15 allocs | 0.21× sony/gobreaker; 0.049× failsafe-go |",
		"| fallback + retry + breaker + timeout | 720 ns, 4 allocs | failsafe-go 2,632 ns, 30 allocs | 0.27× |",
		"| retry, fails once then succeeds (zero delay) | 524 ns, 2 allocs | cenkalti/backoff 963 ns, 7 allocs; avast/retry-go 928 ns, 8 allocs | 0.54× cenkalti/backoff; 0.56× avast/retry-go |",
		// Drains: 8,248 ÷ 3,086 = 2.67; ÷ 4,438 = 1.86.
		"| postgres, no-op handler, 32 workers | 8,248 | River 3,086; floor 4,438 | 2.67× River; 1.86× floor |",
		"| sqlite, no-op handler, 1 worker | 250 µs | floor 509 µs; River 1,630 µs | 0.49× floor; 0.15× River |",
		// Through PgBouncer: 2,298 ÷ 3,381 = 0.68.
		"| postgres, no-op handler, 8 workers | 2,298 | 3,381 | 0.68× |",
		// The idle fleets: through PgBouncer 6.373 ÷ 11.11 per instance directly = 0.57.
		"| directly (LISTEN), 10 instances | 111 | 11.1 | 77.0 | 7.70 (at most 8.00; 2.50 used) |  |",
		"| through PgBouncer (polling every 1 s), 10 instances | 63.7 | 6.37 (0.57× directly) | 10.8 | 1.08 | 50.0 (5.00) |",
		"| through PgBouncer (polling every 1 s), 50 instances | 382 | 7.63 | 10.2 | 0.20 | 254 (5.08) |",
		"- No idle fleet row directly (LISTEN), 50 instances: BenchmarkIdleFleet/direct/instances=50 is missing from the run",
		// The pickups.
		"| directly (LISTEN), 50 instances | 33.9 ms | 116 ms | 94.7 ms | 9.75 ms | 22.3 ms | 51.5 |",
		"| through PgBouncer, polling every 1 s (the default), 50 instances | 29.7 ms | 510 ms |",
		// Quoted, and said to be.
		"| go-mediatr | 7.9 ns | 5.0× | 1,216 ns | 769.6× |",
		"| eyazici90/go-mediator | 4.8 ns | 3.0× | 80 ns | 50.6× |",
		"| direct call (quoted) | 1.58 ns |",
		"not measured by this run",
		// The charts, linked.
		"](benchmarks/inprocess.svg)",
		"](benchmarks/drain-postgres-noop.svg)",
		"](benchmarks/drain-sqlite-noop.svg)",
		// Every benchmark.
		"| RetryLoop/failonce/retry-go |",
	} {
		if !strings.Contains(md, want) {
			t.Errorf("benchmarks.md lacks %q", want)
		}
	}
	if strings.Contains(md, "drain-postgres-insert.svg") || strings.Contains(md, "PostgreSQL rows are missing") {
		t.Error("benchmarks.md links a chart the run has no data for, or says PostgreSQL is missing")
	}
	if _, err := os.Stat(stale); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the stale chart is still there: %v", err)
	}
	charts := map[string][]string{
		"inprocess.svg": {"switchboard", "direct call", "ranging the sequence", "failsafe-go", "sony/gobreaker",
			"cenkalti/backoff", "avast/retry-go", "bounded map", "Send, 0 behaviors", "keyed breaker, 1M keys (cap 10k)", "ns per call"},
		"drain-postgres-noop.svg": {"switchboard", "River", "floor", "switchboard through PgBouncer", "postgres, no-op handler", "workers"},
		"drain-sqlite-noop.svg":   {"switchboard", "River", "floor", "sqlite, no-op handler"},
	}
	for file, series := range charts {
		svg := readFile(t, filepath.Join(out, chartDir, file))
		wellFormed(t, file, svg)
		for _, s := range series {
			if !strings.Contains(svg, ">"+s) {
				t.Errorf("%s has no text %q", file, s)
			}
		}
	}
	files, err := filepath.Glob(filepath.Join(out, chartDir, "*"))
	if err != nil || len(files) != len(charts) {
		t.Errorf("charts written: %v (%v), want the %d of the sample's rows", files, err, len(charts))
	}
}

// TestPageWithoutPostgres reads a run whose PostgreSQL rows were skipped: the page says so and
// has no PostgreSQL chart.
func TestPageWithoutPostgres(t *testing.T) {
	var b strings.Builder
	for line := range strings.Lines(readFile(t, sample)) {
		if !strings.HasPrefix(line, "BenchmarkDrain/postgres/") && !strings.HasPrefix(line, "BenchmarkIdleFleet/") &&
			!strings.HasPrefix(line, "BenchmarkFleetPickup/") && !strings.HasPrefix(line, "bench-postgres:") {
			b.WriteString(line)
		}
	}
	in := filepath.Join(t.TempDir(), "bench.out")
	writeFile(t, in, b.String())
	out := t.TempDir()
	md := generated(t, in, out)
	for _, want := range []string{
		"The PostgreSQL rows are missing from this run: they need `SWITCHBOARD_TEST_PG_DSN`",
		"- No postgres drain rows in this run: SWITCHBOARD_TEST_PG_DSN is not set",
		"- No idle-fleet rows in this run: they need SWITCHBOARD_TEST_PG_DSN",
		"- No pickup rows in this run: they need SWITCHBOARD_TEST_PG_DSN",
		"](benchmarks/drain-sqlite-noop.svg)",
	} {
		if !strings.Contains(md, want) {
			t.Errorf("benchmarks.md lacks %q", want)
		}
	}
	if strings.Contains(md, "postgres, no-op handler, 1 worker") {
		t.Error("benchmarks.md has a PostgreSQL row")
	}
	if _, err := os.Stat(filepath.Join(out, chartDir, "drain-postgres-noop.svg")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("a PostgreSQL chart was written: %v", err)
	}
}

func TestNoResults(t *testing.T) {
	in := filepath.Join(t.TempDir(), "bench.out")
	writeFile(t, in, "--- FAIL: BenchmarkDrain\nFAIL\n")
	err := generate(in, t.TempDir())
	if err == nil || !strings.Contains(err.Error(), "no benchmark results") {
		t.Errorf("generate of a run without results: %v, want an error naming the missing results", err)
	}
}

// A run that failed part-way writes no page: its rows would read as a whole run.
func TestFailedRunWritesNoPage(t *testing.T) {
	in, out := filepath.Join(t.TempDir(), "bench.out"), t.TempDir()
	writeFile(t, in, "BenchmarkDirectCall-2 \t1000000\t1.50 ns/op\n--- FAIL: BenchmarkDrain\nFAIL\n")
	err := generate(in, out)
	if err == nil || !strings.Contains(err.Error(), "the run failed") {
		t.Errorf("generate of a failed run: %v, want an error saying it failed", err)
	}
	if entries, _ := os.ReadDir(out); len(entries) != 0 {
		t.Errorf("a failed run wrote %d files", len(entries))
	}
}

// TestMeta checks that the description make bench writes around the run reads back.
func TestMeta(t *testing.T) {
	var b bytes.Buffer
	writeStart(&b, "make bench BENCH_COUNT=3", "PostgreSQL 15.18", "PgBouncer 1.18.0 (transaction pooling)")
	writeEnd(&b)
	r, err := benchfmt.Parse(&b, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	for key, want := range map[string]string{"command": "make bench BENCH_COUNT=3", "postgres": "PostgreSQL 15.18",
		"pgbouncer": "PgBouncer 1.18.0 (transaction pooling)"} {
		if got := r.Meta[key]; got != want {
			t.Errorf("%s: %q, want %q", key, got, want)
		}
	}
	for _, key := range []string{"date", "nproc", "cpu-model", "go", "load-start", "load-end", "date-end"} {
		if r.Meta[key] == "" {
			t.Errorf("%s missing from the description", key)
		}
	}
	if got := postgresVersion(""); !strings.Contains(got, "SWITCHBOARD_TEST_PG_DSN not set") {
		t.Errorf("PostgreSQL version without a DSN: %q", got)
	}
	r.Meta["command"] = "go test -bench 'A|B'"
	if got := meta(r, "command"); got != `go test -bench 'A\|B'` {
		t.Errorf("a command with a | in the run's table: %q, want it escaped", got)
	}
	if got := pgbouncerVersion(""); !strings.Contains(got, "SWITCHBOARD_TEST_PGBOUNCER_DSN not set") {
		t.Errorf("PgBouncer version without a DSN: %q", got)
	}
}

// generated runs generate on in and returns the benchmarks.md it wrote into out.
func generated(t *testing.T, in, out string) string {
	t.Helper()
	if err := generate(in, out); err != nil {
		t.Fatal(err)
	}
	return readFile(t, filepath.Join(out, "benchmarks.md"))
}

func writeFile(t *testing.T, path, content string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}

func readFile(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// wellFormed fails the test when svg is not an SVG document a page can show.
func wellFormed(t *testing.T, name, svg string) {
	t.Helper()
	if err := svgchart.Check(svg); err != nil {
		t.Errorf("%s: %v", name, err)
	}
}

// The chaos section is make chaos's: a page written over one that has it keeps it as it was,
// charts included (they live in a directory of their own, which the bench command leaves).
func TestPageKeepsTheChaosSection(t *testing.T) {
	out := t.TempDir()
	first := generated(t, sample, out)
	if !strings.Contains(first, benchfmt.ChaosBegin+"\n\n"+ChaosNote+"\n\n"+benchfmt.ChaosEnd) {
		t.Fatalf("a first page lacks the chaos placeholder between its markers:\n%s", first)
	}
	section := "| scenario | switchboard |\n\n![chaos](benchmarks/chaos/chaos.svg)"
	withChaos, err := benchfmt.ReplaceChaosSection(first, section)
	if err != nil {
		t.Fatal(err)
	}
	writeFile(t, filepath.Join(out, "benchmarks.md"), withChaos)
	chart := filepath.Join(out, chartDir, "chaos", "chaos.svg")
	writeFile(t, chart, "<svg/>")
	again := generated(t, sample, out)
	if got, ok := benchfmt.ChaosSection(again); !ok || !strings.Contains(got, section) || strings.Contains(got, ChaosNote) {
		t.Errorf("the chaos section after a new page: %q (found %v), want the one make chaos wrote", got, ok)
	}
	if _, err := os.Stat(chart); err != nil {
		t.Errorf("the chaos chart did not survive the new page: %v", err)
	}
}
