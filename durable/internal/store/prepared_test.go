package store

import (
	"context"
	"path/filepath"
	"testing"
	"time"
)

// The SQLite engine prepares the claim loop's statements once per pool, for as long as a Store
// uses the pool: a Store closed beside another on the same pool leaves the other working, and
// the last one closes them.
func TestSQLiteStatementsLiveWithTheirStores(t *testing.T) {
	ctx := context.Background()
	db, err := OpenSQLite(filepath.Join(t.TempDir(), "q.db"))
	if err != nil {
		t.Fatal(err)
	}
	if err := Migrate(ctx, db, SQLite, nil); err != nil {
		t.Fatal(err)
	}
	e := SQLite.(*sqliteEngine)
	prepared := func() int {
		e.mu.Lock()
		defer e.mu.Unlock()
		if p := e.prepared[db]; p != nil {
			return len(p.stmts)
		}
		return -1
	}
	a, b := New(db, SQLite, false), New(db, SQLite, true)
	finish(t, a, 3, StateSucceeded, pruneT0)
	if n := prepared(); n != 3 {
		t.Fatalf("%d statements prepared for the pool after a drain, want the claim, the completion and the attempt", n)
	}
	if err := a.Close(); err != nil {
		t.Fatal(err)
	}
	finish(t, b, 3, StateSucceeded, pruneT0) // the statements a used are still b's
	if _, err := b.Claim(ctx, "w", time.Now(), time.Minute, 1); err != nil {
		t.Fatal(err)
	}
	if err := b.Close(); err != nil {
		t.Fatal(err)
	}
	if n := prepared(); n != -1 {
		t.Fatalf("%d statements still held for a pool whose Stores are all closed", n)
	}
}
