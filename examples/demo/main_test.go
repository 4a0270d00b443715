package main

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// The scenario, shortened: every request is accounted for, and the story happened — a breaker
// opened, a deferred delivery was delivered by the scheduler, a dead letter was replayed.
func TestRunAccountsForEveryRequest(t *testing.T) {
	var out strings.Builder
	rep, err := run(context.Background(), &out, options{duration: 6 * time.Second, rate: 40, addr: "127.0.0.1:0", dir: t.TempDir(), quit: true})
	if err != nil {
		t.Fatalf("%v\n%s", err, out.String())
	}
	tot := rep.Total
	if tot.Sent < 100 {
		t.Errorf("%d requests sent in 6s at 40/s", tot.Sent)
	}
	for name, got := range map[string]int{
		"breaker trips": tot.Trips, "deferred then delivered": tot.DeferredOK, "replayed": tot.ReplayedOK,
		"first try": tot.First, "after retry": tot.Retried, "fell back": tot.FellBack, "refused (4xx)": tot.Status4xx,
	} {
		if got == 0 {
			t.Errorf("no request counted as %s:\n%s", name, out.String())
		}
	}
	if rep.spans == 0 || rep.series == 0 || rep.logLines == 0 {
		t.Errorf("spans %d, metric series %d, log lines %d: want each above 0", rep.spans, rep.series, rep.logLines)
	}
	for _, want := range []string{"breaker outage: closed → open for 1.5s", "outage is back", "the operator replays", "every request is accounted for."} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("output lacks %q:\n%s", want, out.String())
		}
	}
}

// The summary's check fails when a column does not add up or an endpoint saw a delivery twice.
func TestCheckFindsWhatIsNotAccountedFor(t *testing.T) {
	good := line{Endpoint: "e", Sent: 5, First: 2, Deferred: 3, DeferredOK: 1, Dead: 1, Waiting: 1, delivered: 2, Accepted: 3}
	if err := (&report{Lines: []line{good}, Total: good}).check(); err != nil {
		t.Fatalf("a summary that adds up: %v", err)
	}
	for name, mutate := range map[string]func(*line){
		"sent":     func(l *line) { l.Sent++ },
		"deferred": func(l *line) { l.Waiting-- },
		"unknown":  func(l *line) { l.Waiting--; l.Unknown++ },
		"accepted": func(l *line) { l.Accepted++ },
		"twice":    func(l *line) { l.Twice = 1 },
	} {
		l := good
		mutate(&l)
		if err := (&report{Lines: []line{l}, Total: good}).check(); err == nil {
			t.Errorf("%s: a summary that does not add up passed", name)
		}
	}
	again := good
	again.Again = 1
	if err := (&report{Lines: []line{again}, Total: again}).check(); err != nil {
		t.Errorf("a second copy after an attempt that got no answer failed the check: %v", err)
	}
}

// An endpoint's second acceptance of a delivery counts as again when an attempt of that
// delivery got no answer, and as twice, which the check fails on, when none did.
func TestDeliveriesTellAgainFromTwice(t *testing.T) {
	arrived := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Delivery-Id") == "1" {
			close(arrived) // the attempt went out; it gets no answer
			<-r.Context().Done()
			return
		}
		w.WriteHeader(http.StatusNoContent)
	}))
	defer srv.Close()
	u := newUnanswered(http.DefaultTransport.(*http.Transport).Clone())
	defer u.CloseIdleConnections()
	for _, id := range []string{"1", "2"} {
		ctx, cancel := context.WithCancel(context.Background())
		req, _ := http.NewRequestWithContext(ctx, http.MethodPost, srv.URL, nil)
		req.Header.Set("Delivery-Id", id)
		if id == "1" {
			go func() { <-arrived; cancel() }()
		}
		resp, err := u.RoundTrip(req)
		if err == nil {
			resp.Body.Close()
		}
		cancel()
	}
	if !u.had("1") || u.had("2") {
		t.Fatalf("unanswered: 1 %v (want true), 2 %v (want false)", u.had("1"), u.had("2"))
	}
	e := &endpoint{accepted: map[string]int{"1": 2, "2": 2, "3": 1}}
	if distinct, again, twice := e.deliveries(u.had); distinct != 3 || again != 1 || twice != 1 {
		t.Errorf("deliveries: %d distinct, %d again, %d twice; want 3, 1, 1", distinct, again, twice)
	}
}

func TestValidFlags(t *testing.T) {
	for _, c := range []struct {
		d    time.Duration
		rate int
		addr string
		want string
	}{
		{time.Second, 20, "127.0.0.1:0", "-duration 1s is too short"},
		{time.Minute, 0, "127.0.0.1:0", "-rate 0 is out of range"},
		{time.Minute, 5000, "127.0.0.1:0", "-rate 5000 is out of range"},
		{time.Minute, 20, "bad", `-addr "bad" is not host:port`},
		{time.Minute, 20, "0.0.0.0:0", `-addr "0.0.0.0:0" is not a loopback address`},
		{time.Minute, 20, ":8080", `-addr ":8080" is not a loopback address`},
	} {
		err := validFlags(c.d, c.rate, c.addr)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("validFlags(%v, %d) = %v, want %q", c.d, c.rate, err, c.want)
		}
	}
	for _, addr := range []string{"127.0.0.1:0", "localhost:8080", "[::1]:9000"} {
		if err := validFlags(20*time.Second, 20, addr); err != nil {
			t.Errorf("-addr %s is refused: %v", addr, err)
		}
	}
}

func TestRoundDuration(t *testing.T) {
	for d, want := range map[time.Duration]string{
		299783922 * time.Nanosecond:          "300ms",
		1549 * time.Millisecond:              "1.5s",
		14600 * time.Millisecond:             "15s",
		2*time.Minute + 300*time.Millisecond: "120s",
	} {
		if got := roundDuration(d); got != want {
			t.Errorf("roundDuration(%v) = %q, want %q", d, got, want)
		}
	}
}

// A directory whose queue holds an earlier run's items is refused: their endpoints are gone, and
// the summary would mix the runs.
func TestRunRefusesAQueueOfAnEarlierRun(t *testing.T) {
	dir := t.TempDir()
	opt := options{duration: 3 * time.Second, rate: 20, addr: "127.0.0.1:0", dir: dir, quit: true}
	if _, err := run(context.Background(), io.Discard, opt); err != nil {
		t.Fatal(err)
	}
	_, err := run(context.Background(), io.Discard, opt)
	if err == nil || !strings.Contains(err.Error(), "holds the queue of an earlier run") {
		t.Fatalf("a second run in %s: %v, want the earlier run's queue refused", dir, err)
	}
}
