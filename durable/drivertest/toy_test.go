package drivertest_test

import (
	"context"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	"github.com/switchboard-go/switchboard/durable/driver"
	"github.com/switchboard-go/switchboard/durable/drivertest"
	"github.com/switchboard-go/switchboard/durable/sqlite"
)

// toyDriver is a driver written against the public interface only, as a third party writes
// one: it wraps the SQLite driver's executor, counting the claims it passes on. Embedding
// driver.Executor hides the SQLite executor's optional capabilities (driver.Notifier,
// driver.FleetStores), so the suite also runs the engine without them.
type toyDriver struct {
	inner  driver.Driver
	claims *atomic.Int64
}

func (d toyDriver) Open(ctx context.Context) (driver.Executor, error) {
	ex, err := d.inner.Open(ctx)
	if err != nil {
		return nil, err
	}
	return &toyExecutor{Executor: ex, claims: d.claims}, nil
}

// toyExecutor is the SQLite executor with Claim and ClaimAlone counted.
type toyExecutor struct {
	driver.Executor
	claims *atomic.Int64
}

func (e *toyExecutor) Claim(ctx context.Context, owner string, now time.Time, lease time.Duration, limit int) ([]driver.Claimed, error) {
	cs, err := e.Executor.Claim(ctx, owner, now, lease, limit)
	e.claims.Add(int64(len(cs)))
	return cs, err
}

func (e *toyExecutor) CompleteAndClaim(ctx context.Context, done []driver.Completion, owner string, now time.Time, lease time.Duration, limit int, alone bool) ([]error, []driver.Claimed, error) {
	errs, cs, err := e.Executor.CompleteAndClaim(ctx, done, owner, now, lease, limit, alone)
	e.claims.Add(int64(len(cs)))
	return errs, cs, err
}

var _ driver.Executor = (*toyExecutor)(nil)

// TestToyDriver runs the conformance suite on a driver outside the module's internals: the
// engine works through the interface alone (the wrapper's claims are the ones made), and
// without the optional capabilities (the Notifier test skips, the fleet stores fail).
func TestToyDriver(t *testing.T) {
	var claims atomic.Int64
	t.Run("suite", func(t *testing.T) {
		drivertest.Exercise(t, func(t *testing.T) driver.Driver {
			return toyDriver{inner: sqlite.Open(filepath.Join(t.TempDir(), "toy.db")), claims: &claims}
		})
	})
	if claims.Load() == 0 {
		t.Fatal("no claim went through the toy executor: the engine bypassed the driver interface")
	}
	t.Logf("%d items claimed through the toy executor", claims.Load())
}

// TestTests lists every subtest Exercise runs.
func TestTests(t *testing.T) {
	names := drivertest.Tests()
	if len(names) < 15 {
		t.Fatalf("Tests: %v", names)
	}
	seen := map[string]bool{}
	for _, n := range names {
		if seen[n] {
			t.Fatalf("subtest %q twice", n)
		}
		seen[n] = true
	}
}
