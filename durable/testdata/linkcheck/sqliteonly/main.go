// Command sqliteonly is a durable program on SQLite alone: TestDriversLinkOnlyTheirDatabase
// checks that its binary holds no pgx symbol.
package main

import (
	"context"
	"fmt"
	"os"

	"github.com/switchboard-go/switchboard/durable"
	"github.com/switchboard-go/switchboard/durable/sqlite"
)

func main() {
	q, err := durable.Open(context.Background(), sqlite.Open(os.Args[1]), durable.Config{})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	defer q.Close()
}
