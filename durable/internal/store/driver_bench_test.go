package store

import (
	"context"
	"database/sql"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/switchboard-go/switchboard/durable/internal/pgtest"
)

// BenchmarkPostgresDriverPath runs the scheduler's hot PostgreSQL statements, the same SQL,
// through database/sql with pgx's stdlib adapter (the path the postgres driver takes) and
// through pgxpool natively, to measure what the adapter costs: an insert, and a claim of 10
// items (FOR UPDATE SKIP LOCKED) followed by the batched completion of those items.
// docs/architecture.md gives the figures and the decision they support. It needs
// SWITCHBOARD_TEST_PG_DSN.
func BenchmarkPostgresDriverPath(b *testing.B) {
	dsn := pgDSN(b)
	if dsn == "" {
		b.Skipf("%s not set", pgDSNEnv)
	}
	ctx := context.Background()
	e := Postgres.(*postgresEngine)
	type querier struct {
		query func(q string, args ...any) (RowReader, func(), error)
	}
	paths := map[string]func(b *testing.B, target string) querier{
		"database_sql": func(b *testing.B, target string) querier {
			db := pgtest.Open(b, target)
			return querier{query: func(q string, args ...any) (RowReader, func(), error) {
				rows, err := db.QueryContext(ctx, q, args...)
				if err != nil {
					return nil, nil, err
				}
				return rows, func() { rows.Close() }, nil
			}}
		},
		"pgxpool": func(b *testing.B, target string) querier {
			pool, err := pgxpool.New(ctx, target)
			if err != nil {
				b.Fatal(err)
			}
			b.Cleanup(pool.Close)
			return querier{query: func(q string, args ...any) (RowReader, func(), error) {
				rows, err := pool.Query(ctx, q, args...)
				if err != nil {
					return nil, nil, err
				}
				return rows, rows.Close, nil
			}}
		},
	}
	for _, name := range []string{"database_sql", "pgxpool"} {
		b.Run(name+"/insert", func(b *testing.B) {
			target, _ := benchSchema(b, dsn)
			q := paths[name](b, target)
			now := micros(time.Now())
			b.ResetTimer()
			for range b.N {
				rows, done, err := q.query(e.st.insert, "bench", []byte(`{}`), string(StatePending), nil, nil, now, nil, nil, now, now, nil, nil,
					nil, nil, nil, 0, "bench", 0, 0, nil) // insertSQL's columns, name to reference
				if err != nil {
					b.Fatal(err)
				}
				for rows.Next() {
				}
				err = rows.Err()
				done()
				if err != nil {
					b.Fatal(err)
				}
			}
		})
		b.Run(name+"/claim10_complete", func(b *testing.B) {
			target, admin := benchSchema(b, dsn)
			q := paths[name](b, target)
			if _, err := admin.ExecContext(ctx, `INSERT INTO switchboard_items (name, payload, state, next_at, created_at, updated_at)
				SELECT 'bench', '\x7b7d'::bytea, 'pending', 1, 1, 1 FROM generate_series(1, $1)`, 10*b.N+10); err != nil {
				b.Fatal(err)
			}
			if _, err := admin.ExecContext(ctx, "ANALYZE switchboard_items"); err != nil {
				b.Fatal(err)
			}
			now := time.Now()
			b.ResetTimer()
			for range b.N {
				args, w := postgresClaimArgs(append(claimArgs("bench", now, time.Minute, 10, false), &fairWindow{}))
				rows, done, err := q.query(e.st.claim, args...)
				if err != nil {
					b.Fatal(err)
				}
				claimed, err := readClaims(rows, args, w)
				done()
				if err != nil || len(claimed) == 0 {
					b.Fatalf("claim: %d, %v", len(claimed), err)
				}
				cs := make([]Completion, len(claimed))
				for i, c := range claimed {
					cs[i] = Completion{Fence: Fence{ItemID: c.ItemRow.ID, Owner: "bench", Attempt: c.ItemRow.Attempts},
						State: StateSucceeded, Outcome: OutcomeSucceeded, StartedAt: now, EndedAt: now}
				}
				rows, done, err = q.query(e.completeMany, completionArrays(cs)...)
				if err != nil {
					b.Fatal(err)
				}
				accepted := map[Fence]bool{}
				err = readFences(rows, accepted)
				done()
				if err != nil || len(accepted) != len(cs) {
					b.Fatalf("complete: %d of %d, %v", len(accepted), len(cs), err)
				}
			}
		})
	}
}

// benchSchema returns the DSN of a new migrated schema, and a pool on it.
func benchSchema(b *testing.B, dsn string) (string, *sql.DB) {
	target := pgtest.Schema(b, dsn, "sbbench_")
	db := pgtest.Open(b, target)
	if err := Migrate(context.Background(), db, Postgres, nil); err != nil {
		b.Fatal(err)
	}
	return target, db
}
