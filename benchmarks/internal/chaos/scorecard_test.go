package chaos

import (
	"errors"
	"os"
	"slices"
	"strings"
	"testing"
	"time"
)

func TestJudgeAppliesEachRule(t *testing.T) {
	sc := ChaosScenarios()[0]
	good := Result{Recovered: true, Recovery: 20 * time.Second, CleanThroughput: 100}
	for _, tc := range []struct {
		name    string
		edit    func(*Result)
		reasons []string
	}{
		{"passes", func(*Result) {}, nil},
		{"at the bound", func(r *Result) { r.Recovery = sc.RecoveryBound }, nil},
		{"duplicates do not fail", func(r *Result) { r.Counts.RunTwice = []string{"j1"} }, nil},
		{"lost", func(r *Result) { r.Counts.Lost = []string{"j1", "j2"} }, []string{"2 lost"}},
		{"slow", func(r *Result) { r.Recovery = sc.RecoveryBound + time.Second }, []string{"recovered in 1m1s > 1m0s"}},
		{"never", func(r *Result) { r.Recovered = false }, []string{"never recovered"}},
		{"timeout", func(r *Result) { r.Timeline.TimedOut = true }, []string{"timed out after 5m37.5s"}},
		{"error", func(r *Result) { r.Err = errors.New("boom") }, []string{"error: boom"}},
	} {
		r := good
		tc.edit(&r)
		c := Judge(sc, r)
		if c.Pass != (tc.reasons == nil) || !slices.Equal(c.Reasons, tc.reasons) {
			t.Errorf("%s: pass %v, reasons %q; want %q", tc.name, c.Pass, c.Reasons, tc.reasons)
		}
	}
}

func TestWriteMarkdownScoresSideBySide(t *testing.T) {
	chaos, pressure := ChaosScenarios(), PressureCells()
	ok := Result{Recovered: true, Recovery: 3 * time.Second, CleanThroughput: 100,
		CleanPickup: Latency{N: 100, P95: 2 * time.Millisecond}, WorstPickup: Latency{N: 100, P95: 40 * time.Millisecond}}
	lost := ok
	lost.Counts.Lost = []string{"j1"}
	a := Scorecard{System: "switchboard", Cells: []Cell{Judge(chaos[0], ok), Judge(chaos[1], lost), Judge(pressure[0], ok)}}
	ok2 := ok
	ok2.CleanThroughput = 80
	ok2.CleanPickup.P95 = 50 * time.Millisecond
	b := Scorecard{System: "river", Cells: []Cell{Judge(chaos[0], ok2), Judge(chaos[1], ok2)}}
	if p, n := a.Score(Chaos); p != 1 || n != 2 {
		t.Errorf("switchboard chaos %d/%d, want 1/2", p, n)
	}
	var out strings.Builder
	if err := WriteMarkdown(&out, a, b); err != nil {
		t.Fatal(err)
	}
	md := out.String()
	for _, want := range []string{
		"| scenario | switchboard | river | clean jobs/s river ÷ switchboard | clean p95 river ÷ switchboard |",
		"| chaos_crash_recovery | ✓ recovered 3s, lost 0, 100.0 jobs/s, p95 2.0 ms (worst phase 40.0 ms) | ✓ recovered 3s, lost 0, 80.0 jobs/s, p95 50.0 ms (worst phase 40.0 ms) | 0.80× | 25.00× |",
		"| chaos_postgres_restart | ✗ 1 lost; recovered 3s, 100.0 jobs/s, p95 2.0 ms (worst phase 40.0 ms) | ✓ recovered 3s, lost 0, 80.0 jobs/s, p95 50.0 ms (worst phase 40.0 ms) | 0.80× | 25.00× |",
		"| idle_in_tx_saturation | ✓ recovered 3s, lost 0, 100.0 jobs/s, p95 2.0 ms (worst phase 40.0 ms) | – | – | – |",
		"| **chaos** | **1/2** | **2/2** | | |",
		"| **pressure** | **1/1** | **0/0** | | |",
		"90 % of the clean phase's",
	} {
		if !strings.Contains(md, want) {
			t.Errorf("markdown lacks %q:\n%s", want, md)
		}
	}
	if err := WriteMarkdown(&out); err == nil {
		t.Error("WriteMarkdown with no scorecards: no error")
	}
}

