// Command benchdocs writes docs/benchmarks.md and its charts from the raw output of make bench
// (benchmarks/.bench.out): the comparison tables of package benchfmt, the machine and command
// of the run, a bar chart of the in-process rows' ns/op per system and a chart of the drains'
// items/s by worker count per engine and handler. The charts are SVG files in the benchmarks
// folder beside the page; the ones of earlier runs are replaced.
//
// make bench calls it twice around the benchmarks, to describe the run into the output it
// reads back:
//
//	benchdocs -meta start -command 'make bench'  # date, command, CPUs, CPU model, Go, PostgreSQL, load
//	benchdocs -meta end                          # load and date at the end
//
// and once after them (make bench-docs):
//
//	benchdocs -in .bench.out -out ../docs
//
// The PostgreSQL version comes from the server of SWITCHBOARD_TEST_PG_DSN, when it is set.
package main
