package admin_test

import (
	"context"
	"errors"
	"net/http"
	"path/filepath"
	"testing"
	"time"

	"go.uber.org/zap"

	"github.com/switchboard-go/switchboard/admin"
	"github.com/switchboard-go/switchboard/behaviors/breaker"
	"github.com/switchboard-go/switchboard/durable"
	"github.com/switchboard-go/switchboard/durable/sqlite"
)

// An instance's admin API shows a breaker the fleet shares as the fleet decided it: open after
// another instance's trip, and, while another instance holds its probes, half-open with that
// instance as probe_owner.
func TestBreakersShowTheFleetsState(t *testing.T) {
	ctx := context.Background()
	q, err := durable.Open(ctx, sqlite.Open(filepath.Join(t.TempDir(), "queue.db")), durable.Config{Logger: zap.NewNop()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = q.Close() })
	store := func() *durable.BreakerStore {
		st, err := durable.NewBreakerStore(q, "hosts", durable.BreakerStoreConfig{RefreshInterval: 10 * time.Millisecond, Logger: zap.NewNop()})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = st.Close() })
		return st
	}
	here := breaker.NewRegistry(breaker.Config{Store: store(), Instance: "here", FailureThreshold: 1, OpenDuration: 50 * time.Millisecond})
	there := breaker.NewRegistry(breaker.Config{Store: store(), Instance: "there", FailureThreshold: 1, OpenDuration: 50 * time.Millisecond})
	h, err := admin.New(admin.Config{Breakers: here, Token: token})
	if err != nil {
		t.Fatal(err)
	}
	waitFor := func(what string, ok func(b map[string]any) bool) {
		t.Helper()
		deadline := time.Now().Add(10 * time.Second)
		tick := time.NewTicker(5 * time.Millisecond)
		defer tick.Stop()
		for {
			res := auth(t, h, "GET", "/api/breakers/k", "")
			if res.Code == http.StatusOK && ok(res.body) {
				return
			}
			if time.Now().After(deadline) {
				t.Fatalf("timed out waiting for %s: %d %v", what, res.Code, res.body)
			}
			<-tick.C
		}
	}
	p, err := there.Gate("k")
	if err != nil {
		t.Fatal(err)
	}
	p.Failure() // trips it there
	waitFor("the other instance's trip", func(b map[string]any) bool { return b["state"] == "open" })
	// There claims the probes once the open time has passed by the store's clock too: at the
	// boundary its local view may say half-open while the store, which keeps times to the
	// microsecond, still answers "probe in 0s".
	var probe breaker.Permit
	waitFor("the other instance's probe claim", func(map[string]any) bool {
		p, err := there.Gate("k")
		switch {
		case err == nil && p.Probe():
			probe = p
			return true
		case err == nil:
			t.Fatal("there's call went through as no probe: the breaker closed without one")
		case !errors.Is(err, breaker.ErrOpen):
			t.Fatalf("the claim there: %v", err)
		}
		return false
	})
	waitFor("the other instance's probe", func(b map[string]any) bool { return b["state"] == "half-open" && b["probe_owner"] == "there" })
	probe.Success()
	waitFor("the verdict", func(b map[string]any) bool { return b["state"] == "closed" && b["probe_owner"] == nil })
}
