package driver

import ()

// Migration is one versioned schema change.
type Migration struct {
	// Version orders the migrations; each is applied once.
	Version int
	// Name is the migration's file name, kept in the version table.
	Name string
	// SQL is the migration's script: statements separated by semicolons.
	SQL string
}
