package durable_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/switchboard-go/switchboard/behaviors/retry"
	"github.com/switchboard-go/switchboard/durable"
	"github.com/switchboard-go/switchboard/durable/record"
)

// A handler's error holding a NUL byte or invalid UTF-8, which PostgreSQL's text cannot hold,
// is recorded (as U+FFFD) like any other: the item ends dead with its attempt row and its dead
// letter, and the items beside it are not held up by an outcome the database refuses.
func TestHandlerErrorWithNULIsRecorded(t *testing.T) {
	eachBackend(t, func(t *testing.T, b backend) {
		ctx := context.Background()
		q := b.queue(t, durable.Config{Policy: retry.Policy{MaxAttempts: 1}})
		bad := must[durable.Enqueued](t)(q.Enqueue(ctx, &Work{N: -1}))
		var good []record.ItemID
		for n := range 5 {
			good = append(good, must[durable.Enqueued](t)(q.Enqueue(ctx, &Work{N: n})).ID)
		}
		start(t, q, mediatorFor(t, handlers{work: func(ctx context.Context, w *Work) error {
			if w.N < 0 {
				return errors.New("bad\x00error \xff")
			}
			return nil
		}}), durable.SchedulerConfig{Workers: 4})
		dead := waitState(t, q, bad.ID, record.StateDead)
		for _, id := range good {
			waitState(t, q, id, record.StateSucceeded)
		}
		const want = "bad\uFFFDerror \uFFFD"
		if dead.LastError != want {
			t.Errorf("last error %q, want %q", dead.LastError, want)
		}
		if as := attempts(t, q, bad.ID); len(as) != 1 || as[0].Error != want || as[0].Outcome != record.OutcomeFailed {
			t.Errorf("attempts %+v, want one failed attempt with %q", as, want)
		}
		lp, err := q.DeadLetters(ctx, durable.DeadLetterFilter{})
		letters := lp.Letters
		if err != nil {
			t.Fatal(err)
		}
		if len(letters) != 1 || letters[0].Error != want {
			t.Errorf("dead letters %+v, want one with %q", letters, want)
		}
	})
}

// longKey is a key of 3,000 bytes that does not compress, as a hash or an encoded blob would.
var longKey = func() string {
	b := make([]byte, 3000)
	for i := range b {
		b[i] = "abcdefghijklmnopqrstuvwxyz0123456789"[(i*7919+i/36)%36]
	}
	return string(b)
}()

// A dedupe, ordering, breaker, fairness or debounce key the database could not store as it is,
// or longer than 1,024 bytes, is refused at Enqueue, naming the key, on both engines; nothing
// is stored.
func TestEnqueueRefusesUnstorableKeys(t *testing.T) {
	eachBackend(t, func(t *testing.T, b backend) {
		ctx := context.Background()
		q := b.queue(t, durable.Config{})
		for _, c := range []struct {
			opt  durable.EnqueueOption
			want string
		}{
			{durable.WithDedupeKey("a\x00b"), `the dedupe key "a\x00b" holds a NUL byte`},
			{durable.WithOrderingKey("a\xffb"), `the ordering key "a\xffb" is not valid UTF-8`},
			// A key past 1,024 bytes: an index entry of its own past PostgreSQL's limit (a
			// raw "index row size … exceeds" error, or accepted when it compressed), and a
			// breaker key no concurrency limit could take.
			{durable.WithDedupeKey(longKey), "the dedupe key of 3000 bytes is more than 1024"},
			{durable.WithOrderingKey(longKey), "the ordering key of 3000 bytes is more than 1024"},
			{durable.WithBreakerKey(longKey), "the breaker key of 3000 bytes is more than 1024"},
			{durable.WithFairnessKey(longKey), "the fairness key of 3000 bytes is more than 1024"},
			{durable.WithDebounce(longKey, time.Second, time.Minute), "the debounce key of 3000 bytes is more than 1024"},
		} {
			_, err := q.Enqueue(ctx, &Work{N: 1}, c.opt)
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Errorf("Enqueue: %v, want an error saying %s", err, c.want)
			}
		}
		if st := stats(t, q); st.Counts[record.StatePending] != 0 {
			t.Fatalf("counts %+v after refused enqueues", st.Counts)
		}
	})
}

// Close refuses while the queue's scheduler runs, and closes once Shutdown has returned.
func TestCloseRefusesWhileRunning(t *testing.T) {
	b := sqliteBackend(t)
	q, err := durable.Open(context.Background(), b.driver(), durable.Config{})
	if err != nil {
		t.Fatal(err)
	}
	registerTypes(q)
	if err := q.Start(mediatorFor(t, handlers{})); err != nil {
		t.Fatal(err)
	}
	if err := q.Close(); err == nil || !strings.Contains(err.Error(), "call Shutdown first") {
		t.Fatalf("Close under a running scheduler: %v", err)
	}
	if err := q.Shutdown(context.Background()); err != nil {
		t.Fatal(err)
	}
	if err := q.Close(); err != nil {
		t.Fatalf("Close after Shutdown: %v", err)
	}
}
