package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/switchboard-go/switchboard/behaviors/breaker"
	"github.com/switchboard-go/switchboard/behaviors/retry"
	"github.com/switchboard-go/switchboard/behaviors/timeout"
	"github.com/switchboard-go/switchboard/httpcall"
	"github.com/switchboard-go/switchboard/mediator"
)

// The client's resilience settings, short so that the program runs in about two seconds.
const (
	attemptTimeout   = 300 * time.Millisecond // per attempt: the slow server takes longer
	failureThreshold = 3                      // consecutive failures that open a host's breaker
	openFor          = 30 * time.Second       // how long an open breaker refuses calls
)

// server is one of the program's loopback servers; answer says how it answers its hit-th
// request.
type server struct {
	name   string
	answer func(w http.ResponseWriter, r *http.Request, hit int)
	hits   atomic.Int32
	srv    *httptest.Server
}

func (s *server) start() {
	s.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s.answer(w, r, int(s.hits.Add(1)))
	}))
}

// call is what became of one GET.
type call struct {
	server *server
	err    error
	body   string
	took   time.Duration
	hits   int32 // requests the server got for this call
}

// result is what the test checks: every call, in order.
type result struct{ calls []call }

func run(ctx context.Context, out io.Writer) (*result, error) {
	quit := make(chan struct{}) // ends the slow server's handler, whatever the client does
	flaky := &server{name: "flaky", answer: func(w http.ResponseWriter, _ *http.Request, hit int) {
		if hit == 1 {
			w.Header().Set("Retry-After", "1") // seconds
			w.WriteHeader(http.StatusServiceUnavailable)
			return
		}
		fmt.Fprint(w, "rate 1.08")
	}}
	down := &server{name: "down", answer: func(w http.ResponseWriter, _ *http.Request, _ int) {
		w.WriteHeader(http.StatusServiceUnavailable)
	}}
	slow := &server{name: "slow", answer: func(w http.ResponseWriter, r *http.Request, _ int) {
		t := time.NewTimer(5 * time.Second)
		defer t.Stop()
		select { // until the client gives up
		case <-r.Context().Done():
		case <-quit:
		case <-t.C:
			fmt.Fprint(w, "rate 1.09, late")
		}
	}}
	servers := []*server{flaky, down, slow}
	names := map[string]string{} // breaker key → server name
	for _, s := range servers {
		s.start()
		defer s.srv.Close()
		names[httpcall.AuthorityOf(s.srv.URL)] = s.name
		fmt.Fprintf(out, "%-5s server at %s\n", s.name, s.srv.URL)
	}
	defer close(quit) // runs before the servers' Close, which waits for their handlers

	// The observers below run on the goroutine of the call they observe; mu keeps each line
	// whole, should calls ever run side by side.
	var mu sync.Mutex
	say := func(format string, args ...any) {
		mu.Lock()
		defer mu.Unlock()
		fmt.Fprintf(out, format, args...)
	}
	// One breaker per host: httpcall.Authority keys a *Call by scheme, host and port.
	hosts := breaker.NewRegistry(breaker.Config{
		Key: httpcall.Authority, FailureThreshold: failureThreshold, OpenDuration: openFor,
	})

	m := mediator.New(nil, mediator.Config{})
	m.Observe(narrator{say: say, names: names})             // tells the retries and the breakers' changes
	base := http.DefaultTransport.(*http.Transport).Clone() // the round trips: this program's own pool
	defer base.CloseIdleConnections()
	httpcall.Register(m, base)
	m.Use(retry.New(retry.Config{
		// 503 is retried by default; a server's Retry-After wins when it asks for longer than
		// the backoff, up to MaxDelay.
		Policy: retry.Policy{MaxAttempts: 4, BaseDelay: 100 * time.Millisecond, MaxDelay: 2 * time.Second},
	}))
	m.Use(breaker.New(hosts))
	m.Use(timeout.New(timeout.Config{Duration: attemptTimeout}))
	if err := m.Build(); err != nil {
		return nil, err
	}
	defer m.Close()

	client := &http.Client{Transport: httpcall.NewTransport(m, httpcall.Config{})}
	res := &result{}
	get := func(s *server, why string) call {
		say("\nGET %s: %s\n", s.name, why)
		before := s.hits.Load()
		start := time.Now()
		c := call{server: s}
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, s.srv.URL+"/rate", nil)
		if err != nil {
			c.err = err
			return c
		}
		resp, err := client.Do(req)
		if err == nil {
			var b []byte
			b, err = io.ReadAll(resp.Body)
			resp.Body.Close()
			c.body = string(b)
		}
		c.err, c.took, c.hits = err, time.Since(start), s.hits.Load()-before
		if c.err == nil {
			say("  => %s %q after %s, in %s\n", resp.Status, c.body, requests(c.hits), elapsed(c.took))
		} else {
			code, header := httpcall.StatusOf(c.err)
			answer := fmt.Sprint(code)
			if ra := header.Get("Retry-After"); ra != "" {
				answer += " with Retry-After: " + ra
			}
			say("  => failed after %s, in %s: %s\n     an inbound handler would answer %s\n",
				requests(c.hits), elapsed(c.took), describe(c.err), answer)
		}
		res.calls = append(res.calls, c)
		return c
	}

	get(flaky, "503 with Retry-After: 1 first, then 200")
	get(down, "always 503")
	get(down, "again, while its breaker is open")
	get(down, "and once more")
	get(flaky, "works now; its breaker never opened")
	get(slow, "takes longer than the per-attempt timeout")

	say("\nbreakers at the end:\n")
	for _, s := range servers {
		b, err := hosts.Get(httpcall.AuthorityOf(s.srv.URL))
		if err != nil {
			return nil, err
		}
		say("  %-5s %-6s %d consecutive failure(s)\n", s.name, b.State, b.Failures)
	}
	return res, nil
}

