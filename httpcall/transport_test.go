package httpcall_test

import (
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/switchboard-go/switchboard/behaviors"
	"github.com/switchboard-go/switchboard/behaviors/breaker"
	"github.com/switchboard-go/switchboard/behaviors/retry"
	"github.com/switchboard-go/switchboard/behaviors/timeout"
	"github.com/switchboard-go/switchboard/behaviors/validation"
	"github.com/switchboard-go/switchboard/httpcall"
	"github.com/switchboard-go/switchboard/mediator"
)

// fakeClock is a behaviors.Clock whose waits end at once: it records each one and moves its
// time on by it, so that tests check delays without spending them.
type fakeClock struct {
	mu    sync.Mutex
	now   time.Time
	waits []time.Duration
}

func newFakeClock() *fakeClock { return &fakeClock{now: time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)} }

func (c *fakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *fakeClock) After(d time.Duration) (<-chan time.Time, func() bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.waits = append(c.waits, d)
	c.now = c.now.Add(d)
	ch := make(chan time.Time, 1)
	ch <- c.now
	return ch, func() bool { return false }
}

func (c *fakeClock) Waits() []time.Duration {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]time.Duration(nil), c.waits...)
}

// client registers the handler of *Call with a fresh base transport and the behaviors, builds,
// and returns the mediator and an http.Client whose transport sends through it.
func client(t *testing.T, bs ...mediator.Behavior) (*mediator.Mediator, *http.Client) {
	t.Helper()
	base := &http.Transport{}
	t.Cleanup(base.CloseIdleConnections)
	m := mediator.New(nil, mediator.Config{})
	httpcall.Register(m, base)
	for _, b := range bs {
		m.Use(b)
	}
	if err := m.Build(); err != nil {
		t.Fatal(err)
	}
	return m, &http.Client{Transport: httpcall.NewTransport(m, httpcall.Config{})}
}

// server starts an httptest server whose handler is h and counts its calls.
func server(t *testing.T, h func(n int64, w http.ResponseWriter, r *http.Request)) (*httptest.Server, *atomic.Int64) {
	t.Helper()
	var calls atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h(calls.Add(1), w, r)
	}))
	t.Cleanup(srv.Close)
	return srv, &calls
}

func get(t *testing.T, c *http.Client, url string) (string, error) {
	t.Helper()
	resp, err := c.Get(url)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return string(b), err
}

func TestRetryAfterIsHonoured(t *testing.T) {
	srv, calls := server(t, func(n int64, w http.ResponseWriter, _ *http.Request) {
		if n == 1 {
			w.Header().Set("Retry-After", "1")
			w.WriteHeader(http.StatusServiceUnavailable)
			io.WriteString(w, "busy")
			return
		}
		io.WriteString(w, "ok")
	})
	clock := newFakeClock()
	_, c := client(t, retry.New(retry.Config{Policy: retry.Policy{MaxAttempts: 3}, Clock: clock}))
	body, err := get(t, c, srv.URL)
	if err != nil || body != "ok" {
		t.Fatalf("got %q, %v", body, err)
	}
	if calls.Load() != 2 {
		t.Errorf("%d calls, want 2", calls.Load())
	}
	// The server's 1 s wins over the policy's default 500 ms.
	if w := clock.Waits(); len(w) != 1 || w[0] != time.Second {
		t.Errorf("waits %v, want [1s]", w)
	}
}

func TestErrorStatusReachesTheClientAsStatusError(t *testing.T) {
	srv, calls := server(t, func(_ int64, w http.ResponseWriter, _ *http.Request) {
		w.WriteHeader(http.StatusBadGateway)
	})
	_, c := client(t, retry.New(retry.Config{Policy: retry.Policy{MaxAttempts: 2}, Clock: newFakeClock()}))
	_, err := get(t, c, srv.URL+"/x?token=secret")
	se, ok := errors.AsType[*httpcall.StatusError](err)
	if !ok || se.Code != 502 || !errors.Is(err, retry.ErrExhausted) {
		t.Fatalf("err %v, want an exhausted retry of a 502 StatusError", err)
	}
	if strings.Contains(se.Error(), "secret") {
		t.Errorf("%q carries the query", se.Error())
	}
	if calls.Load() != 2 {
		t.Errorf("%d calls, want 2", calls.Load())
	}
}