func ExampleWriteMarkdown() {
	crash := ChaosScenarios()[0]
	sb := Scorecard{System: "switchboard", Cells: []Cell{
		Judge(crash, Result{Recovered: true, Recovery: 4 * time.Second, CleanThroughput: 100}),
	}}
	river := Scorecard{System: "river", Cells: []Cell{
		Judge(crash, Result{Recovered: true, Recovery: 70 * time.Second, CleanThroughput: 95,
			Counts: Counts{RunTwice: []string{"j7"}, RecordedRetries: []string{"j7"}}}),
	}}
	_ = WriteMarkdown(os.Stdout, sb, river)
	// Output:
	// | scenario | switchboard | river | clean jobs/s river ÷ switchboard | clean p95 river ÷ switchboard |
	// |---|---|---|--:|--:|
	// | chaos_crash_recovery | ✓ recovered 4s, lost 0, 100.0 jobs/s | ✗ recovered in 1m10s > 1m0s; lost 0, run twice 1 (1 recorded as retries), 95.0 jobs/s | 0.95× | – |
	// | **chaos** | **1/1** | **0/1** | | |
	// | **pressure** | **0/0** | **0/0** | | |
	//
	// A cell passes when the scenario ran to its end without a timeout, no acknowledged job was lost, and throughput over a sliding 10s window got back to 90 % of the clean phase's within the scenario's recovery bound after its last fault or pressure phase. Jobs run twice are shown, not failed: the systems are at-least-once.
}

func ExampleWritePhases() {
	crash := ChaosScenarios()[0]
	phase := func(label string, kind Kind, jobs float64, p95 time.Duration, lost int) PhaseReport {
		return PhaseReport{Window: Window{Phase: Phase{Label: label, Kind: kind}}, Throughput: jobs,
			Pickup: Latency{N: 100, P50: p95 / 2, P95: p95, P99: 2 * p95}, Lost: lost,
			Recovery: 3 * time.Second, Recovered: true,
			Diagnostics: Diagnostics{DeadTuples: map[string]int64{"t": 40}, TableBytes: map[string]int64{"t": 2_500_000},
				WaitEvents: []WaitEvent{{Type: "Client", Event: "ClientRead", Samples: 9}}}}
	}
	sb := Scorecard{System: "switchboard", Cells: []Cell{Judge(crash, Result{Recovered: true, CleanThroughput: 100,
		Phases: []PhaseReport{phase("baseline", Clean, 100, 4*time.Millisecond, 0), phase("kill", KillWorker, 99, 6*time.Millisecond, 0)}})}}
	river := Scorecard{System: "river", Cells: []Cell{Judge(crash, Result{Recovered: true, CleanThroughput: 95,
		Phases: []PhaseReport{phase("baseline", Clean, 95, 8*time.Millisecond, 0)}})}}
	_ = WritePhases(os.Stdout, sb, river)
	// Output:
	// #### chaos_crash_recovery
	//
	// | phase | switchboard jobs/s | switchboard pickup p50 / p95 / p99 | switchboard lost, twice | switchboard recovered | switchboard top wait | switchboard dead tuples, size | river jobs/s | river pickup p50 / p95 / p99 | river lost, twice | river recovered | river top wait | river dead tuples, size | jobs/s river ÷ switchboard | p95 river ÷ switchboard |
	// |---|--:|--:|--:|--:|---|--:|--:|--:|--:|--:|---|--:|--:|--:|
	// | baseline (clean) | 100.0 | 2.0 ms / 4.0 ms / 8.0 ms | 0, 0 |  | Client/ClientRead (9) | 40, 2.5 MB | 95.0 | 4.0 ms / 8.0 ms / 16.0 ms | 0, 0 |  | Client/ClientRead (9) | 40, 2.5 MB | 0.95× | 2.00× |
	// | kill (kill-worker) | 99.0 | 3.0 ms / 6.0 ms / 12.0 ms | 0, 0 | 3s | Client/ClientRead (9) | 40, 2.5 MB | – | – | – | – | – | – | – | – |
}
