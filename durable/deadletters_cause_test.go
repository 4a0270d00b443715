package durable_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/switchboard-go/switchboard/durable"
	istore "github.com/switchboard-go/switchboard/durable/internal/store"
	"github.com/switchboard-go/switchboard/durable/record"
)

// Each way an item dies is written on its dead letter: attempts spent, a deadline passed, an
// error the policy calls permanent, a payload that does not decode.
func TestDeadLetterSaysWhyItsItemDied(t *testing.T) {
	eachBackend(t, func(t *testing.T, b backend) {
		e := newEnv(t, b)
		ctx := context.Background()
		t0 := e.clock.Now()
		m := mediatorFor(t, handlers{work: func(ctx context.Context, w *Work) error {
			if w.N == 3 {
				return errPermanent // the default classifier retries only what says it is retryable
			}
			return retryableErr{fmt.Sprintf("down %d", w.N)}
		}})
		spent := must[durable.Enqueued](t)(e.q.Enqueue(ctx, &Work{N: 1})).ID
		expiring := must[durable.Enqueued](t)(e.q.Enqueue(ctx, &Work{N: 2}, durable.WithDeadline(t0.Add(30*time.Minute)))).ID
		permanent := must[durable.Enqueued](t)(e.q.Enqueue(ctx, &Work{N: 3})).ID
		broken, _, err := e.store.Enqueue(ctx, istore.NewItem{Name: "test.work", Payload: []byte(`{"n":"not a number"}`), NextAt: t0, Now: t0})
		if err != nil {
			t.Fatal(err)
		}
		start(t, e.q, m, durable.SchedulerConfig{})
		waitState(t, e.q, permanent, record.StateDead)
		waitState(t, e.q, record.ItemID(broken), record.StateDead)
		eventually(t, 20*time.Second, "the expiring item's first failure", func() bool {
			it := item(t, e.q, expiring)
			return it.Attempts == 1 && it.State == record.StatePending
		})
		// Each hour ends the expiring item's deadline (at its next claim) and spends one more of
		// the other's attempts.
		for n := 1; n < fastPolicy.MaxAttempts; n++ {
			eventually(t, 20*time.Second, fmt.Sprintf("attempt %d", n), func() bool {
				it := item(t, e.q, spent)
				return it.Attempts == n && it.State == record.StatePending
			})
			e.clock.Advance(time.Hour)
		}
		waitState(t, e.q, spent, record.StateDead)
		waitState(t, e.q, expiring, record.StateDead)

		lp, err := e.q.DeadLetters(ctx, durable.DeadLetterFilter{})
		letters, total := lp.Letters, lp.Total
		if err != nil {
			t.Fatal(err)
		}
		if total != 4 {
			t.Fatalf("%d letters, want 4: %+v", total, letters)
		}
		want := map[record.ItemID]record.DeadCause{
			spent: record.DeadAttemptsSpent, expiring: record.DeadDeadline,
			permanent: record.DeadPermanent, record.ItemID(broken): record.DeadUndecodable,
		}
		for _, d := range letters {
			if d.Cause != want[d.ItemID] {
				t.Errorf("item %d's letter (%q): cause %q, want %q", d.ItemID, d.Error, d.Cause, want[d.ItemID])
			}
			// One letter read alone says the same.
			one, _, err := e.q.DeadLetter(ctx, d.ID)
			if err != nil {
				t.Fatal(err)
			}
			if one.Cause != d.Cause {
				t.Errorf("letter %d read alone: cause %q, listed %q", d.ID, one.Cause, d.Cause)
			}
		}
	})
}