// describe says in words what err is, by the types the pipeline's behaviors return.
func describe(err error) string {
	var open *breaker.OpenError
	var tripped *breaker.TrippedError
	var exceeded *timeout.ExceededError
	var exhausted *retry.ExhaustedError
	switch {
	case errors.As(err, &open):
		return fmt.Sprintf("refused by the open breaker (*breaker.OpenError, key %s, a probe in %v)",
			open.Key, open.Remaining.Round(time.Second))
	case errors.As(err, &tripped) && errors.As(err, &exhausted):
		return fmt.Sprintf("%d attempts, the last one opened the breaker, so retry stopped (%v)",
			exhausted.Attempts, shortError(tripped.Err))
	case errors.As(err, &exceeded):
		return fmt.Sprintf("timed out (*timeout.ExceededError after %v; timeouts are retried only with RetryOnTimeout)", exceeded.Duration)
	}
	return err.Error()
}

// requests says how many requests reached a server.
func requests(n int32) string {
	switch n {
	case 0:
		return "no request to the server"
	case 1:
		return "1 request"
	}
	return fmt.Sprintf("%d requests", n)
}

// elapsed rounds a call's duration to a tenth of a second, which is what a reader compares;
// a call shorter than half of that took "under 50ms".
func elapsed(d time.Duration) string {
	if r := d.Round(100 * time.Millisecond); r > 0 {
		return r.String()
	}
	return "under 50ms"
}

// shortError names a server's error status without its URL, which the lines above name.
func shortError(err error) string {
	var se *httpcall.StatusError
	if errors.As(err, &se) {
		if se.Hint > 0 {
			return fmt.Sprintf("%s, Retry-After %v", se.Status, se.Hint)
		}
		return se.Status
	}
	return err.Error()
}

func main() {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := run(ctx, os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
}

// narrator tells what the pipeline does as it happens: an observer of the retries
// (retry.Observer) and of the breakers' state changes (breaker.Observer), attached once to
// the mediator.
type narrator struct {
	say   func(format string, args ...any)
	names map[string]string // the servers' names by breaker key
}

// OnRetry tells a failed attempt and the wait before the next.
func (n narrator) OnRetry(_ context.Context, e retry.Event) {
	n.say("    attempt %d failed (%v); next attempt in %v\n", e.Attempt, shortError(e.Err), e.Delay)
}

// OnStateChange tells a breaker's change.
func (n narrator) OnStateChange(c breaker.StateChange) {
	n.say("    breaker of %s: %s -> %s (%s)\n", n.names[c.Key], c.From, c.To, c.Reason)
}
