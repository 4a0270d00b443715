package durable_test

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/stdlib"

	"github.com/switchboard-go/switchboard/durable"
	istore "github.com/switchboard-go/switchboard/durable/internal/store"
	"github.com/switchboard-go/switchboard/durable/postgres"
	"github.com/switchboard-go/switchboard/durable/record"
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
	id      record.ItemID // when stored
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
	q := openQueue(t, postgres.New(db, postgres.Config{}), durable.Config{Policy: fastPolicy})

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

	q2 := openQueue(t, postgres.Open(srv.dsn, postgres.Config{}), durable.Config{Policy: fastPolicy})
	ctx := context.Background()
	byN := func() map[int][]record.Item {
		t.Helper()
		out := map[int][]record.Item{}
		var after record.ItemID
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
			case errors.Is(err, durable.ErrNotFound):
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

func ids(items []record.Item) []record.ItemID {
	out := make([]record.ItemID, len(items))
	for i, it := range items {
		out[i] = it.ID
	}
	return out
}

// TestEnqueueToken: every item gets a token, random unless WithToken gives one; enqueueing a
// held token again inserts nothing and reports its item; ItemByToken finds an item by it.
func TestEnqueueToken(t *testing.T) {
	eachBackend(t, func(t *testing.T, b backend) {
		ctx := context.Background()
		e := newEnv(t, b)
		q := e.q

		a := must[durable.Enqueued](t)(q.Enqueue(ctx, &Work{N: 1}))
		c := must[durable.Enqueued](t)(q.Enqueue(ctx, &Work{N: 1}))
		if len(a.Token) != 32 || a.Token == c.Token || a.Duplicate || c.Duplicate {
			t.Fatalf("random tokens: %+v, %+v", a, c)
		}
		if it := must[record.Item](t)(q.ItemByToken(ctx, a.Token)); it.ID != a.ID || it.Token != a.Token {
			t.Fatalf("ItemByToken(%q) = %+v; want item %d", a.Token, it, a.ID)
		}

		first := must[durable.Enqueued](t)(q.Enqueue(ctx, &Work{N: 2}, durable.WithToken("order-2")))
		again := must[durable.Enqueued](t)(q.Enqueue(ctx, &Work{N: 2}, durable.WithToken("order-2")))
		if first.Duplicate || !again.Duplicate || again.ID != first.ID || again.Token != "order-2" {
			t.Fatalf("the same token twice: %+v, %+v", first, again)
		}
		// The token holds whatever the item's state: a dead item is still the token's.
		claimed := must[[]istore.Claimed](t)(e.store.Claim(ctx, "w", e.clock.Now(), time.Minute, 10))
		var done []istore.Completion
		for _, cl := range claimed {
			done = append(done, istore.Completion{Fence: cl.Fence(), State: istore.StateDead, Outcome: istore.OutcomeFailed,
				StartedAt: e.clock.Now(), EndedAt: e.clock.Now(), Error: "boom"})
		}
		must[[]error](t)(e.store.Complete(ctx, done))
		if late := must[durable.Enqueued](t)(q.Enqueue(ctx, &Work{N: 2}, durable.WithToken("order-2"))); !late.Duplicate || late.ID != first.ID {
			t.Fatalf("the token of a dead item: %+v; want item %d as a duplicate", late, first.ID)
		}

		// A dedupe key's duplicate reports the item holding the key.
		k := must[durable.Enqueued](t)(q.Enqueue(ctx, &Work{N: 3}, durable.WithDedupeKey("k"), durable.WithToken("t3")))
		d := must[durable.Enqueued](t)(q.Enqueue(ctx, &Work{N: 3}, durable.WithDedupeKey("k"), durable.WithToken("t3b")))
		if !d.Duplicate || d.ID != k.ID {
			t.Fatalf("dedupe key: %+v, %+v", k, d)
		}

		// In a transaction: the token is the transaction's until it commits.
		tx, err := e.store.DB().BeginTx(ctx, nil)
		if err != nil {
			t.Fatal(err)
		}
		in := must[durable.Enqueued](t)(q.EnqueueTx(ctx, tx, &Work{N: 4}, durable.WithToken("tx-4")))
		if err := tx.Commit(); err != nil {
			t.Fatal(err)
		}
		if it := must[record.Item](t)(q.ItemByToken(ctx, "tx-4")); it.ID != in.ID {
			t.Fatalf("ItemByToken after the commit: %+v; want %d", it, in.ID)
		}

		if _, err := q.ItemByToken(ctx, "nobody"); !errors.Is(err, durable.ErrNotFound) || !strings.Contains(err.Error(), "nobody") {
			t.Fatalf("ItemByToken of an unknown token: %v", err)
		}
		for _, tok := range []string{"", strings.Repeat("t", durable.MaxTokenBytes+1), "\xff\xfe", "a\x00b"} {
			if _, err := q.Enqueue(ctx, &Work{N: 5}, durable.WithToken(tok)); err == nil || !strings.Contains(err.Error(), "WithToken") {
				t.Fatalf("WithToken of %d bytes: %v", len(tok), err)
			}
		}
		if n := len(must[[]record.Item](t)(q.List(ctx, durable.Filter{}))); n != 5 {
			t.Fatalf("%d items; want 5", n)
		}
	})
}

// TestDeferredErrorCarriesToken: the deferral's item is found by the token of its
// DeferredError.
func TestDeferredErrorCarriesToken(t *testing.T) {
	eachBackend(t, func(t *testing.T, b backend) {
		ctx := context.Background()
		q := b.queue(t, durable.Config{})
		m := mediator.New(nil, mediator.Config{})
		mediator.HandleFunc(m, func(ctx context.Context, r *Work) (mediator.Void, error) {
			return mediator.Void{}, retryableErr{msg: "down"}
		})
		m.Use(durable.NewDeferral(q, durable.DeferralConfig{PersistTimeout: time.Minute}))
		if err := m.Build(); err != nil {
			t.Fatal(err)
		}
		_, err := mediator.Send(ctx, m, &Work{N: 1})
		deferred, ok := errors.AsType[*durable.DeferredError](err)
		if !ok || deferred.Token == "" {
			t.Fatalf("Send: %v", err)
		}
		if it := must[record.Item](t)(q.ItemByToken(ctx, deferred.Token)); it.ID != deferred.ItemID {
			t.Fatalf("ItemByToken: %+v; want item %d", it, deferred.ItemID)
		}
	})
}

// TestEnqueueNothingSentIsNotUnknown: an enqueue that fails before its statement is sent — its
// context already done, a database that refuses connections — says so: its error does not
// match ErrOutcomeUnknown, and nothing is stored.
func TestEnqueueNothingSentIsNotUnknown(t *testing.T) {
	eachBackend(t, func(t *testing.T, b backend) {
		q := b.queue(t, durable.Config{})
		ctx, cancel := context.WithCancel(context.Background())
		cancel()
		_, err := q.Enqueue(ctx, &Work{N: 1})
		if !errors.Is(err, context.Canceled) || errors.Is(err, durable.ErrOutcomeUnknown) {
			t.Fatalf("Enqueue with a cancelled context: %v; want context.Canceled, not an unknown outcome", err)
		}
		if items := must[[]record.Item](t)(q.List(context.Background(), durable.Filter{})); len(items) != 0 {
			t.Fatalf("items %+v", items)
		}
	})
	t.Run("refused", func(t *testing.T) {
		dsn := pgDSN(t)
		if dsn == "" {
			t.Skipf("%s not set", pgDSNEnv)
		}
		pg, q := hungSetup(t, dsn)
		// No connection kept: one the proxy closed under the pool would take the INSERT
		// (written to a socket whose peer is gone) and lose it, an outcome the client cannot
		// know. Here every call dials, and is refused.
		durable.StoreOf(q).DB().SetMaxIdleConns(0)
		pg.proxy.StopListening() // closes the listener and the pool's connections
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_, err := q.Enqueue(ctx, &Work{N: 1})
		if err == nil || errors.Is(err, durable.ErrOutcomeUnknown) {
			t.Fatalf("Enqueue to a refusing port: %v; want an error saying nothing was sent", err)
		}
		if !errors.Is(err, syscall.ECONNREFUSED) {
			t.Fatalf("Enqueue to a refusing port: %v; want connection refused", err)
		}
		pg.drain(t, q)
	})
}

// TestDeferralConfigValidate: a negative PersistTimeout is refused, naming the field, and the
// deferral's Validate (the mediator's Build) reports that error.
func TestDeferralConfigValidate(t *testing.T) {
	cfg := durable.DeferralConfig{PersistTimeout: -time.Second}
	if err := cfg.Validate(); err == nil || !strings.Contains(err.Error(), "PersistTimeout") {
		t.Fatalf("Validate: %v", err)
	}
	q := typesQueue(t)
	err := registerErr(t, func() error { return durable.NewDeferral(q, cfg).Validate() })
	if err == nil || !strings.Contains(err.Error(), "PersistTimeout") {
		t.Fatalf("NewDeferral: %v", err)
	}
}

// TestDeferralPersistTimeoutBoundsWrite: a caller without a deadline of its own is kept by a
// hung database no longer than DeferralConfig.PersistTimeout, and told the outcome is unknown
// (the insert was sent) with the item's token; once the database answers, the token says
// whether the item was stored, and enqueueing it again stores the request once.
func TestDeferralPersistTimeoutBoundsWrite(t *testing.T) {
	dsn := pgDSN(t)
	if dsn == "" {
		t.Skipf("%s not set", pgDSNEnv)
	}
	const persist = 300 * time.Millisecond
	pg, q := hungSetup(t, dsn)
	t.Cleanup(pg.proxy.Thaw)
	m := mediator.New(nil, mediator.Config{})
	mediator.HandleFunc(m, func(ctx context.Context, r *Work) (mediator.Void, error) {
		return mediator.Void{}, retryableErr{msg: "down"}
	})
	m.Use(durable.NewDeferral(q, durable.DeferralConfig{PersistTimeout: persist}))
	if err := m.Build(); err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	must[durable.Enqueued](t)(q.Enqueue(ctx, &Work{N: 0})) // the pool holds a connection that has run the INSERT
	durable.NotifierIdle(q)                                // and is idle again: the NOTIFY to other instances is sent
	pg.proxy.Freeze()
	began := time.Now()
	_, err := mediator.Send(ctx, m, &Work{N: 1})
	took := time.Since(began)
	if took > persist+100*time.Millisecond {
		t.Errorf("the deferral kept a caller without a deadline %v; PersistTimeout is %v", took, persist)
	}
	unknown, ok := errors.AsType[*durable.OutcomeUnknownError](err)
	if !ok || !errors.Is(err, durable.ErrOutcomeUnknown) || !errors.Is(err, context.DeadlineExceeded) || !strings.Contains(err.Error(), "down") {
		t.Fatalf("the deferral into a hung database returned %v after %v; want the handler's error with an unknown outcome", err, took)
	}
	pg.proxy.Thaw()
	again := must[durable.Enqueued](t)(q.Enqueue(ctx, &Work{N: 1}, durable.WithToken(unknown.Token)))
	it := must[record.Item](t)(q.ItemByToken(ctx, unknown.Token))
	if it.ID != again.ID {
		t.Fatalf("token %q: item %d, enqueue again said %+v", unknown.Token, it.ID, again)
	}
	t.Logf("deferral returned after %v: %v; enqueue again: %+v", took.Round(time.Millisecond), err, again)
	pg.drain(t, q)
}
