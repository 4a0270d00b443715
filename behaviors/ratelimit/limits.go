package ratelimit

import (
	"errors"
	"fmt"
	"maps"
	"slices"
	"time"
)

// Limit is the rate and burst of one key's own limit (see Config.Limits and Config.LimitFor),
// with the bounds of Config.Rate and Config.Burst.
type Limit struct {
	// Rate is the key's permits a second: across the fleet when Config.Store is set.
	// Required: a key listed without a rate is more likely a mistake than a wish for
	// Config.Rate, which every key not listed gets anyway.
	Rate float64
	// Burst is how many permits the key has at once after a quiet spell. Default 1, as for
	// Config.Burst and for the same reason; not Config.Burst, since a burst is a number of
	// permits at the limit's own rate, and the default limit's would not mean the same at
	// another (ten permits at once are a tenth of a second at 100 a second, ten seconds at 1).
	Burst int
}

// checkLimit reports what is wrong with a rate and burst, each naming field+"Rate" or
// field+"Burst" (field is "" for Config's own, `Limits["sms"].` for an entry of Limits).
func checkLimit(field string, rate float64, burst int) []error {
	var errs []error
	rateOK := rate >= 1e9/float64(maxInterval) && rate <= maxRate
	if !rateOK {
		errs = append(errs, fmt.Errorf("ratelimit %sRate %v must be at least %.3g a second (a permit a day) and at most %g a second (one a nanosecond)",
			field, rate, 1e9/float64(maxInterval), float64(maxRate)))
	}
	if burst < 0 {
		errs = append(errs, fmt.Errorf("ratelimit %sBurst %d must not be negative", field, burst))
	} else if iv := intervalOf(rate); rateOK && int64(burst) > maxSpan/iv {
		errs = append(errs, fmt.Errorf("ratelimit %sBurst %d at Rate %v takes %v to come back, more than the %v at most (Burst at most %d at this rate)",
			field, burst, rate, time.Duration(float64(burst)*float64(iv)), time.Duration(maxSpan), maxSpan/iv))
	}
	return errs
}

// checkLimits reports every entry of Limits with an invalid value, in key order.
func checkLimits(limits map[string]Limit) []error {
	var errs []error
	for _, key := range slices.Sorted(maps.Keys(limits)) {
		errs = append(errs, checkLimit(fmt.Sprintf("Limits[%q].", key), limits[key].Rate, limits[key].Burst)...)
	}
	return errs
}

// withDefaultBursts returns a copy of limits whose zero bursts are 1.
func withDefaultBursts(limits map[string]Limit) map[string]Limit {
	if limits == nil {
		return nil
	}
	out := make(map[string]Limit, len(limits))
	for k, l := range limits {
		out[k] = l.withDefaults()
	}
	return out
}

func (l Limit) withDefaults() Limit {
	if l.Burst == 0 {
		l.Burst = 1
	}
	return l
}

// limitOf is key's limit: its entry of Limits, else LimitFor's answer, else Rate and Burst. An
// error, naming the key and the field, when LimitFor's answer is out of bounds (the entries of
// Limits are Validate's). cfg is New's, its bursts defaulted.
func (c *Config) limitOf(key string) (Limit, error) {
	if l, ok := c.Limits[key]; ok {
		return l, nil
	}
	if c.LimitFor != nil {
		if l, ok := c.LimitFor(key); ok {
			if errs := checkLimit(fmt.Sprintf("LimitFor(%q).", key), l.Rate, l.Burst); len(errs) > 0 {
				return Limit{}, errors.Join(errs...)
			}
			return l.withDefaults(), nil
		}
	}
	return Limit{Rate: c.Rate, Burst: c.Burst}, nil
}
