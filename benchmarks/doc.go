// Package benchmarks measures switchboard beside peer libraries in one run, so ratios compare
// like with like on the same machine. It is its own module: the peers never enter the library's
// go.mod. Run: cd benchmarks && go test -run '^$' -bench . -benchmem -cpu 1,2
package benchmarks
