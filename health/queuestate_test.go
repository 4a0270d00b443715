package health_test

import (
	"context"
	"net/http"
	"os/exec"
	"slices"
	"strings"
	"testing"

	"github.com/switchboard-go/switchboard/durable"
	"github.com/switchboard-go/switchboard/health"
)

var _ health.QueueState = (*durable.Queue)(nil)

// standIn is a QueueState that is not a durable queue.
type standIn struct {
	missing    []int
	scheduling bool
}

func (s standIn) MissingMigrations(context.Context) ([]int, error) { return s.missing, nil }
func (s standIn) Scheduling() bool                                 { return s.scheduling }

// The queue checks ask Config.Queue for two methods only: anything that has them can be
// checked, and the package links no queue, nor its databases.
func TestQueueChecksNeedOnlyTheQueueState(t *testing.T) {
	p := probes(t, health.Config{Queue: standIn{missing: []int{7}, scheduling: true}})
	w, rep := probe(t, p.Readiness(), http.MethodGet)
	if w.Code != http.StatusServiceUnavailable {
		t.Fatalf("status %d, want 503", w.Code)
	}
	wantStatuses(t, rep, map[string]health.Status{"store": health.StatusOK, "migrations": health.StatusFailed, "scheduler": health.StatusOK})

	out, err := exec.Command("go", "list", "-deps", "github.com/switchboard-go/switchboard/health").Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	deps := strings.Fields(string(out))
	for _, bad := range []string{"github.com/switchboard-go/switchboard/durable", "github.com/jackc/pgx/v5", "modernc.org/sqlite"} {
		if slices.Contains(deps, bad) {
			t.Errorf("health depends on %s", bad)
		}
	}
}
