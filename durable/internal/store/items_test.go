package store

import (
	"context"
	"database/sql"
	"fmt"
	"github.com/switchboard-go/switchboard/durable/record"
	"slices"
	"strings"
	"testing"
	"time"
)

// itemListShapes are the listing shapes, one per filter combination that picks its index or
// its statement, each reading a page after a cursor.
func itemListShapes() []struct {
	name  string
	q     ItemQuery
	after ItemCursor
} {
	mid := ItemCursor{At: 1700000002010000, ID: 1010000}
	type shape = struct {
		name  string
		q     ItemQuery
		after ItemCursor
	}
	to := time.UnixMicro(1700000009000000)
	return []shape{
		{"pending", ItemQuery{State: StatePending, Limit: 51}, mid},
		{"pending_alone", ItemQuery{State: StatePending, Limit: 51}, ItemCursor{Isolate: true, At: mid.At, ID: mid.ID}},
		{"pending_range_name", ItemQuery{State: StatePending, Name: "rare.work", To: to, Limit: 51}, mid},
		{"parked", ItemQuery{State: StatePending, Parked: true, Limit: 51}, ItemCursor{Key: "breaker:a", At: mid.At, ID: mid.ID}},
		{"parked_key", ItemQuery{State: StatePending, Parked: true, Key: "breaker:a", To: to, Limit: 51}, mid},
		{"parked_key_name", ItemQuery{State: StatePending, Parked: true, Key: "breaker:a", Name: "rare.work", Limit: 51}, mid},
		{"running", ItemQuery{State: StateRunning, Limit: 51}, mid},
		{"succeeded", ItemQuery{State: StateSucceeded, Limit: 51}, mid},
		{"succeeded_range_name", ItemQuery{State: StateSucceeded, Name: "rare.work", From: time.UnixMicro(1700000000500000), Limit: 51}, mid},
		{"dead", ItemQuery{State: StateDead, Limit: 51}, mid},
		{"cancelled", ItemQuery{State: StateCancelled, Limit: 51}, ItemCursor{}},
	}
}

// TestItemListPlans checks that every listing shape's generic plan on PostgreSQL reads an
// index range in the listing's order (no sort, no table scan) over 1,000,000 finished items,
// and that a page a thousand pages in reads no more buffers than twice the first page's.
func TestItemListPlans(t *testing.T) {
	dsn := pgDSN(t)
	if dsn == "" {
		t.Skipf("%s not set", pgDSNEnv)
	}
	if testing.Short() {
		t.Skip("seeds 1,000,000 rows")
	}
	st := postgresBackend(t, dsn).open(t)
	db := st.DB()
	planFixture(t, db, "drained")
	for _, q := range []string{
		`UPDATE switchboard_items SET parked_key = CASE WHEN id % 2 = 0 THEN 'breaker:a' ELSE 'breaker:b' END
			WHERE state = 'pending' AND id % 7 = 0`,
		`UPDATE switchboard_items SET name = 'rare.work' WHERE id % 1000 = 3`,
		`UPDATE switchboard_items SET state = 'dead' WHERE state = 'succeeded' AND id % 100 = 5`,
		`UPDATE switchboard_items SET state = 'cancelled' WHERE state = 'pending' AND parked_key IS NULL AND id % 100 = 6`,
		// Statistics over every row, not a sample: the generic plans of the rare shapes
		// (parked_key_name matches no row) turn on the columns' estimated distinct counts, which
		// a sample of 30,000 of 1,000,000 rows gives differently from one ANALYZE to the next.
		`ALTER TABLE switchboard_items ALTER COLUMN state SET STATISTICS 10000,
			ALTER COLUMN name SET STATISTICS 10000, ALTER COLUMN parked_key SET STATISTICS 10000`,
		"ANALYZE switchboard_items",
	} {
		if _, err := db.Exec(q); err != nil {
			t.Fatal(err)
		}
	}
	var cases []planCase
	for _, sh := range itemListShapes() {
		query, args := itemListSQL(sh.q, sh.after)
		cases = append(cases, planCase{name: "items_" + sh.name, query: Postgres.rebind(query), args: args, noSort: true})
	}
	assertIndexPlans(t, db, cases, nil)

	// Page 1 and page 1,000 of 50 of the succeeded items read about as many buffers.
	q := ItemQuery{State: StateSucceeded, Limit: 51}
	row := db.QueryRow(`SELECT updated_at, id FROM switchboard_items WHERE state = 'succeeded' ORDER BY updated_at DESC, id DESC OFFSET 49949 LIMIT 1`)
	var at, id int64
	if err := row.Scan(&at, &id); err != nil {
		t.Fatal(err)
	}
	b1, r1 := pageBuffers(t, db, q, ItemCursor{})
	b1000, r1000 := pageBuffers(t, db, q, ItemCursor{At: at, ID: ItemID(id)})
	t.Logf("buffers read: page 1 %d (%d rows), page 1000 %d (%d rows)", b1, r1, b1000, r1000)
	if r1 != 51 || r1000 != 51 || b1000 > 2*b1+2 {
		t.Errorf("page 1000 read %d buffers for %d rows, page 1 %d for %d: want at most twice as many", b1000, r1000, b1, r1)
	}
}

