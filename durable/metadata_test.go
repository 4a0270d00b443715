package durable_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"

	"go.uber.org/zap"

	"github.com/switchboard-go/switchboard/durable"
	"github.com/switchboard-go/switchboard/durable/durabletest"
	"github.com/switchboard-go/switchboard/durable/record"
	"github.com/switchboard-go/switchboard/mediator"
)

// traceInfo is a structured value carried as JSON.
type traceInfo struct {
	TraceID string `json:"trace_id"`
	Sampled bool   `json:"sampled"`
}

var (
	tenantKey      = mediator.NewContextKey[string]("tenant")
	traceKey       = mediator.NewContextKey[traceInfo]("trace")
	correlationKey = mediator.NewContextKey[string]("correlation")
)

// seen records the carried values a handler found in its context, by item number.
type seen struct {
	mu     sync.Mutex
	tenant map[int]string
	trace  map[int]traceInfo
	corr   map[int]bool
}

func newSeen() *seen {
	return &seen{tenant: map[int]string{}, trace: map[int]traceInfo{}, corr: map[int]bool{}}
}

func (s *seen) record(ctx context.Context, n int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if v, ok := tenantKey.Get(ctx); ok {
		s.tenant[n] = v
	}
	if v, ok := traceKey.Get(ctx); ok {
		s.trace[n] = v
	}
	_, s.corr[n] = correlationKey.Get(ctx)
}

func metadataQueue(t *testing.T, b backend, extra ...durable.Propagator) (*durable.Queue, *fakeClock) {
	clock := newFakeClock()
	ps := append([]durable.Propagator{durable.Carry(tenantKey), durable.Carry(traceKey), durable.Carry(correlationKey)}, extra...)
	return b.queue(t, durable.Config{Policy: fastPolicy, Clock: clock, Rand: func() float64 { return 0.5 }, Propagators: ps}), clock
}

// Values set in the enqueuing caller's context reach the handler's context at dispatch, through
// Enqueue, EnqueueTx and the deferral, by a scheduler and by durabletest.Work alike; a key the
// caller did not set stays unset, and an item enqueued without any has no metadata.
func TestMetadataReachesDispatch(t *testing.T) {
	eachBackend(t, func(t *testing.T, b backend) {
		q, clock := metadataQueue(t, b)
		got := newSeen()
		failOnce := map[int]bool{3: true}
		var mu sync.Mutex
		m := mediatorFor(t, handlers{work: func(ctx context.Context, w *Work) error {
			if _, stored := durable.FromContext(ctx, w); !stored {
				mu.Lock()
				defer mu.Unlock()
				if failOnce[w.N] {
					delete(failOnce, w.N)
					return retryableErr{"downstream down"}
				}
				return nil
			}
			got.record(ctx, w.N)
			return nil
		}}, func(m *mediator.Mediator) { m.Use(durable.NewDeferral(q, durable.DeferralConfig{})) })

		ctx := tenantKey.With(context.Background(), "acme")
		ctx = traceKey.With(ctx, traceInfo{TraceID: "4bf92f3577b34da6", Sampled: true})
		ids := map[int]record.ItemID{}
		// 1: Enqueue.
		ids[1] = must[durable.Enqueued](t)(q.Enqueue(ctx, &Work{N: 1})).ID
		// 2: EnqueueTx.
		tx, err := durable.StoreOf(q).DB().BeginTx(ctx, nil)
		if err != nil {
			t.Fatal(err)
		}
		res, err := q.EnqueueTx(ctx, tx, &Work{N: 2})
		if err != nil {
			_ = tx.Rollback()
			t.Fatal(err)
		}
		if err := tx.Commit(); err != nil {
			t.Fatal(err)
		}
		ids[2] = res.ID
		// 3: the deferral, from inside the pipeline of a send that failed.
		_, err = mediator.Send(tenantKey.With(ctx, "globex"), m, &Work{N: 3})
		deferred, ok := errors.AsType[*durable.DeferredError](err)
		if !ok {
			t.Fatalf("send: %v, want a deferral", err)
		}
		ids[3] = deferred.ItemID
		// 4: nothing carried.
		ids[4] = must[durable.Enqueued](t)(q.Enqueue(context.Background(), &Work{N: 4})).ID

		want := map[string]string{"tenant": `"acme"`, "trace": `{"trace_id":"4bf92f3577b34da6","sampled":true}`}
		if md := item(t, q, ids[1]).Metadata; len(md) != 2 || md["tenant"] != want["tenant"] || md["trace"] != want["trace"] {
			t.Fatalf("item 1 metadata %v, want %v", md, want)
		}
		if md := item(t, q, ids[4]).Metadata; md != nil {
			t.Fatalf("item 4 metadata %v, want none", md)
		}

		clock.Advance(fastPolicy.MaxDelay) // the deferred item is due
		// durabletest.Work runs the scheduler's per-item code: it restores the metadata too.
		if r := durabletest.Work(context.Background(), t, q, m); r.Succeeded != 4 {
			t.Fatalf("Work = %+v", r)
		}
		for n, tenant := range map[int]string{1: "acme", 2: "acme", 3: "globex"} {
			if got.tenant[n] != tenant || got.trace[n] != (traceInfo{TraceID: "4bf92f3577b34da6", Sampled: true}) || got.corr[n] {
				t.Errorf("item %d dispatched with tenant %q, trace %+v, correlation %v", n, got.tenant[n], got.trace[n], got.corr[n])
			}
		}
		if _, ok := got.tenant[4]; ok || got.corr[4] {
			t.Errorf("item 4 dispatched with values it was not enqueued with: %q", got.tenant[4])
		}

		// The same through a running scheduler.
		id := must[durable.Enqueued](t)(q.Enqueue(correlationKey.With(context.Background(), "req-7"), &Work{N: 5})).ID
		start(t, q, m)
		waitState(t, q, id, record.StateSucceeded)
		got.mu.Lock()
		defer got.mu.Unlock()
		if !got.corr[5] || got.tenant[5] != "" {
			t.Errorf("scheduler dispatch: correlation %v, tenant %q", got.corr[5], got.tenant[5])
		}
	})
}

