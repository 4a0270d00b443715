package httpcall_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/switchboard-go/switchboard/behaviors"
	"github.com/switchboard-go/switchboard/behaviors/breaker"
	"github.com/switchboard-go/switchboard/behaviors/bulkhead"
	"github.com/switchboard-go/switchboard/behaviors/retry"
	"github.com/switchboard-go/switchboard/behaviors/timeout"
	"github.com/switchboard-go/switchboard/behaviors/validation"
	"github.com/switchboard-go/switchboard/durable"
	"github.com/switchboard-go/switchboard/httpcall"
	"github.com/switchboard-go/switchboard/mediator"
)

// secret is text that no answer but a 422 may show: downstreams' bodies, URLs, internal errors.
const secret = "hunter2"

type deliver struct{ mediator.Returns[string] }

// answer is what WriteError wrote, or that it wrote nothing.
type answer struct {
	wrote      bool
	code       int
	retryAfter string // "" for none
	body       string
}

func writeAnswer(t *testing.T, ctx context.Context, err error) answer {
	t.Helper()
	w := httptest.NewRecorder()
	r := httptest.NewRequestWithContext(ctx, http.MethodPost, "/events", nil)
	wrote := httpcall.WriteError(w, r, err)
	if !wrote {
		if w.Body.Len() != 0 || len(w.Header()) != 0 || w.Code != http.StatusOK {
			t.Errorf("WriteError reported false but wrote %d %v %q", w.Code, w.Header(), w.Body)
		}
		return answer{}
	}
	if ct := w.Header().Get("Content-Type"); ct != "application/json" {
		t.Errorf("Content-Type %q, want application/json", ct)
	}
	return answer{true, w.Code, w.Header().Get("Retry-After"), strings.TrimSpace(w.Body.String())}
}

func TestWriteErrorAnswersEachOutcome(t *testing.T) {
	deferred := &durable.DeferredError{ItemID: 42, Token: "t", Cause: errors.New("503 from " + secret)}
	open := func(d time.Duration) error {
		return &breaker.OpenError{Key: "https://hooks.example.com:443", Remaining: d}
	}
	invalid := &validation.Error{Request: reflect.TypeFor[*deliver](), Err: errors.New("url is required")}
	downstream := &httpcall.StatusError{Code: 502, Method: "POST", URL: "https://hooks.example.com/" + secret, Body: []byte(secret)}
	tripped := &breaker.TrippedError{Key: "https://hooks.example.com:443", Remaining: 30 * time.Second, Err: downstream}
	gone, cancel := context.WithCancel(context.Background())
	cancel()
	expired, cancel2 := context.WithDeadline(context.Background(), time.Unix(1, 0))
	defer cancel2()
	unavailable := answer{true, 503, "", `{"error":"Service Unavailable"}`}
	internal := answer{true, 500, "", `{"error":"Internal Server Error"}`}

	for _, tc := range []struct {
		name string
		ctx  context.Context // the inbound request's; nil: a live one
		err  error
		want answer
	}{
		{"nil", nil, nil, answer{}},
		{"deferred", nil, deferred, answer{true, 202, "", `{"id":"42"}`}},
		{"deferred duplicate", nil, &durable.DeferredError{ItemID: 7, Duplicate: true}, answer{true, 202, "", `{"id":"7"}`}},
		{"deferred wrapped", nil, fmt.Errorf("deliver: %w", deferred), answer{true, 202, "", `{"id":"42"}`}},
		{"deferred joined", nil, errors.Join(errors.New(secret), deferred), answer{true, 202, "", `{"id":"42"}`}},
		{"validation", nil, invalid, answer{true, 422, "", `{"error":"url is required"}`}},
		{"validation wrapped", nil, fmt.Errorf("deliver %s: %w", secret, invalid), answer{true, 422, "", `{"error":"url is required"}`}},
		{"validation sentinel", nil, fmt.Errorf("%s: %w", secret, validation.ErrInvalid), answer{true, 422, "", `{"error":"invalid request"}`}},
		{"validation of an outbound Call", nil, &validation.Error{Request: reflect.TypeFor[*httpcall.Call](), Err: errors.New(secret)}, internal},
		{"open breaker", nil, open(1200 * time.Millisecond), answer{true, 503, "2", `{"error":"Service Unavailable"}`}},
		{"open breaker, whole seconds", nil, open(time.Second), answer{true, 503, "1", `{"error":"Service Unavailable"}`}},
		{"open breaker, under a second", nil, open(time.Nanosecond), answer{true, 503, "1", `{"error":"Service Unavailable"}`}},
		{"half-open breaker, probes taken", nil, open(0), unavailable},
		{"open breaker of an inner call", nil, &url.Error{Op: "Post", URL: "https://hooks.example.com/" + secret, Err: open(90 * time.Second)}, answer{true, 503, "90", `{"error":"Service Unavailable"}`}},
		{"full bulkhead", nil, &bulkhead.FullError{Key: "k", Limit: 4}, unavailable},
		{"tripped", nil, tripped, answer{true, 503, "30", `{"error":"Service Unavailable"}`}},
		{"exhausted over a refusal", nil, &retry.ExhaustedError{Attempts: 2, Err: open(5 * time.Second)}, answer{true, 503, "5", `{"error":"Service Unavailable"}`}},
		{"downstream's Retry-After", nil, &httpcall.StatusError{Code: 503, Body: []byte(secret), Hint: 10 * time.Second}, answer{true, 503, "10", `{"error":"Service Unavailable"}`}},
		{"refusal joined with a timeout", nil, errors.Join(context.DeadlineExceeded, open(2*time.Second)), answer{true, 503, "2", `{"error":"Service Unavailable"}`}},
		{"deadline", nil, fmt.Errorf("post: %w", context.DeadlineExceeded), answer{true, 504, "", `{"error":"Gateway Timeout"}`}},
		{"timeout behavior", nil, &timeout.ExceededError{Duration: time.Second, Err: errors.New(secret)}, answer{true, 504, "", `{"error":"Gateway Timeout"}`}},
		{"cancelled, client still there", nil, fmt.Errorf("shutting down: %w", context.Canceled), unavailable},
		{"client gone", gone, context.Canceled, answer{}},
		{"client gone, other error", gone, open(time.Second), answer{}},
		{"client gone, deferred", gone, deferred, answer{}},
		{"client's deadline", expired, context.DeadlineExceeded, answer{}},
		{"no handler", nil, &mediator.NoHandlerError{Type: reflect.TypeFor[*deliver](), Kind: "request"}, internal},
		{"downstream failure", nil, downstream, internal},
		{"other", nil, errors.New(secret), internal},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx := tc.ctx
			if ctx == nil {
				ctx = context.Background()
			}
			got := writeAnswer(t, ctx, tc.err)
			if got != tc.want {
				t.Errorf("WriteError(%v) wrote %+v, want %+v", tc.err, got, tc.want)
			}
			if strings.Contains(got.body, secret) {
				t.Errorf("the body %q shows the error's text", got.body)
			}
			if tc.ctx != nil || tc.err == nil {
				return
			}
			code, header := httpcall.StatusOf(tc.err)
			if code != got.code || header.Get("Retry-After") != got.retryAfter {
				t.Errorf("StatusOf = %d %v; WriteError wrote %d Retry-After %q", code, header, got.code, got.retryAfter)
			}
		})
	}
}