// pageBuffers runs q under EXPLAIN (ANALYZE, BUFFERS) and returns the buffers its plan read
// and the rows it returned.
func pageBuffers(t *testing.T, db *sql.DB, q ItemQuery, after ItemCursor) (buffers, rows int) {
	t.Helper()
	query, args := itemListSQL(q, after)
	return planBuffers(t, db, Postgres.rebind(query), args...)
}

// TestItemListSQLitePlans checks that SQLite reads every listing shape through an index in
// its order: no temporary b-tree sorts the rows.
func TestItemListSQLitePlans(t *testing.T) {
	db := sqliteBackend(t).open(t).DB()
	for _, sh := range itemListShapes() {
		query, args := itemListSQL(sh.q, sh.after)
		text := strings.Join(sqlitePlan(t, db, query, args...), "; ")
		t.Logf("%s: %s", sh.name, text)
		if strings.Contains(text, "TEMP B-TREE") || !strings.Contains(text, "USING INDEX") && !strings.Contains(text, "USING COVERING INDEX") {
			t.Errorf("%s: plan %s: want an index read in order, no sort", sh.name, text)
		}
	}
}

// TestListItems pages through the items of each listing on every engine: every item once, in
// the listing's order, with the filters applied.
func TestListItems(t *testing.T) {
	eachBackend(t, func(t *testing.T, b backend) {
		ctx := context.Background()
		s := b.open(t)
		t0 := time.Date(2027, 1, 1, 0, 0, 0, 0, time.UTC)
		var due, parkedX []ItemID
		for i := range 23 {
			name := "a.work"
			if i%3 == 0 {
				name = "b.work"
			}
			parked := ""
			if i%4 == 0 {
				parked = "breaker:x"
			} else if i%4 == 1 {
				parked = "breaker:w"
			}
			// due times tie in pairs: those are listed by id; later items are due sooner
			id, _, err := s.Enqueue(ctx, NewItem{Name: name, Payload: []byte("{}"), NextAt: t0.Add(time.Duration(30-i/2) * time.Second), Now: t0, ParkedKey: parked})
			if err != nil {
				t.Fatal(err)
			}
			due = append(due, id)
			if parked == "breaker:x" && name == "b.work" && 30-i/2 < 29 {
				parkedX = append(parkedX, id)
			}
		}
		page := func(q ItemQuery) []ItemID {
			var got []ItemID
			for {
				items, err := s.ListItems(ctx, q)
				if err != nil {
					t.Fatal(err)
				}
				for _, it := range items {
					got = append(got, it.ID)
				}
				if len(items) < q.Limit {
					return got
				}
				q.After = CursorOf(q, items[len(items)-1])
			}
		}
		byDue := func(ids []ItemID) []ItemID {
			out := slices.Clone(ids)
			slices.SortStableFunc(out, func(a, b ItemID) int {
				ta, tb := 30-(int(a-due[0]))/2, 30-(int(b-due[0]))/2
				if ta != tb {
					return ta - tb
				}
				return int(a - b)
			})
			return out
		}
		if got, want := page(ItemQuery{State: StatePending, Limit: 5}), byDue(due); !slices.Equal(got, want) {
			t.Errorf("pending pages: %v, want %v", got, want)
		}
		if got, want := page(ItemQuery{State: StatePending, Parked: true, Key: "breaker:x", Name: "b.work", To: t0.Add(29 * time.Second), Limit: 2}), byDue(parkedX); !slices.Equal(got, want) {
			t.Errorf("key+name+to pages: %v, want %v", got, want)
		}
		var w, x []ItemID
		for i, id := range due {
			switch i % 4 {
			case 0:
				x = append(x, id)
			case 1:
				w = append(w, id)
			}
		}
		if got, want := page(ItemQuery{State: StatePending, Parked: true, Limit: 4}), append(byDue(w), byDue(x)...); !slices.Equal(got, want) {
			t.Errorf("parked pages: %v, want %v", got, want)
		}
		// Claimed, then finished one by one: running by lease end, succeeded newest first.
		claimed, err := s.Claim(ctx, "w1", t0.Add(time.Minute), time.Minute, 100)
		if err != nil || len(claimed) != 23 {
			t.Fatalf("claim: %d, %v", len(claimed), err)
		}
		if got := page(ItemQuery{State: StateRunning, Limit: 7}); len(got) != 23 {
			t.Errorf("running: %v", got)
		}
		var done []ItemID
		for i, c := range claimed {
			end := t0.Add(time.Duration(2+i/3) * time.Minute)
			if _, err := s.Complete(ctx, []Completion{{Fence: c.Fence(), State: StateSucceeded, Outcome: OutcomeSucceeded, StartedAt: end, EndedAt: end}}); err != nil {
				t.Fatal(err)
			}
			done = append(done, c.ID)
		}
		slices.Reverse(done)
		if got := page(ItemQuery{State: StateSucceeded, Limit: 4}); !slices.Equal(got, done) {
			t.Errorf("succeeded pages: %v, want %v", got, done)
		}
		if got := page(ItemQuery{State: StateSucceeded, From: t0.Add(9 * time.Minute), To: t0.Add(10 * time.Minute), Limit: 1}); !slices.Equal(got, done[:2]) {
			t.Errorf("succeeded in [t0+9m, t0+10m): %v, want %v", got, done[:2])
		}
		if got := page(ItemQuery{State: StateDead, Limit: 5}); len(got) != 0 {
			t.Errorf("dead: %v, want none", got)
		}
	})
}

