package durable_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/switchboard-go/switchboard/durable"
	"github.com/switchboard-go/switchboard/durable/record"
	"github.com/switchboard-go/switchboard/mediator"
)

// Bulky is a request whose payload is as large as its data.
type Bulky struct {
	mediator.Command
	Data string `json:"data"`
}

// TestPayloadOverLimitRefusedBeforeDatabase: a request that encodes to more than the queue's
// limit is refused by Enqueue, EnqueueTx and the deferral with an error naming the request, its
// size and the limit, matching ErrPayloadTooLarge, before any database call: nothing is stored,
// and a queue whose pool is closed gives the same error. The default limit holds as well.
func TestPayloadOverLimitRefusedBeforeDatabase(t *testing.T) {
	eachBackend(t, func(t *testing.T, b backend) {
		ctx := context.Background()
		const limit = 1024
		q := b.queue(t, durable.Config{MaxPayloadBytes: limit})
		durable.Register[*Bulky](q, "test.bulky")
		big := &Bulky{Data: strings.Repeat("x", limit)} // encodes to more than limit
		small := &Bulky{Data: "ok"}
		check := func(what string, err error) {
			t.Helper()
			tooLarge, ok := errors.AsType[*durable.PayloadTooLargeError](err)
			if !ok || !errors.Is(err, durable.ErrPayloadTooLarge) {
				t.Fatalf("%s of a %d-byte request with a %d-byte limit: %v; want a *PayloadTooLargeError", what, len(big.Data), limit, err)
			}
			if tooLarge.Name != "test.bulky" || tooLarge.Limit != limit || tooLarge.Size <= limit {
				t.Fatalf("%s: %+v", what, tooLarge)
			}
			for _, want := range []string{`"test.bulky"`, "1024", "MaxPayloadBytes"} {
				if !strings.Contains(err.Error(), want) {
					t.Fatalf("%s: %q does not say %s", what, err, want)
				}
			}
		}

		_, err := q.Enqueue(ctx, big)
		check("Enqueue", err)
		db := durable.StoreOf(q).DB()
		tx, err := db.BeginTx(ctx, nil)
		if err != nil {
			t.Fatal(err)
		}
		_, err = q.EnqueueTx(ctx, tx, big)
		check("EnqueueTx", err)
		if err := tx.Rollback(); err != nil {
			t.Fatal(err)
		}

		m := mediator.New(nil, mediator.Config{})
		down := retryableErr{msg: "blob store unavailable"}
		mediator.HandleFunc(m, func(ctx context.Context, r *Bulky) (mediator.Void, error) { return mediator.Void{}, down })
		m.Use(durable.NewDeferral(q, durable.DeferralConfig{}))
		if err := m.Build(); err != nil {
			t.Fatal(err)
		}
		_, err = mediator.Send(ctx, m, big)
		check("the deferral", err)
		if !errors.Is(err, down) || errors.Is(err, durable.ErrDeferred) || errors.Is(err, durable.ErrOutcomeUnknown) {
			t.Fatalf("the deferral returned %v; want the handler's error joined with the refusal", err)
		}

		if items := must[[]record.Item](t)(q.List(ctx, durable.Filter{})); len(items) != 0 {
			t.Fatalf("items after refusals: %+v", items)
		}
		if _, err := q.Enqueue(ctx, small); err != nil {
			t.Fatalf("a small request: %v", err)
		}

		// With the pool closed, any database call would fail: the refusal comes first.
		_ = q.Close()
		_, err = q.Enqueue(ctx, big)
		check("Enqueue on a closed pool", err)
		if _, err := q.Enqueue(ctx, small); err == nil || errors.Is(err, durable.ErrPayloadTooLarge) {
			t.Fatalf("a small request on a closed pool: %v; want the database's error", err)
		}

		// The default limit.
		qd := b.queue(t, durable.Config{})
		durable.Register[*Bulky](qd, "test.bulky")
		_, err = qd.Enqueue(ctx, &Bulky{Data: strings.Repeat("x", durable.DefaultMaxPayloadBytes)})
		if tooLarge, ok := errors.AsType[*durable.PayloadTooLargeError](err); !ok || tooLarge.Limit != durable.DefaultMaxPayloadBytes {
			t.Fatalf("a request over the default limit: %v", err)
		}
		if items := must[[]record.Item](t)(qd.List(ctx, durable.Filter{})); len(items) != 1 {
			t.Fatalf("items: %+v; want the one small request", items)
		}
	})
}

// TestBatchLetterOverLimitKeptWithoutPayload: a failed batch item whose payload is over the
// limit is still captured, without its payload, and its letter says why.
func TestBatchLetterOverLimitKeptWithoutPayload(t *testing.T) {
	ctx := context.Background()
	q := sqliteBackend(t).queue(t, durable.Config{MaxPayloadBytes: 100})
	durable.Register[*Bulky](q, "test.bulky")
	m := mediator.New(nil, mediator.Config{})
	mediator.HandleFunc(m, func(ctx context.Context, r *Bulky) (mediator.Void, error) { return mediator.Void{}, errPermanent })
	if err := m.Build(); err != nil {
		t.Fatal(err)
	}
	res, err := q.RunBatch(ctx, m, "import", []durable.BatchItem{{Key: "r1", Request: &Bulky{Data: strings.Repeat("x", 200)}}})
	if err != nil || res.Invalid != 1 {
		t.Fatalf("RunBatch: %+v, %v", res, err)
	}
	l, _, err := q.DeadLetter(ctx, res.DeadLetters[0])
	if err != nil {
		t.Fatal(err)
	}
	if len(l.Payload) != 0 || !strings.Contains(l.Error, "payload was not kept") || !strings.Contains(l.Error, "MaxPayloadBytes") {
		t.Fatalf("letter %+v", l)
	}
}

// TestConfigValidatePayloadLimit: a negative limit, or one above what the databases store, is
// refused naming the field.
func TestConfigValidatePayloadLimit(t *testing.T) {
	for _, n := range []int{-1, durable.MaxPayloadLimit + 1} {
		err := durable.Config{MaxPayloadBytes: n}.Validate()
		if err == nil || !strings.Contains(err.Error(), "MaxPayloadBytes") {
			t.Errorf("MaxPayloadBytes %d: %v", n, err)
		}
	}
	if err := (durable.Config{MaxPayloadBytes: durable.MaxPayloadLimit}).Validate(); err != nil {
		t.Errorf("MaxPayloadLimit: %v", err)
	}
}
