package behaviors

import (
	"context"
	"errors"
	"reflect"

	"github.com/switchboard-go/switchboard/mediator"
)

// The outcomes of a call, as the logging, metrics and tracing packages report them: one
// vocabulary, so a log line, a counter and a span say the same thing of one call. OutcomeOf
// classifies a call.
const (
	// OutcomeSucceeded: the caller got a response (a fallback's included).
	OutcomeSucceeded = "succeeded"
	// OutcomeFailed: the caller got an error the other outcomes do not name.
	OutcomeFailed = "failed"
	// OutcomeCancelled: the caller's context was done when the call ended (it gave up, or its
	// deadline passed): the caller's choice, not the dependency's failure.
	OutcomeCancelled = "cancelled"
	// OutcomeRefused: the request's own circuit breaker or bulkhead refused it before its
	// handler ran (Refused).
	OutcomeRefused = "refused"
	// OutcomeDeferred: the durable deferral stored the request for later (an error that is
	// Deferring): the work was accepted, not failed.
	OutcomeDeferred = "deferred"
)

// OutcomeOf classifies a call of req on ctx that ended with err: OutcomeSucceeded for a nil err,
// then, in this order, OutcomeCancelled, OutcomeDeferred, OutcomeRefused, else
// OutcomeFailed. It allocates nothing.
func OutcomeOf(ctx context.Context, req any, err error) string {
	switch {
	case err == nil:
		return OutcomeSucceeded
	case ctx.Err() != nil || mediator.IsCallerCancellation(ctx, err):
		return OutcomeCancelled
	case isDeferred(err):
		return OutcomeDeferred
	case Refused(err, req):
		return OutcomeRefused
	}
	return OutcomeFailed
}

func isDeferred(err error) bool {
	var d Deferring
	return errors.As(err, &d) && d.Deferred()
}

// RequestName is the name observers give request type t: the type as reflect prints it,
// without the pointer ("billing.Charge" for *billing.Charge). The logging, metrics and tracing
// packages use it for the request field, the request label and the span name, so the three
// name a request alike.
func RequestName(t reflect.Type) string {
	if t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	return t.String()
}
