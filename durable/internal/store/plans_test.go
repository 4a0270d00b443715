// The plan checks: the scheduler's PostgreSQL statements must probe indexes in their generic
// plans, whatever the tables hold.

package store

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"
)

// planCase is one statement whose generic plan is checked: its text with $n placeholders and
// sample arguments of the right types (the generic plan does not depend on their values).
type planCase struct {
	name  string
	query string
	args  []any
	// noSort: the plan must not sort (a listing read in its index's order, a page at a time).
	noSort bool
	// scansOff: the store runs it with sequential scans off (indexPlans: the claim loop's
	// round trips), and its plan is checked so.
	scansOff bool
	// replanned: the store plans it anew at every run (customPlans), and its plan is checked
	// so: the one made on the tables as they are when it is checked.
	replanned bool
}

// planNode is the part of an EXPLAIN (FORMAT JSON) node the checks read.
type planNode struct {
	NodeType  string     `json:"Node Type"`
	Relation  string     `json:"Relation Name"`
	Index     string     `json:"Index Name"`
	IndexCond string     `json:"Index Cond"`
	Filter    string     `json:"Filter"`
	Parent    string     `json:"Parent Relationship"`
	Plans     []planNode `json:"Plans"`
}

// planGuarded are the tables that grow without bound: no statement may read them whole.
var planGuarded = map[string]bool{"switchboard_items": true, "switchboard_attempts": true, "switchboard_breakers": true}

