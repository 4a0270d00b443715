package durable_test

import (
	"context"
	"testing"

	"github.com/switchboard-go/switchboard/behaviors/breaker"
	"github.com/switchboard-go/switchboard/durable"
	"github.com/switchboard-go/switchboard/durable/record"
	"github.com/switchboard-go/switchboard/mediator"
)

// A dead letter says which endpoint its item was for (the item's guard key), in the listing
// and alone, so that an operator need not open each letter to see what failed; a letter of an
// unguarded item says none.
func TestDeadLetterNamesItsEndpoint(t *testing.T) {
	eachBackend(t, func(t *testing.T, b backend) {
		e := newEnv(t, b)
		ctx := context.Background()
		m := mediatorFor(t, handlers{work: func(ctx context.Context, w *Work) error { return errPermanent }})
		const endpoint = "https://api.payments.example/v1/charge"
		guarded := must[durable.Enqueued](t)(e.q.Enqueue(ctx, &Work{N: 1}, durable.WithBreakerKey(endpoint))).ID
		plain := must[durable.Enqueued](t)(e.q.Enqueue(ctx, &Work{N: 2})).ID
		start(t, e.q, m, durable.SchedulerConfig{})
		waitState(t, e.q, guarded, record.StateDead)
		waitState(t, e.q, plain, record.StateDead)

		lp, err := e.q.DeadLetters(ctx, durable.DeadLetterFilter{})
		letters := lp.Letters
		if err != nil {
			t.Fatal(err)
		}
		got := map[record.ItemID]string{}
		for _, d := range letters {
			got[d.ItemID] = d.GuardKey
			one, _, err := e.q.DeadLetter(ctx, d.ID)
			if err != nil {
				t.Fatal(err)
			}
			if one.GuardKey != d.GuardKey {
				t.Errorf("letter %d: %q alone, %q listed", d.ID, one.GuardKey, d.GuardKey)
			}
		}
		if len(got) != 2 || got[guarded] != endpoint || got[plain] != "" {
			t.Errorf("the letters' guard keys by item: %v; want %q for item %d and none for %d", got, endpoint, guarded, plain)
		}
	})
}

// hostCall is a request whose endpoint its registration's breaker key function names.
type hostCall struct {
	mediator.Command
	Host string `json:"host"`
}

// A letter of an item guarded by its registration's key function (WithBreaker), the usual
// way, names its endpoint too: only WithBreakerKey's items did, so most letters said none.
func TestDeadLetterNamesTheEndpointItsBreakerKeyGives(t *testing.T) {
	eachBackend(t, func(t *testing.T, b backend) {
		reg := breaker.NewRegistry(breaker.Config{})
		e := newEnvWith(t, b, func(q *durable.Queue) {
			durable.Register[*hostCall](q, "test.host-call", durable.WithBreaker(reg, func(h *hostCall) string { return h.Host }))
		})
		ctx := context.Background()
		m := mediator.New(nil, mediator.Config{})
		mediator.HandleFunc(m, func(ctx context.Context, h *hostCall) (mediator.Void, error) { return mediator.Void{}, errPermanent })
		if err := m.Build(); err != nil {
			t.Fatal(err)
		}
		id := must[durable.Enqueued](t)(e.q.Enqueue(ctx, &hostCall{Host: "https://billing.example"})).ID
		start(t, e.q, m, durable.SchedulerConfig{})
		waitState(t, e.q, id, record.StateDead)
		lp, err := e.q.DeadLetters(ctx, durable.DeadLetterFilter{})
		letters := lp.Letters
		if err != nil || len(letters) != 1 {
			t.Fatalf("letters %v, %v", letters, err)
		}
		if letters[0].GuardKey != "https://billing.example" {
			t.Errorf("the letter's endpoint is %q; want the key its breaker key function gives", letters[0].GuardKey)
		}
	})
}
