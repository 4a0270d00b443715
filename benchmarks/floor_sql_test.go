package benchmarks

import (
	"os"
	"path/filepath"
	"regexp"
	"strconv"
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
	// in its %s) and the items of an ordering key behind an earlier one (orderedFirstSQL).
	paused := literal(src("pauses.go"), "const pausedNameSQL = ")
	ordered := literal(engine, "const orderedFirstSQL = ")
	debounced := literal(src("debounce.go"), "const debounceOrderSQL = ")
	fair := src("fairclaim.go")
	claim := func(name, now string) string {
		q := literal(fair, "var "+name+" = fmt.Sprintf(")
		return strings.NewReplacer("%[1]s", strings.Replace(paused, "%s", now, 1), "%[2]s", ordered, "%[3]s", debounced).Replace(q)
	}
	if m := regexp.MustCompile(`const attemptIDBlock = (\d+)`).FindStringSubmatch(src("attemptids.go")); m == nil || m[1] != strconv.Itoa(floorIDBlock) {
		t.Errorf("the floor reserves attempt ids %d at a time, the store %v", floorIDBlock, m)
	}
	for _, c := range []struct{ name, floor, store string }{
		{"claimColumns", floorClaimColumns, columns},
		{"postgresFairClaim", floorPostgresClaim, literal(fair, "const postgresFairClaim = ") + columns + literal(fair, "RETURNING ` + claimColumns + ")},
		{"postgresComplete", floorPostgresComplete, literal(pg, "const postgresComplete = ")},
		{"indexPlans", floorIndexPlans, literal(pg, "const indexPlans = ")},
		{"sqliteFairClaim", floorSQLiteClaim, claim("sqliteFairClaim", "?6") + columns},
		{"sqliteOneKeyClaim", floorSQLiteOneKeyClaim, claim("sqliteOneKeyClaim", "?6") + columns},
		{"sqliteFairWindow", floorSQLiteWindow, literal(fair, "const sqliteFairWindow = ")},
		{"sqliteCompleteOne", floorSQLiteComplete, literal(sq, "const sqliteCompleteOne = ")},
		{"sqliteReserveAttemptIDs", floorReserveAttemptIDs, literal(sq, "const sqliteReserveAttemptIDs = ")},
		{"sqliteFirstAttemptIDs", floorFirstAttemptIDs, literal(sq, "const sqliteFirstAttemptIDs = ")},
	} {
		if squeeze(c.floor) != squeeze(c.store) {
			t.Errorf("the floor's %s differs from the store's:\nfloor: %s\nstore: %s", c.name, squeeze(c.floor), squeeze(c.store))
		}
	}
}

// squeeze collapses every run of white space to one space.
func squeeze(s string) string { return strings.Join(strings.Fields(s), " ") }
