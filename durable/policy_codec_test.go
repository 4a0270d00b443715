package durable_test

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"math"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/switchboard-go/switchboard/behaviors"
	"github.com/switchboard-go/switchboard/behaviors/retry"
	"github.com/switchboard-go/switchboard/durable"
	istore "github.com/switchboard-go/switchboard/durable/internal/store"
	"github.com/switchboard-go/switchboard/durable/record"
	"github.com/switchboard-go/switchboard/durable/sqlite"
	"github.com/switchboard-go/switchboard/mediator"
)

// noPanic runs fn and reports an error if it panics, so that a regression shows as a test
// failure instead of crashing the test binary.
func noPanic(t *testing.T, what string, fn func()) {
	t.Helper()
	defer func() {
		if p := recover(); p != nil {
			t.Errorf("%s panicked: %v", what, p)
		}
	}()
	fn()
}

// A payload written by a newer version of the request type (one more field) decodes on an
// instance that does not know the field yet: the default codec ignores it.
func TestJSONCodecToleratesUnknownFields(t *testing.T) {
	r := typesQueue(t)
	v, err := durable.DecodeFor(r, "test.work", []byte(`{"n":7,"added":{"deep":[1,2]}}`))
	if err != nil {
		t.Fatalf("decode with an added field: %v", err)
	}
	if w, ok := v.(*Work); !ok || w.N != 7 {
		t.Fatalf("decoded %#v, want *Work{N: 7}", v)
	}
	var w Work
	if err := (durable.JSONCodec{}).Unmarshal([]byte(`{"added":1,"n":8}`), &w); err != nil || w.N != 8 {
		t.Fatalf("JSONCodec{}.Unmarshal: %+v, %v", w, err)
	}
}

// During a rolling deploy, an item written by a newer instance is claimed by an older one: it
// runs instead of becoming a dead letter.
func TestItemWithAddedFieldRunsOnOlderInstance(t *testing.T) {
	e := newEnv(t, sqliteBackend(t))
	ctx := context.Background()
	now := e.clock.Now()
	id, _, err := e.store.Enqueue(ctx, istore.NewItem{Name: "test.work", Payload: []byte(`{"n":5,"priority":"high"}`), NextAt: now, Now: now})
	if err != nil {
		t.Fatal(err)
	}
	got := make(chan int, 1)
	m := mediatorFor(t, handlers{work: func(ctx context.Context, w *Work) error {
		got <- w.N
		return nil
	}})
	start(t, e.q, m, durable.SchedulerConfig{Workers: 1})
	var it record.Item
	eventually(t, 20*time.Second, "the item to succeed or die", func() bool {
		it = item(t, e.q, record.ItemID(id))
		return it.State == record.StateSucceeded || it.State == record.StateDead
	})
	if it.State != record.StateSucceeded {
		t.Fatalf("item is %s: %s", it.State, it.LastError)
	}
	if n := <-got; n != 5 || it.Attempts != 1 {
		t.Fatalf("handler got N=%d; item %+v", n, it)
	}
}

// Whatever the codec's tolerance, a payload that is not exactly one JSON value, or does not fit
// the type, matches ErrDecode.
func TestJSONCodecRejectsBadPayloads(t *testing.T) {
	r := typesQueue(t)
	for _, payload := range []string{
		`{"n":1} {"n":2}`,
		`{"n":1}}`,
		`{"n":1}]`,
		`{"n":1}x`,
		`{"n":"one"}`,
		`{"n":1`,
		``,
		`[]`,
	} {
		v, err := durable.DecodeFor(r, "test.work", []byte(payload))
		if !errors.Is(err, durable.ErrDecode) || !strings.Contains(err.Error(), `"test.work"`) || errors.Unwrap(err) == nil {
			t.Errorf("Decode(%q) = %#v, %v; want an error matching ErrDecode, naming test.work, unwrapping to the codec's", payload, v, err)
		}
	}
	// Whitespace after the value is not trailing data.
	if _, err := durable.DecodeFor(r, "test.work", []byte("{\"n\":1}\n\t ")); err != nil {
		t.Errorf("trailing whitespace: %v", err)
	}
}

