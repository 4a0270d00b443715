// Command postgresonly is a durable program on PostgreSQL alone: TestDriversLinkOnlyTheirDatabase
// checks that its binary holds no modernc.org/sqlite symbol.
package main

import (
	"context"
	"fmt"
	"os"

	"github.com/switchboard-go/switchboard/durable"
	"github.com/switchboard-go/switchboard/durable/postgres"
)

func main() {
	q, err := durable.Open(context.Background(), postgres.Open(os.Args[1], postgres.Config{}), durable.Config{})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	defer q.Close()
}