func TestNotFoundIsAResponse(t *testing.T) {
	srv, calls := server(t, func(_ int64, w http.ResponseWriter, _ *http.Request) {
		http.Error(w, "no such quote", http.StatusNotFound)
	})
	_, c := client(t, retry.New(retry.Config{Policy: retry.Policy{MaxAttempts: 3}, Clock: newFakeClock()}))
	resp, err := c.Get(srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 404 || calls.Load() != 1 {
		t.Errorf("status %d after %d calls, want 404 after 1", resp.StatusCode, calls.Load())
	}
}

func TestTransportErrorsAreRetriedWhenThePolicySaysSo(t *testing.T) {
	for _, tc := range []struct {
		name  string
		serve func(net.Conn)
	}{
		{"reset", func(c net.Conn) {
			readRequest(c)
			c.(*net.TCPConn).SetLinger(0)
			c.Close()
		}},
		{"closed before a response", func(c net.Conn) { readRequest(c); c.Close() }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			for _, on := range []behaviors.Switch{behaviors.Off, behaviors.On} {
				var conns atomic.Int64
				url := rawServer(t, func(c net.Conn) { conns.Add(1); tc.serve(c) })
				_, c := client(t, retry.New(retry.Config{
					Policy: retry.Policy{MaxAttempts: 3, RetryOnTransport: on},
					Clock:  newFakeClock(),
				}))
				_, err := get(t, c, url)
				if !behaviors.IsTransport(err) {
					t.Errorf("RetryOnTransport %s: %v is not a transport error", on, err)
				}
				want := int64(1)
				if on == behaviors.On {
					want = 3
				}
				if got := conns.Load(); got != want {
					t.Errorf("RetryOnTransport %s: %d attempts, want %d", on, got, want)
				}
			}
		})
	}
}

func TestHungServerTimesOutAndCountsForTheBreaker(t *testing.T) {
	release := make(chan struct{})
	srv, calls := server(t, func(_ int64, w http.ResponseWriter, r *http.Request) {
		select {
		case <-r.Context().Done():
		case <-release:
		}
	})
	t.Cleanup(func() { close(release) }) // runs before srv.Close
	reg := breaker.NewRegistry(breaker.Config{Key: httpcall.Authority, FailureThreshold: 1, Clock: newFakeClock()})
	_, c := client(t,
		retry.New(retry.Config{Policy: retry.Policy{MaxAttempts: 3}, Clock: newFakeClock()}),
		breaker.New(reg),
		timeout.New(timeout.Config{Duration: 50 * time.Millisecond}),
	)
	_, err := get(t, c, srv.URL)
	if !errors.Is(err, timeout.ErrExceeded) || !behaviors.IsTimeout(err) {
		t.Fatalf("err %v, want a timeout", err)
	}
	if calls.Load() != 1 {
		t.Errorf("%d calls, want 1 (timeouts are not retried by default)", calls.Load())
	}
	snap, err := reg.Get(httpcall.Authority(callTo(t, srv.URL)))
	if err != nil || snap.State != breaker.StateOpen {
		t.Errorf("breaker %+v, %v; want open", snap, err)
	}
	_, err = get(t, c, srv.URL)
	if !errors.Is(err, breaker.ErrOpen) || calls.Load() != 1 {
		t.Errorf("err %v after %d calls, want a refusal without a call", err, calls.Load())
	}
}

func callTo(t *testing.T, url string) *httpcall.Call {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	return &httpcall.Call{Request: req}
}

