package durable_test

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// A program links only the database driver it uses: one on durable/sqlite holds no pgx symbol,
// one on durable/postgres no modernc.org/sqlite symbol (the programs are in
// testdata/linkcheck). It builds them, so -short skips it.
func TestDriversLinkOnlyTheirDatabase(t *testing.T) {
	if testing.Short() {
		t.Skip("builds two programs")
	}
	gobin, err := exec.LookPath("go")
	if err != nil {
		t.Skip("no go command")
	}
	for _, c := range []struct {
		program, forbidden, needed string
	}{
		{"sqliteonly", "jackc/pgx", "modernc.org/sqlite"},
		{"postgresonly", "modernc.org/sqlite", "jackc/pgx"},
	} {
		bin := filepath.Join(t.TempDir(), c.program)
		build := exec.Command(gobin, "build", "-o", bin, "./testdata/linkcheck/"+c.program)
		if out, err := build.CombinedOutput(); err != nil {
			t.Fatalf("go build %s: %v\n%s", c.program, err, out)
		}
		out, err := exec.Command(gobin, "tool", "nm", bin).Output()
		if err != nil {
			t.Fatalf("go tool nm %s: %v", c.program, err)
		}
		syms := string(out)
		if n := strings.Count(syms, c.forbidden); n > 0 {
			t.Errorf("%s links %d symbols of %s", c.program, n, c.forbidden)
		}
		if !strings.Contains(syms, c.needed) {
			t.Errorf("%s links no %s symbol: the check would pass for any program", c.program, c.needed)
		}
		if fi, err := os.Stat(bin); err == nil {
			t.Logf("%s: %d bytes", c.program, fi.Size())
		}
	}
}
