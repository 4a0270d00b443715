package main

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/switchboard-go/switchboard/behaviors/breaker"
	"github.com/switchboard-go/switchboard/behaviors/retry"
	"github.com/switchboard-go/switchboard/behaviors/timeout"
	"github.com/switchboard-go/switchboard/httpcall"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func TestRun(t *testing.T) {
	var out strings.Builder
	res, err := run(context.Background(), &out)
	if err != nil {
		t.Fatal(err)
	}
	got := out.String()
	if len(res.calls) != 6 {
		t.Fatalf("%d calls, want 6:\n%s", len(res.calls), got)
	}
	flaky, down, downAgain, downOnceMore, flakyAgain, slow := res.calls[0], res.calls[1], res.calls[2], res.calls[3], res.calls[4], res.calls[5]

	// The flaky server's 503 was retried after the second it asked for, not the 100ms backoff.
	if flaky.err != nil || flaky.body != "rate 1.08" || flaky.hits != 2 {
		t.Errorf("flaky: err %v, body %q, %d requests; want the rate after 2 requests", flaky.err, flaky.body, flaky.hits)
	}
	if flaky.took < time.Second {
		t.Errorf("flaky: took %v, less than the server's Retry-After of 1s", flaky.took)
	}

	// The down server's third failure opened its breaker and ended the retries, one attempt
	// short of MaxAttempts.
	var exhausted *retry.ExhaustedError
	if !errors.Is(down.err, breaker.ErrTripped) || !errors.As(down.err, &exhausted) || exhausted.Attempts != 3 || down.hits != 3 {
		t.Errorf("down: err %v after %d requests; want the trip on the third", down.err, down.hits)
	}
	// After that its calls were refused without a request, with a 503 and Retry-After to answer.
	downKey := httpcall.AuthorityOf(down.server.srv.URL)
	for _, c := range []call{downAgain, downOnceMore} {
		var open *breaker.OpenError
		if !errors.As(c.err, &open) || open.Key != downKey || c.hits != 0 || c.took >= time.Second {
			t.Errorf("down again: err %v after %d requests in %v; want an *breaker.OpenError for %s at once", c.err, c.hits, c.took, downKey)
		}
		if code, h := httpcall.StatusOf(c.err); code != 503 || h.Get("Retry-After") != "30" {
			t.Errorf("down again: StatusOf = %d, Retry-After %q; want 503, 30", code, h.Get("Retry-After"))
		}
	}
	// Another host's breaker was not affected.
	if flakyAgain.err != nil || flakyAgain.hits != 1 {
		t.Errorf("flaky again: err %v after %d requests; want one request that works", flakyAgain.err, flakyAgain.hits)
	}

	// The slow server's one attempt timed out (timeouts are not retried by default), long
	// before the server would have answered.
	if !errors.Is(slow.err, timeout.ErrExceeded) || slow.hits != 1 || slow.took >= 2*time.Second {
		t.Errorf("slow: err %v after %d requests in %v; want one timed-out attempt", slow.err, slow.hits, slow.took)
	}
	if code, _ := httpcall.StatusOf(slow.err); code != 504 {
		t.Errorf("slow: StatusOf = %d, want 504", code)
	}

	for _, want := range []string{
		"    attempt 1 failed (503 Service Unavailable, Retry-After 1s); next attempt in 1s\n",
		"    breaker of down: closed -> open (failure-threshold)\n",
		"3 attempts, the last one opened the breaker, so retry stopped (503 Service Unavailable)\n     an inbound handler would answer 503 with Retry-After: 30\n",
		"refused by the open breaker (*breaker.OpenError, key " + downKey + ", a probe in 30s)\n",
		"an inbound handler would answer 504\n",
		"  flaky closed 0 consecutive failure(s)\n  down  open   3 consecutive failure(s)\n  slow  closed 1 consecutive failure(s)\n",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("output lacks %q:\n%s", want, got)
		}
	}
}