func TestBreakerIsKeyedByHost(t *testing.T) {
	a, callsA := server(t, func(_ int64, w http.ResponseWriter, _ *http.Request) {
		w.WriteHeader(http.StatusServiceUnavailable)
	})
	b, callsB := server(t, func(_ int64, w http.ResponseWriter, _ *http.Request) { io.WriteString(w, "b") })
	reg := breaker.NewRegistry(breaker.Config{Key: httpcall.Authority, FailureThreshold: 2, Clock: newFakeClock()})
	_, c := client(t, breaker.New(reg))
	for range 2 {
		if _, err := get(t, c, a.URL+"/quotes"); !errors.Is(err, httpcall.ErrStatus) {
			t.Fatalf("A: %v, want a status error", err)
		}
	}
	if _, err := get(t, c, a.URL+"/other/path"); !errors.Is(err, breaker.ErrOpen) {
		t.Errorf("A after two failures: %v, want its breaker open", err)
	}
	if body, err := get(t, c, b.URL); err != nil || body != "b" {
		t.Errorf("B: %q, %v; want its answer", body, err)
	}
	if callsA.Load() != 2 || callsB.Load() != 1 {
		t.Errorf("calls A %d, B %d; want 2 and 1", callsA.Load(), callsB.Load())
	}
	states := map[string]breaker.State{}
	for _, s := range reg.Snapshot() {
		states[s.Key] = s.State
	}
	keyA, keyB := httpcall.Authority(callTo(t, a.URL)), httpcall.Authority(callTo(t, b.URL))
	if states[keyA] != breaker.StateOpen || states[keyB] != breaker.StateClosed || len(states) != 2 {
		t.Errorf("breakers %v; want %s open and %s closed", states, keyA, keyB)
	}

	// A refused request's body is closed, as the RoundTripper contract asks.
	body := &trackedBody{r: strings.NewReader("payload")}
	req, _ := http.NewRequest(http.MethodPost, a.URL, body)
	if _, err := c.Do(req); !errors.Is(err, breaker.ErrOpen) || !body.closed {
		t.Errorf("refused POST: %v, body closed %v; want a refusal and a closed body", err, body.closed)
	}
}

func TestBodiesAreReplayedOrSentOnce(t *testing.T) {
	var mu sync.Mutex
	var bodies []string
	srv, calls := server(t, func(n int64, w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		mu.Lock()
		bodies = append(bodies, string(b))
		mu.Unlock()
		if n%2 == 1 {
			w.WriteHeader(http.StatusServiceUnavailable)
		}
	})
	_, c := client(t, retry.New(retry.Config{Policy: retry.Policy{MaxAttempts: 3}, Clock: newFakeClock()}))

	// GetBody is nil: the body cannot be replayed, so the request is sent once.
	req, _ := http.NewRequest(http.MethodPost, srv.URL, io.NopCloser(strings.NewReader("once")))
	_, err := c.Do(req)
	if se, ok := errors.AsType[*httpcall.StatusError](err); !ok || se.Code != 503 || errors.Is(err, retry.ErrExhausted) {
		t.Errorf("non-replayable POST: %v; want the 503 of one attempt", err)
	}
	if calls.Load() != 1 {
		t.Errorf("non-replayable POST: %d calls, want 1", calls.Load())
	}

	// A strings.Reader body has GetBody: the retry sends the same body again.
	calls.Store(0)
	mu.Lock()
	bodies = nil
	mu.Unlock()
	req, _ = http.NewRequest(http.MethodPost, srv.URL, strings.NewReader("twice"))
	resp, err := c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	mu.Lock()
	defer mu.Unlock()
	if calls.Load() != 2 || len(bodies) != 2 || bodies[0] != "twice" || bodies[1] != "twice" {
		t.Errorf("replayable POST: %d calls with bodies %q; want 2 with the same body", calls.Load(), bodies)
	}
}

