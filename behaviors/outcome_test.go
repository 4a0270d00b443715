package behaviors_test

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/switchboard-go/switchboard/behaviors"
	"github.com/switchboard-go/switchboard/behaviors/validation"
)

// OutcomeOf tells the caller's errors (a 4xx answer other than 408 and 429, a validation
// error: client_error) from failures (a 5xx, a 408 or 429, anything else), and a refusal the
// handler passed on (another request's, or one naming no request) from a failure: the caller
// got a refusal. Both used to read as failed.
func TestOutcomeOf(t *testing.T) {
	req, other := &Call{}, &Call{}
	for _, c := range []struct {
		err  error
		want string
	}{
		{nil, behaviors.OutcomeSucceeded},
		{&statusErr{Code: 404}, behaviors.OutcomeClientError},
		{fmt.Errorf("lookup: %w", &statusErr{Code: 400}), behaviors.OutcomeClientError},
		{&statusErr{Code: 499}, behaviors.OutcomeClientError},
		{&validation.Error{Err: errors.New("no id")}, behaviors.OutcomeClientError},
		{&statusErr{Code: 408}, behaviors.OutcomeFailed},
		{&statusErr{Code: 429}, behaviors.OutcomeFailed},
		{&statusErr{Code: 503}, behaviors.OutcomeFailed},
		{&statusErr{Code: 399}, behaviors.OutcomeFailed},
		{errors.New("down"), behaviors.OutcomeFailed},
		{&pausedError{req: req}, behaviors.OutcomeRefused},
		{fmt.Errorf("lookup: %w", &pausedError{req: other}), behaviors.OutcomeRefused},
		{&pausedError{}, behaviors.OutcomeRefused},
		{context.Canceled, behaviors.OutcomeFailed}, // not the caller's: its context is live
	} {
		if got := behaviors.OutcomeOf(context.Background(), req, c.err); got != c.want {
			t.Errorf("OutcomeOf(%v) = %q, want %q", c.err, got, c.want)
		}
		if got, want := behaviors.IsClientError(c.err), c.want == behaviors.OutcomeClientError; got != want {
			t.Errorf("IsClientError(%v) = %v, want %v", c.err, got, want)
		}
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if got := behaviors.OutcomeOf(ctx, req, &statusErr{Code: 404}); got != behaviors.OutcomeCancelled {
		t.Errorf("a call whose caller cancelled: %q", got)
	}
}
