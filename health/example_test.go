package health_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"

	"github.com/switchboard-go/switchboard/durable"
	"github.com/switchboard-go/switchboard/durable/sqlite"
	"github.com/switchboard-go/switchboard/health"
	"github.com/switchboard-go/switchboard/mediator"
)

// Mount the liveness and readiness handlers beside the service's routes. Readiness fails until
// the queue's scheduler runs, and again once it is shut down.
func Example() {
	ctx := context.Background()
	dir, _ := os.MkdirTemp("", "health-example")
	defer os.RemoveAll(dir)
	q, err := durable.Open(ctx, sqlite.Open(filepath.Join(dir, "queue.db")), durable.Config{})
	if err != nil {
		panic(err)
	}
	defer q.Close()

	probes, err := health.New(health.Config{
		Queue: q, // checks "store", "migrations" and "scheduler"
		Checks: []health.Check{
			{Name: "cache", Run: func(ctx context.Context) error { return nil }}, // the application's own
		},
	})
	if err != nil {
		panic(err)
	}
	mux := http.NewServeMux()
	mux.Handle("/livez", probes.Liveness())   // restart the process when this fails
	mux.Handle("/readyz", probes.Readiness()) // send no traffic while this fails

	get := func(path string) {
		w := httptest.NewRecorder()
		mux.ServeHTTP(w, httptest.NewRequest(http.MethodGet, path, nil))
		var rep health.Report
		_ = json.Unmarshal(w.Body.Bytes(), &rep)
		fmt.Println(path, w.Code, rep.Status)
		for _, c := range rep.Checks {
			if c.Error != "" {
				fmt.Printf("  %s: %s (%s)\n", c.Name, c.Status, c.Error)
			} else {
				fmt.Printf("  %s: %s\n", c.Name, c.Status)
			}
		}
	}
	get("/livez")
	get("/readyz")

	m := mediator.New(nil, mediator.Config{})
	if err := m.Build(); err != nil {
		panic(err)
	}
	if err := q.Start(m); err != nil {
		panic(err)
	}
	get("/readyz")
	_ = q.Shutdown(ctx)

	// Output:
	// /livez 200 ok
	// /readyz 503 failed
	//   store: ok
	//   migrations: ok
	//   scheduler: failed (not running: Queue.Start was not called or Queue.Shutdown was)
	//   cache: ok
	// /readyz 200 ok
	//   store: ok
	//   migrations: ok
	//   scheduler: ok
	//   cache: ok
}

// releaseQueue stands for a queue whose database lacks a migration of this release.
type releaseQueue struct{}

func (releaseQueue) MissingMigrations(context.Context) ([]int, error) { return []int{9}, nil }
func (releaseQueue) Scheduling() bool                                 { return true }

// Config.Queue asks two methods of the queue, MissingMigrations and Scheduling: a
// *durable.Queue has them, and so can a stand-in.
func ExampleQueueState() {
	probes, err := health.New(health.Config{Queue: releaseQueue{}})
	if err != nil {
		panic(err)
	}
	w := httptest.NewRecorder()
	probes.Readiness().ServeHTTP(w, httptest.NewRequest(http.MethodGet, "/readyz", nil))
	var rep health.Report
	_ = json.Unmarshal(w.Body.Bytes(), &rep)
	fmt.Println(w.Code, rep.Status)
	for _, c := range rep.Checks {
		fmt.Printf("%s: %s\n", c.Name, strings.TrimSpace(string(c.Status)+" "+c.Error))
	}
	// Output:
	// 503 failed
	// store: ok
	// migrations: failed the database lacks migrations [9]: run the driver package's Migrate (or apply its MigrationSQL) first
	// scheduler: ok
}
