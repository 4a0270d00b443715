package durable_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"

	"github.com/switchboard-go/switchboard/behaviors/ratelimit"
	"github.com/switchboard-go/switchboard/durable"
)

// Two stores of one name share a limit: their leases never overlap, each tells the other's
// presence in Instances, and a store of another name has its own limits.
func TestRateLimitStoreLeases(t *testing.T) {
	eachBackend(t, func(t *testing.T, b backend) {
		q := b.bare(t, durable.Config{})
		a := must[*durable.RateLimitStore](t)(durable.NewRateLimitStore(q, durable.RateLimitStoreConfig{Instance: "a"}))
		c := must[*durable.RateLimitStore](t)(durable.NewRateLimitStore(q, durable.RateLimitStoreConfig{Instance: "c"}))
		other := must[*durable.RateLimitStore](t)(durable.NewRateLimitStore(q, durable.RateLimitStoreConfig{Name: "other", Instance: "a"}))
		if a.LeasePeriod() != 500*time.Millisecond {
			t.Fatal(a.LeasePeriod())
		}
		ctx := context.Background()
		r := ratelimit.LeaseRequest{Key: "api", Interval: 10 * time.Millisecond, Burst: 1, Permits: 5}
		la := must[ratelimit.Lease](t)(a.Lease(ctx, r))
		lc := must[ratelimit.Lease](t)(c.Lease(ctx, r))
		if la.Permits != 5 || lc.Permits != 5 || lc.First.Before(la.First.Add(50*time.Millisecond)) {
			t.Fatalf("a %+v, c %+v", la, lc)
		}
		if la.Instances != 1 || lc.Instances != 2 {
			t.Fatalf("instances: a %d, c %d", la.Instances, lc.Instances)
		}
		if lo := must[ratelimit.Lease](t)(other.Lease(ctx, r)); lo.Permits != 5 || lo.First.After(lo.Now) {
			t.Fatalf("other name: %+v", lo)
		}
		// More than a period's permits at once: none, and when the next one is free: after c's
		// five, or now when they have passed already (a slow machine between the leases).
		big := r
		big.Permits = 100
		if l := must[ratelimit.Lease](t)(a.Lease(ctx, big)); l.Permits != 0 || !l.Next.Equal(maxTime(lc.First.Add(50*time.Millisecond), l.Now)) {
			t.Fatalf("a lease past the period: %+v", l)
		}
	})
}

func TestRateLimitStoreConfigValidate(t *testing.T) {
	err := durable.RateLimitStoreConfig{Name: "a\x00", LeasePeriod: time.Millisecond, Timeout: -1, Instance: "\xff"}.Validate()
	for _, want := range []string{"Name", "LeasePeriod", "Timeout", "Instance"} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Fatalf("%v lacks %s", err, want)
		}
	}
	if _, err := durable.NewRateLimitStore(nil, durable.RateLimitStoreConfig{}); err == nil {
		t.Fatal("a nil queue passed")
	}
}

// A store whose database is gone fails its leases, saying which store.
func TestRateLimitStoreClosedQueue(t *testing.T) {
	q := sqliteBackend(t).bare(t, durable.Config{})
	s := must[*durable.RateLimitStore](t)(durable.NewRateLimitStore(q, durable.RateLimitStoreConfig{Name: "n"}))
	_ = q.Close()
	_, err := s.Lease(context.Background(), ratelimit.LeaseRequest{Key: "k", Interval: time.Millisecond, Burst: 1, Permits: 1})
	if err == nil || !strings.Contains(err.Error(), `rate limit store "n"`) || errors.Is(err, context.Canceled) {
		t.Fatal(err)
	}
}

func maxTime(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}

// A lease whose lessees cannot be counted is still the lease the database granted (its row has
// moved on): the store returns it with the last count it knew rather than dropping it.
func TestRateLimitStoreLeaseKeptWhenCountFails(t *testing.T) {
	q := sqliteBackend(t).bare(t, durable.Config{})
	s := must[*durable.RateLimitStore](t)(durable.NewRateLimitStore(q, durable.RateLimitStoreConfig{Instance: "a"}))
	ctx := context.Background()
	r := ratelimit.LeaseRequest{Key: "k", Interval: 10 * time.Millisecond, Burst: 1, Permits: 3}
	first := must[ratelimit.Lease](t)(s.Lease(ctx, r))
	if _, err := durable.StoreOf(q).DB().ExecContext(ctx, "DROP TABLE switchboard_rate_limit_lessees"); err != nil {
		t.Fatal(err)
	}
	// A fresh key: its lessees are counted at its first lease, and the count fails.
	r.Key = "fresh"
	l, err := s.Lease(ctx, r)
	if err != nil || l.Permits != 3 || l.Instances != 1 {
		t.Fatalf("lease with the count failing: %+v, %v (first %+v)", l, err, first)
	}
	// The permits it returned were taken off the limit: the next lease follows them.
	next := must[ratelimit.Lease](t)(s.Lease(ctx, r))
	if next.Permits != 3 || next.First.Before(l.First.Add(30*time.Millisecond)) {
		t.Fatalf("next %+v after %+v", next, l)
	}
}

// The store's lines name the instance as every other line of the queue does, by the queue's
// InstanceID under "instance", so that an operator who follows one instance's logs sees its
// rate limit store's too; the store's lessee name, unique per store, has a key of its own.
func TestRateLimitStoreLogsTheQueuesInstance(t *testing.T) {
	core, logs := observer.New(zapcore.InfoLevel)
	// The store's Logger is left to its default, the queue's.
	q := sqliteBackend(t).bare(t, durable.Config{InstanceID: "svc-7", Logger: zap.New(core)})
	s := must[*durable.RateLimitStore](t)(durable.NewRateLimitStore(q, durable.RateLimitStoreConfig{}))
	ctx := context.Background()
	if _, err := durable.StoreOf(q).DB().ExecContext(ctx, "DROP TABLE switchboard_rate_limits"); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Lease(ctx, ratelimit.LeaseRequest{Key: "k", Interval: 10 * time.Millisecond, Burst: 1, Permits: 3}); err == nil {
		t.Fatal("a lease without the table succeeded")
	}
	lines := logs.FilterFieldKey("rate_limit_store").All()
	if len(lines) == 0 {
		t.Fatal("the failed lease logged nothing to the queue's logger")
	}
	for _, e := range lines {
		var instances []string
		lessee := ""
		for _, f := range e.Context {
			switch f.Key {
			case "instance":
				instances = append(instances, f.String)
			case "lessee":
				lessee = f.String
			}
		}
		if len(instances) != 1 || instances[0] != "svc-7" || lessee == "" || lessee == "svc-7" {
			t.Errorf("%q: instance fields %q, lessee %q; want one instance \"svc-7\" and the store's own lessee name", e.Message, instances, lessee)
		}
	}
}
