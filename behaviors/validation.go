package behaviors

import (
	"context"
	"errors"
	"reflect"

	"github.com/switchboard-go/switchboard/mediator"
)

// ValidationOrder is the default order of Validation within mediator.StagePre: after context
// population behaviors at lower orders (authentication, locale), so validators may use what
// they set.
const ValidationOrder = 100

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

// Validation is a behavior that calls the request's Validate method (Validator or
// ContextValidator) before anything else of the pipeline runs, and fails with a
// *ValidationError when it returns an error. Such an error is never retried and never counted
// by a breaker. It is in mediator.StagePre at ValidationOrder and applies only to request
// types that implement one of the interfaces.
type Validation struct{}

// NewValidation returns a Validation behavior.
func NewValidation() *Validation { return &Validation{} }

// Name returns "validation".
func (*Validation) Name() string { return "validation" }

// Stage returns mediator.StagePre.
func (*Validation) Stage() mediator.Stage { return mediator.StagePre }

// Order returns ValidationOrder.
func (*Validation) Order() int { return ValidationOrder }

// AppliesTo selects the request types that implement Validator or ContextValidator.
func (*Validation) AppliesTo(info mediator.RequestInfo) bool {
	return !info.Stream && (info.Request.Implements(validatorType) || info.Request.Implements(ctxValidatorType))
}

// Handle validates req and then calls next.
func (*Validation) Handle(ctx context.Context, req any, next mediator.Next) (any, error) {
	var err error
	switch v := req.(type) {
	case Validator:
		err = v.Validate()
	case ContextValidator:
		err = v.Validate(ctx)
	}
	if err != nil {
		if !errors.Is(err, ErrValidation) {
			err = &ValidationError{Request: reflect.TypeOf(req), Err: err}
		}
		return nil, err
	}
	return next(ctx, req)
}