// panicky is a propagator that panics in Inject or Extract.
type panicky struct{ inject, extract bool }

func (p panicky) Inject(ctx context.Context, carrier map[string]string) {
	carrier["panicky"] = "partial"
	if p.inject {
		panic("inject exploded")
	}
}

func (p panicky) Extract(ctx context.Context, carrier map[string]string) context.Context {
	if p.extract {
		panic("extract exploded")
	}
	return ctx
}

// A propagator that panics is logged and skipped: at Enqueue the item is stored with the other
// propagators' values (and none of the panicking one's), at dispatch the item runs with the
// values the others restore.
func TestMetadataPanickingPropagator(t *testing.T) {
	eachBackend(t, func(t *testing.T, b backend) {
		rec := &logRecorder{}
		t.Cleanup(zap.ReplaceGlobals(rec.logger())) // the queue's default logger is zap.L()

		q, _ := metadataQueue(t, b, panicky{inject: true})
		ctx := tenantKey.With(context.Background(), "acme")
		id := must[durable.Enqueued](t)(q.Enqueue(ctx, &Work{N: 1})).ID
		if md := item(t, q, id).Metadata; len(md) != 1 || md["tenant"] != `"acme"` {
			t.Fatalf("metadata %v, want the tenant alone", md)
		}
		if !rec.has("durable: a propagator failed at enqueue; the item is stored without its values") {
			t.Fatal("the panic at enqueue was not logged")
		}

		q2, _ := metadataQueue(t, b, panicky{extract: true})
		got := newSeen()
		m := mediatorFor(t, handlers{work: func(ctx context.Context, w *Work) error {
			got.record(ctx, w.N)
			return nil
		}})
		// q2 shares the database: it sees q's item too.
		if r := durabletest.Work(context.Background(), t, q2, m); r.Succeeded != 1 {
			t.Fatalf("Work = %+v", r)
		}
		if got.tenant[1] != "acme" {
			t.Fatalf("dispatched with tenant %q", got.tenant[1])
		}
		if !rec.has("durable: a propagator failed at dispatch; dispatching without its values") {
			t.Fatal("the panic at dispatch was not logged")
		}
	})
}

