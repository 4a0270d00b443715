package durable_test

import (
	"context"
	"database/sql"
	"slices"
	"testing"

	"github.com/switchboard-go/switchboard/durable"
	"github.com/switchboard-go/switchboard/mediator"
)

func TestSchedulingFollowsStartAndShutdown(t *testing.T) {
	q := sqliteBackend(t).bare(t, durable.Config{})
	if q.Scheduling() {
		t.Error("Scheduling before Start")
	}
	m := mediator.New(nil, mediator.Config{})
	if err := m.Build(); err != nil {
		t.Fatal(err)
	}
	if err := durable.StartWith(q, m, durable.SchedulerConfig{}); err != nil {
		t.Fatal(err)
	}
	if !q.Scheduling() {
		t.Error("not Scheduling after Start")
	}
	if err := q.Shutdown(context.Background()); err != nil {
		t.Fatal(err)
	}
	if q.Scheduling() {
		t.Error("Scheduling after Shutdown")
	}
}

func TestMissingMigrationsReadsOnly(t *testing.T) {
	eachBackend(t, func(t *testing.T, b backend) {
		ctx := context.Background()
		q := b.bare(t, durable.Config{})
		if missing, err := q.MissingMigrations(ctx); err != nil || len(missing) != 0 {
			t.Fatalf("a migrated database: missing %v, %v", missing, err)
		}
		db := adminPool(t, b)
		if _, err := db.Exec("DELETE FROM switchboard_schema_migrations WHERE version = 1"); err != nil {
			t.Fatal(err)
		}
		for range 2 { // reports, and applies nothing
			if missing, err := q.MissingMigrations(ctx); err != nil || !slices.Equal(missing, []int{1}) {
				t.Fatalf("missing %v, %v; want [1]", missing, err)
			}
		}
	})
}

// adminPool opens a pool of its own on b's database.
func adminPool(t *testing.T, b backend) *sql.DB { return b.pool(t) }
