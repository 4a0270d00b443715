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

type SendDigest struct {
	mediator.Command
	User string `json:"user"`
}

// The digest of a user is sent at most once a day, however often it is asked for.
func (d *SendDigest) DedupeKey() string { return "digest:" + d.User }

// A uniqueness window holds a dedupe key after its item succeeded: an enqueue with the key
// within the window returns the item that ran, as a duplicate; after it, a new item runs.
func ExampleWithUniqueWindow() {
	dir, _ := os.MkdirTemp("", "durable-example")
	defer os.RemoveAll(dir)
	ctx := context.Background()
	clock := newFakeClock() // a clock moved by hand, standing for the day passing
	clock.Set(time.Date(2030, 1, 1, 9, 0, 0, 0, time.UTC))
	q, err := durable.Open(ctx, sqlite.Open(filepath.Join(dir, "queue.db")), durable.Config{Clock: clock})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer q.Close()
	durable.Register[*SendDigest](q, "digest.send", durable.WithUniqueWindow(24*time.Hour))

	m := mediator.New(nil, mediator.Config{})
	sent := make(chan string, 1)
	mediator.HandleFunc(m, func(ctx context.Context, r *SendDigest) (mediator.Void, error) {
		sent <- "sent the digest of " + r.User
		return mediator.Void{}, nil
	})
	if err := m.Build(); err != nil {
		fmt.Println(err)
		return
	}
	run := func() {
		if err := q.Start(m); err != nil {
			fmt.Println(err)
			return
		}
		fmt.Println(<-sent)
		_ = q.Shutdown(ctx) // the success is stored
	}

	first, _ := q.Enqueue(ctx, &SendDigest{User: "ann"})
	fmt.Println("enqueued, duplicate:", first.Duplicate)
	run()

	clock.Advance(23 * time.Hour)
	again, _ := q.Enqueue(ctx, &SendDigest{User: "ann"})
	fmt.Println("23 h later: duplicate:", again.Duplicate, "of the digest sent:", again.ID == first.ID)

	// An enqueue can set its own window, or none.
	other, _ := q.Enqueue(ctx, &SendDigest{User: "bob"}, durable.WithUniqueFor(time.Hour))
	fmt.Println("bob's: duplicate:", other.Duplicate)

	clock.Advance(time.Hour)
	next, _ := q.Enqueue(ctx, &SendDigest{User: "ann"})
	fmt.Println("a day later: duplicate:", next.Duplicate)
	held, _ := q.Item(ctx, first.ID)
	fmt.Println("the first digest released its key at", held.UniqueReleasedAt.Format(time.DateTime))
	// Output:
	// enqueued, duplicate: false
	// sent the digest of ann
	// 23 h later: duplicate: true of the digest sent: true
	// bob's: duplicate: false
	// a day later: duplicate: false
	// the first digest released its key at 2030-01-02 09:00:00
}