// Metadata beyond MaxMetadataSize is refused at Enqueue with ErrMetadataTooLarge, and nothing is
// stored; Open refuses two carried keys of one name.
func TestMetadataLimits(t *testing.T) {
	b := sqliteBackend(t)
	q, _ := metadataQueue(t, b)
	big := tenantKey.With(context.Background(), strings.Repeat("x", durable.MaxMetadataSize))
	if _, err := q.Enqueue(big, &Work{N: 1}); !errors.Is(err, durable.ErrMetadataTooLarge) || !strings.Contains(err.Error(), "test.work") {
		t.Fatalf("Enqueue = %v, want ErrMetadataTooLarge naming the request", err)
	}
	if n := stats(t, q).Counts[record.StatePending]; n != 0 {
		t.Fatalf("%d items stored", n)
	}

	cfg := durable.Config{Propagators: []durable.Propagator{
		durable.Carry(tenantKey), durable.Carry(mediator.NewContextKey[int]("tenant")), nil}}
	err := cfg.Validate()
	if err == nil || !strings.Contains(err.Error(), `second key named "tenant"`) || !strings.Contains(err.Error(), "Propagators[2] is nil") {
		t.Fatalf("Validate = %v", err)
	}
}

// A dead letter keeps its request's metadata, and a replay runs with it: for an item that died
// under the scheduler and for a batch item captured by RunBatch. It used to be dropped, so a
// replayed request ran without its tenant and trace context.
func TestMetadataSurvivesIntoReplay(t *testing.T) {
	eachBackend(t, func(t *testing.T, b backend) {
		q, _ := metadataQueue(t, b)
		got := newSeen()
		fixed := false
		m := mediatorFor(t, handlers{work: func(ctx context.Context, w *Work) error {
			if !fixed {
				return errors.New("not worth another try")
			}
			got.record(ctx, w.N)
			return nil
		}})
		ctx := tenantKey.With(context.Background(), "acme")
		ctx = traceKey.With(ctx, traceInfo{TraceID: "4bf92f3577b34da6", Sampled: true})

		// 1: an item that dies at its first attempt (the error is not retried).
		id := must[durable.Enqueued](t)(q.Enqueue(ctx, &Work{N: 1})).ID
		if r := durabletest.Work(context.Background(), t, q, m); r.Dead != 1 {
			t.Fatalf("Work = %+v, want one dead item", r)
		}
		lp, err := q.DeadLetters(context.Background(), durable.DeadLetterFilter{})
		letters := lp.Letters
		if err != nil || len(letters) != 1 || letters[0].ItemID != id {
			t.Fatalf("letters %+v, %v", letters, err)
		}
		itemLetter := letters[0]
		// 2: a batch item captured with the batch caller's context.
		res, err := q.RunBatch(ctx, m, "sync", []durable.BatchItem{{Key: "k2", Request: &Work{N: 2}}})
		if err != nil || len(res.DeadLetters) != 1 {
			t.Fatalf("RunBatch = %+v, %v", res, err)
		}
		for _, d := range []record.DeadLetterID{itemLetter.ID, res.DeadLetters[0]} {
			letter, _, err := q.DeadLetter(context.Background(), d)
			if err != nil || letter.Metadata["tenant"] != `"acme"` {
				t.Fatalf("letter %d metadata %v, %v", d, letter.Metadata, err)
			}
		}

		fixed = true
		// The operator's context carries nothing: the values come from the letters.
		for _, d := range []record.DeadLetterID{itemLetter.ID, res.DeadLetters[0]} {
			if r, err := q.Replay(context.Background(), m, d, "ops"); r != durable.Replayed || err != nil {
				t.Fatalf("Replay(%d) = %v, %v", d, r, err)
			}
		}
		for n := 1; n <= 2; n++ {
			if got.tenant[n] != "acme" || got.trace[n].TraceID != "4bf92f3577b34da6" || got.corr[n] {
				t.Errorf("replay of %d saw tenant %q, trace %+v, correlation set %v", n, got.tenant[n], got.trace[n], got.corr[n])
			}
		}
	})
}

