package behaviors_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/url"
	"os"
	"syscall"
	"testing"
	"time"

	"github.com/switchboard-go/switchboard/behaviors"
	"github.com/switchboard-go/switchboard/behaviors/breaker"
	"github.com/switchboard-go/switchboard/behaviors/bulkhead"
	"github.com/switchboard-go/switchboard/behaviors/retry"
	"github.com/switchboard-go/switchboard/behaviors/validation"
	"github.com/switchboard-go/switchboard/mediator"
)

func TestRetryable(t *testing.T) {
	for _, tc := range []struct {
		err  error
		want bool
	}{
		{nil, false},
		{errBoom, false},
		{&transientErr{Msg: "x"}, true},
		{fmt.Errorf("wrapped: %w", &statusErr{Code: 503}), true},
		{&statusErr{Code: 429}, true},
		{&statusErr{Code: 502}, true},
		{&statusErr{Code: 504}, true},
		{&statusErr{Code: 500}, false},
		{context.Canceled, false},
		{context.DeadlineExceeded, false},
		{&validation.Error{Err: &transientErr{Msg: "x"}}, false},
		{fmt.Errorf("%w", mediator.ErrNoHandler), false},
		{&breaker.OpenError{}, false},
	} {
		if got := behaviors.Retryable(tc.err); got != tc.want {
			t.Errorf("Retryable(%v) = %v", tc.err, got)
		}
	}
}

func TestIsTransport(t *testing.T) {
	for _, c := range []struct {
		err  error
		want bool
	}{
		{&net.OpError{Op: "dial", Err: os.NewSyscallError("connect", syscall.ECONNREFUSED)}, true},
		{fmt.Errorf("read: %w", syscall.ECONNRESET), true},
		{io.ErrUnexpectedEOF, true},
		{&url.Error{Op: "Post", URL: "http://x", Err: io.EOF}, true},
		{io.EOF, false}, // end of a stream, not a broken connection
		{&net.DNSError{Err: "server misbehaving", IsTemporary: true}, true},
		{&net.DNSError{Err: "no such host", IsNotFound: true}, false},
		{errBoom, false},
		{nil, false},
	} {
		if got := behaviors.IsTransport(c.err); got != c.want {
			t.Errorf("IsTransport(%v) = %v, want %v", c.err, got, c.want)
		}
	}
}

// Refused tells a refusal of the request itself (its breaker, its bulkhead: the handler never
// ran) from a refusal its handler met sending another request and returned (the handler ran).
func TestRefusedNamesTheRequestRefused(t *testing.T) {
	reg := breaker.NewRegistry(breaker.Config{Key: endpointKey})
	var innerErr error
	var m *mediator.Mediator
	m = mediator.New(nil, mediator.Config{})
	mediator.HandleFunc(m, func(ctx context.Context, q *Call) (*Reply, error) {
		if q.Endpoint == "outer" {
			_, innerErr = mediator.Send(ctx, m, &Call{Endpoint: "inner"})
			return nil, innerErr
		}
		return &Reply{}, nil
	})
	m.Use(breaker.New(reg))
	if err := m.Build(); err != nil {
		t.Fatal(err)
	}
	// Create both breakers, then open the inner one.
	for _, e := range []string{"inner"} {
		if _, err := mediator.Send(context.Background(), m, &Call{Endpoint: e}); err != nil {
			t.Fatal(err)
		}
	}
	if err := reg.Trip("inner"); err != nil {
		t.Fatal(err)
	}
	outer := &Call{Endpoint: "outer"}
	_, err := mediator.Send(context.Background(), m, outer)
	if !errors.Is(err, breaker.ErrOpen) || behaviors.Refused(err, outer) {
		t.Fatalf("outer's handler ran and returned the inner refusal %v; Refused says %v", err, behaviors.Refused(err, outer))
	}
	inner := &Call{Endpoint: "inner"}
	if _, err := mediator.Send(context.Background(), m, inner); !behaviors.Refused(err, inner) || behaviors.Refused(err, outer) {
		t.Fatalf("inner refusal %v", err)
	}
	if behaviors.Refused(&breaker.OpenError{}, inner) || behaviors.Refused(errBoom, inner) || behaviors.Refused(nil, inner) {
		t.Fatal("a refusal without a request, or no refusal, is not inner's")
	}

	// A full bulkhead refuses its own request.
	release := make(chan struct{})
	entered := make(chan struct{})
	bm := build(t, func(ctx context.Context, q *Call) (*Reply, error) {
		if q.Endpoint == "hold" {
			close(entered)
			<-release
		}
		return &Reply{}, nil
	}, bulkhead.New(bulkhead.Config{Limit: 1}))
	done := make(chan struct{})
	go func() {
		defer close(done)
		_, _ = mediator.Send(context.Background(), bm, &Call{Endpoint: "hold"})
	}()
	<-entered
	second := &Call{}
	_, err = mediator.Send(context.Background(), bm, second)
	close(release)
	<-done
	if !errors.Is(err, bulkhead.ErrFull) || !behaviors.Refused(err, second) {
		t.Fatalf("bulkhead refusal %v", err)
	}
}

// A retried call whose earlier attempts reached the handler and whose last attempt met an open
// breaker was made: it is a failure, not a refusal, for observers and the durable scheduler.
func TestRetriedCallRefusedLastIsNotARefusal(t *testing.T) {
	reg := breaker.NewRegistry(breaker.Config{Key: endpointKey})
	calls := 0
	m := mediator.New(nil, mediator.Config{})
	mediator.HandleFunc(m, func(ctx context.Context, q *Call) (*Reply, error) {
		calls++
		if calls == 2 {
			// Another caller trips the breaker while this call retries.
			if err := reg.Trip(q.Endpoint); err != nil {
				t.Error(err)
			}
		}
		return nil, &statusErr{Code: 503}
	})
	m.Use(retry.New(retry.Config{Policy: retry.Policy{MaxAttempts: 3, BaseDelay: time.Nanosecond}}))
	m.Use(breaker.New(reg))
	if err := m.Build(); err != nil {
		t.Fatal(err)
	}
	req := &Call{Endpoint: "flaky"}
	_, err := mediator.Send(context.Background(), m, req)
	if !errors.Is(err, breaker.ErrOpen) || calls != 2 {
		t.Fatalf("want the third attempt refused after two handler calls; got %v after %d calls", err, calls)
	}
	if behaviors.Refused(err, req) {
		t.Fatalf("Refused(%v) = true, but the handler ran twice", err)
	}
	if got := behaviors.OutcomeOf(context.Background(), req, err); got != behaviors.OutcomeFailed {
		t.Fatalf("OutcomeOf = %q, want %q", got, behaviors.OutcomeFailed)
	}

	// A call every attempt of which was refused is still a refusal.
	only := &Call{Endpoint: "flaky"}
	calls = 0
	_, err = mediator.Send(context.Background(), m, only)
	if calls != 0 || !behaviors.Refused(err, only) {
		t.Fatalf("all attempts refused: calls %d, Refused %v (%v)", calls, behaviors.Refused(err, only), err)
	}
}
