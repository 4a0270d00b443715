package sqlite_test

import (
	"path/filepath"
	"testing"

	"github.com/switchboard-go/switchboard/durable/driver"
	"github.com/switchboard-go/switchboard/durable/drivertest"
	"github.com/switchboard-go/switchboard/durable/sqlite"
)

// TestConformance runs the driver conformance suite on SQLite, a fresh file per test.
func TestConformance(t *testing.T) {
	drivertest.Exercise(t, func(t *testing.T) driver.Driver {
		return sqlite.Open(filepath.Join(t.TempDir(), "queue.db"))
	})
}
