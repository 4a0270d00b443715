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
	// OutcomeFailed: the caller got an error the other outcomes do not name: a failure of the
	// service or of a dependency (a 5xx, a timeout, a transport error, a panic).
	OutcomeFailed = "failed"
	// OutcomeClientError: the caller got an error that says its request is wrong (IsClientError:
	// a validation error, a 4xx status other than 408 and 429). Told apart from OutcomeFailed so
	// that an error rate over failed is the service's, not its callers' mistakes.
	OutcomeClientError = "client_error"
	// OutcomeCancelled: the caller's context was done when the call ended (it gave up, or its
	// deadline passed): the caller's choice, not the dependency's failure.
	OutcomeCancelled = "cancelled"
	// OutcomeRefused: the caller got a refusal (IsRefusal): the request's own circuit breaker,
	// bulkhead, rate limit or a refusing behavior of the user's turned it away before its
	// handler ran (Refused), or its handler passed on the refusal of a request it sent (load
	// shed further down). Nothing failed: the refused call did not happen.
	OutcomeRefused = "refused"
	// OutcomeDeferred: the durable deferral stored the request for later (an error that is
	// Deferring): the work was accepted, not failed.
	OutcomeDeferred = "deferred"
)

// OutcomeOf classifies a call of req on ctx that ended with err: OutcomeSucceeded for a nil err,
// then, in this order, OutcomeCancelled, OutcomeDeferred, OutcomeRefused, OutcomeClientError,
// else OutcomeFailed. It allocates nothing. Any refusal is OutcomeRefused (IsRefusal, so not a
// retried call whose earlier attempts reached the handler): req's own (Refused) and one its
// handler passed on alike, since the caller's answer is a refusal either way; the durable
// queue, which charges an attempt for the second, tells them apart with Refused.
func OutcomeOf(ctx context.Context, req any, err error) string {
	switch {
	case err == nil:
		return OutcomeSucceeded
	case ctx.Err() != nil || mediator.IsCallerCancellation(ctx, err):
		return OutcomeCancelled
	case isDeferred(err):
		return OutcomeDeferred
	case IsRefusal(err):
		return OutcomeRefused
	case IsClientError(err):
		return OutcomeClientError
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
