package store

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/switchboard-go/switchboard/durable/record"
)

// Migration 0026 over a database with letter actions: the actions keep their ids and columns,
// the next action's id follows them, the item kinds are admitted and another kind still is not.
func TestMigration0026KeepsLetterActions(t *testing.T) {
	eachBackend(t, func(t *testing.T, b backend) {
		ctx := context.Background()
		db := b.pool(t)
		ms := must[[]Migration](t)(Migrations(b.engine))
		var before, after []Migration
		for _, m := range ms {
			if m.Version < 26 {
				before = append(before, m)
			} else {
				after = append(after, m)
			}
		}
		if err := Apply(ctx, db, b.engine, before, nil); err != nil {
			t.Fatal(err)
		}
		for _, q := range []string{
			`INSERT INTO switchboard_bulk_actions (kind, filter, actor, state, rate, in_flight, max_letter, matched, cursor_id, replayed, created_at, updated_at, finished_at)
			VALUES ('replay', '{"source":"a"}', 'alice', 'done', 50, 4, 9, 3, 9, 3, 1, 2, 2)`,
			`INSERT INTO switchboard_bulk_actions (kind, filter, actor, state, rate, in_flight, max_letter, matched, created_at, updated_at)
			VALUES ('discard', '{}', 'bob', 'queued', 20, 4, 12, 5, 3, 3)`,
		} {
			if _, err := db.Exec(q); err != nil {
				t.Fatal(err)
			}
		}
		if err := Apply(ctx, db, b.engine, after, nil); err != nil {
			t.Fatal(err)
		}
		s := New(db, b.engine, false)
		old := must[[]BulkActionRow](t)(s.BulkActions(ctx, 0, 10, false))
		if len(old) != 2 || old[0].ID != 2 || old[0].Kind != "discard" || old[0].MaxLetter != 12 || old[1].ID != 1 || old[1].Replayed != 3 ||
			old[1].Cursor != 9 || old[1].MaxItem != 0 || old[1].Changed != 0 {
			t.Fatalf("letter actions after the migration: %+v", old)
		}
		now := time.Now()
		id, err := s.InsertBulkAction(ctx, BulkActionRow{Kind: string(record.BulkSetItemPriority), Filter: `{"name":"n"}`, Actor: "carol", State: BulkQueued,
			Rate: 50, InFlight: 1, Priority: 7, MaxItem: 40, Matched: 4, CreatedAt: now}, AuditRow{At: now, Actor: "carol", Action: "bulk_set_priority",
			TargetKind: "bulk_action", Outcome: record.AuditDone})
		if err != nil || id != 3 {
			t.Fatalf("an item action after the migration: id %d, %v", id, err)
		}
		items := must[[]BulkActionRow](t)(s.BulkActions(ctx, 0, 10, true))
		if len(items) != 1 || items[0].Priority != 7 || items[0].MaxItem != 40 || items[0].Kind != "set_priority" {
			t.Fatalf("item actions: %+v", items)
		}
		_, err = db.Exec(`INSERT INTO switchboard_bulk_actions (kind, filter, actor, state, rate, in_flight, max_letter, matched, created_at, updated_at)
			VALUES ('explode', '{}', 'x', 'queued', 1, 1, 0, 0, 1, 1)`)
		if err == nil || !strings.Contains(err.Error(), "switchboard_bulk_actions_kind") && !strings.Contains(strings.ToLower(err.Error()), "check") {
			t.Fatalf("an unknown kind: %v", err)
		}
	})
}

// The statements of a bulk action on items read indexes in their generic plans over 1,000,000
// finished items and a backlog of pending ones: its next items by id from the cursor, whatever
// the filter, and the count of its start.
func TestItemBulkPlans(t *testing.T) {
	dsn := pgDSN(t)
	if dsn == "" {
		t.Skipf("%s not set", pgDSNEnv)
	}
	if testing.Short() {
		t.Skip("seeds 1,000,000 rows")
	}
	s := postgresBackend(t, dsn).open(t)
	planFixture(t, s.DB(), "current")
	var cases []planCase
	for _, q := range []ItemQuery{{}, {Name: "test.work"}, {Key: "k"}, {Parked: true, From: time.UnixMicro(1), To: time.UnixMicro(2)}} {
		where, args := itemBulkWhere(q)
		cases = append(cases,
			planCase{fmt.Sprintf("bulk_items %+v", q), s.e.rebind("SELECT " + itemColumns + " FROM switchboard_items" + where + " AND id > ? AND id <= ? ORDER BY id LIMIT ?"),
				append(args, int64(1_000_500), int64(1_020_000), 100), false, false, false},
			planCase{fmt.Sprintf("count_bulk_items %+v", q), s.e.rebind("SELECT COUNT(*) FROM switchboard_items" + where + " AND id <= ?"),
				append(slices.Clone(args), int64(1_020_000)), false, false, false})
	}
	assertIndexPlans(t, s.DB(), cases, nil)
}
