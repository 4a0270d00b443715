package postgres_test

import (
	"testing"

	"github.com/switchboard-go/switchboard/durable/driver"
	"github.com/switchboard-go/switchboard/durable/drivertest"
	"github.com/switchboard-go/switchboard/durable/internal/pgtest"
	"github.com/switchboard-go/switchboard/durable/postgres"
)

// TestConformance runs the driver conformance suite on PostgreSQL, a fresh schema per test,
// on the server of SWITCHBOARD_TEST_PG_DSN: skipped without it, failed without it under
// CI=true.
func TestConformance(t *testing.T) {
	dsn := pgtest.DSN(t)
	if dsn == "" {
		t.Skipf("%s not set", pgtest.DSNEnv)
	}
	drivertest.Exercise(t, func(t *testing.T) driver.Driver {
		return postgres.Open(pgtest.Schema(t, dsn, "conformance_"), postgres.Config{})
	})
}
