package main

import (
	"context"
	"strings"
	"testing"
	"testing/synctest"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// In a synctest bubble the clock is fake, so the latencies, timeouts and waits are exact and
// the whole output can be compared.
func TestRun(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var out strings.Builder
		if err := run(context.Background(), &out); err != nil {
			t.Fatal(err)
		}
		const want = `pipeline of *Quote, outermost first (stage, order):
call-log (pre, 0)
  retry (default, 50)
    audit (default, 51)
      circuit-breaker (default, 60)
        timeout (default, 70)
          handler

EUR: the first attempt times out, the second fails, the third works:
  call Quote{EUR}
    audit: attempt 1 failed after 100ms: timeout: exceeded after 100ms: context deadline exceeded
    audit: attempt 2 failed after 20ms: rates service answered 503
    audit: attempt 3 ok after 20ms
  => rate 1.08

USD: the service is down; the third failure in a row opens the breaker and ends the retries:
  call Quote{USD}
    audit: attempt 1 failed after 20ms: rates service answered 503
    audit: attempt 2 failed after 20ms: rates service answered 503
    audit: attempt 3 failed after 20ms and opened the breaker: rates service answered 503
  => failed: retry: failed after 3 attempts: rates service answered 503 (circuit "*main.Quote" opened for 10s)

USD again: the open breaker refuses it; retry does not try a refused call again:
  call Quote{USD}
    audit: attempt 1 refused at once, the handler was not called: breaker: circuit open for "*main.Quote" (probe in 10s)
  => failed: breaker: circuit open for "*main.Quote" (probe in 10s)

the handler ran 3 times for EUR and 3 for USD: the refused call never reached it
`
		if got := out.String(); got != want {
			t.Errorf("output:\n%s\nwant:\n%s", got, want)
		}
	})
}
