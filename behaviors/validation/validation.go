package validation

import (
	"context"
	"errors"
	"fmt"
	"reflect"

	"github.com/switchboard-go/switchboard/behaviors"
	"github.com/switchboard-go/switchboard/behaviors/internal/classify"
	"github.com/switchboard-go/switchboard/mediator"
)

// ErrInvalid reports a request that failed validation. It is never retried and never counted
// by a breaker, and the observers report it with the outcome behaviors.OutcomeClientError.
var ErrInvalid = classify.ErrInvalid

// Error reports a request that failed validation. It matches ErrInvalid and unwraps to the
// validator's error. Handlers may return one too, so that retry and the breaker treat their
// own input checks the same way.
type Error struct {
	// Request is the request type; nil when unknown.
	Request reflect.Type
	// Err is the validator's error.
	Err error
}

// Error names the request type and the validator's error.
func (e *Error) Error() string {
	if e.Request != nil {
		return fmt.Sprintf("validation: invalid %s: %v", e.Request, e.Err)
	}
	return fmt.Sprintf("validation: invalid request: %v", e.Err)
}

// Is reports whether target is ErrInvalid.
func (e *Error) Is(target error) bool { return target == ErrInvalid }

// Unwrap returns the validator's error.
func (e *Error) Unwrap() error { return e.Err }

// Retryable reports false: the same request fails the same validation again.
func (e *Error) Retryable() bool { return false }

// Validator is implemented by requests that can check themselves.
type Validator interface {
	Validate() error
}

// ContextValidator is implemented by requests whose check needs the context.
type ContextValidator interface {
	Validate(ctx context.Context) error
}

var (
	validatorType    = reflect.TypeFor[Validator]()
	ctxValidatorType = reflect.TypeFor[ContextValidator]()
)

// Behavior is the validation behavior: it calls the request's Validate method (Validator or
// ContextValidator) before anything else of the pipeline runs, and fails with an *Error when
// it returns an error. Such an error is never retried and never counted by a breaker. It is in
// mediator.StagePre at behaviors.ValidationOrder and applies only to request types that
// implement one of the interfaces.
type Behavior struct{}

// New returns a validation behavior.
func New() *Behavior { return &Behavior{} }

// Placement implements mediator.PlacedBehavior: Explain shows it as "validation", in
// mediator.StagePre, at behaviors.ValidationOrder (see the table of orders in package behaviors).
func (*Behavior) Placement() mediator.Placement {
	return mediator.Placement{Name: "validation", Stage: mediator.StagePre, Order: behaviors.ValidationOrder}
}

// AppliesTo selects the request types that implement Validator or ContextValidator.
func (*Behavior) AppliesTo(info mediator.RequestInfo) bool {
	return !info.Stream && (info.Request.Implements(validatorType) || info.Request.Implements(ctxValidatorType))
}

// Handle validates req and then calls next.
func (*Behavior) Handle(ctx context.Context, req any, next mediator.Next) (any, error) {
	var err error
	switch v := req.(type) {
	case Validator:
		err = v.Validate()
	case ContextValidator:
		err = v.Validate(ctx)
	}
	if err != nil {
		if !errors.Is(err, ErrInvalid) {
			err = &Error{Request: reflect.TypeOf(req), Err: err}
		}
		return nil, err
	}
	return next(ctx, req)
}
