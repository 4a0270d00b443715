package store

import (
	"context"
	"database/sql"
	"strings"
	"sync"
	"testing"
)

// pgIndexValid reports whether the index name exists and is valid.
func pgIndexValid(t *testing.T, ctx context.Context, q interface {
	QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row
}, name string) bool {
	t.Helper()
	var valid bool
	if err := q.QueryRowContext(ctx, "SELECT i.indisvalid FROM pg_index i WHERE i.indexrelid = to_regclass($1)", name).Scan(&valid); err != nil {
		t.Fatalf("index %s: %v", name, err)
	}
	return valid
}

// A migration's concurrent index build on a large table (PostgreSQL): an index a crashed build
// left invalid is dropped and built again, and two instances migrating at once both finish
// with the index valid and the version recorded once.
func TestMigrationBuildsIndexesOnline(t *testing.T) {
	dsn := pgDSN(t)
	if dsn == "" {
		t.Skipf("%s not set", pgDSNEnv)
	}
	ctx := context.Background()
	ms, err := Migrations(Postgres)
	if err != nil {
		t.Fatal(err)
	}
	var before []Migration
	for _, m := range ms {
		if m.Version < 28 {
			before = append(before, m)
		}
	}
	saved := onlineThreshold
	onlineThreshold = 10 // the table below is large by this measure
	t.Cleanup(func() { onlineThreshold = saved })

	for _, crashed := range []bool{true, false} {
		b := postgresBackend(t, dsn)
		db := b.pool(t)
		if err := Apply(ctx, db, Postgres, before, nil); err != nil {
			t.Fatal(err)
		}
		if _, err := db.ExecContext(ctx, `INSERT INTO switchboard_items (name, payload, state, attempts, next_at, created_at, updated_at, fair_key)
			SELECT 'test.work', '\x7b7d'::bytea, 'succeeded', 1, g, g, g, 'test.work' FROM generate_series(1, 100) g`); err != nil {
			t.Fatal(err)
		}
		if crashed {
			// What a build killed half-way leaves: the index in the catalog, marked invalid.
			for _, stmt := range []string{
				"ALTER TABLE switchboard_items ADD COLUMN reference TEXT",
				"CREATE INDEX switchboard_items_reference ON switchboard_items (reference) WHERE reference IS NOT NULL",
				"UPDATE pg_index SET indisvalid = false WHERE indexrelid = 'switchboard_items_reference'::regclass",
			} {
				if _, err := db.ExecContext(ctx, stmt); err != nil {
					t.Fatal(err)
				}
			}
			if pgIndexValid(t, ctx, db, "switchboard_items_reference") {
				t.Fatal("the index the crash left is valid")
			}
		}
		var wg sync.WaitGroup
		errs := make([]error, 2)
		for i := range errs {
			wg.Go(func() { errs[i] = Apply(ctx, db, Postgres, ms, nil) })
		}
		wg.Wait()
		for i, err := range errs {
			if err != nil {
				t.Fatalf("crashed %v: instance %d: %v", crashed, i, err)
			}
		}
		for _, ix := range []string{"switchboard_items_reference", "switchboard_dead_letters_key"} {
			if !pgIndexValid(t, ctx, db, ix) {
				t.Errorf("crashed %v: %s is not valid after the migration", crashed, ix)
			}
		}
		var n int
		if err := db.QueryRowContext(ctx, "SELECT COUNT(*) FROM switchboard_schema_migrations WHERE version = 28").Scan(&n); err != nil || n != 1 {
			t.Errorf("crashed %v: version 28 recorded %d times (%v)", crashed, n, err)
		}
	}
}

// A concurrent index build a migration does not spell as the runner reads it is refused,
// naming the statement, before anything runs.
func TestMigrationRefusesAnUnreadableConcurrentBuild(t *testing.T) {
	_, _, err := onlineIndexes(context.Background(), nil, []string{"CREATE INDEX CONCURRENTLY x ON switchboard_items (name)"})
	if err == nil || !strings.Contains(err.Error(), "CREATE INDEX CONCURRENTLY IF NOT EXISTS name ON table") {
		t.Fatalf("onlineIndexes: %v", err)
	}
}
