package hedge_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/switchboard-go/switchboard/behaviors/hedge"
	"github.com/switchboard-go/switchboard/mediator"
)

// Fetch is an idempotent GET of a loopback endpoint.
type Fetch struct {
	mediator.Returns[int]
	URL string
}

// The acceptance of hedging: a loopback HTTP endpoint whose every 20th request takes 200ms
// (the others about a millisecond) is called with and without hedging in one run. The hedged
// p99 (with a fixed delay) is less than half the unhedged one, for a few percent more requests.
func TestHedgingCutsTheSlowTail(t *testing.T) {
	if testing.Short() {
		t.Skip("measures real latency for a few seconds")
	}
	var served, slowServed atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n := served.Add(1)
		d := time.Millisecond
		if n%20 == 0 {
			slowServed.Add(1)
			d = 200 * time.Millisecond // the slow tail: 5 % of requests
		}
		tm := time.NewTimer(d)
		defer tm.Stop()
		select {
		case <-tm.C:
			w.WriteHeader(http.StatusOK)
		case <-r.Context().Done(): // a hedge won: the client went away
		}
	}))
	defer srv.Close()
	tr := &http.Transport{MaxIdleConnsPerHost: 64}
	defer tr.CloseIdleConnections()
	client := &http.Client{Transport: tr}
	fetch := func(ctx context.Context, q *Fetch) (int, error) {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, q.URL, nil)
		if err != nil {
			return 0, err
		}
		resp, err := client.Do(req)
		if err != nil {
			return 0, err
		}
		defer resp.Body.Close()
		return resp.StatusCode, nil
	}
	pipeline := func(bs ...mediator.Behavior) *mediator.Mediator {
		m := mediator.New(nil, mediator.Config{})
		mediator.HandleFunc(m, fetch)
		for _, b := range bs {
			m.Use(b)
		}
		if err := m.Build(); err != nil {
			t.Fatal(err)
		}
		return m
	}
	const calls, workers = 600, 4
	// run returns the calls' latencies, sorted, and the requests the endpoint served.
	run := func(m *mediator.Mediator) (lat []time.Duration, requests int64) {
		before := served.Load()
		lat = make([]time.Duration, calls)
		var next atomic.Int64
		var wg sync.WaitGroup
		for range workers {
			wg.Go(func() {
				for i := next.Add(1) - 1; i < calls; i = next.Add(1) - 1 {
					start := time.Now()
					code, err := mediator.Send(context.Background(), m, &Fetch{URL: srv.URL})
					lat[i] = time.Since(start)
					if err != nil || code != http.StatusOK {
						t.Errorf("call %d: %d %v", i, code, err)
					}
				}
			})
		}
		wg.Wait()
		slices.Sort(lat)
		return lat, served.Load() - before
	}
	p50 := func(lat []time.Duration) time.Duration { return lat[calls/2] }
	p99 := func(lat []time.Duration) time.Duration { return lat[calls*99/100] }
	const delay = 20 * time.Millisecond
	h := hedge.New(hedge.Config{Delay: delay})
	plainLat, plainReq := run(pipeline())
	hedgedLat, hedgedReq := run(pipeline(h))
	plainP99, hedgedP99 := p99(plainLat), p99(hedgedLat)
	t.Logf("without hedging: p50 %s, p99 %s, %d requests for %d calls", p50(plainLat), plainP99, plainReq, calls)
	t.Logf("with hedging:    p50 %s, p99 %s, %d requests for %d calls (%d extra, %.1f %%); %+v",
		p50(hedgedLat), hedgedP99, hedgedReq, calls, hedgedReq-calls, 100*float64(hedgedReq-calls)/calls, h.Snapshot())
	// The percentile delay: p95 of the recent calls, 20ms until 50 samples.
	ph := hedge.New(hedge.Config{Delay: 20 * time.Millisecond, Percentile: 95, MinSamples: 50})
	pctLat, pctReq := run(pipeline(ph))
	pctP99 := p99(pctLat)
	t.Logf("with p95 delay:  p50 %s, p99 %s, %d requests for %d calls (%d extra, %.1f %%); %+v",
		p50(pctLat), pctP99, pctReq, calls, pctReq-calls, 100*float64(pctReq-calls)/calls, ph.Snapshot())
	// The p95 follows the machine's load (under the race detector on a busy machine the fast
	// requests' p95 can reach 10ms), so it is held to less than three quarters.
	if pctP99 >= plainP99*3/4 || pctReq-calls > calls/4 {
		t.Errorf("p95 delay: p99 %s (unhedged %s), %d extra requests", pctP99, plainP99, pctReq-calls)
	}
	if plainP99 < 200*time.Millisecond {
		t.Fatalf("the unhedged p99 %s is not the slow tail: the test measures nothing", plainP99)
	}
	if hedgedP99 >= plainP99/2 {
		t.Errorf("hedged p99 %s is not below half of the unhedged %s", hedgedP99, plainP99)
	}
	// A hedge goes out only for a call not answered within the delay: the slow 5 %, and on a
	// loaded machine the fast requests that took longer than the delay too. So the hedges sent
	// are at most the calls that took the delay or longer, and the extra requests the endpoint
	// served at most the hedges sent (and the few requests net/http sends again by itself on a
	// kept-alive connection that closed); the slow calls' hedges alone are a few percent.
	first, _ := slices.BinarySearch(hedgedLat, delay)
	pastDelay := calls - first
	var sent int64
	for _, s := range h.Snapshot() {
		sent += int64(s.Sent)
	}
	extra := hedgedReq - calls
	t.Logf("hedged run: %d calls took %s or longer, %d hedges sent, %d extra requests", pastDelay, delay, sent, extra)
	if sent > int64(pastDelay) || extra > sent+calls/100 {
		t.Errorf("%d hedges sent and %d extra requests for %d calls that took the delay or longer: a hedge went out before the delay", sent, extra, pastDelay)
	}
	if extra < calls/40 {
		t.Errorf("%d extra requests for %d calls with 5 %% slow: want about one per slow call", extra, calls)
	}
}