// TestCancelItem cancels a pending item (auditing it, freeing its dedupe key) and leaves a
// running one as it is, on every engine.
func TestCancelItem(t *testing.T) {
	eachBackend(t, func(t *testing.T, b backend) {
		ctx := context.Background()
		s := b.open(t)
		now := time.Date(2027, 1, 1, 0, 0, 0, 0, time.UTC)
		audit := func(changed bool, it Item, _ *PauseRow) AuditRow {
			return AuditRow{At: now, Actor: "op", Action: "cancel", TargetKind: "item", Target: fmt.Sprint(it.ID), Outcome: record.AuditOutcome(fmt.Sprint(changed))}
		}
		a, _, err := s.Enqueue(ctx, NewItem{Name: "w", NextAt: now, Now: now, DedupeKey: "k", ParkedKey: "breaker:x"})
		if err != nil {
			t.Fatal(err)
		}
		it, changed, found, err := s.CancelItem(ctx, ItemChange{ID: a, Now: now, Audit: audit})
		if err != nil || !changed || !found || it.State != StateCancelled || it.ParkedKey != "" {
			t.Fatalf("cancel: %+v changed=%v found=%v %v", it, changed, found, err)
		}
		if _, again, err := s.Enqueue(ctx, NewItem{Name: "w", NextAt: now, Now: now, DedupeKey: "k"}); err != nil || again {
			t.Errorf("enqueue with the cancelled item's dedupe key: duplicate=%v %v, want a new item", again, err)
		}
		claimed, err := s.Claim(ctx, "w1", now, time.Minute, 10)
		if err != nil || len(claimed) != 1 || claimed[0].ID == a {
			t.Fatalf("claim: %v %v, want the new item alone", claimed, err)
		}
		it, changed, found, err = s.CancelItem(ctx, ItemChange{ID: claimed[0].ID, Now: now, Audit: audit})
		if err != nil || changed || !found || it.State != StateRunning {
			t.Errorf("cancel running: %+v changed=%v found=%v %v", it, changed, found, err)
		}
		if _, _, found, err = s.CancelItem(ctx, ItemChange{ID: 999999, Now: now, Audit: audit}); err != nil || found {
			t.Errorf("cancel unknown: found=%v %v", found, err)
		}
		rows, err := s.Audit(ctx, AuditQuery{TargetKind: "item", Limit: 10})
		if err != nil || len(rows) != 2 || rows[0].Outcome != "false" || rows[1].Outcome != "true" {
			t.Errorf("audit: %+v %v, want the two cancels", rows, err)
		}
		st, err := s.Stats(ctx, now, 1000)
		if err != nil || st.Counts[StateCancelled] != 1 {
			t.Errorf("stats: %v %v, want one cancelled", st.Counts, err)
		}
	})
}
