package docs

import (
	"bufio"
	"bytes"
	"os/exec"
	"slices"
	"strings"
	"testing"
)

// module is the library's import path; the layer rules name packages below it.
const module = "github.com/switchboard-go/switchboard"

// floors is the picture of docs/architecture.md ("Packages import downward only") as data:
// the library packages each package may import directly (relative to the module; a trailing
// "/..." allows a folder and everything below it). A package not listed fails the test, so a
// new package gets its place here and in the picture at once. examples/ and scripts/ are
// programs, not layers, and docs/ holds only these tests.
var floors = map[string][]string{
	"mediator":               {},
	"mediator/mediatortest":  {"mediator"},
	"handlers":               {"mediator"},
	"behaviors":              {"mediator", "behaviors/internal/..."},
	"behaviors/internal/...": {"mediator", "behaviors/internal/..."},
	"behaviors/retry":        {"mediator", "behaviors", "behaviors/internal/...", "behaviors/validation", "behaviors/budget"},
	"behaviors/budget":       {"mediator", "behaviors"},
	"behaviors/hedge":        {"mediator", "behaviors", "behaviors/budget"},
	"behaviors/breaker":      {"mediator", "behaviors", "behaviors/internal/...", "behaviors/validation"},
	"behaviors/fallback":     {"mediator", "behaviors", "behaviors/internal/..."},
	"behaviors/timeout":      {"mediator", "behaviors", "behaviors/internal/..."},
	"behaviors/bulkhead":     {"mediator", "behaviors", "behaviors/internal/..."},
	"behaviors/ratelimit":    {"mediator", "behaviors", "behaviors/internal/..."},
	"behaviors/validation":   {"mediator", "behaviors", "behaviors/internal/..."},
	"behaviors/recovery":     {"mediator", "behaviors", "behaviors/internal/..."},
	"httpcall":               {"mediator", "behaviors", "behaviors/validation"},
	"logging":                {"mediator", "behaviors", "behaviors/retry", "behaviors/breaker", "behaviors/bulkhead", "behaviors/fallback", "behaviors/budget", "behaviors/hedge"},
	"metrics":                {"mediator", "behaviors", "behaviors/retry", "behaviors/breaker", "behaviors/fallback", "behaviors/budget", "behaviors/hedge", "behaviors/ratelimit"},
	"tracing":                {"mediator", "behaviors", "behaviors/retry", "behaviors/breaker", "behaviors/fallback", "behaviors/hedge", "behaviors/ratelimit"},
	"health":                 {"mediator", "behaviors"},
	"durable": {"mediator", "behaviors", "behaviors/retry", "behaviors/breaker", "behaviors/budget", "behaviors/ratelimit", "durable/record",
		"durable/driver", "durable/internal/exec", "durable/internal/store", "durable/internal/dbhealth", "durable/internal/notify", "durable/internal/gate",
		"durable/internal/executor", "durable/internal/maintenance", "durable/internal/claimloop"},
	// The engine's services (docs/architecture.md, "The durable engine"): each imports the
	// store and what it needs of the behaviors, none imports another except the executor the
	// gate it asks; the claim loop reaches the executor and the gate through interfaces.
	"durable/internal/dbhealth":    {},
	"durable/internal/notify":      {"durable/internal/dbhealth", "durable/internal/store"},
	"durable/internal/gate":        {"mediator", "behaviors", "behaviors/breaker", "behaviors/budget", "behaviors/retry", "durable/internal/dbhealth", "durable/internal/store"},
	"durable/internal/executor":    {"mediator", "behaviors", "behaviors/retry", "durable/internal/gate", "durable/internal/store"},
	"durable/internal/maintenance": {"behaviors", "durable/internal/dbhealth", "durable/internal/store"},
	"durable/internal/claimloop":   {"behaviors", "durable/internal/dbhealth", "durable/internal/maintenance", "durable/internal/store"},
	"durable/record":               {},
	"durable/internal/store":       {"durable/driver", "durable/record"},
	"durable/driver":               {"durable/record"},
	"durable/internal/exec":        {"mediator", "durable/internal/store"},
	"durable/internal/pgxconn":     {},
	"durable/internal/pgtest":      {"durable/internal/pgxconn"},
	"durable/sqlite":               {"durable/driver", "durable/internal/store"},
	"durable/postgres":             {"durable/driver", "durable/internal/store", "durable/internal/pgxconn"},
	"durable/drivertest":           {"mediator", "behaviors", "behaviors/breaker", "behaviors/ratelimit", "behaviors/retry", "durable", "durable/driver", "durable/record"},
	"durable/durabletest":          {"mediator", "durable", "durable/record", "durable/sqlite", "durable/postgres", "durable/internal/exec", "durable/internal/pgtest"},
	"internal/browsertest":         {},
	"admin":                        {"mediator", "behaviors", "behaviors/breaker", "behaviors/budget", "behaviors/hedge", "behaviors/ratelimit", "durable", "durable/record"},
	// The operator's command-line tool: the drivers for its migrations, and the admin API over
	// HTTP for the rest (so it imports neither admin nor durable: every change goes through
	// the API, authorised and audited).
	"cmd/switchboard": {"durable/driver", "durable/sqlite", "durable/postgres"},
}

