package drivertest

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/switchboard-go/switchboard/durable"
	"github.com/switchboard-go/switchboard/durable/driver"
	"github.com/switchboard-go/switchboard/durable/record"
)

// openExecutor opens drv's executor and migrates it, closing it at the end of the test.
func openExecutor(t *testing.T, drv driver.Driver) driver.Executor {
	t.Helper()
	ctx := context.Background()
	ex, err := drv.Open(ctx)
	if err != nil {
		t.Fatalf("Driver.Open: %v", err)
	}
	if ex == nil {
		t.Fatal("Driver.Open returned no executor and no error")
	}
	t.Cleanup(func() { _ = ex.Close() })
	if err := ex.Migrate(ctx, nil); err != nil {
		t.Fatalf("Executor.Migrate: %v", err)
	}
	return ex
}

// testMigrate: Migrate applies every migration once (a second Migrate applies none), leaves
// none missing and the version at SchemaVersion; a queue then opens with SkipMigrations.
func testMigrate(t *testing.T, open OpenFunc) {
	ctx := context.Background()
	drv := open(t)
	ex, err := drv.Open(ctx)
	if err != nil {
		t.Fatalf("Driver.Open: %v", err)
	}
	defer func() { _ = ex.Close() }()
	missing, err := ex.MissingMigrations(ctx)
	if err != nil || len(missing) == 0 {
		t.Fatalf("a fresh database: missing %v, %v; want every migration", missing, err)
	}
	applied := 0
	if err := ex.Migrate(ctx, func(driver.Migration) { applied++ }); err != nil {
		t.Fatalf("Migrate: %v", err)
	}
	if applied != len(missing) {
		t.Fatalf("Migrate applied %d migrations; %d were missing", applied, len(missing))
	}
	if err := ex.Migrate(ctx, func(m driver.Migration) { t.Errorf("second Migrate applied %d again", m.Version) }); err != nil {
		t.Fatalf("second Migrate: %v", err)
	}
	if missing, err := ex.MissingMigrations(ctx); err != nil || len(missing) != 0 {
		t.Fatalf("after Migrate: missing %v, %v", missing, err)
	}
	if v, err := ex.Version(ctx); err != nil || v != ex.SchemaVersion() {
		t.Fatalf("version %d, %v; want SchemaVersion %d", v, err, ex.SchemaVersion())
	}
	q := openQueue(t, drv, durable.Config{SkipMigrations: true})
	if missing, err := q.MissingMigrations(ctx); err != nil || len(missing) != 0 {
		t.Fatalf("Queue.MissingMigrations: %v, %v", missing, err)
	}
}

// testClaimLeaseFence: a claim leases due items to its owner and counts the attempt in its
// fence; an item not due, or leased, is not claimed again; a sweep after the lease ran out
// returns the item marked to run alone (Claim leaves it, ClaimIsolated takes it), and the
// completion of the old lease is then rejected with a
// *driver.LeaseLostError (errors.Is driver.ErrLeaseLost) while the new one is accepted.
func testClaimLeaseFence(t *testing.T, open OpenFunc) {
	ex := openExecutor(t, open(t))
	ctx := context.Background()
	now := time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC)
	id, existed, err := ex.Enqueue(ctx, driver.NewItem{Name: workName, Payload: []byte(`{"n":1}`), NextAt: now, Now: now})
	if err != nil || existed {
		t.Fatalf("Enqueue: %v (existed %v)", err, existed)
	}
	if _, _, err := ex.Enqueue(ctx, driver.NewItem{Name: workName, Payload: []byte(`{}`), NextAt: now.Add(time.Hour), Now: now}); err != nil {
		t.Fatal(err)
	}
	first, err := ex.Claim(ctx, "a", now, time.Minute, 10)
	if err != nil || len(first) != 1 || first[0].ID != id || first[0].Fence() != (driver.Fence{ItemID: id, Owner: "a", Attempt: 1}) {
		t.Fatalf("Claim: %+v, %v; want item %d leased to a, attempt 1 (the other is not due)", first, err, id)
	}
	if again, err := ex.Claim(ctx, "b", now.Add(30*time.Second), time.Minute, 10); err != nil || len(again) != 0 {
		t.Fatalf("Claim of a leased item: %+v, %v; want none", again, err)
	}
	if it, err := ex.Item(ctx, id); err != nil || it.State != record.StateRunning || it.LeaseOwner != "a" {
		t.Fatalf("Item: %+v, %v; want running under a", it, err)
	}
	if n, err := ex.Sweep(ctx, now.Add(30*time.Second)); err != nil || n != 0 {
		t.Fatalf("Sweep before the lease ran out: %d, %v", n, err)
	}
	later := now.Add(2 * time.Minute)
	if n, err := ex.Sweep(ctx, later); err != nil || n != 1 {
		t.Fatalf("Sweep after the lease ran out: %d, %v; want 1", n, err)
	}
	if due, err := ex.IsolatedDue(ctx, later); err != nil || !due {
		t.Fatalf("IsolatedDue after the sweep: %v, %v; want true", due, err)
	}
	if cs, err := ex.Claim(ctx, "b", later, time.Minute, 10); err != nil || len(cs) != 0 {
		t.Fatalf("Claim of a swept item: %+v, %v; want none (it runs alone)", cs, err)
	}
	second, err := ex.ClaimIsolated(ctx, "b", later, time.Minute)
	if err != nil || len(second) != 1 || second[0].ID != id || second[0].Fence().Attempt != 2 {
		t.Fatalf("ClaimIsolated after the sweep: %+v, %v; want the item, attempt 2", second, err)
	}
	done := func(c driver.Claimed) driver.Completion {
		return driver.Completion{Fence: c.Fence(), State: record.StateSucceeded, Outcome: record.OutcomeSucceeded, StartedAt: later, EndedAt: later, Name: workName}
	}
	errs, err := ex.Complete(ctx, []driver.Completion{done(first[0]), done(second[0])})
	if err != nil || len(errs) != 2 {
		t.Fatalf("Complete: %v, %v", errs, err)
	}
	var lost *driver.LeaseLostError
	if !errors.As(errs[0], &lost) || !errors.Is(errs[0], driver.ErrLeaseLost) || lost.Fence != first[0].Fence() {
		t.Fatalf("completion of the swept lease: %v; want a *LeaseLostError of its fence", errs[0])
	}
	if errs[1] != nil {
		t.Fatalf("completion of the current lease: %v", errs[1])
	}
	it, err := ex.Item(ctx, id)
	if err != nil || it.State != record.StateSucceeded {
		t.Fatalf("Item: %+v, %v; want succeeded", it, err)
	}
	as, err := ex.Attempts(ctx, id)
	if err != nil || len(as) != 2 || as[0].Outcome != record.OutcomeAbandoned || as[1].Outcome != record.OutcomeSucceeded {
		t.Fatalf("Attempts: %+v, %v; want the swept attempt abandoned, the second succeeded", as, err)
	}
	// However a store records a success (the built-in ones on its item), it is an attempt as
	// the others are: its own id, its instance and times.
	if s := as[1]; s.ID == as[0].ID || s.Number != 2 || s.Instance != "b" || !s.StartedAt.Equal(later) || !s.EndedAt.Equal(later) || s.ItemID != id {
		t.Fatalf("the success's attempt %+v beside %+v; want its own id, number 2, instance b, its times", s, as[0])
	}
}

