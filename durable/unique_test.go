package durable_test

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/switchboard-go/switchboard/durable"
	"github.com/switchboard-go/switchboard/durable/record"
	"github.com/switchboard-go/switchboard/mediator"
)

// Digest is a request whose registration holds its dedupe key for an hour after it succeeds
// (WithUniqueWindow).
type Digest struct {
	mediator.Command
	User string `json:"user"`
	Fail bool   `json:"fail"`
}

func (d *Digest) DedupeKey() string { return "digest:" + d.User }

var errDigest = errors.New("digest failed")

// digestEnv is newEnv with Digest registered with a window of an hour, and a scheduler running
// its handler (which fails the digests marked Fail, for good).
func digestEnv(t *testing.T, b backend) *env {
	t.Helper()
	e := newEnvWith(t, b, func(q *durable.Queue) {
		durable.Register[*Digest](q, "test.digest", durable.WithUniqueWindow(time.Hour), durable.WithPolicy(fastPolicy))
	})
	m := mediatorFor(t, handlers{}, func(m *mediator.Mediator) {
		mediator.HandleFunc(m, func(_ context.Context, d *Digest) (mediator.Void, error) {
			if d.Fail {
				return mediator.Void{}, errDigest // not retryable: the item is dead
			}
			return mediator.Void{}, nil
		})
	})
	start(t, e.q, m, durable.SchedulerConfig{Retention: -1})
	return e
}

// A dedupe key with a window is held after its item succeeded, until the window ends: an
// Enqueue with the key within it returns the item as a duplicate; after it, a new item takes
// the key. One that ends dead releases the key at once.
func TestUniqueWindow(t *testing.T) {
	eachBackend(t, func(t *testing.T, b backend) {
		e := digestEnv(t, b)
		ctx := context.Background()
		enqueue := func(d any, opts ...durable.EnqueueOption) durable.Enqueued {
			t.Helper()
			return must[durable.Enqueued](t)(e.q.Enqueue(ctx, d, opts...))
		}
		first := enqueue(&Digest{User: "ann"})
		done := waitState(t, e.q, first.ID, record.StateSucceeded)
		e.clock.Advance(59 * time.Minute)
		if again := enqueue(&Digest{User: "ann"}); !again.Duplicate || again.ID != first.ID {
			t.Fatalf("an enqueue 59 min after the success: %+v, want the succeeded item %d as a duplicate", again, first.ID)
		}
		if done.UniqueFor != time.Hour {
			t.Fatalf("the item's window: %v, want the registration's hour", done.UniqueFor)
		}
		e.clock.Advance(time.Minute)
		next := enqueue(&Digest{User: "ann"})
		if next.Duplicate || next.ID == first.ID {
			t.Fatalf("an enqueue once the window ended: %+v, want a new item", next)
		}
		if it := item(t, e.q, first.ID); !it.UniqueReleasedAt.Equal(e.clock.Now()) {
			t.Fatalf("the first item's key released at %v, want %v", it.UniqueReleasedAt, e.clock.Now())
		}
		waitState(t, e.q, next.ID, record.StateSucceeded)

		dead := enqueue(&Digest{User: "bob", Fail: true})
		waitState(t, e.q, dead.ID, record.StateDead)
		if again := enqueue(&Digest{User: "bob"}); again.Duplicate {
			t.Fatalf("an enqueue after the item died: %+v, want a new item", again)
		}

		// The enqueue's window overrides the registration's; zero: none.
		none := enqueue(&Digest{User: "cy"}, durable.WithUniqueFor(0))
		waitState(t, e.q, none.ID, record.StateSucceeded)
		if again := enqueue(&Digest{User: "cy"}); again.Duplicate {
			t.Fatalf("an enqueue after an item without a window succeeded: %+v, want a new item", again)
		}
		short := enqueue(&Work{N: 1}, durable.WithDedupeKey("work:1"), durable.WithUniqueFor(time.Minute))
		waitState(t, e.q, short.ID, record.StateSucceeded)
		if again := enqueue(&Work{N: 1}, durable.WithDedupeKey("work:1")); !again.Duplicate || again.ID != short.ID {
			t.Fatalf("an enqueue within an enqueue's window: %+v, want item %d as a duplicate", again, short.ID)
		}
	})
}

