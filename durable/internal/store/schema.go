package store

import (
	"context"

	"github.com/switchboard-go/switchboard/durable/driver"
)

// The Store is the executor of the built-in drivers.
var (
	_ driver.Executor    = (*Store)(nil)
	_ driver.Notifier    = (*Store)(nil)
	_ driver.FleetStores = (*Store)(nil)
	_ driver.ItemFinder  = (*Store)(nil)
)

// Migrate applies the migrations s's database lacks (see the package function Migrate).
func (s *Store) Migrate(ctx context.Context, applied func(Migration)) error {
	return Migrate(ctx, s.db, s.e, applied)
}

// Version returns the newest migration s's database has applied (see the package function
// Version).
func (s *Store) Version(ctx context.Context) (int, error) { return Version(ctx, s.db, s.e) }

// SchemaVersion returns the version of the newest embedded migration.
func (s *Store) SchemaVersion() int { return SchemaVersion() }

// MissingMigrations returns the migrations s's database lacks (see the package function
// MissingMigrations).
func (s *Store) MissingMigrations(ctx context.Context) ([]int, error) {
	return MissingMigrations(ctx, s.db, s.e)
}