func TestStatusOfNil(t *testing.T) {
	if code, header := httpcall.StatusOf(nil); code != 0 || header != nil {
		t.Errorf("StatusOf(nil) = %d %v, want 0 nil", code, header)
	}
}

// A retried call whose first attempt reached the handler and failed, and whose next attempt
// a breaker opened meanwhile refused, is not a refusal (behaviors.IsRefusal): the dependency
// was called and failed. It still says when to try again, the breaker's open time, and is
// answered 503 with it.
func TestWriteErrorRetriedIntoAnOpenBreaker(t *testing.T) {
	clock := newFakeClock()
	reg := breaker.NewRegistry(breaker.Config{OpenDuration: 20 * time.Second, Clock: clock})
	m := mediator.New(nil, mediator.Config{})
	mediator.HandleFunc(m, func(context.Context, *deliver) (string, error) {
		if err := reg.Trip(behaviors.TypeKey(reflect.TypeFor[*deliver]())); err != nil { // as other calls' failures would
			t.Error(err)
		}
		return "", &httpcall.StatusError{Code: 502, Body: []byte(secret)}
	})
	m.Use(retry.New(retry.Config{Policy: retry.Policy{MaxAttempts: 3, BaseDelay: time.Millisecond}, Clock: clock}))
	m.Use(breaker.New(reg))
	if err := m.Build(); err != nil {
		t.Fatal(err)
	}
	_, err := mediator.Send(context.Background(), m, &deliver{})
	if !errors.Is(err, breaker.ErrOpen) || behaviors.IsRefusal(err) {
		t.Fatalf("Send: %v (a refusal: %v), want an exhausted call ending on the open breaker, not a refusal", err, behaviors.IsRefusal(err))
	}
	got := writeAnswer(t, context.Background(), err)
	if want := (answer{true, 503, "20", `{"error":"Service Unavailable"}`}); got != want {
		t.Errorf("WriteError wrote %+v, want %+v", got, want)
	}
}

// WriteError adds its headers to those the handler set, and StatusOf's header is nil when the
// answer has none.
func TestWriteErrorKeepsTheHandlersHeaders(t *testing.T) {
	w := httptest.NewRecorder()
	w.Header().Set("X-Request-Id", "r-1")
	r := httptest.NewRequest(http.MethodPost, "/events", nil)
	if !httpcall.WriteError(w, r, &breaker.OpenError{Key: "k", Remaining: 3 * time.Second}) {
		t.Fatal("WriteError wrote nothing")
	}
	if w.Header().Get("X-Request-Id") != "r-1" || w.Header().Get("Retry-After") != "3" {
		t.Errorf("headers %v", w.Header())
	}
	if _, header := httpcall.StatusOf(errors.New("x")); header != nil {
		t.Errorf("StatusOf's header for a 500: %v, want nil", header)
	}
}
