package store

import (
	"context"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"
)

// The dead-letter tables are append-only: no statement of the store, in its Go files or its
// migrations, deletes a dead letter or an event, or rewrites an event. A grep-level check, case
// and whitespace insensitive, of the text the store can send.
func TestDeadLetterTablesAppendOnly(t *testing.T) {
	forbidden := []*regexp.Regexp{
		regexp.MustCompile(`(?is)\bdelete\s+from\s+"?switchboard_dead_letters"?\b`),
		regexp.MustCompile(`(?is)\bdelete\s+from\s+"?switchboard_dead_letter_events"?\b`),
		regexp.MustCompile(`(?is)\bupdate\s+"?switchboard_dead_letter_events"?\b`),
	}
	var files []string
	for _, pattern := range []string{"*.go", "migrations/*/*.sql"} {
		m, err := filepath.Glob(pattern)
		if err != nil {
			t.Fatal(err)
		}
		files = append(files, m...)
	}
	read := 0
	for _, f := range files {
		if strings.HasSuffix(f, "_test.go") {
			continue // tests may set up or tear down what they like; the store may not
		}
		body, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		read++
		for _, re := range forbidden {
			if loc := re.FindIndex(body); loc != nil {
				t.Errorf("%s: %q: the dead-letter tables are append-only", f, body[loc[0]:loc[1]])
			}
		}
	}
	if read < 8 {
		t.Fatalf("read only %d files: %v", read, files)
	}
	// The check itself finds what it looks for.
	for _, s := range []string{"DELETE  FROM\n\tswitchboard_dead_letters WHERE", "delete from switchboard_dead_letter_events", "Update switchboard_dead_letter_events SET"} {
		found := false
		for _, re := range forbidden {
			found = found || re.MatchString(s)
		}
		if !found {
			t.Errorf("the check misses %q", s)
		}
	}
	if forbidden[0].MatchString("DELETE FROM switchboard_dead_letters_x") {
		t.Error("the check matches another table")
	}
}

// TestDeadLettersCountUpToTheirCountLimit: the listing's total stops at its CountLimit (the
// limit plus one says that more match) and, on PostgreSQL, reads no further than that beside
// many letters: letters are never deleted, and a dashboard lists them every few seconds.
func TestDeadLettersCountUpToTheirCountLimit(t *testing.T) {
	eachBackend(t, func(t *testing.T, b backend) {
		ctx := context.Background()
		s := b.open(t)
		db := s.DB()
		const replayed = 20_000
		if b.engine == Postgres {
			mustExec(t, db, `INSERT INTO switchboard_dead_letters (source, name, item_key, payload, error, status, retry_count, created_at, updated_at)
				SELECT 'sync', 'w', '', '\x7b7d', 'boom ' || g, 'replayed', 1, g, g FROM generate_series(1, $1) g`, replayed)
			mustExec(t, db, `VACUUM ANALYZE switchboard_dead_letters`)
		} else {
			mustExec(t, db, `WITH RECURSIVE g(n) AS (SELECT 1 UNION ALL SELECT n + 1 FROM g WHERE n < ?)
				INSERT INTO switchboard_dead_letters (source, name, item_key, payload, error, status, retry_count, created_at, updated_at)
				SELECT 'sync', 'w', '', x'7b7d', 'boom ' || n, 'replayed', 1, n, n FROM g`, replayed)
			mustExec(t, db, `ANALYZE`)
		}
		now := time.Date(2027, 1, 1, 0, 0, 0, 0, time.UTC)
		for range 3 {
			must[DeadLetterID](t)(s.InsertDeadLetter(ctx, NewDeadLetter{Source: "sync", Name: "w", Payload: []byte(`{}`), Error: "boom", Now: now}))
		}
		const limit = 100
		for _, c := range []struct {
			name string
			f    DeadLetterFilter
			want int
		}{
			{"replayed, bounded", DeadLetterFilter{Status: DeadLetterReplayed, Limit: 5, CountLimit: limit}, limit + 1},
			{"replayed, in full", DeadLetterFilter{Status: DeadLetterReplayed, Limit: 5}, replayed},
			{"replayed with an error filter, bounded", DeadLetterFilter{Status: DeadLetterReplayed, ErrorContains: "BOOM 1", Limit: 5, CountLimit: limit}, limit + 1},
			{"replayed with a narrow error filter", DeadLetterFilter{Status: DeadLetterReplayed, ErrorContains: "boom 1999", Limit: 5, CountLimit: limit}, 11},
			{"failed, under the limit", DeadLetterFilter{Status: DeadLetterFailed, Limit: 5, CountLimit: limit}, 3},
			{"failed, at the limit", DeadLetterFilter{Status: DeadLetterFailed, Limit: 5, CountLimit: 3}, 3},
		} {
			page, total, err := s.DeadLetters(ctx, c.f)
			if err != nil || total != c.want || len(page) != min(c.f.Limit, c.want) {
				t.Errorf("%s: %d letters, total %d, %v; want total %d", c.name, len(page), total, err, c.want)
			}
		}
		if b.engine != Postgres {
			return
		}
		// The bounded count reads the listing index's root and the leaves that hold its
		// letters: a few pages, not the twenty thousand letters' (about 70 leaves).
		count, args := deadLetterCount(DeadLetterFilter{Status: DeadLetterReplayed, CountLimit: limit})
		if buffers, rows := planBuffers(t, db, Postgres.rebind(count), args...); buffers > 10 || rows != 1 {
			t.Errorf("the listing's bounded count read %d buffers beside %d letters, want a few", buffers, replayed)
		}
	})
}
