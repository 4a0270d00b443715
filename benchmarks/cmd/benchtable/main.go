// Command benchtable reads the output of the benchmarks module's go test -bench runs on
// standard input and prints the comparison table of make bench in Markdown: each case's
// switchboard figure beside its peer's or baseline's from the same run, with their ratio
// (switchboard ÷ River, switchboard ÷ floor, Send ÷ direct call, …), then every benchmark's
// metrics. With -count above 1 each figure is the median of its runs. It prints the machine's
// load average (/proc/loadavg) when it starts and when its input ends, since figures taken on
// a busy machine say less. Lines that are not results (failures, skips) are copied to standard
// error; a failed run makes it exit with status 1 after the table.
//
//	cd benchmarks && go test -run '^$' -bench . -benchtime 1x | go run ./cmd/benchtable
package main

import (
	"fmt"
	"os"
	"strings"
)

func main() {
	start := loadAverage()
	res, err := parse(os.Stdin, os.Stderr)
	if err != nil {
		fmt.Fprintln(os.Stderr, "benchtable:", err)
		os.Exit(2)
	}
	render(os.Stdout, res, start, loadAverage())
	if res.failed {
		fmt.Fprintln(os.Stderr, "benchtable: the benchmark run failed (see above)")
		os.Exit(1)
	}
}

// loadAverage is the first three fields of /proc/loadavg, as uptime prints them.
func loadAverage() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "unknown"
	}
	f := strings.Fields(string(b))
	if len(f) < 3 {
		return "unknown"
	}
	return strings.Join(f[:3], ", ")
}
