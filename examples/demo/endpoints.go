package main

import (
	"context"
	"fmt"
	"io"
	"math"
	"net"
	"net/http"
	"sync"
	"sync/atomic"
	"time"
)

// endpoint is one remote service the dispatcher sends to, served on loopback by this program.
// Its answers depend on how far the run has come, so a run of any length shows every phase.
type endpoint struct {
	name  string
	about string // what it does, for the start screen
	url   string
	// fail answers hit (counted from 1) at done, the fraction of the run done, when the
	// endpoint fails it, and reports whether it did; the endpoint accepts the others.
	fail func(w http.ResponseWriter, r *http.Request, hit int64, done float64) bool
	hits atomic.Int64
	done func() float64 // the fraction of the run done: 0 at its start, 1 at its end

	mu       sync.Mutex
	accepted map[string]int // deliveries answered 2xx, by Delivery-Id, and how often
}

// deliveries counts the distinct deliveries the endpoint accepted and those it accepted more
// than once: again, after an attempt that got no answer (unanswered says which), and twice,
// without one. It is the endpoint's own view, which the summary checks its accounting against.
func (e *endpoint) deliveries(unanswered func(id string) bool) (distinct, again, twice int) {
	e.mu.Lock()
	defer e.mu.Unlock()
	for id, n := range e.accepted {
		switch {
		case n > 1 && unanswered(id):
			again++
		case n > 1:
			twice++
		}
	}
	return len(e.accepted), again, twice
}

func (e *endpoint) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	// Reading the body to its end lets the server notice a client that hangs up (an attempt
	// that timed out): the request's context ends, and a slow answer is not given to nobody.
	_, _ = io.Copy(io.Discard, io.LimitReader(r.Body, 1<<20))
	if !e.fail(w, r, e.hits.Add(1), e.done()) {
		e.ok(w, r)
	}
}

// ok answers a request the endpoint accepts: a quote to a GET, 204 to a delivery, which it
// records under its Delivery-Id.
func (e *endpoint) ok(w http.ResponseWriter, r *http.Request) {
	if r.Method == http.MethodGet {
		fmt.Fprint(w, "1.0825")
		return
	}
	if key := r.Header.Get("Delivery-Id"); key != "" {
		e.mu.Lock()
		e.accepted[key]++
		e.mu.Unlock()
	}
	w.WriteHeader(http.StatusNoContent)
}

// timings are the moments of a run, as fractions of its duration, and the resilience settings
// scaled to it, so that a 20 s run and a 60 s one show the same story.
type timings struct {
	d time.Duration
}

func (t timings) at(f float64) time.Duration { return time.Duration(float64(t.d) * f) }

// openFor is how long a tripped breaker refuses calls before it lets one probe through: a
// quarter of the run (15 s of the default minute), long enough to watch its countdown.
func (t timings) openFor() time.Duration { return t.at(0.25) }

// maxAge is how long a deferred delivery may wait for its endpoint before it is a dead letter:
// a third of the run, longer than one open period (so what the bursts defer gets through) and
// shorter than the outage (so what the outage defers first dies).
func (t timings) maxAge() time.Duration { return t.at(1.0 / 3) }

// The outage endpoint is down from outageFrom to outageTo of the run; the bursty one fails for
// burstLen of every burstEvery.
const (
	outageFrom  = 0.15
	outageTo    = 0.60
	burstFrom   = 0.05
	burstEvery  = 0.25
	burstLen    = 1.0 / 60
	burstsUntil = 0.70 // no burst starts after, so the bursty endpoint's breaker is closed at the end
	sendUntil   = 0.85 // the requests stop then, so the queue can drain before the summary
	replayAt    = 0.70 // the demo replays part of the outage's dead letters then
)

// newEndpoints returns the five endpoints; slow is how long a slow answer of the slow endpoint
// takes (over the per-attempt timeout).
func newEndpoints(slow time.Duration) []*endpoint {
	wait := func(r *http.Request, d time.Duration) bool {
		t := time.NewTimer(d)
		defer t.Stop()
		select {
		case <-t.C:
			return true
		case <-r.Context().Done():
			return false
		}
	}
	eps := []*endpoint{
		{name: "steady", about: "answers at once; refuses one delivery in 25 with 422 (not retried)",
			fail: func(w http.ResponseWriter, r *http.Request, hit int64, _ float64) bool {
				if r.Method == http.MethodPost && hit%25 == 0 {
					http.Error(w, "unknown account", http.StatusUnprocessableEntity)
					return true
				}
				return false
			}},
		{name: "slow", about: "takes 20 ms; one answer in 6 takes " + slow.String() + ", past the attempt timeout",
			fail: func(w http.ResponseWriter, r *http.Request, hit int64, _ float64) bool {
				d := 20 * time.Millisecond
				if hit%6 == 0 {
					d = slow
				}
				return !wait(r, d) // a caller gone gets no answer
			}},
		{name: "bursty", about: "fails in bursts with 503 and Retry-After: 1",
			fail: func(w http.ResponseWriter, r *http.Request, _ int64, done float64) bool {
				if p := done - burstFrom; p >= 0 && p-burstEvery*math.Floor(p/burstEvery) < burstLen && done < burstsUntil {
					w.Header().Set("Retry-After", "1")
					http.Error(w, "overloaded", http.StatusServiceUnavailable)
					return true
				}
				return false
			}},
		{name: "resets", about: "resets the connection of one request in 4",
			fail: func(w http.ResponseWriter, r *http.Request, hit int64, _ float64) bool {
				if hit%4 == 1 {
					reset(w)
					return true
				}
				return false
			}},
		{name: "outage", about: fmt.Sprintf("down (503) from %.0f%% to %.0f%% of the run, then back", outageFrom*100, outageTo*100),
			fail: func(w http.ResponseWriter, r *http.Request, _ int64, done float64) bool {
				if done >= outageFrom && done < outageTo {
					http.Error(w, "down for maintenance", http.StatusServiceUnavailable)
					return true
				}
				return false
			}},
	}
	for _, e := range eps {
		e.accepted = map[string]int{}
	}
	return eps
}

// reset closes the request's connection with a TCP reset, as a crashing server or a middlebox
// does: the client sees "connection reset by peer", a transport error.
func reset(w http.ResponseWriter) {
	hj, ok := w.(http.Hijacker)
	if !ok {
		http.Error(w, "cannot reset", http.StatusInternalServerError)
		return
	}
	conn, _, err := hj.Hijack()
	if err != nil {
		return
	}
	if tc, ok := conn.(*net.TCPConn); ok {
		_ = tc.SetLinger(0)
	}
	_ = conn.Close()
}

// listen serves h on a free loopback port; it returns the base URL and the function that stops
// it.
func listen(addr string, h http.Handler) (string, func(), error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return "", nil, err
	}
	srv := &http.Server{Handler: h, ReadHeaderTimeout: 5 * time.Second}
	served := make(chan struct{})
	go func() {
		defer close(served)
		_ = srv.Serve(ln)
	}()
	return "http://" + ln.Addr().String() + "/", func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		if srv.Shutdown(ctx) != nil {
			_ = srv.Close()
		}
		<-served
	}, nil
}
