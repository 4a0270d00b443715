package durable_test

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/stdlib"

	"github.com/switchboard-go/switchboard/durable"
	"github.com/switchboard-go/switchboard/mediator"
)

// What a caller of the deferral or of Enqueue was told.
type outcomeTold int

const (
	toldStored  outcomeTold = iota // deferred or enqueued: the item exists
	toldUnknown                    // ErrOutcomeUnknown: it may or may not exist
	toldFailed                     // an error saying nothing was stored
)

func (o outcomeTold) String() string { return [...]string{"stored", "unknown", "failed"}[o] }

type outcomeCaller struct {
	n       int    // the request's Work.N, unique per caller
	enqueue bool   // Enqueue rather than the deferral
	token   string // the item's token, when the caller was told it
	told    outcomeTold
	id      durable.ItemID // when stored
	err     error
	over    time.Duration // how long past its deadline the call returned
}

// TestDeferralUnknownOutcomeFrozenPostgres: a PostgreSQL server of the test's own is frozen
// (SIGSTOP on its postmaster and every backend) while 20 callers defer a request each and 20
// enqueue one, every call with a 2 s deadline; then it resumes. No caller may wait past its
// deadline by more than 50 ms; no caller told "failed" may have its item stored; every caller
// told "unknown" finds its item, or none, by its token; and enqueueing every token again makes
// no second item.
func TestDeferralUnknownOutcomeFrozenPostgres(t *testing.T) {
	hungLeakCheck(t)
	srv := startHungServer(t)
	const (
		callers  = 20 // per path
		deadline = 2 * time.Second
		slack    = 50 * time.Millisecond
	)
	// Three quarters of the callers find an idle connection, which they use without the ping
	// pgx makes on a connection idle for a second (it would fail at the deadline, and the
	// INSERT would never be sent): they write to a frozen backend, an outcome nobody can know.
	// The others dial, and the server never answers: nothing is sent.
	pgcfg, err := pgx.ParseConfig(srv.dsn)
	if err != nil {
		t.Fatal(err)
	}
	db := stdlib.OpenDB(*pgcfg, stdlib.OptionShouldPing(func(context.Context, stdlib.ShouldPingParams) bool { return false }))
	t.Cleanup(func() { _ = db.Close() })
	warmConns := 2 * callers * 3 / 4
	db.SetMaxIdleConns(warmConns)
	q := openQueue(t, durable.Config{DB: db, Dialect: durable.Postgres, Policy: fastPolicy})

	m := mediator.New(nil, mediator.Config{})
	mediator.HandleFunc(m, func(ctx context.Context, r *Work) (mediator.Void, error) {
		return mediator.Void{}, retryableErr{msg: fmt.Sprintf("work %d: service unavailable", r.N)}
	})
	m.Use(durable.NewDeferral(q, durable.DeferralConfig{}))
	if err := m.Build(); err != nil {
		t.Fatal(err)
	}

	// Warm the pool: every connection has run the INSERT (prepared it) before the freeze.
	var warm sync.WaitGroup
	start := make(chan struct{})
	for i := range warmConns {
		warm.Go(func() {
			<-start
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			if _, err := q.Enqueue(ctx, &Work{N: -1 - i}); err != nil {
				t.Errorf("warm-up enqueue: %v", err)
			}
		})
	}
	close(start)
	warm.Wait()
	if t.Failed() {
		return
	}

	srv.stop(t)
	t.Cleanup(func() { srv.cont(t) })
	cs := make([]*outcomeCaller, 2*callers)
	var wg sync.WaitGroup
	begin := make(chan struct{})
	for i := range cs {
		c := &outcomeCaller{n: i, enqueue: i >= callers}
		if c.enqueue {
			c.token = fmt.Sprintf("frozen-%d-%s", i, randomSuffix())
		}
		cs[i] = c
		wg.Go(func() {
			<-begin
			ctx, cancel := context.WithTimeout(context.Background(), deadline)
			defer cancel()
			due, _ := ctx.Deadline()
			if c.enqueue {
				var res durable.Enqueued
				res, c.err = q.Enqueue(ctx, &Work{N: c.n}, durable.WithToken(c.token))
				c.id = res.ID
			} else {
				_, c.err = mediator.Send(ctx, m, &Work{N: c.n})
			}
			c.over = time.Since(due)
			classifyOutcome(c)
		})
	}
	close(begin)
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(time.Minute):
		srv.cont(t)
		<-done
		t.Fatal("callers were still waiting a minute into the freeze")
	}
	srv.cont(t)

	// Every backend the callers wrote to reads what it was sent, runs it, and ends when it
	// finds its connection closed; only then is what the database holds final.
	_ = q.Close()
	_ = db.Close()
	look, err := sql.Open("pgx", srv.dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer look.Close()
	eventually(t, 30*time.Second, "every client backend of the frozen pool to end", func() bool {
		var n int
		err := look.QueryRow(`SELECT count(*) FROM pg_stat_activity WHERE backend_type = 'client backend' AND pid <> pg_backend_pid()`).Scan(&n)
		return err == nil && n == 0
	})

	q2 := openQueue(t, durable.Config{PostgresDSN: srv.dsn, Policy: fastPolicy})
	ctx := context.Background()
	byN := func() map[int][]durable.Item {
		t.Helper()
		out := map[int][]durable.Item{}
		var after durable.ItemID
		for {
			items, err := q2.List(ctx, durable.Filter{AfterID: after, Limit: 500})
			if err != nil {
				t.Fatal(err)
			}
			if len(items) == 0 {
				return out
			}
			for _, it := range items {
				var w Work
				if err := json.Unmarshal(it.Payload, &w); err != nil {
					t.Fatalf("item %d: %v", it.ID, err)
				}
				if w.N >= 0 {
					out[w.N] = append(out[w.N], it)
				}
			}
			after = items[len(items)-1].ID
		}
	}

	stored := byN()
	counts := map[outcomeTold]int{}
	var found, none int // of the unknown outcomes
	var worst time.Duration
	for _, c := range cs {
		counts[c.told]++
		worst = max(worst, c.over)
		path := "deferral"
		if c.enqueue {
			path = "enqueue"
		}
		if c.over > slack {
			t.Errorf("%s caller %d returned %v past its %v deadline (told %v: %v)", path, c.n, c.over.Round(time.Millisecond), deadline, c.told, c.err)
		}
		items := stored[c.n]
		switch c.told {
		case toldFailed:
			if len(items) != 0 {
				t.Errorf("%s caller %d was told the request failed (%v), yet item %d holds it", path, c.n, c.err, items[0].ID)
			}
		case toldStored:
			if len(items) != 1 || items[0].ID != c.id {
				t.Errorf("%s caller %d was told item %d, the store holds %v", path, c.n, c.id, ids(items))
			}
		case toldUnknown:
			it, err := q2.ItemByToken(ctx, c.token)
			switch {
			case errors.Is(err, sql.ErrNoRows):
				none++
				if len(items) != 0 {
					t.Errorf("%s caller %d: no item under token %q, yet items %v hold its request", path, c.n, c.token, ids(items))
				}
			case err != nil:
				t.Errorf("%s caller %d: ItemByToken(%q): %v", path, c.n, c.token, err)
			case len(items) != 1 || items[0].ID != it.ID:
				t.Errorf("%s caller %d: token %q names item %d, the request is in %v", path, c.n, c.token, it.ID, ids(items))
			default:
				found++
			}
		}
	}
	t.Logf("told: %d stored, %d unknown (%d stored, %d not), %d failed; latest return %v past the deadline",
		counts[toldStored], counts[toldUnknown], found, none, counts[toldFailed], worst.Round(time.Millisecond))

	// Enqueueing every token again stores each request once.
	for _, c := range cs {
		if c.token == "" {
			continue
		}
		res, err := q2.Enqueue(ctx, &Work{N: c.n}, durable.WithToken(c.token))
		if err != nil {
			t.Errorf("enqueue token %q again: %v", c.token, err)
			continue
		}
		if had := stored[c.n]; len(had) == 1 && (!res.Duplicate || res.ID != had[0].ID) {
			t.Errorf("caller %d: enqueueing token %q again returned %+v; want item %d as a duplicate", c.n, c.token, res, had[0].ID)
		}
	}
	for n, items := range byN() {
		if len(items) > 1 {
			t.Errorf("request %d is stored %d times: %v", n, len(items), ids(items))
		}
	}
	if counts[toldUnknown] == 0 {
		t.Logf("no caller met an unknown outcome this run")
	}
}

// classifyOutcome sorts what the caller was told.
func classifyOutcome(c *outcomeCaller) {
	var unknown *durable.OutcomeUnknownError
	var deferred *durable.DeferredError
	switch {
	case c.err == nil:
		c.told = toldStored
	case errors.As(c.err, &deferred):
		c.told, c.id, c.token = toldStored, deferred.ItemID, deferred.Token
	case errors.As(c.err, &unknown):
		if !errors.Is(c.err, durable.ErrOutcomeUnknown) {
			panic(fmt.Sprintf("%v does not match ErrOutcomeUnknown", c.err))
		}
		c.told, c.token = toldUnknown, unknown.Token
	default:
		c.told = toldFailed
	}
}

func ids(items []durable.Item) []durable.ItemID {
	out := make([]durable.ItemID, len(items))
	for i, it := range items {
		out[i] = it.ID
	}
	return out
}
