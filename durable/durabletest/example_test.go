package durabletest_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/switchboard-go/switchboard/behaviors"
	"github.com/switchboard-go/switchboard/behaviors/retry"
	"github.com/switchboard-go/switchboard/durable"
	"github.com/switchboard-go/switchboard/durable/durabletest"
	"github.com/switchboard-go/switchboard/durable/sqlite"
	"github.com/switchboard-go/switchboard/mediator"
)

type SendInvoice struct {
	mediator.Command
	Invoice string `json:"invoice"`
}

// unavailable is the error of a service that is down: status 503, retried.
type unavailable struct{}

func (unavailable) Error() string   { return "invoice service unavailable" }
func (unavailable) StatusCode() int { return 503 }

// exampleT stands in for the *testing.T of a test, which an Example does not have.
type exampleT struct{ testing.TB }

func (exampleT) Helper()                           {}
func (exampleT) Fatalf(format string, args ...any) { panic(fmt.Sprintf(format, args...)) }

// A test drives a durable handler with Work: no scheduler, no goroutine, no sleep. Time moves
// by the test's clock. (In a test, durabletest.NewQueue(t, cfg) opens the queue.)
func Example() {
	var t testing.TB = exampleT{} // in a test: its *testing.T
	ctx := context.Background()
	clk := durabletest.NewManualClock(time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC))
	dir, _ := os.MkdirTemp("", "durabletest-example")
	defer os.RemoveAll(dir)
	q, err := durable.Open(ctx, sqlite.Open(filepath.Join(dir, "queue.db")), durable.Config{
		Clock:  clk,
		Policy: retry.Policy{MaxAttempts: 2, BaseDelay: time.Minute, Jitter: behaviors.Off},
	})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer q.Close()
	durable.Register[*SendInvoice](q, "billing.send-invoice")

	down := true
	m := mediator.New(nil, mediator.Config{})
	mediator.HandleFunc(m, func(ctx context.Context, r *SendInvoice) (mediator.Void, error) {
		if down {
			return mediator.Void{}, unavailable{}
		}
		fmt.Println("sent", r.Invoice)
		return mediator.Void{}, nil
	})
	_ = m.Build()

	_, _ = q.Enqueue(ctx, &SendInvoice{Invoice: "INV-1"})
	fmt.Println(len(durabletest.RequireEnqueued[*SendInvoice](t, q)), "enqueued")

	fmt.Println(durabletest.Work(ctx, t, q, m)) // fails: retried a minute later
	fmt.Println(durabletest.Work(ctx, t, q, m)) // not due yet: nothing runs
	clk.Advance(time.Minute)
	down = false
	fmt.Println(durabletest.Work(ctx, t, q, m))
	// Output:
	// 1 enqueued
	// succeeded=0 retried=1 dead=0 refused=0
	// succeeded=0 retried=0 dead=0 refused=0
	// sent INV-1
	// succeeded=1 retried=0 dead=0 refused=0
}
