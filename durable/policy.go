package durable

import (
	"time"

	"github.com/switchboard-go/switchboard/behaviors"
	"github.com/switchboard-go/switchboard/behaviors/retry"
)

// defaultPolicy is what the zero fields of Config.Policy mean for durable work. It is the
// retry behavior's vocabulary (retry.Policy) with durable values; see Config.Policy for the
// reasons.
var defaultPolicy = retry.Policy{
	MaxAttempts:      10,
	Strategy:         retry.Exponential,
	BaseDelay:        time.Second,
	Multiplier:       2,
	MaxDelay:         time.Hour,
	Jitter:           behaviors.On,
	RetryOnTimeout:   behaviors.On,
	RetryOnTransport: behaviors.On,
	WaitForBreaker:   behaviors.On,
}

// classification keeps the fields of p that decide what is worth another try, so it can be
// layered over a request's in-process retry policy without changing that policy's timing.
func classification(p retry.Policy) retry.Policy {
	return retry.Policy{
		RetryOnTimeout:       p.RetryOnTimeout,
		RetryOnTransport:     p.RetryOnTransport,
		WaitForBreaker:       p.WaitForBreaker,
		RetryableStatusCodes: p.RetryableStatusCodes,
		Classifier:           p.Classifier,
	}
}
