package durable_test

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/switchboard-go/switchboard/durable"
	"github.com/switchboard-go/switchboard/durable/record"
)

// seedKey inserts n pending items of test.work due at at, of fairness key key, straight into
// q's table (an Enqueue each would take minutes): payloads {"n": 1..n}.
func seedKey(t *testing.T, b backend, q *durable.Queue, key string, n int, at time.Time) {
	t.Helper()
	db := durable.StoreOf(q).DB()
	us := at.UnixMicro()
	var err error
	if b.name == "postgres" {
		_, err = db.Exec(`INSERT INTO switchboard_items (name, payload, state, next_at, created_at, updated_at, fair_key)
			SELECT 'test.work', convert_to('{"n":' || g || '}', 'UTF8'), 'pending', $1::bigint, $1::bigint, $1::bigint, $2::text
			FROM generate_series(1, $3::int) g`, us, key, n)
	} else {
		_, err = db.Exec(`WITH RECURSIVE g(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM g WHERE x < ?3)
			INSERT INTO switchboard_items (name, payload, state, next_at, created_at, updated_at, fair_key)
			SELECT 'test.work', CAST('{"n":' || x || '}' AS BLOB), 'pending', ?1, ?1, ?1, ?2 FROM g`, us, key, n)
	}
	if err != nil {
		t.Fatalf("seeding %d items of %s: %v", n, key, err)
	}
	if b.name == "postgres" {
		if _, err := db.Exec(`ANALYZE switchboard_items`); err != nil {
			t.Fatal(err)
		}
	}
}

// startOrder records the order in which items start: the n of each Work, by its key (n above
// bMark: key B).
type startOrder struct {
	mu       sync.Mutex
	a, b     int
	aBeforeB []int // A's starts before each B start
	done     chan struct{}
	wantB    int
}

const bMark = 1 << 30

func (s *startOrder) work(_ context.Context, w *Work) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if w.N < bMark {
		s.a++
		return nil
	}
	s.b++
	s.aBeforeB = append(s.aBeforeB, s.a)
	if s.b == s.wantB {
		close(s.done)
	}
	return nil
}

// The acceptance case of fairness: 100,000 items of key A due, then 100 of key B enqueued after
// them; with 8 workers every B item starts before 1 % of A's items have run. Before fairness the
// claim took due items in due order, so B's items waited for all of A's.
func TestBacklogOfOneKeyDelaysNoOther(t *testing.T) {
	eachBackend(t, func(t *testing.T, b backend) {
		t.Parallel()
		q := b.queue(t, durable.Config{})
		seedKey(t, b, q, "A", 100_000, time.Now().Add(-time.Minute))
		ctx := context.Background()
		for i := range 100 {
			must[durable.Enqueued](t)(q.Enqueue(ctx, &Work{N: bMark + i}, durable.WithFairnessKey("B")))
		}
		order := &startOrder{done: make(chan struct{}), wantB: 100}
		start(t, q, mediatorFor(t, handlers{work: order.work}), durable.SchedulerConfig{Workers: 8})
		select {
		case <-order.done:
		case <-time.After(2 * time.Minute):
			order.mu.Lock()
			defer order.mu.Unlock()
			t.Fatalf("after 2 minutes %d of B's 100 items started (and %d of A's)", order.b, order.a)
		}
		order.mu.Lock()
		defer order.mu.Unlock()
		if last := order.aBeforeB[len(order.aBeforeB)-1]; last >= 1000 {
			t.Fatalf("%d of A's items started before B's last one (want fewer than 1,000, 1 %% of A's backlog); A's starts before each B start: %v", last, order.aBeforeB)
		}
	})
}

