package store

import (
	"context"
	"testing"
	"time"
)

// A claim of the probes keeps its token while it holds them: the row a claimant reads back,
// the winner's row a loser gets, and the polled changes carry it; the next transition clears
// it, and a claim without a token stores none.
func TestBreakerClaimKeepsItsToken(t *testing.T) {
	eachBackend(t, func(t *testing.T, b backend) {
		s := b.open(t)
		ctx := context.Background()
		open, _ := transition(t, s, BreakerTransition{Name: "reg", Key: "k", To: BreakerOpen, OpenFor: 0, Owner: "a"})
		held, applied := transition(t, s, BreakerTransition{Name: "reg", Key: "k", From: open.Epoch, To: BreakerHalfOpen, ProbeFor: time.Hour,
			Owner: "a", Claim: "claim-a"})
		if !applied || held.ProbeClaim != "claim-a" || held.ProbeOwner != "a" {
			t.Fatalf("claim: applied %v, %+v", applied, held)
		}
		lost, applied := transition(t, s, BreakerTransition{Name: "reg", Key: "k", From: open.Epoch, To: BreakerHalfOpen, ProbeFor: time.Hour,
			Owner: "a", Claim: "claim-a2"})
		if applied || lost.ProbeClaim != "claim-a" || lost.Epoch != held.Epoch {
			t.Fatalf("a second claim from the same epoch: applied %v, %+v; want the first claim's row", applied, lost)
		}
		changes := must[[]BreakerRow](t)(s.BreakerChanges(ctx, "reg", 0, 10))
		if len(changes) != 1 || changes[0].ProbeClaim != "claim-a" {
			t.Fatalf("changes: %+v", changes)
		}
		reopened, applied := transition(t, s, BreakerTransition{Name: "reg", Key: "k", From: held.Epoch, To: BreakerOpen, OpenFor: 0, Owner: "a"})
		if !applied || reopened.ProbeClaim != "" || reopened.ProbeOwner != "" {
			t.Fatalf("the verdict: applied %v, %+v; want the claim gone", applied, reopened)
		}
		bare, applied := transition(t, s, BreakerTransition{Name: "reg", Key: "k", From: reopened.Epoch, To: BreakerHalfOpen, ProbeFor: time.Hour, Owner: "b"})
		if !applied || bare.ProbeClaim != "" || bare.ProbeOwner != "b" {
			t.Fatalf("a claim without a token: applied %v, %+v", applied, bare)
		}
	})
}

// Migration 20 adds the claim's token: a breaker half-open before it reads with none, keeps its
// holder and its claim's end, and its probes are claimed, with a token, once that has passed.
func TestMigrationAddsBreakerProbeClaim(t *testing.T) {
	eachBackend(t, func(t *testing.T, b backend) {
		ctx := context.Background()
		db := b.pool(t)
		ms := must[[]Migration](t)(Migrations(b.engine))
		var before []Migration
		for _, m := range ms {
			if m.Version < 20 {
				before = append(before, m)
			}
		}
		if err := Apply(ctx, db, b.engine, before, nil); err != nil {
			t.Fatal(err)
		}
		long := time.Date(2020, 1, 1, 0, 0, 0, 0, time.UTC) // the claim ran out long ago
		past := micros(long)
		insert := b.engine.rebind(`INSERT INTO switchboard_breakers (name, key, state, epoch, failures, opened_at, open_until, probe_owner,
			probe_until, last_probe_at, by_instance, updated_at, seq) VALUES ('reg', 'k', 'half_open', 4, 1, ?, ?, 'old', ?, ?, 'old', ?, 7)`)
		if _, err := db.ExecContext(ctx, insert, past, past, past, past, past); err != nil {
			t.Fatal(err)
		}
		if err := Migrate(ctx, db, b.engine, nil); err != nil {
			t.Fatal(err)
		}
		s := New(db, b.engine, false)
		row := must[BreakerRow](t)(s.Breaker(ctx, "reg", "k"))
		if row.State != BreakerHalfOpen || row.ProbeOwner != "old" || row.ProbeClaim != "" || !row.ProbeUntil.Equal(long) {
			t.Fatalf("the half-open breaker after the migration: %+v", row)
		}
		taken, applied := transition(t, s, BreakerTransition{Name: "reg", Key: "k", From: row.Epoch, To: BreakerHalfOpen, ProbeFor: time.Hour,
			Owner: "new", Claim: "claim-new"})
		if !applied || taken.ProbeClaim != "claim-new" || taken.ProbeOwner != "new" || taken.Epoch != 5 {
			t.Fatalf("the claim taken over: applied %v, %+v", applied, taken)
		}
	})
}