// A policy whose BaseDelay is above MaxDelay waits MaxDelay: MaxDelay caps every delay.
func TestPolicyDelayHonoursMax(t *testing.T) {
	p := durable.DurablePolicy(retry.Policy{BaseDelay: time.Hour, MaxDelay: time.Millisecond, Jitter: behaviors.Off})
	if d := p.Delay(1, 0.5); d != time.Millisecond {
		t.Errorf("%+v.Delay(1) = %v, want 1ms", p, d)
	}
	// A BaseDelay above the durable default MaxDelay (1 h) is capped at it too.
	if d := durable.DurablePolicy(retry.Policy{BaseDelay: 2 * time.Hour, Jitter: behaviors.Off}).Delay(1, 0.5); d != time.Hour {
		t.Errorf("BaseDelay 2h with the default MaxDelay: Delay(1) = %v, want 1h", d)
	}
	// Jitter never takes a delay above MaxDelay; below the cap it still spreads both ways.
	j := durable.DurablePolicy(retry.Policy{BaseDelay: time.Hour, MaxDelay: time.Minute})
	for _, r := range []float64{0, 0.25, 0.5, 0.75, 0.999} {
		if d := j.Delay(1, r); d > time.Minute || d < 54*time.Second {
			t.Errorf("%+v.Delay(1, %v) = %v, want within [54s, 1m]", j, r, d)
		}
	}
	if d := j.Delay(1, 0); d != 54*time.Second {
		t.Errorf("%+v.Delay(1, 0) = %v, want 54s", j, d)
	}
	below := durable.DurablePolicy(retry.Policy{BaseDelay: time.Second, MaxDelay: time.Minute})
	if lo, hi := below.Delay(1, 0), below.Delay(1, 0.999); lo != 900*time.Millisecond || hi <= time.Second {
		t.Errorf("%+v: Delay(1, 0) = %v, Delay(1, 0.999) = %v; want 900ms and above 1s", below, lo, hi)
	}
}

// Registering a request type with an invalid policy fails with an error naming the fields, and
// leaves the type unregistered.
func TestRegisterRefusesInvalidPolicy(t *testing.T) {
	r := sqliteBackend(t).bare(t, durable.Config{})
	err := registerErr(t, func() error {
		return durable.Register[*Work](r, "test.work", durable.WithPolicy(retry.Policy{MaxAttempts: -1, Multiplier: 0.5}))
	})
	if err == nil {
		t.Fatal("registered with MaxAttempts -1 and Multiplier 0.5")
	}
	if !errors.Is(err, retry.ErrInvalidPolicy) {
		t.Errorf("error %v does not match ErrInvalidPolicy", err)
	}
	for _, want := range []string{"*durable_test.Work", "MaxAttempts", "-1", "Multiplier", "0.5"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not mention %q", err, want)
		}
	}
	if durable.Registered(r, reflect.TypeFor[*Work]()) {
		t.Error("the type was registered despite the error")
	}
	// A valid policy registers.
	if err := registerErr(t, func() error {
		return durable.Register[*Work](r, "test.work", durable.WithPolicy(retry.Policy{MaxAttempts: 3, Jitter: behaviors.Off}))
	}); err != nil {
		t.Fatalf("valid policy: %v", err)
	}
}

// explodingCodec panics while encoding, as a codec with a bug might.
type explodingCodec struct{}

func (explodingCodec) Marshal(v any) ([]byte, error) { panic("encoder exploded") }
func (explodingCodec) Unmarshal(data []byte, v any) error {
	return durable.JSONCodec{}.Unmarshal(data, v)
}

// A codec that panics while encoding gives an error naming the request and the panic, on
// every path that encodes: the registry's encode, Enqueue, and the deferral inside mediator.Send.
func TestEncodeRecoversCodecPanic(t *testing.T) {
	r := sqliteBackend(t).bare(t, durable.Config{})
	durable.Register[*Fragile](r, "test.fragile", durable.WithCodec(explodingCodec{}))
	checkErr := func(what string, err error) {
		t.Helper()
		if err == nil {
			t.Fatalf("%s: no error", what)
		}
		for _, want := range []string{"test.fragile", "encoder exploded"} {
			if !strings.Contains(err.Error(), want) {
				t.Errorf("%s: error %q does not mention %q", what, err, want)
			}
		}
	}
	noPanic(t, "the registry's encode", func() {
		_, _, err := durable.EncodeFor(r, &Fragile{V: "x"})
		checkErr("the registry's encode", err)
	})

	q := r
	ctx := context.Background()
	noPanic(t, "Queue.Enqueue", func() {
		_, err := q.Enqueue(ctx, &Fragile{V: "x"})
		checkErr("Queue.Enqueue", err)
	})

	m := mediator.New(nil, mediator.Config{})
	mediator.HandleFunc(m, func(ctx context.Context, f *Fragile) (mediator.Void, error) {
		return mediator.Void{}, retryableErr{"downstream unavailable"}
	})
	m.Use(durable.NewDeferral(q, durable.DeferralConfig{}))
	if err := m.Build(); err != nil {
		t.Fatal(err)
	}
	noPanic(t, "mediator.Send through the deferral", func() {
		_, err := mediator.Send(ctx, m, &Fragile{V: "x"})
		checkErr("mediator.Send", err)
		if errors.Is(err, durable.ErrDeferred) {
			t.Errorf("reported as deferred although nothing was stored: %v", err)
		}
		var re retryableErr
		if !errors.As(err, &re) {
			t.Errorf("the handler's error is lost: %v", err)
		}
	})
	if st := stats(t, q); st.Counts[record.StatePending] != 0 {
		t.Errorf("stored items: %+v", st.Counts)
	}
}