// testExecutorDedupe: Enqueue with a dedupe key or token an item holds inserts nothing and
// reports that item (existed); once the item succeeded, the key is free again, and the token
// still taken.
func testExecutorDedupe(t *testing.T, open OpenFunc) {
	ex := openExecutor(t, open(t))
	ctx := context.Background()
	now := time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC)
	it := driver.NewItem{Name: workName, Payload: []byte(`{}`), NextAt: now, Now: now, DedupeKey: "k", Token: "t1"}
	id, existed, err := ex.Enqueue(ctx, it)
	if err != nil || existed {
		t.Fatalf("Enqueue: %v %v", existed, err)
	}
	it.Token = "t2"
	if dup, existed, err := ex.Enqueue(ctx, it); err != nil || !existed || dup != id {
		t.Fatalf("Enqueue with a held dedupe key: %d %v %v; want %d existed", dup, existed, err, id)
	}
	it.DedupeKey, it.Token = "", "t1"
	if dup, existed, err := ex.Enqueue(ctx, it); err != nil || !existed || dup != id {
		t.Fatalf("Enqueue with a taken token: %d %v %v; want %d existed", dup, existed, err, id)
	}
	if got, err := ex.ItemByToken(ctx, "t1"); err != nil || got.ID != id {
		t.Fatalf("ItemByToken: %+v %v", got, err)
	}
	cs, err := ex.Claim(ctx, "a", now, time.Minute, 10)
	if err != nil || len(cs) != 1 {
		t.Fatalf("Claim: %v %v", cs, err)
	}
	errs, err := ex.Complete(ctx, []driver.Completion{{Fence: cs[0].Fence(), State: record.StateSucceeded, Outcome: record.OutcomeSucceeded, StartedAt: now, EndedAt: now, Name: workName}})
	if err != nil || errs[0] != nil {
		t.Fatalf("Complete: %v %v", errs, err)
	}
	it.DedupeKey, it.Token = "k", "t3"
	if next, existed, err := ex.Enqueue(ctx, it); err != nil || existed || next == id {
		t.Fatalf("Enqueue after the holder succeeded: %d %v %v; want a new item", next, existed, err)
	}
	// A token stays taken after its item finished.
	it.DedupeKey, it.Token = "", "t1"
	if dup, existed, err := ex.Enqueue(ctx, it); err != nil || !existed || dup != id {
		t.Fatalf("Enqueue with the token of a succeeded item: %d %v %v; want %d existed", dup, existed, err, id)
	}
	if got, err := ex.ItemByToken(ctx, "t1"); err != nil || got.ID != id || got.State != record.StateSucceeded {
		t.Fatalf("ItemByToken of a succeeded item: %+v %v", got, err)
	}
}
