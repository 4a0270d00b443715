package durabletest

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"testing"

	"github.com/switchboard-go/switchboard/durable"
	"github.com/switchboard-go/switchboard/durable/internal/exec"
	"github.com/switchboard-go/switchboard/durable/internal/pgtest"
	"github.com/switchboard-go/switchboard/durable/postgres"
	"github.com/switchboard-go/switchboard/durable/record"
	"github.com/switchboard-go/switchboard/durable/sqlite"
	"github.com/switchboard-go/switchboard/mediator"
)

// PostgresDSNEnv names the environment variable that makes NewQueue use PostgreSQL: a DSN of a
// server where the test may create and drop schemas.
const PostgresDSNEnv = "SWITCHBOARD_TEST_PG_DSN"

// NewQueue opens a throwaway queue with cfg: a SQLite file in t.TempDir(), or, when the
// environment variable SWITCHBOARD_TEST_PG_DSN is set, a schema of its own on that PostgreSQL
// server (PostgresSchema). The queue is closed, and the schema dropped, when the test ends.
func NewQueue(t testing.TB, cfg durable.Config) *durable.Queue {
	t.Helper()
	var driver durable.Driver = sqlite.Open(filepath.Join(t.TempDir(), "durable.db"))
	if dsn := os.Getenv(PostgresDSNEnv); dsn != "" {
		driver = postgres.Open(PostgresSchema(t, dsn), postgres.Config{})
	}
	q, err := durable.Open(context.Background(), driver, cfg)
	if err != nil {
		t.Fatalf("durabletest.NewQueue: %v", err)
	}
	t.Cleanup(func() {
		if err := q.Close(); err != nil {
			t.Errorf("durabletest: closing the queue: %v", err)
		}
	})
	return q
}

// PostgresSchema creates a schema of its own on the PostgreSQL server of dsn, for one test, and
// returns dsn with that schema as its search_path: pass it to postgres.Open, or open pools of
// your own on it. The schema, and everything in it, is dropped when the test ends, so tests
// (and packages testing in parallel) share one server without seeing each other's items.
func PostgresSchema(t testing.TB, dsn string) string {
	t.Helper()
	return pgtest.Schema(t, dsn, "durabletest_")
}

// RequireEnqueued fails the test unless q holds a pending item of request type Q (as
// registered with durable.Register) for which every match function reports true, and returns
// every such request, decoded, in the order they were enqueued.
func RequireEnqueued[Q any](t testing.TB, q *durable.Queue, match ...func(Q) bool) []Q {
	t.Helper()
	typ := reflect.TypeFor[Q]()
	in, ok := exec.Of(q)
	if !ok {
		t.Fatalf("durabletest.RequireEnqueued: %T is not a queue of package durable", q)
	}
	name, ok := in.NameOf(typ)
	if !ok {
		t.Fatalf("durabletest.RequireEnqueued: %s is not registered on the queue", typ)
	}
	var (
		found   []Q
		pending int
	)
	for f := (durable.ItemFilter{State: record.StatePending, Name: name, Limit: 500}); ; {
		page, err := q.Items(context.Background(), f)
		if err != nil {
			t.Fatalf("durabletest.RequireEnqueued: %v", err)
		}
		for _, it := range page.Items {
			pending++
			v, err := in.Decode(it.Name, it.Payload)
			if err != nil {
				t.Fatalf("durabletest.RequireEnqueued: item %d: %v", it.ID, err)
			}
			req := v.(Q)
			if matches(req, match) {
				found = append(found, req)
			}
		}
		if page.Next == "" {
			break
		}
		f.After = page.Next
	}
	if len(found) == 0 {
		if pending == 0 {
			t.Fatalf("durabletest.RequireEnqueued: no pending item of %s (%q)", typ, name)
		}
		t.Fatalf("durabletest.RequireEnqueued: none of the %d pending items of %s (%q) matches", pending, typ, name)
	}
	return found
}

func matches[Q any](req Q, match []func(Q) bool) bool {
	for _, m := range match {
		if !m(req) {
			return false
		}
	}
	return true
}

// Result counts what Work did with the items it claimed.
type Result struct {
	// Succeeded counts the attempts that succeeded.
	Succeeded int
	// Retried counts the failed attempts whose item is due again later.
	Retried int
	// Dead counts the items that became dead letters: a failed last attempt, an error that is
	// not retried, exhausted attempts, a payload that does not decode.
	Dead int
	// Refused counts the items put off without an attempt: an open circuit breaker or a full
	// bulkhead refused them, or their request name is not registered.
	Refused int
}

// String renders the counts.
func (r Result) String() string {
	return fmt.Sprintf("succeeded=%d retried=%d dead=%d refused=%d", r.Succeeded, r.Retried, r.Dead, r.Refused)
}

// WorkOption tweaks one Work.
type WorkOption func(*workConfig)

type workConfig struct{ instance string }

// AsInstance makes Work stand in for the scheduler of instance id: the id its leases and
// attempt rows carry. Default: the InstanceID of q's durable.Config, or "durabletest" when it
// names none. A test of what several instances did (a dashboard's, an audit's) works as each in
// turn.
func AsInstance(id string) WorkOption { return func(c *workConfig) { c.instance = id } }

// Work runs the items of q that are due now through sender (usually the *mediator.Mediator),
// one at a time in the calling goroutine, until none is due, and returns what happened. Each
// item goes through the scheduler's own code: the same marks on the dispatch, the same attempt
// rows, the same retry and dead-letter decisions, the same handling of breaker and bulkhead
// refusals. An item that becomes due while Work runs (the next item of an ordering key, a
// retry whose delay has passed) runs too. The scheduler Work stands in for is configured as
// q's Start would be, by the durable.Config q was opened with (its Breakers and Logger count);
// the test fails if the database fails. Work starts no goroutine and never sleeps: with an
// injected durable.Config.Clock, advance the clock to make the next retries due, then call Work
// again.
func Work(ctx context.Context, t testing.TB, q *durable.Queue, sender mediator.Sender, opts ...WorkOption) Result {
	t.Helper()
	var c workConfig
	for _, o := range opts {
		o(&c)
	}
	in, ok := exec.Of(q)
	if !ok {
		t.Fatalf("durabletest.Work: %T is not a queue of package durable", q)
	}
	e, err := in.Executor(ctx, sender, c.instance)
	if err != nil {
		t.Fatalf("durabletest.Work: %v", err)
	}
	defer e.Close()
	n, err := exec.Work(ctx, e)
	if err != nil {
		t.Fatalf("durabletest.Work: %v", err)
	}
	return Result{Succeeded: n.Succeeded, Retried: n.Retried, Dead: n.Dead, Refused: n.Refused}
}
