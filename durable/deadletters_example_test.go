package durable_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"go.uber.org/zap"

	"github.com/switchboard-go/switchboard/durable"
	"github.com/switchboard-go/switchboard/durable/record"
	"github.com/switchboard-go/switchboard/durable/sqlite"
	"github.com/switchboard-go/switchboard/mediator"
)

type ImportContact struct {
	mediator.Command
	Email string `json:"email"`
}

// A batch run captures its failing items as dead letters; an operator lists them, replays one
// once the cause is fixed, and discards another, saying why.
func Example_deadLetters() {
	dir, _ := os.MkdirTemp("", "durable-dead-letters")
	defer os.RemoveAll(dir)
	ctx := context.Background()
	q, err := durable.Open(ctx, sqlite.Open(filepath.Join(dir, "queue.db")), durable.Config{
		Logger: zap.NewNop()})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer q.Close()
	durable.Register[*ImportContact](q, "crm.import-contact")

	fixed := false
	m := mediator.New(nil, mediator.Config{})
	mediator.HandleFunc(m, func(ctx context.Context, r *ImportContact) (mediator.Void, error) {
		if r.Email == "" {
			return mediator.Void{}, errors.New("no email")
		}
		if !fixed && r.Email == "ann@example" {
			return mediator.Void{}, errors.New("invalid email " + r.Email)
		}
		return mediator.Void{}, nil
	})
	if err := m.Build(); err != nil {
		fmt.Println(err)
		return
	}

	res, _ := q.RunBatch(ctx, m, "crm-sync", []durable.BatchItem{
		{Key: "c1", Request: &ImportContact{Email: "bob@example"}},
		{Key: "c2", Request: &ImportContact{Email: "ann@example"}},
		{Key: "c3", Request: &ImportContact{}},
	})
	fmt.Printf("processed %d, succeeded %d, invalid %d\n", res.Processed, res.Succeeded, res.Invalid)

	page, _ := q.DeadLetters(ctx, durable.DeadLetterFilter{Source: "crm-sync"}) // failed ones, newest first
	fmt.Println("failed letters:", page.Total)
	for _, d := range page.Letters {
		fmt.Printf("  %s: %s\n", d.Key, d.Error)
	}

	fixed = true // the mapping bug is fixed: replay ann, discard the empty record
	r, err := q.Replay(ctx, m, res.DeadLetters[0], "alice")
	fmt.Println("replay c2:", r, err)
	r, err = q.Discard(ctx, res.DeadLetters[1], "alice", "record has no email")
	fmt.Println("discard c3:", r, err)
	r, err = q.Replay(ctx, m, res.DeadLetters[1], "alice")
	fmt.Println("replay c3:", r, errors.Is(err, durable.ErrConflict))

	d, timeline, _ := q.DeadLetter(ctx, res.DeadLetters[1])
	fmt.Println("c3 is", d.Status)
	for _, e := range timeline {
		fmt.Printf("  %s by %s (%s)\n", e.Kind, e.Actor, e.Reason)
	}
	st, _ := q.Stats(ctx)
	fmt.Println("open letters:", st.DeadLetters[record.DeadLetterFailed])
	// Output:
	// processed 3, succeeded 1, invalid 2
	// failed letters: 2
	//   c3: no email
	//   c2: invalid email ann@example
	// replay c2: replayed <nil>
	// discard c3: discarded <nil>
	// replay c3: conflict true
	// c3 is discarded
	//   discard by alice (record has no email)
	// open letters: 0
}
