package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/switchboard-go/switchboard/benchmarks/internal/benchfmt"
	"github.com/switchboard-go/switchboard/benchmarks/internal/chaos"
	"github.com/switchboard-go/switchboard/benchmarks/internal/svgchart"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// card is a scorecard of one chaos scenario and one pressure cell whose traces run at rate
// with a dip to half of it during the fault.
func card(system string, rate float64) chaos.Scorecard {
	t0 := time.Date(2026, 12, 7, 12, 0, 0, 0, time.UTC)
	result := func(sc chaos.Scenario) chaos.Result {
		r := chaos.Result{Recovered: true, CleanThroughput: rate, TraceStart: t0,
			CleanPickup: chaos.Latency{N: 10, P95: time.Millisecond}, WorstPickup: chaos.Latency{N: 10, P95: time.Second}}
		at := t0
		for _, p := range sc.Phases {
			if p.Kind == chaos.Warmup {
				continue
			}
			w := chaos.Window{Phase: p, Start: at, End: at.Add(p.Duration)}
			r.Timeline.Windows = append(r.Timeline.Windows, w)
			for range int(p.Duration / time.Second) {
				v := rate
				if p.Faulty() {
					v = rate / 2
				}
				r.Trace = append(r.Trace, v)
			}
			at = w.End
		}
		return r
	}
	crash, idle := chaos.ChaosScenarios()[0].Scaled(6), chaos.PressureCells()[0].Scaled(120)
	return chaos.Scorecard{System: system, Cells: []chaos.Cell{chaos.Judge(crash, result(crash)), chaos.Judge(idle, result(idle))}}
}

func TestWriteSectionPutsTheScorecardAndChartsOnThePage(t *testing.T) {
	docs := t.TempDir()
	page := filepath.Join(docs, "benchmarks.md")
	before := "# Benchmarks\n\n## Chaos and pressure\n\n" + benchfmt.ChaosBegin + "\n\nnot yet\n\n" + benchfmt.ChaosEnd + "\n\n## Every benchmark of the run\n"
	if err := os.WriteFile(page, []byte(before), 0o644); err != nil {
		t.Fatal(err)
	}
	cards := []chaos.Scorecard{card("switchboard", 100), card("river", 90)}
	var score strings.Builder
	if err := chaos.WriteMarkdown(&score, cards...); err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(docs, "benchmarks", "chaos")
	if err := writeSection(page, dir, cards, "About the run.\n", score.String()); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(page)
	if err != nil {
		t.Fatal(err)
	}
	got := string(b)
	for _, want := range []string{
		"# Benchmarks\n\n## Chaos and pressure\n\n" + benchfmt.ChaosBegin + "\n\nWritten by `make chaos` from one run. About the run.",
		"| chaos_crash_recovery | ✓ recovered 0s, lost 0, 100.0 jobs/s, p95 1.0 ms (worst phase 1000.0 ms) | ✓ recovered 0s, lost 0, 90.0 jobs/s, p95 1.0 ms (worst phase 1000.0 ms) | 0.90× | 1.00× |",
		"](benchmarks/chaos/chaos.svg)",
		"](benchmarks/chaos/pressure.svg)",
		"[chaos.md](chaos.md)",
		benchfmt.ChaosEnd + "\n\n## Every benchmark of the run\n",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("the page lacks %q:\n%s", want, got)
		}
	}
	if strings.Contains(got, "not yet") {
		t.Errorf("the old section stayed:\n%s", got)
	}
	for _, f := range []string{"chaos.svg", "pressure.svg"} {
		svg, err := os.ReadFile(filepath.Join(dir, f))
		if err != nil {
			t.Fatal(err)
		}
		wellFormed(t, f, string(svg))
		for _, want := range []string{"chaos_crash_recovery", "switchboard", "river", "fault or pressure"} {
			if f == "pressure.svg" && want == "chaos_crash_recovery" {
				want = "idle_in_tx_saturation"
			}
			if !strings.Contains(string(svg), want) {
				t.Errorf("%s lacks %q", f, want)
			}
		}
	}
	if err := writeSection(filepath.Join(docs, "missing.md"), dir, cards, "", ""); err == nil {
		t.Error("writeSection on a missing page: no error")
	}
}

func TestMovingAverageTrails(t *testing.T) {
	got := movingAverage([]float64{10, 20, 30, 40}, 2)
	want := []float64{10, 15, 25, 35}
	for i, xy := range got {
		if xy.X != float64(i+1) || xy.Y != want[i] {
			t.Errorf("point %d = %+v, want (%d, %v)", i, xy, i+1, want[i])
		}
	}
}

// wellFormed fails the test when svg is not an SVG document a page can show.
func wellFormed(t *testing.T, name, svg string) {
	t.Helper()
	if err := svgchart.Check(svg); err != nil {
		t.Errorf("%s: %v", name, err)
	}
}