// driverFree are the packages that must not link a database driver, directly or through
// anything they import: a service that uses them with one database, or none, links only
// what it chose (the drivers live in durable/sqlite and durable/postgres).
var driverFree = []string{
	"mediator", "handlers", "behaviors/...", "httpcall", "logging", "metrics", "tracing", "health", "admin",
	"durable", "durable/record", "durable/driver", "durable/drivertest", "durable/internal/store", "durable/internal/exec", "durable/internal/dbhealth",
	"durable/internal/notify", "durable/internal/gate", "durable/internal/executor", "durable/internal/maintenance",
	"durable/internal/claimloop",
}

// drivers are the import paths of database drivers, as prefixes.
var drivers = []string{"modernc.org/sqlite", "github.com/jackc/pgx", "github.com/lib/pq", "github.com/mattn/go-sqlite3"}

// matches reports whether pkg (relative to the module) is named by pattern: the same path, or
// a path below a pattern ending in "/...".
func matches(pattern, pkg string) bool {
	if dir, ok := strings.CutSuffix(pattern, "/..."); ok {
		return pkg == dir || strings.HasPrefix(pkg, dir+"/")
	}
	return pattern == pkg
}

// goList runs go list over the module's packages with format and returns its lines.
func goList(t *testing.T, args ...string) []string {
	t.Helper()
	if testing.Short() {
		t.Skip("runs go list over the module")
	}
	cmd := exec.Command("go", append([]string{"list"}, args...)...)
	cmd.Dir = ".."
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list %s: %v\n%s", strings.Join(args, " "), err, stderr.String())
	}
	var lines []string
	sc := bufio.NewScanner(bytes.NewReader(out))
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		lines = append(lines, sc.Text())
	}
	return lines
}

// TestPackagesImportDownwardOnly fails when a library package imports one of the module that
// its floor does not allow (an upward or sideways import the architecture does not have), or
// when a package has no floor.
func TestPackagesImportDownwardOnly(t *testing.T) {
	for _, line := range goList(t, "-f", "{{.ImportPath}}{{range .Imports}} {{.}}{{end}}", "./...") {
		fields := strings.Fields(line)
		pkg, ok := strings.CutPrefix(fields[0], module+"/")
		if !ok || matches("examples/...", pkg) || matches("scripts/...", pkg) || pkg == "docs" {
			continue
		}
		allowed, known := floor(pkg)
		if !known {
			t.Errorf("%s has no floor: give it its place in floors and in docs/architecture.md", pkg)
			continue
		}
		for _, imp := range fields[1:] {
			dep, ok := strings.CutPrefix(imp, module+"/")
			if !ok {
				continue
			}
			if !slices.ContainsFunc(allowed, func(p string) bool { return matches(p, dep) }) {
				t.Errorf("%s imports %s, above or beside its floor %v", pkg, dep, allowed)
			}
		}
	}
}

// floor returns the allowed imports of pkg: its own entry, or that of a "/..." pattern naming it.
func floor(pkg string) ([]string, bool) {
	if f, ok := floors[pkg]; ok {
		return f, true
	}
	for pattern, f := range floors {
		if strings.HasSuffix(pattern, "/...") && matches(pattern, pkg) {
			return f, true
		}
	}
	return nil, false
}

// TestNoDatabaseDriverBelowTheDrivers fails when a package that must stay driver-free links a
// database driver through any of its dependencies.
func TestNoDatabaseDriverBelowTheDrivers(t *testing.T) {
	var pkgs []string
	for _, p := range driverFree {
		pkgs = append(pkgs, "./"+p)
	}
	for _, line := range goList(t, append([]string{"-f", "{{.ImportPath}}{{range .Deps}} {{.}}{{end}}"}, pkgs...)...) {
		fields := strings.Fields(line)
		for _, dep := range fields[1:] {
			for _, d := range drivers {
				if dep == d || strings.HasPrefix(dep, d+"/") {
					t.Errorf("%s links the database driver %s", fields[0], dep)
				}
			}
		}
	}
}
