package durable_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/switchboard-go/switchboard/durable"
	"github.com/switchboard-go/switchboard/durable/record"
)

// A batch of 1,000 with 7 poisoned items (5 errors, 2 panics): the rest all run, and each
// poisoned item is a dead letter with the batch's source, its key, payload and error.
func TestRunBatchIsolatesPoisonedItems(t *testing.T) {
	eachBackend(t, func(t *testing.T, b backend) {
		ctx := context.Background()
		e := newDLEnv(t, b, durable.Config{})
		errs := map[int]bool{3: true, 250: true, 251: true, 700: true, 999: true}
		panics := map[int]bool{0: true, 500: true}
		e.handle(func(_ context.Context, w *Work) error {
			if errs[w.N] {
				return fmt.Errorf("mapping failed for record %d", w.N)
			}
			if panics[w.N] {
				panic(fmt.Sprintf("nil field in record %d", w.N))
			}
			return nil
		})
		items := make([]durable.BatchItem, 1000)
		for i := range items {
			items[i] = durable.BatchItem{Key: fmt.Sprintf("rec-%d", i), Request: &Work{N: i}}
		}
		res, err := e.q.RunBatch(ctx, e.m, "crm-sync", items)
		if err != nil {
			t.Fatal(err)
		}
		if res.Processed != 1000 || res.Succeeded != 993 || res.Invalid != 7 || len(res.DeadLetters) != 7 {
			t.Fatalf("result %+v", res)
		}
		if e.runs.Load() != 1000 {
			t.Fatalf("handler ran %d times", e.runs.Load())
		}
		lp, err := e.q.DeadLetters(ctx, durable.DeadLetterFilter{Source: "crm-sync"})
		letters, total := lp.Letters, lp.Total
		if err != nil || total != 7 || len(letters) != 7 {
			t.Fatalf("%d letters of %d: %v", len(letters), total, err)
		}
		order := []int{0, 3, 250, 251, 500, 700, 999}
		for i, id := range res.DeadLetters {
			n := order[i]
			d, tl := e.letter(t, id)
			if d.ItemID != 0 || d.Source != "crm-sync" || d.Name != "test.work" || d.Key != fmt.Sprintf("rec-%d", n) ||
				string(d.Payload) != fmt.Sprintf(`{"n":%d}`, n) || d.Status != record.DeadLetterFailed || d.RetryCount != 0 || len(tl) != 0 {
				t.Fatalf("letter %d: %+v %q", i, d, timeline(tl))
			}
			want := fmt.Sprintf("mapping failed for record %d", n)
			if panics[n] {
				want = fmt.Sprintf("nil field in record %d", n)
			}
			if !strings.Contains(d.Error, want) {
				t.Fatalf("letter %d: error %q, want %q in it", i, d.Error, want)
			}
		}
		if got := e.onDead(); len(got) != 7 {
			t.Fatalf("OnDead called %d times", len(got))
		}
		if st := stats(t, e.q); st.DeadLetters[record.DeadLetterFailed] != 7 {
			t.Fatalf("stats %v", st.DeadLetters)
		}
		// Nothing is retried automatically: the queue holds no item.
		if st := stats(t, e.q); st.Counts[record.StatePending] != 0 {
			t.Fatalf("stats %v", st.Counts)
		}
		// Fixed, the operator replays them.
		e.handle(nil)
		results, err := e.q.ReplayMany(ctx, e.m, res.DeadLetters, "ops")
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range results {
			if r.Resolution != durable.Replayed {
				t.Fatalf("%+v", r)
			}
		}
	})
}

// Every request type must be registered; nothing runs otherwise.
func TestRunBatchRefusesUnregisteredTypes(t *testing.T) {
	e := newDLEnv(t, sqliteBackend(t), durable.Config{})
	type Stray struct{ N int }
	_, err := e.q.RunBatch(context.Background(), e.m, "s", []durable.BatchItem{
		{Key: "a", Request: &Work{N: 1}}, {Key: "b", Request: &Stray{}}, {Key: "c", Request: nil},
	})
	if !errors.Is(err, durable.ErrUnknownRequest) || !strings.Contains(err.Error(), `item 1 (key "b")`) ||
		!strings.Contains(err.Error(), `item 2 (key "c")`) {
		t.Fatalf("error %v", err)
	}
	if e.runs.Load() != 0 {
		t.Fatalf("handler ran %d times", e.runs.Load())
	}
	if _, err := e.q.RunBatch(context.Background(), e.m, "", nil); err == nil || !strings.Contains(err.Error(), "source") {
		t.Fatalf("error %v", err)
	}
}

// The caller's cancellation stops the batch and is never captured as a dead letter.
func TestRunBatchCancellation(t *testing.T) {
	eachBackend(t, func(t *testing.T, b backend) {
		e := newDLEnv(t, b, durable.Config{})
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		e.handle(func(ctx context.Context, w *Work) error {
			if w.N == 1 {
				return errors.New("bad")
			}
			if w.N == 3 {
				cancel()
				return ctx.Err()
			}
			return nil
		})
		items := make([]durable.BatchItem, 10)
		for i := range items {
			items[i] = durable.BatchItem{Key: fmt.Sprint(i), Request: &Work{N: i}}
		}
		res, err := e.q.RunBatch(ctx, e.m, "s", items)
		if !errors.Is(err, context.Canceled) || res.Processed != 3 || res.Succeeded != 2 || res.Invalid != 1 {
			t.Fatalf("result %+v, %v", res, err)
		}
		if e.runs.Load() != 4 {
			t.Fatalf("handler ran %d times", e.runs.Load())
		}
		if st := stats(t, e.q); st.DeadLetters[record.DeadLetterFailed] != 1 {
			t.Fatalf("stats %v", st.DeadLetters)
		}
	})
}
