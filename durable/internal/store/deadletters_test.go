package store

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
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
