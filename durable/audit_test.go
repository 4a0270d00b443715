package durable_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/switchboard-go/switchboard/durable"
	"github.com/switchboard-go/switchboard/durable/record"
)

// TestAuditLog: entries come back newest first, by target, page by page, with what they said.
func TestAuditLog(t *testing.T) {
	eachBackend(t, func(t *testing.T, b backend) {
		e := newEnv(t, b)
		ctx := context.Background()
		add := func(action record.AuditAction, kind record.AuditTarget, target, detail string) {
			t.Helper()
			if err := durable.AuditFor(e.q, record.AuditEntry{Actor: "ops", Action: action, TargetKind: kind, Target: target,
				Detail: detail, Outcome: record.AuditDone}); err != nil {
				t.Fatal(err)
			}
			e.clock.Advance(time.Second)
		}
		add("pause", "name", "mail.send", "until the fix ships")
		add("cancel", "item", "17", "")
		add("resume", "name", "mail.send", "")
		all := must[[]record.AuditEntry](t)(e.q.Audit(ctx, durable.AuditFilter{}))
		if len(all) != 3 || all[0].Action != "resume" || all[2].Action != "pause" || all[2].Detail != "until the fix ships" ||
			all[1].Detail != "" || all[0].Actor != "ops" || !all[0].At.After(all[2].At) {
			t.Fatalf("log = %+v", all)
		}
		names := must[[]record.AuditEntry](t)(e.q.Audit(ctx, durable.AuditFilter{TargetKind: "name", Target: "mail.send"}))
		if len(names) != 2 || names[0].Action != "resume" || names[1].Action != "pause" {
			t.Fatalf("by target = %+v", names)
		}
		page := must[[]record.AuditEntry](t)(e.q.Audit(ctx, durable.AuditFilter{Limit: 2}))
		next := must[[]record.AuditEntry](t)(e.q.Audit(ctx, durable.AuditFilter{Limit: 2, Before: page[1].ID}))
		if len(page) != 2 || len(next) != 1 || next[0].Action != "pause" {
			t.Fatalf("pages = %+v, %+v", page, next)
		}
	})
}

// TestAuditFilterRefusesBadInput: every problem of a filter is named.
func TestAuditFilterRefusesBadInput(t *testing.T) {
	q := typesQueue(t)
	_, err := q.Audit(context.Background(), durable.AuditFilter{Limit: 501, Before: -1, Target: "x"})
	if err == nil {
		t.Fatal("accepted")
	}
	_, kindErr := q.Audit(context.Background(), durable.AuditFilter{TargetKind: "planet"})
	if kindErr == nil || !strings.Contains(kindErr.Error(), `TargetKind "planet" is none of`) {
		t.Errorf("an unknown target kind: %v", kindErr)
	}
	for _, want := range []string{"Limit 501", "Before -1", "Target is set without TargetKind"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not name %q", err, want)
		}
	}
}
