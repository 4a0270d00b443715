package ratelimit_test

import (
	"context"
	"errors"
	"strconv"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/switchboard-go/switchboard/behaviors/ratelimit"
)

// Configs whose interval or burst span do not fit a time.Duration are refused by Validate,
// naming the field and the bound; and a limiter made of one anyway (New does not validate)
// does not wrap: its first call passes, its second is refused with a wait that is not
// negative or absurd.
func TestRateLimitOverflowingConfigs(t *testing.T) {
	for _, c := range []struct {
		cfg   ratelimit.Config
		field string
	}{
		{ratelimit.Config{Rate: 1e-12}, "Rate"},
		{ratelimit.Config{Rate: 0.001, Burst: 10_000_000}, "Burst"},
		{ratelimit.Config{Rate: 1, Burst: 1e10}, "Burst"},
	} {
		err := c.cfg.Validate()
		if err == nil || !strings.Contains(err.Error(), c.field) {
			t.Errorf("%+v: Validate %v, want an error naming %s", c.cfg, err, c.field)
		}
		synctest.Test(t, func(t *testing.T) {
			rl := ratelimit.New(c.cfg)
			if _, err := rl.Handle(context.Background(), &Call{}, func(context.Context, any) (any, error) { return nil, nil }); err != nil {
				t.Fatalf("%+v: first call %v", c.cfg, err)
			}
			if s := rl.Snapshot(); len(s) != 1 || s[0].Available >= s[0].Burst {
				t.Fatalf("%+v: after one call %+v", c.cfg, s)
			}
			_, err := rl.Handle(context.Background(), &Call{}, func(context.Context, any) (any, error) { return nil, nil })
			le, ok := errors.AsType[*ratelimit.LimitedError](err)
			if c.cfg.Burst > 1 {
				if err != nil {
					t.Fatalf("%+v: second call of a burst %v", c.cfg, err)
				}
				return
			}
			if !ok || le.Wait <= 0 || le.Wait > 24*time.Hour {
				t.Fatalf("%+v: second call %v", c.cfg, err)
			}
		})
	}
}

func keyOfString(req any) string { return req.(string) }

func pass(context.Context, any) (any, error) { return nil, nil }

// A limiter keyed by something with many values (a URL) keeps at most MaxKeys of them: the
// idle ones are dropped first, then the least recently called; a key with a caller waiting for
// its permit never is.
func TestRateLimitKeysBounded(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		rl := ratelimit.New(ratelimit.Config{Rate: 1, Key: keyOfString, MaxWait: time.Minute})
		// A busy key: a caller waits for its second permit, a second away.
		if _, err := rl.Handle(context.Background(), "busy", pass); err != nil {
			t.Fatal(err)
		}
		done := make(chan error)
		go func() { _, err := rl.Handle(context.Background(), "busy", pass); done <- err }()
		synctest.Wait()
		count := func() (n int, busy *ratelimit.KeySnapshot) {
			snap := rl.Snapshot()
			for i := range snap {
				if snap[i].Key == "busy" {
					busy = &snap[i]
				}
			}
			return len(snap), busy
		}
		for i := range 5000 { // no time passes: every key's limit is spent
			if _, err := rl.Handle(context.Background(), "k"+strconv.Itoa(i), pass); err != nil {
				t.Fatal(i, err)
			}
		}
		if n, busy := count(); n > 1000 || busy == nil || busy.Waiting != 1 {
			t.Fatalf("%d keys kept (want at most %d), busy key %+v", n, 1000, busy)
		}
		if err := <-done; err != nil {
			t.Fatal(err)
		}
		if _, busy := count(); busy == nil || busy.Available != 0 {
			t.Fatalf("the busy key's limit was forgotten: %+v", busy)
		}
		for i := range 3000 { // idle keys
			if _, err := rl.Handle(context.Background(), "j"+strconv.Itoa(i), pass); err != nil {
				t.Fatal(i, err)
			}
			if i%100 == 99 {
				time.Sleep(time.Second) // fake time: the keys called so far are idle again
			}
		}
		if n, _ := count(); n > 1000 {
			t.Fatalf("%d keys kept, want at most %d", n, 1000)
		}
	})
}

// A fleet key with leased permits in hand is never dropped; the keys called once are.
func TestRateLimitFleetKeysBounded(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		rl := ratelimit.New(ratelimit.Config{Rate: 100, MaxKeys: 10, MaxWait: time.Second, Key: keyOfString,
			Store: instance{newMemStore(500 * time.Millisecond), "a"}})
		defer rl.Close()
		ctx, cancel := context.WithCancel(context.Background())
		busyDone := make(chan struct{})
		go func() { // the busy key, called as fast as its limit lets it
			defer close(busyDone)
			for ctx.Err() == nil {
				if _, err := rl.Handle(ctx, "busy", pass); err != nil {
					if le, ok := errors.AsType[*ratelimit.LimitedError](err); ok {
						time.Sleep(le.Wait)
					}
				}
			}
		}()
		time.Sleep(2 * time.Second)
		leased := func() int64 {
			for _, s := range rl.Snapshot() {
				if s.Key == "busy" {
					return s.Leased
				}
			}
			return -1
		}
		before := leased()
		for i := range 200 {
			if _, err := rl.Handle(context.Background(), "k"+strconv.Itoa(i), pass); err != nil {
				t.Fatal(i, err)
			}
		}
		n := len(rl.Snapshot())
		after := leased()
		cancel()
		<-busyDone
		if n > 10 || before <= 0 || after < before {
			t.Fatalf("%d keys kept (want at most 10); the busy key leased %d, then %d", n, before, after)
		}
	})
}
