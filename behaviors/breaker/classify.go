package breaker

import (
	"errors"

	"github.com/switchboard-go/switchboard/behaviors"
	"github.com/switchboard-go/switchboard/mediator"
)

// CountsAsFailure is the default Classifier of a Registry: it reports whether err says the
// dependency behind a breaker is unhealthy. It reports false for nil, client errors
// (behaviors.IsClientError: validation errors and errors carrying a 4xx status code other than
// 408 and 429, the caller's fault, not the dependency's), mediator.ErrNoHandler and refusals
// (behaviors.IsRefusal: circuit-open errors, bulkhead rejections, a refusing behavior of your
// own). Every other error counts, timeouts included: a deadline set inside the breaker by the
// timeout behavior is not the caller's. (The registry itself never counts the error of a call
// whose context is done, whatever its Classifier says.)
func CountsAsFailure(err error) bool {
	if err == nil {
		return false
	}
	return !behaviors.IsClientError(err) && !errors.Is(err, mediator.ErrNoHandler) && !behaviors.IsRefusal(err)
}
