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
	if n := prepared(); n != 5 {
		t.Fatalf("%d statements prepared for the pool after a drain, want the claim (with its test of one key and the claim of one key), the completion and the attempt", n)
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

// A completion's text columns reach the database as they were, whatever they hold: on
// PostgreSQL they travel in an array's text form, where quotes, backslashes, braces, commas
// and white space are special. A NUL byte or invalid UTF-8, which PostgreSQL's text cannot
// hold, is stored as U+FFFD on both engines, and the outcome is recorded.
func TestCompletionTextRoundTrip(t *testing.T) {
	eachBackend(t, func(t *testing.T, b backend) {
		ctx := context.Background()
		s := b.open(t)
		texts := []string{``, `"`, `\`, `\"`, `{a,b}`, `NULL`, " lead and trail ", "line\nbreak\ttab", `a"b\c,d{e}f`, "ünïcødé ✓",
			"nul\x00byte", "invalid \xff utf-8"}
		for range texts {
			if _, _, err := s.Enqueue(ctx, NewItem{Name: "test.work", Payload: []byte("{}"), NextAt: pruneT0, Now: pruneT0}); err != nil {
				t.Fatal(err)
			}
		}
		cl, err := s.Claim(ctx, "w\"\\{,}", pruneT0, time.Hour, len(texts))
		if err != nil || len(cl) != len(texts) {
			t.Fatalf("claim: %d items, %v", len(cl), err)
		}
		cs := make([]Completion, len(cl))
		for i, c := range cl {
			cs[i] = Completion{Fence: c.Fence(), State: StatePending, NextAt: pruneT0.Add(time.Hour), Outcome: OutcomeFailed,
				Error: texts[i], ParkedKey: texts[len(texts)-1-i], StartedAt: pruneT0, EndedAt: pruneT0}
		}
		res, err := s.Complete(ctx, cs)
		if err != nil {
			t.Fatal(err)
		}
		for i, c := range cs {
			if res[i] != nil {
				t.Fatalf("completion %d (%q) rejected: %v", i, texts[i], res[i])
			}
			as, err := s.Attempts(ctx, c.Fence.ItemID)
			if err != nil || len(as) != 1 {
				t.Fatalf("attempts of %d: %v %v", c.Fence.ItemID, as, err)
			}
			if want := storedText(texts[i]); as[0].Error != want || as[0].Instance != c.Fence.Owner {
				t.Errorf("attempt error %q by %q, want %q by %q", as[0].Error, as[0].Instance, want, c.Fence.Owner)
			}
			it, err := s.Item(ctx, c.Fence.ItemID)
			if err != nil {
				t.Fatal(err)
			}
			if want := storedText(texts[len(texts)-1-i]); it.ParkedKey != want || it.LastError != storedText(texts[i]) {
				t.Errorf("parked key %q, last error %q; want %q, %q", it.ParkedKey, it.LastError, want, storedText(texts[i]))
			}
		}
	})
}
