package main

import (
	"strings"
	"testing"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func TestRun(t *testing.T) {
	var out strings.Builder
	if err := run(&out); err != nil {
		t.Fatal(err)
	}
	got := out.String()
	for _, want := range []string{
		"trace (pre, 0)\n  fallback (default, 30)\n    retry (default, 50)\n      breaker (default, 60)\n        metrics (post, 0)\n          handler\n",
		"  [email] order 1 (trace t-1)\n  [ledger] order 1 (trace t-1)\n  [analytics] order 1 (trace t-1)\n",
		"placed order 1, total 42",
		"refused: total must be positive",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("output lacks %q:\n%s", want, got)
		}
	}
}
