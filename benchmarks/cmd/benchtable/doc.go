// Command benchtable reads the output of the benchmarks module's go test -bench runs on
// standard input and prints the comparison tables of make bench in Markdown: each case's
// switchboard figure beside its peers' or baseline's from the same run, with their ratios
// (switchboard ÷ River, switchboard ÷ floor, Send ÷ direct call, …), then every benchmark's
// metrics. With -count above 1 each figure is the median of its runs. It prints the machine's
// load average (/proc/loadavg) when it starts and when its input ends, since figures taken on
// a busy machine say less. Lines that are not results (failures, skips) are copied to standard
// error; a failed run makes it exit with status 1 after the tables. cmd/benchdocs writes the
// same tables, with charts, to docs/benchmarks.md.
//
//	cd benchmarks && go test -run '^$' -bench . -benchtime 1x | go run ./cmd/benchtable
package main
