// Package benchfmt reads the output of this module's go test -bench runs and prints their
// comparisons: each switchboard figure beside its peers' or baseline's from the same run, with
// their ratios. cmd/benchtable prints them to a terminal; cmd/benchdocs writes them, with
// charts and the machine they ran on, to docs/benchmarks.md.
package benchfmt