// A nil request, or a nil pointer of a registered type, is refused instead of being stored as
// "null" and later dispatched as an empty request.
func TestEncodeRefusesNilRequest(t *testing.T) {
	r := typesQueue(t)
	for _, c := range []struct {
		req      any
		typeName string
	}{
		{nil, "nil"},
		{(*Work)(nil), "*durable_test.Work"},
		{(*Keyed)(nil), "*durable_test.Keyed"},
		{(*Fragile)(nil), "*durable_test.Fragile"}, // not registered: nil still wins
	} {
		name, payload, err := durable.EncodeFor(r, c.req)
		if !errors.Is(err, mediator.ErrNilRequest) {
			t.Errorf("Encode(%T) = %q, %q, %v; want an error matching mediator.ErrNilRequest", c.req, name, payload, err)
			continue
		}
		if !strings.Contains(err.Error(), c.typeName) {
			t.Errorf("Encode(%T): error %q does not name the type", c.req, err)
		}
	}

	e := newEnv(t, sqliteBackend(t))
	ctx := context.Background()
	if _, err := e.q.Enqueue(ctx, (*Work)(nil)); !errors.Is(err, mediator.ErrNilRequest) {
		t.Errorf("Enqueue(nil *Work): %v", err)
	}
	tx := must[*sql.Tx](t)(e.store.DB().BeginTx(ctx, nil))
	defer func() { _ = tx.Rollback() }()
	if _, err := e.q.EnqueueTx(ctx, tx, (*Work)(nil)); !errors.Is(err, mediator.ErrNilRequest) {
		t.Errorf("EnqueueTx(nil *Work): %v", err)
	}
	_ = tx.Rollback()
	if st := stats(t, e.q); st.Counts[record.StatePending] != 0 {
		t.Errorf("stored items: %+v", st.Counts)
	}
}

// A strict codec keeps rejecting unknown fields, and trailing data, as ErrDecode.
func TestJSONCodecStrict(t *testing.T) {
	r := sqliteBackend(t).bare(t, durable.Config{})
	if err := registerErr(t, func() error {
		return durable.Register[*Work](r, "test.work", durable.WithCodec(durable.JSONCodec{Strict: true}))
	}); err != nil {
		t.Fatal(err)
	}
	v, err := durable.DecodeFor(r, "test.work", []byte(`{"n":2}`))
	if err != nil || v.(*Work).N != 2 {
		t.Fatalf("known fields only: %#v, %v", v, err)
	}
	for _, c := range []struct{ payload, mention string }{
		{`{"n":1,"gone":true}`, `"gone"`},
		{`{"n":1}]`, "trailing"},
		{`{"n":1}}`, "trailing"},
		{`{"n":1} {"n":2}`, "trailing"},
	} {
		_, err := durable.DecodeFor(r, "test.work", []byte(c.payload))
		if !errors.Is(err, durable.ErrDecode) || !strings.Contains(err.Error(), `"test.work"`) || !strings.Contains(err.Error(), c.mention) {
			t.Errorf("strict Decode(%q) = %v; want an error matching ErrDecode mentioning %s", c.payload, err, c.mention)
		}
	}
}