// dispatchNoted is a propagator with a Dispatching method: it notes each dispatch it is told
// of and marks the context with it; panicking makes it panic instead.
type dispatchNoted struct {
	panicking bool
	mu        *sync.Mutex
	told      *[]string
}

var notedKey = mediator.NewContextKey[string]("noted")

func (dispatchNoted) Inject(context.Context, map[string]string) {}

func (dispatchNoted) Extract(ctx context.Context, _ map[string]string) context.Context { return ctx }

func (p dispatchNoted) Dispatching(ctx context.Context, req any, item int64, name string, attempt int, instance string) context.Context {
	if p.panicking {
		panic("dispatching exploded")
	}
	note := fmt.Sprintf("%T item=%d name=%s attempt=%d instance=%q", req, item, name, attempt, instance)
	p.mu.Lock()
	*p.told = append(*p.told, note)
	p.mu.Unlock()
	return notedKey.With(ctx, note)
}

// A propagator with a Dispatching method is told of each dispatch of an item (metadata or none)
// and of each replay, with FromContext's values, and the handler runs with the context it
// returns; one that panics is logged and skipped.
func TestPropagatorToldOfDispatch(t *testing.T) {
	eachBackend(t, func(t *testing.T, b backend) {
		rec := &logRecorder{}
		t.Cleanup(zap.ReplaceGlobals(rec.logger())) // the queue's default logger is zap.L()
		var mu sync.Mutex
		var told []string
		q := b.queue(t, durable.Config{Policy: fastPolicy, Clock: newFakeClock(), Propagators: []durable.Propagator{
			dispatchNoted{panicking: true}, dispatchNoted{mu: &mu, told: &told}}})
		var handled []string
		fail := true
		m := mediatorFor(t, handlers{work: func(ctx context.Context, w *Work) error {
			note, _ := notedKey.Get(ctx)
			handled = append(handled, note)
			if fail {
				return errors.New("not worth another try")
			}
			return nil
		}})
		id := must[durable.Enqueued](t)(q.Enqueue(context.Background(), &Work{N: 1})).ID
		if r := durabletest.Work(context.Background(), t, q, m, durabletest.AsInstance("w1")); r.Dead != 1 {
			t.Fatalf("Work = %+v, want one dead item", r)
		}
		lp, err := q.DeadLetters(context.Background(), durable.DeadLetterFilter{})
		letters := lp.Letters
		if err != nil || len(letters) != 1 {
			t.Fatalf("letters %+v, %v", letters, err)
		}
		fail = false
		if r, err := q.Replay(context.Background(), m, letters[0].ID, "ops"); r != durable.Replayed || err != nil {
			t.Fatalf("Replay = %v, %v", r, err)
		}
		want := []string{
			fmt.Sprintf(`*durable_test.Work item=%d name=test.work attempt=1 instance="w1"`, id),
			fmt.Sprintf(`*durable_test.Work item=%d name=test.work attempt=0 instance=""`, id),
		}
		if !slices.Equal(told, want) || !slices.Equal(handled, want) {
			t.Errorf("told %q, handled with %q; want %q", told, handled, want)
		}
		if !rec.has("durable: a propagator failed at dispatch; dispatching without its values") {
			t.Error("the panic of Dispatching was not logged")
		}
	})
}

// Counts reports Stats' counts by name.
func TestCountsByName(t *testing.T) {
	eachBackend(t, func(t *testing.T, b backend) {
		q := b.queue(t, durable.Config{Policy: fastPolicy, Clock: newFakeClock()})
		must[durable.Enqueued](t)(q.Enqueue(context.Background(), &Work{N: 1}))
		items, dead, err := q.Counts(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		if items["pending"] != 1 || items["dead"] != 0 || len(items) != 5 || len(dead) != 3 || dead["failed"] != 0 {
			t.Errorf("Counts = %v, %v", items, dead)
		}
	})
}
