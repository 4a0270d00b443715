package ratelimit_test

import (
	"context"
	"errors"
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
