package validation_test

import (
	"context"
	"errors"
	"fmt"

	"github.com/switchboard-go/switchboard/behaviors"
	"github.com/switchboard-go/switchboard/behaviors/validation"
	"github.com/switchboard-go/switchboard/mediator"
)

type Signup struct {
	mediator.Returns[int]
	Email string
}

func (s *Signup) Validate() error {
	if s.Email == "" {
		return errors.New("email is required")
	}
	return nil
}

// Requests that implement Validator are checked before the pipeline runs.
func ExampleNew() {
	m := mediator.New(nil, mediator.Config{})
	mediator.HandleFunc(m, func(context.Context, *Signup) (int, error) { return 1, nil })
	m.Use(validation.New())
	mustBuild(m)
	_, err := mediator.Send(context.Background(), m, &Signup{})
	fmt.Println(err)
	fmt.Println(errors.Is(err, validation.ErrInvalid), behaviors.Retryable(err))
	// Output:
	// validation: invalid *validation_test.Signup: email is required
	// true false
}

func mustBuild(m *mediator.Mediator) *mediator.Mediator {
	if err := m.Build(); err != nil {
		panic(err)
	}
	return m
}
