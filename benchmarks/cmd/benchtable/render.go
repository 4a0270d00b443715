package main

import (
	"fmt"
	"io"
	"math"
	"strconv"
	"strings"
)

// The cases of the drain benchmarks (BenchmarkDrain/<engine>/<handler>/w=<workers>/<system>).
var (
	engines  = []string{"postgres", "sqlite"}
	handlers = []struct{ name, label string }{{"noop", "no-op handler"}, {"insert", "one INSERT per item"}}
	workers  = []int{1, 8, 32}
)

// The in-process rows: switchboard's benchmark, its baseline's, and how to name them.
var inProcess = []struct {
	label, sb, base, baseLabel string
	allocs                     bool
}{
	{"`Send`, 0 behaviors", "BenchmarkSend", "BenchmarkDirectCall", "direct call", false},
	{"`TypedSender.Send`, 0 behaviors", "BenchmarkTypedSend", "BenchmarkDirectCall", "direct call", false},
	{"`Stream` of 3 items", "BenchmarkStream", "BenchmarkStreamDirect", "ranging the sequence directly", true},
	{"keyed breaker, 1M keys (cap 10k)", "BenchmarkKeyedBreaker/switchboard", "BenchmarkKeyedBreaker/map", "a bounded map miss", true},
}

func drainName(engine, handler string, w int, system string) string {
	return fmt.Sprintf("BenchmarkDrain/%s/%s/w=%d/%s", engine, handler, w, system)
}

// render prints the comparison table, the notes on what is missing, and every benchmark's
// figures.
func render(w io.Writer, r *results, loadStart, loadEnd string) {
	fmt.Fprintln(w, "## switchboard beside its peers and floors")
	fmt.Fprintln(w)
	fmt.Fprintf(w, "Load average (1, 5, 15 min) at start: %s; at end: %s.", loadStart, loadEnd)
	if r.cpu != "" {
		fmt.Fprintf(w, " CPU: %s.", r.cpu)
	}
	if n := r.runs(); n > 1 {
		fmt.Fprintf(w, " Medians of %d runs.", n)
	}
	fmt.Fprintln(w)
	fmt.Fprintln(w)
	fmt.Fprintln(w, "| case | switchboard | peer / floor (same run) | ratio |")
	fmt.Fprintln(w, "| --- | ---: | ---: | ---: |")
	var notes []string
	for _, e := range engines {
		if !r.hasPrefix("BenchmarkDrain/" + e + "/") {
			why := "the run failed, or its -bench pattern left them out"
			if e == "postgres" {
				why = "SWITCHBOARD_TEST_PG_DSN is not set, " + why
			}
			notes = append(notes, fmt.Sprintf("No %s drain rows in this run: %s.", e, why))
			continue
		}
		for _, h := range handlers {
			for _, n := range workers {
				drainRow(w, r, e, h.name, h.label, n)
			}
		}
	}
	for _, e := range engines {
		for _, h := range handlers {
			for _, n := range workers {
				cpuRow(w, r, e, h.name, h.label, n)
			}
		}
	}
	for _, p := range inProcess {
		sb, ok1 := r.get(p.sb, "ns/op")
		base, ok2 := r.get(p.base, "ns/op")
		if !ok1 || !ok2 {
			notes = append(notes, fmt.Sprintf("No %s row: %s or %s is missing from the run.", p.label, p.sb, p.base))
			continue
		}
		left, right := ns(sb), ns(base)
		if p.allocs {
			left += ", " + allocs(r, p.sb)
			right += ", " + allocs(r, p.base)
		}
		fmt.Fprintf(w, "| %s | %s | %s %s | %s |\n", p.label, left, p.baseLabel, right, ratio(sb, base))
	}
	fmt.Fprintln(w)
	for _, n := range notes {
		fmt.Fprintln(w, n)
	}
	if len(notes) > 0 {
		fmt.Fprintln(w)
	}
	fmt.Fprintln(w, "Drains: items/s from start to a stopped system with every outcome stored; Go CPU is this process's (user + system), the PostgreSQL server's excluded. One op is one item.")
	fmt.Fprintln(w)
	details(w, r)
}

