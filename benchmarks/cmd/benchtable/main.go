package main

import (
	"fmt"
	"os"

	"github.com/switchboard-go/switchboard/benchmarks/internal/benchfmt"
)

func main() {
	start := benchfmt.LoadAverage()
	res, err := benchfmt.Parse(os.Stdin, os.Stderr)
	if err != nil {
		fmt.Fprintln(os.Stderr, "benchtable:", err)
		os.Exit(2)
	}
	benchfmt.Render(os.Stdout, res, start, benchfmt.LoadAverage())
	if res.Failed {
		fmt.Fprintln(os.Stderr, "benchtable: the benchmark run failed (see above)")
		os.Exit(1)
	}
}
