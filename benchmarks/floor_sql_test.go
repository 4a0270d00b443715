package benchmarks

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// TestFloorStatementsMatchStore checks that the floor's statements are still the store's: it
// reads them from durable/internal/store's source (this module lives beside it, see go.mod's
// replace) and compares them, whitespace aside, so a change to the scheduler's SQL cannot
// leave the floor measuring something else.
func TestFloorStatementsMatchStore(t *testing.T) {
	src := func(file string) string {
		b, err := os.ReadFile(filepath.Join("..", "durable", "internal", "store", file))
		if err != nil {
			t.Fatal(err)
		}
		return string(b)
	}
	// literal returns the raw string literal that follows prefix in text.
	literal := func(text, prefix string) string {
		m := regexp.MustCompile(regexp.QuoteMeta(prefix) + "[`\"]([^`\"]*)[`\"]").FindStringSubmatch(text)
		if m == nil {
			t.Fatalf("durable/internal/store: no %q literal: update the floor and this test", prefix)
		}
		return m[1]
	}
	pg, sq, engine, store := src("postgres.go"), src("sqlite.go"), src("engine.go"), src("store.go")
	columns := literal(store, "const claimColumns = ")
	// The claims leave out the items of a paused request name (pausedNameSQL, now's placeholder
	// in its %s).
	paused := literal(src("pauses.go"), "const pausedNameSQL = ")
	claimSelect := strings.Replace(strings.Replace(literal(engine, "const claimSelect = "), "%s", " INDEXED BY switchboard_items_due", 1),
		"%d", "0", 1)
	claimSelect = strings.Replace(claimSelect, "%s", strings.Replace(paused, "%s", "?6", 1), 1)
	pgClaim := strings.Replace(strings.ReplaceAll(literal(pg, "return fmt.Sprintf("), "%d", "0"), "%s", strings.Replace(paused, "%s", "$6", 1), 1)
	for _, c := range []struct{ name, floor, store string }{
		{"claimColumns", floorClaimColumns, columns},
		{"postgresClaim(0)", floorPostgresClaim, pgClaim + columns},
		{"postgresComplete", floorPostgresComplete, literal(pg, "const postgresComplete = ")},
		{"SQLite claim", floorSQLiteClaim, strings.Replace(literal(sq, "const sqliteClaimUpdate = "), "%s", claimSelect, 1) + columns},
		{"sqliteCompleteOne", floorSQLiteComplete, literal(sq, "const sqliteCompleteOne = ")},
		{"insertAttemptSQL", floorInsertAttempt, literal(engine, "const insertAttemptSQL = ")},
	} {
		if squeeze(c.floor) != squeeze(c.store) {
			t.Errorf("the floor's %s differs from the store's:\nfloor: %s\nstore: %s", c.name, squeeze(c.floor), squeeze(c.store))
		}
	}
}

// squeeze collapses every run of white space to one space.
func squeeze(s string) string { return strings.Join(strings.Fields(s), " ") }
