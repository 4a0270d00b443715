package docs

import (
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// The observers depend on no durable code and no database driver (observability.md says so),
// so a program traced or measured without a queue links none.
func TestObserversDependOnNoQueue(t *testing.T) {
	for pkg, needed := range map[string]string{
		"metrics": "github.com/prometheus/client_golang/prometheus",
		"tracing": "go.opentelemetry.io/otel/trace",
	} {
		out, err := exec.Command("go", "list", "-deps", "github.com/switchboard-go/switchboard/"+pkg).Output()
		if err != nil {
			t.Fatalf("go list %s: %v", pkg, err)
		}
		deps := strings.Fields(string(out))
		for _, dep := range deps {
			if strings.HasPrefix(dep, "github.com/switchboard-go/switchboard/durable") || dep == "database/sql" ||
				strings.HasPrefix(dep, "github.com/jackc/pgx") || strings.HasPrefix(dep, "modernc.org/sqlite") {
				t.Errorf("%s depends on %s", pkg, dep)
			}
		}
		if !slices.Contains(deps, needed) {
			t.Errorf("%s does not depend on %s: the check would pass for any list", pkg, needed)
		}
	}
}

// A mediator measured by package metrics is at most 1.1 times the size of one counting by hand
// with the Prometheus client alone, and one traced by package tracing at most 1.1 times one
// tracing by hand with the OpenTelemetry API alone (the programs are in testdata/observers). It
// builds four programs, so -short skips it.
func TestObserverBinarySizes(t *testing.T) {
	if testing.Short() {
		t.Skip("builds four programs")
	}
	for _, c := range []struct{ alone, with string }{{"prometheus", "metrics"}, {"otel", "tracing"}} {
		base, with := binarySize(t, c.alone), binarySize(t, c.with)
		ratio := float64(with) / float64(base)
		t.Logf("mediator + %s: %d bytes; mediator + %s: %d bytes (%.3f×)", c.alone, base, c.with, with, ratio)
		if ratio > 1.1 {
			t.Errorf("mediator + %s is %.3f× mediator + %s alone, above 1.1×", c.with, ratio, c.alone)
		}
	}
}

// binarySize builds testdata/observers/<program> and returns its binary's size.
func binarySize(t *testing.T, program string) int64 {
	t.Helper()
	bin := filepath.Join(t.TempDir(), program)
	if out, err := exec.Command("go", "build", "-o", bin, "./testdata/observers/"+program).CombinedOutput(); err != nil {
		t.Fatalf("go build %s: %v\n%s", program, err, out)
	}
	fi, err := os.Stat(bin)
	if err != nil {
		t.Fatal(err)
	}
	return fi.Size()
}
