package retry

import (
	"errors"

	"github.com/switchboard-go/switchboard/behaviors/breaker"
	"github.com/switchboard-go/switchboard/behaviors/bulkhead"
)

// refused reports whether err says an attempt was turned away before it reached the handler.
func refused(err error) bool {
	return errors.Is(err, breaker.ErrOpen) || errors.Is(err, bulkhead.ErrFull)
}