// The policies durable work is configured with are validated by retry.Policy.Validate: every
// invalid field reported, each naming its field and value.
func TestPolicyValidate(t *testing.T) {
	nan, inf := math.NaN(), math.Inf(1)
	for _, p := range []retry.Policy{
		{},
		durable.DurablePolicy(retry.Policy{}),
		fastPolicy,
		{Jitter: behaviors.Off},
		{Multiplier: 1},
		{Multiplier: 1e308},
		{BaseDelay: time.Hour, MaxDelay: time.Hour},
	} {
		if err := p.Validate(); err != nil {
			t.Errorf("%+v.Validate() = %v, want nil", p, err)
		}
	}
	for _, c := range []struct {
		p     retry.Policy
		field string
		value string
	}{
		{retry.Policy{MaxAttempts: -1}, "MaxAttempts", "-1"},
		{retry.Policy{BaseDelay: -time.Second}, "BaseDelay", "-1s"},
		{retry.Policy{MaxDelay: -time.Millisecond}, "MaxDelay", "-1ms"},
		{retry.Policy{Multiplier: 0.5}, "Multiplier", "0.5"},
		{retry.Policy{Multiplier: -2}, "Multiplier", "-2"},
		{retry.Policy{Multiplier: nan}, "Multiplier", "NaN"},
		{retry.Policy{Multiplier: inf}, "Multiplier", "+Inf"},
		{retry.Policy{Jitter: behaviors.Switch(5)}, "Jitter", ""},
		// Every delay would be cut to MaxDelay without a word.
		{retry.Policy{BaseDelay: time.Hour, MaxDelay: time.Millisecond}, "MaxDelay", "1ms"},
	} {
		err := c.p.Validate()
		var ipe *retry.InvalidPolicyError
		switch {
		case err == nil:
			t.Errorf("%+v.Validate() = nil", c.p)
		case !errors.Is(err, retry.ErrInvalidPolicy):
			t.Errorf("%+v.Validate() = %v: does not match ErrInvalidPolicy", c.p, err)
		case !errors.As(err, &ipe) || ipe.Field != c.field:
			t.Errorf("%+v.Validate() = %#v: want an *InvalidPolicyError for %s", c.p, err, c.field)
		case !strings.Contains(err.Error(), strings.TrimSpace(c.field+" "+c.value)):
			t.Errorf("%+v.Validate() = %q: want it to name %s and its value %s", c.p, err, c.field, c.value)
		}
	}
	// Every invalid field is reported, not just the first.
	err := retry.Policy{MaxAttempts: -3, BaseDelay: -1, MaxDelay: -1, Multiplier: 0.1, Jitter: 9}.Validate()
	joined, ok := err.(interface{ Unwrap() []error })
	if !ok {
		t.Fatalf("Validate() = %#v, want joined errors", err)
	}
	var fields []string
	for _, e := range joined.Unwrap() {
		var ipe *retry.InvalidPolicyError
		if !errors.As(e, &ipe) || !errors.Is(e, retry.ErrInvalidPolicy) {
			t.Fatalf("%#v is not an *InvalidPolicyError matching ErrInvalidPolicy", e)
		}
		fields = append(fields, ipe.Field)
	}
	if got := strings.Join(fields, " "); got != "MaxAttempts BaseDelay MaxDelay Multiplier Jitter" {
		t.Errorf("reported fields %q", got)
	}
}

// Register's error for an invalid policy is the validation error.
func TestRegisterInvalidPolicyMatchesSentinel(t *testing.T) {
	r := sqliteBackend(t).bare(t, durable.Config{})
	err := registerErr(t, func() error {
		return durable.Register[*Work](r, "test.work", durable.WithPolicy(retry.Policy{Jitter: behaviors.Switch(7)}))
	})
	var ipe *retry.InvalidPolicyError
	if !errors.Is(err, retry.ErrInvalidPolicy) || !errors.As(err, &ipe) || ipe.Field != "Jitter" {
		t.Fatalf("Register: %v", err)
	}
}

// The default JSON codec ignores fields it does not know, so a payload written by a newer
// version decodes on an older one; a strict codec rejects them.
func ExampleJSONCodec() {
	payload := []byte(`{"invoice":"INV-3","priority":"high"}`) // "priority" was added later
	var tolerant, strict SendInvoice
	err := durable.JSONCodec{}.Unmarshal(payload, &tolerant)
	fmt.Println(tolerant.Invoice, err)
	err = durable.JSONCodec{Strict: true}.Unmarshal(payload, &strict)
	fmt.Println(err)
	// Output:
	// INV-3 <nil>
	// json: unknown field "priority"
}

func TestOpenRefusesInvalidPolicy(t *testing.T) {
	q, err := durable.Open(context.Background(), sqlite.Open(filepath.Join(t.TempDir(), "q.db")), durable.Config{Policy: retry.Policy{BaseDelay: -time.Second}})
	var ipe *retry.InvalidPolicyError
	if q != nil || !errors.Is(err, retry.ErrInvalidPolicy) || !errors.As(err, &ipe) || ipe.Field != "BaseDelay" {
		t.Fatalf("Open = %v, %v", q, err)
	}
}