// A window needs a dedupe key and may not be negative; a registration's negative window panics.
func TestUniqueWindowInvalid(t *testing.T) {
	q := sqliteBackend(t).queue(t, durable.Config{})
	ctx := context.Background()
	for _, c := range []struct {
		opts []durable.EnqueueOption
		want string
	}{
		{[]durable.EnqueueOption{durable.WithUniqueFor(time.Hour)}, "no dedupe key"},
		{[]durable.EnqueueOption{durable.WithDedupeKey("k"), durable.WithUniqueFor(-time.Second)}, "negative"},
	} {
		if _, err := q.Enqueue(ctx, &Work{}, c.opts...); err == nil || !strings.Contains(err.Error(), c.want) || !strings.Contains(err.Error(), "WithUniqueFor") {
			t.Errorf("Enqueue: %v, want an error naming WithUniqueFor: %s", err, c.want)
		}
	}
	if err := registerErr(t, func() error { return durable.Register[*Digest](q, "test.digest", durable.WithUniqueWindow(-time.Hour)) }); err == nil ||
		!strings.Contains(err.Error(), "WithUniqueWindow") {
		t.Fatalf("Register with a negative window: %v, want an error naming WithUniqueWindow", err)
	}
}

// The pruner keeps a succeeded item that holds its key until its window ends, whatever the
// retention.
func TestUniqueWindowOutlivesRetention(t *testing.T) {
	eachBackend(t, func(t *testing.T, b backend) {
		e := digestEnv(t, b)
		ctx := context.Background()
		held := must[durable.Enqueued](t)(e.q.Enqueue(ctx, &Digest{User: "ann"}))
		plain := must[durable.Enqueued](t)(e.q.Enqueue(ctx, &Digest{User: "bob"}, durable.WithUniqueFor(0)))
		waitState(t, e.q, held.ID, record.StateSucceeded)
		waitState(t, e.q, plain.ID, record.StateSucceeded)
		pruner := must[*durable.Scheduler](t)(durable.NewScheduler(e.q, mediatorFor(t, handlers{}), durable.SchedulerConfig{Retention: time.Minute}))
		e.clock.Advance(30 * time.Minute)
		if n := pruner.Prune(); n != 1 {
			t.Fatalf("pruned %d items past their retention, want 1: the one without a window", n)
		}
		if again := must[durable.Enqueued](t)(e.q.Enqueue(ctx, &Digest{User: "ann"})); !again.Duplicate || again.ID != held.ID {
			t.Fatalf("an enqueue within the window, past the retention: %+v, want item %d as a duplicate", again, held.ID)
		}
		e.clock.Advance(31 * time.Minute)
		if n := pruner.Prune(); n != 1 {
			t.Fatalf("pruned %d items once the window ended, want 1", n)
		}
	})
}

// Instances enqueueing the same key at once insert one item, while the key is free and when
// they find its window ended.
func TestUniqueWindowConcurrent(t *testing.T) {
	eachBackend(t, func(t *testing.T, b backend) {
		e := digestEnv(t, b)
		queues := []*durable.Queue{e.q}
		if b.name == "postgres" {
			other := b.queue(t, durable.Config{Clock: e.clock})
			durable.Register[*Digest](other, "test.digest", durable.WithUniqueWindow(time.Hour))
			queues = append(queues, other)
		}
		race := func() record.ItemID {
			t.Helper()
			var (
				wg       sync.WaitGroup
				mu       sync.Mutex
				inserted []record.ItemID
				ids      = map[record.ItemID]bool{}
				go_      = make(chan struct{})
			)
			for i := range 16 {
				q := queues[i%len(queues)]
				wg.Go(func() {
					<-go_
					res, err := q.Enqueue(context.Background(), &Digest{User: "ann"})
					mu.Lock()
					defer mu.Unlock()
					if err != nil {
						t.Error(err)
						return
					}
					ids[res.ID] = true
					if !res.Duplicate {
						inserted = append(inserted, res.ID)
					}
				})
			}
			close(go_)
			wg.Wait()
			if len(inserted) != 1 || len(ids) != 1 {
				t.Fatalf("16 enqueues of one key at once inserted %v and answered items %v; want one item", inserted, ids)
			}
			return inserted[0]
		}
		first := race()
		waitState(t, e.q, first, record.StateSucceeded)
		e.clock.Advance(2 * time.Hour)
		if second := race(); second == first {
			t.Fatalf("after the window the key went to the same item %d", first)
		}
	})
}
