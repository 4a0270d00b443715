package validation_test

import (
	"context"
	"errors"
	"testing"

	"github.com/switchboard-go/switchboard/behaviors/retry"
	"github.com/switchboard-go/switchboard/behaviors/validation"
	"github.com/switchboard-go/switchboard/mediator"
)

type CreateUser struct {
	mediator.Returns[int]
	Name string
}

func (c *CreateUser) Validate() error {
	if c.Name == "" {
		return errors.New("name is required")
	}
	return nil
}

type Transfer struct {
	mediator.Command
	Amount int
}

type ctxKey struct{}

func (t *Transfer) Validate(ctx context.Context) error {
	if limit, _ := ctx.Value(ctxKey{}).(int); t.Amount > limit {
		return errors.New("over the limit")
	}
	return nil
}

func TestValidation(t *testing.T) {
	calls := 0
	m := mediator.New(nil, mediator.Config{})
	mediator.HandleFunc(m, func(context.Context, *CreateUser) (int, error) { calls++; return 7, nil })
	mediator.HandleFunc(m, func(context.Context, *Transfer) (mediator.Void, error) { calls++; return mediator.Void{}, nil })
	mediator.HandleFunc(m, (&script{}).Handle)
	m.Use(retry.New(retry.Config{Policy: retry.Policy{MaxAttempts: 3, Classifier: func(error) bool { return true }}}))
	m.Use(validation.New())
	if err := m.Build(); err != nil {
		t.Fatal(err)
	}
	_, err := mediator.Send(context.Background(), m, &CreateUser{})
	var ve *validation.Error
	if !errors.As(err, &ve) || !errors.Is(err, validation.ErrInvalid) || calls != 0 ||
		err.Error() != "validation: invalid *validation_test.CreateUser: name is required" {
		t.Fatal(err, calls)
	}
	if id, err := mediator.Send(context.Background(), m, &CreateUser{Name: "ada"}); err != nil || id != 7 {
		t.Fatal(id, err)
	}
	ctx := context.WithValue(context.Background(), ctxKey{}, 100)
	if _, err := mediator.Send(ctx, m, &Transfer{Amount: 500}); !errors.Is(err, validation.ErrInvalid) {
		t.Fatal(err)
	}
	if _, err := mediator.Send(ctx, m, &Transfer{Amount: 50}); err != nil {
		t.Fatal(err)
	}
	chain, _ := mediator.Explain[*CreateUser](m)
	if chain.String() != "validation (pre, 100)\n  retry (default, 50)\n    handler\n" {
		t.Fatal(chain)
	}
	if chain, _ := mediator.Explain[*Call](m); chain[0].Name != "retry" {
		t.Fatal("validation applied to a type without Validate", chain)
	}
}

// A handler's own validation error is not retried either.
func TestValidationErrorFromHandlerNotRetried(t *testing.T) {
	m, s, _ := retrying(t, retry.Config{Policy: retry.Policy{MaxAttempts: 3, Classifier: func(error) bool { return true }}},
		&validation.Error{Err: errBoom})
	if _, err := mediator.Send(context.Background(), m, &Call{}); !errors.Is(err, errBoom) || s.Calls != 1 {
		t.Fatal(err, s.Calls)
	}
}

// retrying builds a mediator with a retry behavior of cfg over a scripted handler.
func retrying(t *testing.T, cfg retry.Config, results ...error) (*mediator.Mediator, *script, *[]int) {
	t.Helper()
	s := &script{Results: results}
	var attempts []int
	m := build(t, func(ctx context.Context, q *Call) (*Reply, error) {
		attempts = append(attempts, retry.AttemptNumber(ctx))
		return s.Handle(ctx, q)
	}, retry.New(cfg))
	return m, s, &attempts
}
