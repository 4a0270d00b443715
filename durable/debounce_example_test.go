package durable_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/switchboard-go/switchboard/durable"
	"github.com/switchboard-go/switchboard/durable/sqlite"
	"github.com/switchboard-go/switchboard/mediator"
)

// SyncProfile copies a user's profile to a CRM.
type SyncProfile struct {
	mediator.Command
	User  string `json:"user"`
	Email string `json:"email"`
}

// A burst of updates to one profile becomes one delivery of its last state: each enqueue
// within the window updates the pending item, and the item runs a window after the last one
// (never later than the maximum delay after the first).
func ExampleWithDebounce() {
	dir, _ := os.MkdirTemp("", "durable-example")
	defer os.RemoveAll(dir)
	ctx := context.Background()
	clock := newFakeClock() // a clock moved by hand, standing for the seconds passing
	q, err := durable.Open(ctx, sqlite.Open(filepath.Join(dir, "queue.db")),
		durable.Config{Clock: clock, PollInterval: 10 * time.Millisecond})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer q.Close()
	durable.Register[*SyncProfile](q, "profile.sync")

	m := mediator.New(nil, mediator.Config{})
	synced := make(chan string, 1)
	mediator.HandleFunc(m, func(ctx context.Context, p *SyncProfile) (mediator.Void, error) {
		synced <- p.User + " <" + p.Email + ">"
		return mediator.Void{}, nil
	})
	if err := m.Build(); err != nil {
		fmt.Println(err)
		return
	}
	if err := q.Start(m); err != nil {
		fmt.Println(err)
		return
	}
	defer func() { _ = q.Shutdown(ctx) }()

	for _, email := range []string{"ann@old.example", "ann@typo.exmaple", "ann@new.example"} {
		res, err := q.Enqueue(ctx, &SyncProfile{User: "ann", Email: email},
			durable.WithDebounce("profile:ann", 5*time.Second, time.Minute))
		if err != nil {
			fmt.Println(err)
			return
		}
		fmt.Println("item", res.ID, "debounced:", res.Debounced)
		clock.Advance(time.Second)
	}
	clock.Advance(5 * time.Second) // the window after the last update has passed
	fmt.Println("synced", <-synced)
	// Output:
	// item 1 debounced: false
	// item 1 debounced: true
	// item 1 debounced: true
	// synced ann <ann@new.example>
}