// With a backlog of priority 0 items of a key, an item of priority 9 enqueued after them starts
// within a claim round or two; with the same priority it would wait for the backlog.
func TestHighPriorityOvertakesABacklog(t *testing.T) {
	eachBackend(t, func(t *testing.T, b backend) {
		t.Parallel()
		q := b.queue(t, durable.Config{})
		seedKey(t, b, q, "test.work", 20_000, time.Now())
		ctx := context.Background()
		order := &startOrder{done: make(chan struct{}), wantB: 1}
		s := start(t, q, mediatorFor(t, handlers{work: order.work}), durable.SchedulerConfig{Workers: 8, BatchSize: 8})
		must[durable.Enqueued](t)(q.Enqueue(ctx, &Work{N: bMark}, durable.WithPriority(9)))
		s.Wake()
		select {
		case <-order.done:
		case <-time.After(time.Minute):
			t.Fatal("the priority 9 item did not start within a minute")
		}
		order.mu.Lock()
		defer order.mu.Unlock()
		// Started before it: those running and claimed when it came, a round of 8 each.
		if n := order.aBeforeB[0]; n > 3*8 {
			t.Fatalf("%d backlog items started before the priority 9 item; want at most the rounds already claimed (24)", n)
		}
	})
}

// The priority and the fairness key are the enqueue's, else the registration's, else the
// request's or its guard's; bad ones are refused, naming them, and nothing is stored.
func TestPriorityAndFairnessKeyOfAnItem(t *testing.T) {
	ctx := context.Background()
	b := sqliteBackend(t)
	q := b.bare(t, durable.Config{})
	if err := durable.Register[*Work](q, "test.work", durable.WithDefaultPriority(3), durable.WithFairness(func(w *Work) string { return fmt.Sprintf("tenant-%d", w.N%2) })); err != nil {
		t.Fatal(err)
	}
	if err := durable.Register[*Keyed](q, "test.keyed"); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		req      any
		opts     []durable.EnqueueOption
		priority int
		key      string
	}{
		{&Work{N: 1}, nil, 3, "tenant-1"},
		{&Work{N: 2}, []durable.EnqueueOption{durable.WithPriority(7), durable.WithFairnessKey("vip")}, 7, "vip"},
		// An empty key is no key: the registration's applies.
		{&Work{N: 4}, []durable.EnqueueOption{durable.WithFairnessKey("")}, 3, "tenant-0"},
		{&Keyed{Key: "x"}, nil, 0, "test.keyed"},
		{&Keyed{Key: "x"}, []durable.EnqueueOption{durable.WithBreakerKey("api.example.com")}, 0, "api.example.com"},
	} {
		id := must[durable.Enqueued](t)(q.Enqueue(ctx, c.req, c.opts...)).ID
		it := item(t, q, id)
		if it.Priority != c.priority || it.FairnessKey != c.key {
			t.Errorf("%T %+v: priority %d, fairness key %q; want %d, %q", c.req, c.req, it.Priority, it.FairnessKey, c.priority, c.key)
		}
	}
	for _, c := range []struct {
		opt  durable.EnqueueOption
		want string
	}{
		{durable.WithPriority(10), "WithPriority 10 is out of range 0..9"},
		{durable.WithPriority(-1), "WithPriority -1 is out of range 0..9"},
		{durable.WithFairnessKey("a\x00b"), "fairness key"},
	} {
		if _, err := q.Enqueue(ctx, &Work{N: 9}, c.opt); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("Enqueue: %v; want it to say %q", err, c.want)
		}
	}
	if err := durable.Register[*Unique](q, "test.unique", durable.WithDefaultPriority(12)); err == nil || !strings.Contains(err.Error(), "WithDefaultPriority 12 is out of range") {
		t.Errorf("Register with priority 12: %v", err)
	}
	if _, err := durable.Open(ctx, b.driver(), durable.Config{PriorityAging: -time.Second}); err == nil || !strings.Contains(err.Error(), "PriorityAging -1s is negative") {
		t.Errorf("Open with a negative PriorityAging: %v", err)
	}
	if st := must[durable.Stats](t)(q.Stats(ctx)); st.Counts[record.StatePending] != 5 {
		t.Errorf("%d items pending, want the 5 good ones", st.Counts[record.StatePending])
	}
}
