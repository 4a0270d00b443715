package main

import (
	"bufio"
	"fmt"
	"io"
	"regexp"
	"slices"
	"strconv"
	"strings"
)

// results are the benchmark figures of a run: for each benchmark (its name without the
// GOMAXPROCS suffix) and unit, the values of its runs in input order.
type results struct {
	order  []string // benchmark names, first seen first
	values map[string]map[string][]float64
	cpu    string // the "cpu:" header line's value
	failed bool   // a FAIL line or a panic was seen
}

// procs is the -N suffix go test adds to a benchmark's name (GOMAXPROCS).
var procs = regexp.MustCompile(`-\d+$`)

// parse reads go test -bench output (the standard benchmark format, custom metrics included),
// copying to other the lines that are neither results nor the usual headers.
func parse(r io.Reader, other io.Writer) (*results, error) {
	res := &results{values: map[string]map[string][]float64{}}
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if name, vals, ok := resultLine(line); ok {
			if res.values[name] == nil {
				res.order = append(res.order, name)
				res.values[name] = map[string][]float64{}
			}
			for unit, v := range vals {
				res.values[name][unit] = append(res.values[name][unit], v)
			}
			continue
		}
		trimmed := strings.TrimSpace(line)
		switch {
		case strings.HasPrefix(trimmed, "cpu:"):
			res.cpu = strings.TrimSpace(strings.TrimPrefix(trimmed, "cpu:"))
			continue
		case trimmed == "", trimmed == "PASS", strings.HasPrefix(trimmed, "goos:"), strings.HasPrefix(trimmed, "goarch:"),
			strings.HasPrefix(trimmed, "pkg:"), strings.HasPrefix(trimmed, "ok "):
			continue
		case strings.HasPrefix(trimmed, "FAIL"), strings.HasPrefix(trimmed, "--- FAIL"), strings.HasPrefix(trimmed, "panic:"):
			res.failed = true
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

// get returns the median of name's unit, and whether there is one.
func (r *results) get(name, unit string) (float64, bool) {
	vs := r.values[name][unit]
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

// runs is the largest number of runs of any benchmark.
func (r *results) runs() int {
	n := 0
	for _, units := range r.values {
		for _, vs := range units {
			n = max(n, len(vs))
		}
	}
	return n
}