func (r *results) hasPrefix(p string) bool {
	for _, n := range r.order {
		if strings.HasPrefix(n, p) {
			return true
		}
	}
	return false
}

// A drain row's peers, in the order the row names them.
var (
	ratePeers = []struct{ system, label string }{{"river", "River"}, {"floor", "floor"}}
	cpuPeers  = []struct{ system, label string }{{"floor", "floor"}, {"river", "River"}}
)

func drainRow(w io.Writer, r *results, engine, handler, label string, n int) {
	peerRow(w, r, fmt.Sprintf("drain %s, %s, %s (items/s)", engine, label, plural(n, "worker")),
		engine, handler, n, "items/s", count, ratePeers)
}

func cpuRow(w io.Writer, r *results, engine, handler, label string, n int) {
	peerRow(w, r, fmt.Sprintf("Go CPU per item, %s, %s, %s", engine, label, plural(n, "worker")),
		engine, handler, n, "cpu-ns/item", micros, cpuPeers)
}

// peerRow prints the row of a drain case's unit: switchboard's figure, its peers', and the
// ratios of switchboard's to each; nothing when switchboard's is missing.
func peerRow(w io.Writer, r *results, caseLabel, engine, handler string, n int, unit string, format func(float64) string,
	peers []struct{ system, label string }) {
	sb, ok := r.get(drainName(engine, handler, n, "switchboard"), unit)
	if !ok {
		return
	}
	var figures, ratios []string
	for _, p := range peers {
		v, ok := r.get(drainName(engine, handler, n, p.system), unit)
		if !ok {
			continue
		}
		figures = append(figures, p.label+" "+format(v))
		ratios = append(ratios, ratio(sb, v)+" "+p.label)
	}
	fmt.Fprintf(w, "| %s | %s | %s | %s |\n", caseLabel, format(sb), strings.Join(figures, "; "), strings.Join(ratios, "; "))
}

// details prints every benchmark's figures, one row each.
func details(w io.Writer, r *results) {
	if len(r.order) == 0 {
		fmt.Fprintln(w, "No benchmark results in the input.")
		return
	}
	units := []string{"items/s", "cpu-ns/item", "ns/op", "B/op", "allocs/op"}
	seen := map[string]bool{}
	for _, u := range units {
		seen[u] = true
	}
	for _, n := range r.order {
		for u := range r.values[n] {
			if !seen[u] {
				seen[u] = true
				units = append(units, u)
			}
		}
	}
	fmt.Fprintln(w, "| benchmark | "+strings.Join(units, " | ")+" |")
	fmt.Fprintln(w, "| --- |"+strings.Repeat(" ---: |", len(units)))
	for _, n := range r.order {
		cells := make([]string, len(units))
		for i, u := range units {
			if v, ok := r.get(n, u); ok {
				cells[i] = number(v)
			}
		}
		fmt.Fprintf(w, "| %s | %s |\n", strings.TrimPrefix(n, "Benchmark"), strings.Join(cells, " | "))
	}
}

func allocs(r *results, name string) string {
	v, ok := r.get(name, "allocs/op")
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

// ratio is a ÷ b, as the table prints it.
func ratio(a, b float64) string {
	if b == 0 {
		return "n/a"
	}
	return strconv.FormatFloat(a/b, 'f', 2, 64) + "×"
}

// count is a rate, rounded, with thousands separators.
func count(v float64) string { return group(strconv.FormatInt(int64(math.Round(v)), 10)) }

func micros(nanos float64) string { return strconv.FormatFloat(nanos/1000, 'f', 1, 64) + " µs" }

func ns(v float64) string { return number(v) + " ns" }

// number prints v with three significant digits below 1000, grouped digits above.
func number(v float64) string {
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
