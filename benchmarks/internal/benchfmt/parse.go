package benchfmt

import (
	"bufio"
	"fmt"
	"io"
	"regexp"
	"slices"
	"strconv"
	"strings"
)

// Results are the benchmark figures of a run: for each benchmark (its name without the
// GOMAXPROCS suffix) and unit, the values of its runs in input order.
type Results struct {
	// Order is the benchmarks' names, first seen first.
	Order []string
	// CPU is the value of go test's "cpu:" header line.
	CPU string
	// Meta is the run's description from its "bench-<key>: <value>" lines (see MetaLine),
	// by key: the machine, the command, the load average at start and end.
	Meta map[string]string
	// Failed is set when a FAIL line or a panic was seen.
	Failed bool

	values map[string]map[string][]float64
}

// procs is the -N suffix go test adds to a benchmark's name (GOMAXPROCS).
var procs = regexp.MustCompile(`-\d+$`)

// metaPrefix starts a line of the run's description, which go test never prints.
const metaPrefix = "bench-"

// MetaLine is the line of the run's description that Parse reads back as Meta[key] = value.
func MetaLine(key, value string) string {
	return metaPrefix + key + ": " + strings.Join(strings.Fields(value), " ")
}

// Parse reads go test -bench output (the standard benchmark format, custom metrics included)
// and the run's description lines, copying to other (when not nil) the lines that are
// neither, nor the usual headers: failures, skips, logs.
func Parse(r io.Reader, other io.Writer) (*Results, error) {
	res := &Results{values: map[string]map[string][]float64{}, Meta: map[string]string{}}
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if name, vals, ok := resultLine(line); ok {
			if res.values[name] == nil {
				res.Order = append(res.Order, name)
				res.values[name] = map[string][]float64{}
			}
			for unit, v := range vals {
				res.values[name][unit] = append(res.values[name][unit], v)
			}
			continue
		}
		if key, value, ok := strings.Cut(strings.TrimPrefix(line, metaPrefix), ": "); ok && strings.HasPrefix(line, metaPrefix) {
			res.Meta[key] = value
			continue
		}
		trimmed := strings.TrimSpace(line)
		switch {
		case strings.HasPrefix(trimmed, "cpu:"):
			res.CPU = strings.TrimSpace(strings.TrimPrefix(trimmed, "cpu:"))
			continue
		case trimmed == "", trimmed == "PASS", strings.HasPrefix(trimmed, "goos:"), strings.HasPrefix(trimmed, "goarch:"),
			strings.HasPrefix(trimmed, "pkg:"), strings.HasPrefix(trimmed, "ok "):
			continue
		case strings.HasPrefix(trimmed, "FAIL"), strings.HasPrefix(trimmed, "--- FAIL"), strings.HasPrefix(trimmed, "panic:"):
			res.Failed = true
		}
		if other != nil {
			fmt.Fprintln(other, line)
		}
	}
	return res, sc.Err()
}

// resultLine parses "BenchmarkX-2  <iterations>  <value> <unit>  <value> <unit> …".
func resultLine(line string) (name string, vals map[string]float64, ok bool) {
	f := strings.Fields(line)
	if len(f) < 4 || !strings.HasPrefix(f[0], "Benchmark") || len(f)%2 != 0 {
		return "", nil, false
	}
	if _, err := strconv.ParseInt(f[1], 10, 64); err != nil {
		return "", nil, false
	}
	vals = map[string]float64{}
	for i := 2; i+1 < len(f); i += 2 {
		v, err := strconv.ParseFloat(f[i], 64)
		if err != nil {
			return "", nil, false
		}
		vals[f[i+1]] = v
	}
	return procs.ReplaceAllString(f[0], ""), vals, true
}

// Get returns the median of the runs of benchmark name in unit, and whether there is one. A
// unit "a+b" is the median of the runs' sums of their figures in units a and b.
func (r *Results) Get(name, unit string) (float64, bool) {
	vs := r.values[name][unit]
	if a, b, ok := strings.Cut(unit, "+"); ok {
		vs = r.sums(name, a, b)
	}
	if len(vs) == 0 {
		return 0, false
	}
	s := slices.Clone(vs)
	slices.Sort(s)
	if len(s)%2 == 1 {
		return s[len(s)/2], true
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2, true
}

// sums is, run by run, the sum of a benchmark's figures in units a and b; nil unless it has as
// many of both.
func (r *Results) sums(name, a, b string) []float64 {
	as, bs := r.values[name][a], r.values[name][b]
	if len(as) != len(bs) {
		return nil
	}
	out := make([]float64, len(as))
	for i := range as {
		out[i] = as[i] + bs[i]
	}
	return out
}

// HasUnit reports whether a benchmark has a figure in unit.
func (r *Results) HasUnit(unit string) bool {
	for _, units := range r.values {
		if len(units[unit]) > 0 {
			return true
		}
	}
	return false
}

// Runs is the largest number of runs of any benchmark.
func (r *Results) Runs() int {
	n := 0
	for _, units := range r.values {
		for _, vs := range units {
			n = max(n, len(vs))
		}
	}
	return n
}

// HasSuffix reports whether a benchmark's name ends with s.
func (r *Results) HasSuffix(s string) bool {
	for _, n := range r.Order {
		if strings.HasSuffix(n, s) {
			return true
		}
	}
	return false
}

// HasPrefix reports whether a benchmark's name starts with p.
func (r *Results) HasPrefix(p string) bool {
	for _, n := range r.Order {
		if strings.HasPrefix(n, p) {
			return true
		}
	}
	return false
}
