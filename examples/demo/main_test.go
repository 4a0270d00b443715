package main

import (
	"context"
	"net/http"
	"path/filepath"
	"strings"
	"testing"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func TestRun(t *testing.T) {
	var out strings.Builder
	if err := run(context.Background(), &out, filepath.Join(t.TempDir(), "queue.db"), options{}); err != nil {
		t.Fatal(err)
	}
	got := out.String()
	for _, want := range []string{
		"durable-deferral (default, 40)\n  retry (default, 50)\n    circuit-breaker (default, 60)\n      timeout (default, 70)\n        handler\n",
		"ch-1: charged",
		"ch-2: deferred as item 1 (retry: failed after 3 attempts: pay-b answered 503 (circuit \"pay-b\" opened for 300ms))",
		"ch-3: deferred as item 2 (breaker: circuit open for \"pay-b\"",
		"calls to pay-b while its breaker was open: 0",
		"ch-4: charged",
		"rate 1.05, err <nil>",
		"ch-5: failed: pay-a answered 402",
		"scheduler charged ch-2 on pay-b (durable attempt 1)",
		"scheduler charged ch-3 on pay-b (durable attempt 1)",
		"   pending   0\n   succeeded 2\n   dead      1\n",
		"#3 on demo-1: failed pay-c answered 503",
		"pay-b closed",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("output lacks %q:\n%s", want, got)
		}
	}
}

// The demo's key function names request types it does not know by their type: it used to call
// behaviors.TypeKey with a nil type and panic as soon as a third request type reached it.
func TestEndpointKeyOfAnotherRequestType(t *testing.T) {
	type Refund struct{ Ref string }
	if got := endpointKey(&Refund{}); got != "*main.Refund" {
		t.Fatalf("endpointKey = %q", got)
	}
}

// The demo serves the admin dashboard while it runs, at the URL and with the token it prints:
// the page loads without a token, the API answers with it.
func TestRunServesTheDashboard(t *testing.T) {
	var out strings.Builder
	checked := false
	defer http.DefaultClient.CloseIdleConnections()
	err := run(context.Background(), &out, filepath.Join(t.TempDir(), "queue.db"), options{
		dashboard: "127.0.0.1:0",
		served: func(url, token string) {
			res, err := http.Get(url)
			if err != nil {
				t.Fatal(err)
			}
			res.Body.Close()
			if res.StatusCode != http.StatusOK {
				t.Errorf("GET %s: %d", url, res.StatusCode)
			}
			req, _ := http.NewRequest(http.MethodGet, url+"api/breakers", nil)
			req.Header.Set("Authorization", "Bearer "+token)
			res, err = http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			res.Body.Close()
			if res.StatusCode != http.StatusOK {
				t.Errorf("GET api/breakers with the token: %d", res.StatusCode)
			}
			checked = true
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	if !checked || !strings.Contains(out.String(), "dashboard: http://127.0.0.1:") {
		t.Fatalf("dashboard not served or not announced:\n%s", out.String())
	}
}
