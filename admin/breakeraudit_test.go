package admin_test

import (
	"context"
	"net/http"
	"strings"
	"testing"

	"github.com/switchboard-go/switchboard/durable"
	"github.com/switchboard-go/switchboard/durable/record"
)

// A trip and a reset through the admin are in the queue's audit log under the principal, the
// registry's sharing said: they were not, though the command-line tool's help said so and the
// issue asks that every action through the API be audited.
func TestBreakerTripAndResetAreAudited(t *testing.T) {
	f := newFixture(t, durableConfig())
	want(t, auth(t, f.h, "POST", "/api/breakers/payments/trip", ""), http.StatusOK)
	want(t, auth(t, f.h, "POST", "/api/breakers/payments/reset", ""), http.StatusOK)
	res := auth(t, f.h, "GET", "/api/audit?target_kind=breaker_key&target=payments", "")
	want(t, res, http.StatusOK)
	entries, _ := res.body["entries"].([]any)
	var got []string
	for _, e := range entries {
		m := e.(map[string]any)
		got = append(got, m["action"].(string)+" by "+m["actor"].(string))
		if !strings.Contains(m["detail"].(string), "this instance only") {
			t.Errorf("the entry %v does not say the registry is this instance's alone", m)
		}
	}
	if strings.Join(got, ", ") != "reset by admin, trip by admin" {
		t.Errorf("the audit log of the breaker: %q", got)
	}
	// A read is not an action.
	want(t, auth(t, f.h, "GET", "/api/breakers/payments", ""), http.StatusOK)
	if es, _ := f.q.Audit(context.Background(), durable.AuditFilter{TargetKind: record.AuditTargetBreakerKey}); len(es) != 2 {
		t.Errorf("%d entries after a read; want the 2 actions", len(es))
	}
	if err := f.q.RecordBreakerAction(context.Background(), "admin", record.AuditPauseSchedule, "payments", ""); err == nil ||
		!strings.Contains(err.Error(), `action "pause" is neither "trip" nor "reset"`) {
		t.Errorf("RecordBreakerAction of a schedule's action: %v", err)
	}
}
