// Command chaosreplica is one replica of a system under the chaos harness
// (benchmarks/internal/chaos): switchboard's scheduler or River's client working the harness's
// jobs on PostgreSQL, printing a line per finished run of its handler to standard output, until
// SIGTERM (a graceful stop) or SIGKILL. The harness starts it (benchmarks/cmd/chaos).
//
//	chaosreplica -system switchboard|river -dsn DSN [-workers N] [-instance I]
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"github.com/switchboard-go/switchboard/benchmarks/internal/chaos/replicas"
)

func main() {
	system := flag.String("system", "", "switchboard or river")
	dsn := flag.String("dsn", "", "the PostgreSQL DSN of the system's database (its search_path selects the schema)")
	workers := flag.Int("workers", 10, "the replica's workers")
	instance := flag.Int("instance", 0, "the replica's number, for its error messages")
	flag.Parse()
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	defer stop()
	var err error
	switch *system {
	case "switchboard":
		err = replicas.RunSwitchboard(ctx, *dsn, *workers, os.Stdout)
	case "river":
		err = replicas.RunRiver(ctx, *dsn, *workers, os.Stdout)
	default:
		err = fmt.Errorf("-system %q: want switchboard or river", *system)
	}
	if err != nil {
		fmt.Fprintf(os.Stderr, "chaosreplica %d: %v\n", *instance, err)
		os.Exit(1)
	}
}