func TestCallerCancellationIsNotRetriedNorCounted(t *testing.T) {
	arrived := make(chan struct{}, 1)
	srv, calls := server(t, func(_ int64, w http.ResponseWriter, r *http.Request) {
		arrived <- struct{}{}
		<-r.Context().Done()
	})
	reg := breaker.NewRegistry(breaker.Config{Key: httpcall.Authority, FailureThreshold: 1, Clock: newFakeClock()})
	_, c := client(t,
		retry.New(retry.Config{Policy: retry.Policy{MaxAttempts: 3, RetryOnTimeout: behaviors.On, RetryOnTransport: behaviors.On}, Clock: newFakeClock()}),
		breaker.New(reg),
		timeout.New(timeout.Config{Duration: time.Hour}),
	)
	ctx, cancel := context.WithCancel(context.Background())
	go func() {
		<-arrived
		cancel()
	}()
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, srv.URL, nil)
	_, err := c.Do(req)
	if !errors.Is(err, context.Canceled) || errors.Is(err, timeout.ErrExceeded) {
		t.Errorf("err %v, want the caller's cancellation", err)
	}
	if calls.Load() != 1 {
		t.Errorf("%d calls, want 1", calls.Load())
	}
	if snap, err := reg.Get(httpcall.Authority(callTo(t, srv.URL))); err != nil || snap.State != breaker.StateClosed || snap.Failures != 0 {
		t.Errorf("breaker %+v, %v; want closed with no failure", snap, err)
	}
}

func TestBodyOutlivesTheAttemptTimeout(t *testing.T) {
	headers := make(chan struct{})
	rest := make(chan struct{})
	srv, _ := server(t, func(_ int64, w http.ResponseWriter, r *http.Request) {
		io.WriteString(w, "first ")
		w.(http.Flusher).Flush()
		close(headers)
		<-rest
		io.WriteString(w, "second")
	})
	_, c := client(t, timeout.New(timeout.Config{Duration: time.Hour}))
	resp, err := c.Get(srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	<-headers
	// The per-attempt context of the timeout behavior is gone: the pipeline has returned.
	close(rest)
	b, err := io.ReadAll(resp.Body)
	if err != nil || string(b) != "first second" {
		t.Errorf("body %q, %v; want the whole body", b, err)
	}
}

func TestCallerCancellationEndsTheBody(t *testing.T) {
	srv, _ := server(t, func(_ int64, w http.ResponseWriter, r *http.Request) {
		io.WriteString(w, "first ")
		w.(http.Flusher).Flush()
		<-r.Context().Done()
	})
	_, c := client(t, timeout.New(timeout.Config{Duration: time.Hour}))
	ctx, cancel := context.WithCancel(context.Background())
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, srv.URL, nil)
	resp, err := c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	buf := make([]byte, 6)
	if _, err := io.ReadFull(resp.Body, buf); err != nil {
		t.Fatal(err)
	}
	cancel()
	if _, err := io.ReadAll(resp.Body); !errors.Is(err, context.Canceled) {
		t.Errorf("read after cancel: %v, want context.Canceled", err)
	}
}

func TestSecondAttemptOfANonReplayableCallIsRefused(t *testing.T) {
	srv, calls := server(t, func(_ int64, w http.ResponseWriter, _ *http.Request) {
		w.WriteHeader(http.StatusServiceUnavailable)
	})
	// Sent directly, without the mark the Transport sets: the handler refuses the second attempt.
	m, _ := client(t, retry.New(retry.Config{Policy: retry.Policy{MaxAttempts: 3}, Clock: newFakeClock()}))
	req, _ := http.NewRequest(http.MethodPost, srv.URL, io.NopCloser(strings.NewReader("once")))
	_, err := mediator.Send(context.Background(), m, &httpcall.Call{Request: req})
	if calls.Load() != 1 || !errors.Is(err, validation.ErrInvalid) {
		t.Errorf("%d calls, err %v; want 1 call and a refused second attempt", calls.Load(), err)
	}
}