// assertIndexPlans checks the plan PostgreSQL uses for each statement once it has switched the
// prepared statement to its generic plan (which the pgx driver's statement cache lets happen
// after five executions on a connection). On one connection with plan_cache_mode =
// force_generic_plan it PREPAREs the statement and reads EXPLAIN (FORMAT JSON) EXECUTE with the
// sample arguments. It fails the test when a node
//   - is a Seq Scan on switchboard_items or switchboard_attempts;
//   - is an Index Scan or Index Only Scan on one of them without an Index Cond (it reads the
//     whole index: the completion's old generic plan read every running item through the lease
//     index this way);
//   - is a Nested Loop whose inner side is not an index scan (it re-reads that side for every
//     outer row: the same plan joined each running item to every completion that way);
//   - scans one of them with a Filter that tests an array (= ANY): the array is searched for
//     every row the scan reads, where probing the primary key with it would read only its
//     elements (the old extend read every running item this way);
//   - scans one of them through an index whose only condition is on state: it reads every item
//     in that state (every pending item, sorted, for a claim of 500).
//
// The statistics of the tables decide the plans: call it on tables that hold the data (and the
// statistics) of interest.
func assertIndexPlans(t *testing.T, db *sql.DB, stmts []planCase, fill func()) {
	t.Helper()
	ctx := context.Background()
	conn, err := db.Conn(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	exec := func(q string) {
		t.Helper()
		if _, err := conn.ExecContext(ctx, q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	exec("SET plan_cache_mode = force_generic_plan")
	defer exec("RESET plan_cache_mode")
	calls := make([]string, len(stmts))
	for i, sc := range stmts {
		name := fmt.Sprintf("plancheck_%d", i)
		exec("PREPARE " + name + " AS " + sc.query)
		defer exec("DEALLOCATE " + name)
		calls[i] = "EXECUTE " + name
		if len(sc.args) > 0 {
			lits := make([]string, len(sc.args))
			for j, a := range sc.args {
				lits[j] = sqlLiteral(t, a)
			}
			calls[i] += "(" + strings.Join(lits, ", ") + ")"
		}
	}
	// explain reads the plan of statement i, the one the connection keeps for it (planned at
	// its first explain), with sequential scans off for a statement the store runs that way,
	// planned anew for one the store plans at every run: the lines of its EXPLAIN in format.
	explain := func(i int, format string) []string {
		t.Helper()
		if stmts[i].scansOff {
			exec("SET enable_seqscan = off")
			defer exec("RESET enable_seqscan")
		}
		if stmts[i].replanned {
			exec("SET plan_cache_mode = force_custom_plan")
			defer exec("SET plan_cache_mode = force_generic_plan")
		}
		rows, err := conn.QueryContext(ctx, "EXPLAIN "+format+calls[i])
		if err != nil {
			t.Fatalf("%s: explain: %v", stmts[i].name, err)
		}
		defer rows.Close()
		var lines []string
		for rows.Next() {
			var line string
			if err := rows.Scan(&line); err != nil {
				t.Fatalf("%s: explain: %v", stmts[i].name, err)
			}
			lines = append(lines, line)
		}
		if err := rows.Err(); err != nil {
			t.Fatalf("%s: explain: %v", stmts[i].name, err)
		}
		return lines
	}
	if fill != nil {
		// Each statement is planned now, on the tables as they are, and keeps that plan while
		// fill changes what they hold.
		for i := range stmts {
			explain(i, "")
		}
		fill()
	}
	for i, sc := range stmts {
		var doc []struct {
			Plan planNode `json:"Plan"`
		}
		if err := json.Unmarshal([]byte(strings.Join(explain(i, "(FORMAT JSON) "), "\n")), &doc); err != nil || len(doc) != 1 {
			t.Fatalf("%s: explain output: %v", sc.name, err)
		}
		problems := planProblems(doc[0].Plan)
		if sc.noSort {
			problems = append(problems, sortProblems(doc[0].Plan)...)
		}
		if len(problems) > 0 {
			text := explain(i, "")
			t.Errorf("%s: generic plan %s\n%s", sc.name, strings.Join(problems, "; "), strings.Join(text, "\n"))
		}
	}
}

// probesIndex reports whether n reads its rows through an index scan, possibly under a LATERAL
// subquery's wrappers that pass its rows on (the fair claim's per-key subquery: a Subquery Scan
// of a Limit of a LockRows of the index scan).
func probesIndex(n planNode) bool {
	switch n.NodeType {
	case "Index Scan", "Index Only Scan", "Bitmap Heap Scan", "Tid Scan":
		// A Tid Scan reads the one row its TID names (the completion finds the rows its lock
		// step locked by their ctid).
		return true
	case "Subquery Scan", "Limit", "LockRows":
		for _, c := range n.Plans {
			if c.Parent == "Outer" || c.Parent == "Subquery" {
				return probesIndex(c)
			}
		}
	}
	return false
}

func planProblems(n planNode) []string {
	var out []string
	switch n.NodeType {
	case "Seq Scan":
		if planGuarded[n.Relation] {
			out = append(out, "has a Seq Scan on "+n.Relation)
		}
	case "Index Scan", "Index Only Scan", "Bitmap Index Scan":
		if planGuarded[n.Relation] && n.IndexCond == "" {
			out = append(out, fmt.Sprintf("reads all of index %s on %s (%s without Index Cond)", n.Index, n.Relation, n.NodeType))
		}
		if stateOnlyCond.MatchString(n.IndexCond) {
			out = append(out, fmt.Sprintf("reads every item in a state through %s (Index Cond: %s)", n.Index, n.IndexCond))
		}
	case "Nested Loop":
		for _, c := range n.Plans {
			if c.Parent != "Inner" {
				continue
			}
			switch {
			case probesIndex(c):
			case !readsTable(c):
				// A computed row (the database's clock, read once in a subquery or a WITH): no
				// table is read again.
			default:
				what := c.NodeType
				if c.Relation != "" {
					what += " on " + c.Relation
				}
				out = append(out, "has a Nested Loop that re-reads its inner "+what+" for every outer row")
			}
		}
	}
	if planGuarded[n.Relation] && strings.Contains(n.Filter, "= ANY (") {
		out = append(out, fmt.Sprintf("filters the rows of a %s on %s by an array (%s)", n.NodeType, n.Relation, n.Filter))
	}
	for _, c := range n.Plans {
		out = append(out, planProblems(c)...)
	}
	return out
}

// sortProblems names the sorts in the plan below n.
func sortProblems(n planNode) []string {
	var out []string
	if strings.Contains(n.NodeType, "Sort") {
		out = append(out, "has a "+n.NodeType+": it reads every row it sorts")
	}
	for _, c := range n.Plans {
		out = append(out, sortProblems(c)...)
	}
	return out
}

// readsTable reports whether the plan below n reads a table. A CTE Scan reads its WITH's
// result, planned apart; only the scans of the statement's own WITHs of one computed row are
// its inner sides here.
func readsTable(n planNode) bool {
	if n.Relation != "" {
		return true
	}
	for _, c := range n.Plans {
		if readsTable(c) {
			return true
		}
	}
	return false
}

// sqlLiteral renders a sample argument as an SQL literal for EXECUTE, which takes no bind
// parameters.
func sqlLiteral(t *testing.T, v any) string {
	quote := func(s string) string { return "'" + strings.ReplaceAll(s, "'", "''") + "'" }
	elem := func(s string) string { return `"` + strings.NewReplacer(`\`, `\\`, `"`, `\"`).Replace(s) + `"` }
	switch x := v.(type) {
	case nil:
		return "NULL"
	case int:
		return strconv.Itoa(x)
	case int32:
		return strconv.FormatInt(int64(x), 10)
	case int64:
		return strconv.FormatInt(x, 10)
	case string:
		return quote(x)
	case []byte:
		return fmt.Sprintf(`'\x%x'::bytea`, x)
	case []int64:
		s := make([]string, len(x))
		for i, e := range x {
			s[i] = strconv.FormatInt(e, 10)
		}
		return quote("{" + strings.Join(s, ",") + "}")
	case []int32:
		s := make([]string, len(x))
		for i, e := range x {
			s[i] = strconv.FormatInt(int64(e), 10)
		}
		return quote("{" + strings.Join(s, ",") + "}")
	case []string:
		s := make([]string, len(x))
		for i, e := range x {
			s[i] = elem(e)
		}
		return quote("{" + strings.Join(s, ",") + "}")
	}
	t.Fatalf("sqlLiteral: unsupported %T", v)
	return ""
}

var (
	placeholderRE = regexp.MustCompile(`\$(\d+)`)
	stateOnlyCond = regexp.MustCompile(`^\(state = '[a-z]+'::text\)$`)
)

// maxPlaceholder returns the highest $n in q.
func maxPlaceholder(q string) int {
	n := 0
	for _, m := range placeholderRE.FindAllStringSubmatch(q, -1) {
		v, _ := strconv.Atoi(m[1])
		n = max(n, v)
	}
	return n
}

// statementCases pairs the store's PostgreSQL statements with sample arguments. Argument lists
// are cut to the statement's number of placeholders, so older forms of a statement (fewer
// columns) take the same lists.
func statementCases(stmts map[string]string) []planCase {
	now := time.Date(2027, 1, 1, 0, 0, 0, 0, time.UTC).UnixMicro()
	lease := now + 30_000_000
	ids := []int64{1000001, 1000002, 1000003}
	samples := map[string][]any{
		// owner, lease until, claimed at, updated at, alone, now, limit
		"claim":          {"plancheck", lease, now, now, 0, now, 500, nil, 128},
		"claim_isolated": {"plancheck", lease, now, now, 1, now, 1},
		"claim_ids":      {now, 500, []string{"test.work", "test.other"}},
		"claim_ids_one":  {now, 500, "test.work"},
		// id, attempt, owner, state, next_at, undo, error, started_at, ended_at, outcome, parked_key, cause
		"complete": {ids, []int32{1, 1, 1}, []string{"plancheck", "plancheck", "plancheck"},
			[]string{"succeeded", "pending", "dead"}, []int64{0, now + 1e6, 0}, []int32{0, 0, 1},
			[]string{"", "boom", "gone"}, []int64{now, now, 0}, []int64{now, now, now},
			[]string{"succeeded", "failed", ""}, []string{"", "", ""}, []string{"", "", "undecodable"}},
		"complete_one": {ids[:1], []int32{1}, []string{"plancheck"}, []string{"dead"}, []int64{0}, []int32{1},
			[]string{"gone"}, []int64{0}, []int64{now}, []string{""}, []string{""}, []string{"undecodable"}},
		"extend":       {lease, "plancheck", ids},
		"sweep":        {now},
		"isolated_due": {now, now},
		"unpark":       {now, "breaker:a"},
		"repark":       {now, 3_000_000, "breaker:a"},
		"oldest_due":   {now, now},
		// name, payload, state, dedupe key, ordering key, next_at, last error, parked key, created, updated, metadata, token, guard key, deadline, unique for, deferred
		"enqueue":        {"test.work", []byte(`{}`), "pending", "plancheck-dedupe", nil, now, nil, nil, now, now, nil, "plancheck-token", nil, nil, nil, 0, "test.work", 0, 0, nil},
		"enqueue_notify": {"test.work", []byte(`{}`), "pending", "plancheck-dedupe", nil, now, nil, nil, now, now, nil, "plancheck-token", nil, nil, int64(3600e6), 1, "test.work", 9, int64(540e6), "n-00168"},
		// name, payload, ordering key, next_at, last error, parked key, created, updated, metadata, token, guard key, deadline, deferred, debounce key, debounce until, fairness key, priority, head start, reference
		"enqueue_debounce": {"test.work", []byte(`{}`), nil, now, nil, nil, now, now, nil, "plancheck-token", nil, nil, 0, "plancheck-debounce", now + 60e6, "test.work", 0, 0, nil},
		"dedupe":           {"plancheck-dedupe"},
		// released at, id, now
		"release": {now, int64(1000001), now},
		"token":   {"plancheck-token"},
		// before, limit, now
		"prune": {now, PruneBatch, now},
		// name, key, state, failures, open for, probe for, owner, claim (and the epoch)
		"breaker_insert": {"plancheck", "k1", "open", 5, int64(30e6), int64(0), "w1", ""},
		"breaker_update": {"plancheck", "k1", "half_open", 5, int64(0), int64(10e6), "w1", "c1", int64(3)},
		"breaker_read":   {"plancheck", "k1"},
		"breaker_load":   {"plancheck"},
		// name, after, limit
		"breaker_since": {"plancheck", int64(1000), 1000},
		"breaker_seq":   {"plancheck"},
		// key, id, owner, attempt
		"acquire": {"api", int64(1000001), "plancheck", 1},
		// now, key
		"wake_limited": {now, "api"},
		"limits":       {""},
	}
	names := make([]string, 0, len(stmts))
	for name := range stmts {
		names = append(names, name)
	}
	order := []string{"claim", "claim_ids", "claim_ids_one", "claim_isolated", "complete", "complete_one", "extend", "sweep", "isolated_due", "unpark", "repark", "oldest_due", "enqueue", "enqueue_notify", "enqueue_debounce", "dedupe", "release", "token", "prune",
		"breaker_insert", "breaker_update", "breaker_read", "breaker_load", "breaker_since", "breaker_seq", "acquire", "wake_limited", "limits"}
	sort.Slice(names, func(i, j int) bool { return slices.Index(order, names[i]) < slices.Index(order, names[j]) })
	var out []planCase
	for _, name := range names {
		q := stmts[name]
		args := samples[name]
		if n := maxPlaceholder(q); n < len(args) {
			args = args[:n]
		}
		out = append(out, planCase{name: name, query: q, args: args, scansOff: slices.Contains(scansOffStatements, name), replanned: slices.Contains(replannedStatements, name)})
	}
	return out
}

// scansOffStatements are the statements the store runs with sequential scans off (its
// indexPlans first in their batch or transaction).
var scansOffStatements = []string{"claim", "claim_ids", "claim_ids_one", "claim_isolated", "complete", "complete_one", "extend", "sweep", "isolated_due", "oldest_due", "acquire"}

// replannedStatements are the statements the store plans anew at every run (customPlans first
// in their batch or transaction).
var replannedStatements = []string{"unpark", "repark", "prune", "wake_limited", "limits", "dedupe", "release", "token"}

// planFixture fills a fresh store's tables for plan checks: 1,000,000 succeeded items with an
// attempt row each, 20,000 due pending items (one in ten with an ordering key, one in ten with
// a debounce key), 1,000 running items. stats decides what ANALYZE saw:
//   - "drained": it ran when only the finished items existed (the queue filled afterwards);
//   - "current": it ran after everything was inserted;
//   - "backlog": it ran while 300,000 further items were pending, which have finished since;
//   - "empty": it ran when the claim's table was empty, the finished items (100,000 of them)
//     in their own table, as after a drain and an idle spell.
//
// Autovacuum is off on the tables, so the statistics stay as described.
func planFixture(t testing.TB, db *sql.DB, stats string) {
	t.Helper()
	const t0 = fixtureT0
	run := func(q string, args ...any) { t.Helper(); mustExec(t, db, q, args...) }
	analyze := func() {
		run("ANALYZE switchboard_items")
		run("ANALYZE switchboard_attempts")
	}
	run("ALTER TABLE switchboard_items SET (autovacuum_enabled = false)")
	run("ALTER TABLE switchboard_attempts SET (autovacuum_enabled = false)")
	if stats == "empty" {
		// The claim's table is empty when ANALYZE runs, as a queue's is after a drain and an
		// idle spell; the finished items are where they finish, in the other table.
		run("ALTER TABLE switchboard_finished_items SET (autovacuum_enabled = false)")
		run(`INSERT INTO switchboard_finished_items (id, name, payload, state, attempts, next_at, claimed_at, created_at, updated_at, token)
			SELECT g, 'test.work', '\x7b7d', CASE WHEN g % 100 = 0 THEN 'dead' ELSE 'succeeded' END, 1, $1::bigint + g, $1::bigint + g + 1000, $1::bigint + g, $1::bigint + g + 2000, 'f' || g
			FROM generate_series(1, 100000) g`, t0)
		run(`INSERT INTO switchboard_attempts (item_id, attempt, instance, started_at, ended_at, outcome)
			SELECT id, 1, 'seed', claimed_at, updated_at, 'failed' FROM switchboard_finished_items WHERE state = 'dead'`)
		run("ALTER TABLE switchboard_items ALTER COLUMN id RESTART WITH 100001")
		run("ANALYZE switchboard_finished_items")
		analyze()
	} else {
		run(`INSERT INTO switchboard_items (name, payload, state, attempts, next_at, claimed_at, created_at, updated_at)
			SELECT 'test.work', '\x7b7d', 'succeeded', 1, $1::bigint + g, $1::bigint + g + 1000, $1::bigint + g, $1::bigint + g + 2000
			FROM generate_series(1, 1000000) g`, t0)
		run(`INSERT INTO switchboard_attempts (item_id, attempt, instance, started_at, ended_at, outcome)
			SELECT id, 1, 'seed', claimed_at, updated_at, 'succeeded' FROM switchboard_items`)
	}
	switch stats {
	case "drained":
		analyze()
	case "backlog":
		run(`INSERT INTO switchboard_items (name, payload, state, next_at, created_at, updated_at)
			SELECT 'test.work', '\x7b7d', 'pending', $1::bigint + g, $1::bigint + g, $1::bigint + g FROM generate_series(1, 300000) g`, t0+1_500_000)
		analyze()
		run(`UPDATE switchboard_items SET state = 'succeeded', attempts = 1 WHERE state = 'pending'`)
	case "empty":
		return // fillLiveItems, once the statements are planned
	}
	fillLiveItems(t, db)
	if stats == "current" {
		analyze()
	}
	run("VACUUM switchboard_items")
}

// fixtureT0 is the time (in microseconds) planFixture's items are made from.
const fixtureT0 = int64(1700000000000000)

// fillLiveItems adds planFixture's live items, without analyzing them: 20,000 due pending
// items and 1,000 running ones, with a failed attempt each.
func fillLiveItems(t testing.TB, db *sql.DB) {
	t.Helper()
	const t0 = fixtureT0
	run := func(q string, args ...any) { t.Helper(); mustExec(t, db, q, args...) }
	run(`INSERT INTO switchboard_items (name, payload, state, ordering_key, debounce_key, debounce_until, next_at, created_at, updated_at)
		SELECT 'test.work', '\x7b7d', 'pending', CASE WHEN g % 10 = 0 THEN 'k' || (g % 200) END,
		       CASE WHEN g % 10 = 5 THEN 'd' || g END, CASE WHEN g % 10 = 5 THEN $1::bigint + g END,
		       $1::bigint + g, $1::bigint + g, $1::bigint + g
		FROM generate_series(1, 21000) g`, t0+2_000_000)
	run(`UPDATE switchboard_items SET state = 'running', attempts = 1, claimed_at = $1, lease_owner = 'w1', lease_until = $2
		WHERE id IN (SELECT id FROM switchboard_items WHERE state = 'pending' ORDER BY next_at, id LIMIT 1000)`, t0+3_000_000, t0+100_000_000_000)
	run(`INSERT INTO switchboard_attempts (item_id, attempt, instance, started_at, ended_at, outcome)
		SELECT id, 1, 'seed', next_at, next_at, 'failed' FROM switchboard_items WHERE state IN ('pending', 'running')`)
}

// TestIndexPlans checks the generic plans of the store's PostgreSQL statements with 1,000,000
// finished items present, under three states of the planner statistics, and the plans kept
// from an idle spell on an empty claim's table once a burst has filled it ("empty").
func TestIndexPlans(t *testing.T) {
	dsn := pgDSN(t)
	if dsn == "" {
		t.Skipf("%s not set", pgDSNEnv)
	}
	if testing.Short() {
		t.Skip("seeds 1,000,000 rows per case")
	}
	all := statementCases(postgresStatements())
	for _, stats := range []string{"current", "drained", "backlog", "empty"} {
		t.Run("stats="+stats, func(t *testing.T) {
			store := postgresBackend(t, dsn).open(t)
			planFixture(t, store.DB(), stats)
			cases := all
			var fill func()
			if stats == "empty" {
				// The completion planned on a table of no pages at all joins the batch to the
				// whole primary key. Bounding its reads (the batch's ids, then their span) made
				// the drain slower, on a steady queue and after an idle spell alike (docs/
				// architecture.md), and a queue's idle table, which keeps its last items' dead
				// rows, gets the plan that probes the key per item: it is left out here.
				// A slot's acquisition, per item, keeps its plan too (a plan per run costs several
				// times its run): planned on no pages, it counts a key's slots by reading the
				// running items, through the lease index, not the backlog.
				cases = slices.DeleteFunc(slices.Clone(all), func(c planCase) bool {
					return c.name == "complete" || c.name == "complete_one" || c.name == "acquire"
				})
				fill = func() { fillLiveItems(t, store.DB()) }
				// The finished items are in their own table here (in the other states' older
				// layout, in the claim's): it is guarded too.
				planGuarded["switchboard_finished_items"] = true
				defer delete(planGuarded, "switchboard_finished_items")
			}
			assertIndexPlans(t, store.DB(), cases, fill)
		})
	}
}

// TestBreakerPlans checks the generic plans of the shared breakers' statements over 100,000
// breakers of 10 registries, most of them closed, analyzed or not.
func TestBreakerPlans(t *testing.T) {
	dsn := pgDSN(t)
	if dsn == "" {
		t.Skipf("%s not set", pgDSNEnv)
	}
	var cases []planCase
	for _, c := range statementCases(postgresStatements()) {
		if strings.HasPrefix(c.name, "breaker_") {
			cases = append(cases, c)
		}
	}
	for _, analyze := range []bool{true, false} {
		t.Run(fmt.Sprintf("analyzed=%v", analyze), func(t *testing.T) {
			db := postgresBackend(t, dsn).open(t).DB()
			if _, err := db.Exec(`ALTER TABLE switchboard_breakers SET (autovacuum_enabled = false)`); err != nil {
				t.Fatal(err)
			}
			if _, err := db.Exec(`INSERT INTO switchboard_breakers (name, key, state, epoch, failures, by_instance, updated_at, seq)
				SELECT CASE WHEN g % 10 = 0 THEN 'plancheck' ELSE 'reg' || (g % 10) END, 'k' || g,
				       CASE WHEN g % 100 = 0 THEN 'open' ELSE 'closed' END, 2, 0, 'seed', g, g
				FROM generate_series(1, 100000) g`); err != nil {
				t.Fatal(err)
			}
			if analyze {
				if _, err := db.Exec("ANALYZE switchboard_breakers"); err != nil {
					t.Fatal(err)
				}
			}
			assertIndexPlans(t, db, cases, nil)
		})
	}
}
