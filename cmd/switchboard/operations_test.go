package main

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/switchboard-go/switchboard/behaviors/breaker"
	"github.com/switchboard-go/switchboard/durable"
	"github.com/switchboard-go/switchboard/durable/record"
)

func TestOperationsSQLite(t *testing.T)   { testOperations(t, false) }
func TestOperationsPostgres(t *testing.T) { testOperations(t, true) }

// Each command, run as an operator runs it, against a real admin server and database: what it
// prints (the API's JSON, parsed) and what it changed in the queue.
func testOperations(t *testing.T, postgres bool) {
	s := newServer(t, postgres)
	t.Run("stats", func(t *testing.T) { testStats(t, s) })
	t.Run("letters", func(t *testing.T) { testLetters(t, s) }) // fixes the handler
	t.Run("items", func(t *testing.T) { testItems(t, s) })
	t.Run("pauses", func(t *testing.T) { testPauses(t, s) })
	t.Run("breakers", func(t *testing.T) { testBreakers(t, s) })
	t.Run("schedules", func(t *testing.T) { testSchedules(t, s) })
	t.Run("watch", func(t *testing.T) { testWatch(t, s) })
}

func testStats(t *testing.T, s *server) {
	v := s.jsonOf(t, "stats")
	if got := v["dead_letters"].(map[string]any)["failed"]; got != 3.0 {
		t.Errorf("stats --json: failed letters %v, want 3: %v", got, v)
	}
	if got := v["items"].(map[string]any)["pending"]; got != 2.0 {
		t.Errorf("stats --json: pending items %v, want 2: %v", got, v)
	}
	r := s.cli(t, "stats")
	if r.code != 0 || !strings.HasPrefix(r.stdout, "items         pending 2  running 0") || !strings.Contains(r.stdout, "\ndead letters  failed 3 ") {
		t.Errorf("stats: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
}

func testItems(t *testing.T, s *server) {
	ctx := context.Background()
	later, never := s.items[0].ID, s.items[1].ID
	id := fmt.Sprint(later)
	v := s.jsonOf(t, "items", "ls", "--state", "pending", "--name", "crm.import-contact")
	items := v["items"].([]any)
	if len(items) != 2 || items[0].(map[string]any)["id"] != float64(later) {
		t.Fatalf("items ls --json: %v", v)
	}
	r := s.cli(t, "items", "ls", "--limit", "1")
	if r.code != 0 || !strings.Contains(r.stdout, "crm.import-contact") || !strings.Contains(r.stdout, "more: --after ") {
		t.Fatalf("items ls --limit 1: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}

	// find, by the application's id: the item.
	v = s.jsonOf(t, "items", "find", "contact/later@example")
	found := v["items"].([]any)
	if len(found) != 1 || found[0].(map[string]any)["id"] != float64(later) || found[0].(map[string]any)["reference"] != "contact/later@example" {
		t.Fatalf("items find --json: %v", v)
	}
	r = s.cli(t, "items", "find", "contact/later@example")
	if r.code != 0 || !strings.Contains(r.stdout, "REFERENCE") || !strings.Contains(r.stdout, "contact/later@example") {
		t.Fatalf("items find: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	r = s.cli(t, "items", "find", "nothing-here")
	if r.code != 0 || !strings.Contains(r.stdout, "nothing found") {
		t.Fatalf("items find nothing-here: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	// show, by id: the item with its payload.
	v = s.jsonOf(t, "items", "show", id)
	it := v["item"].(map[string]any)
	if it["name"] != "crm.import-contact" || it["state"] != "pending" || it["payload"].(map[string]any)["email"] != "later@example" {
		t.Fatalf("items show --json: %v", v)
	}
	r = s.cli(t, "items", "show", id)
	if r.code != 0 || !strings.Contains(r.stdout, "payload:") || !strings.Contains(r.stdout, `"email":"later@example"`) {
		t.Fatalf("items show: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	// A bad filter is the API's 400, whose message names it.
	r = s.cli(t, "items", "ls", "--state", "lost")
	if r.code != exitFailed || !strings.Contains(r.stderr, "GET /api/items: 400 Bad Request: ") || !strings.Contains(r.stderr, `"lost"`) {
		t.Fatalf("items ls --state lost: exit %d, stderr %q", r.code, r.stderr)
	}
	r = s.cli(t, "items", "show", "987654")
	if r.code != exitFailed || !strings.Contains(r.stderr, "404 Not Found: unknown item 987654") {
		t.Fatalf("items show of an unknown id: exit %d, stderr %q", r.code, r.stderr)
	}

	// cancel; a second cancel is a conflict the API explains: exit 1 with its message.
	v = s.jsonOf(t, "items", "cancel", fmt.Sprint(never), "--reason", "sent by hand")
	if v["result"] != "cancelled" || v["state"] != "cancelled" {
		t.Fatalf("items cancel --json: %v", v)
	}
	r = s.cli(t, "items", "cancel", fmt.Sprint(never), "--reason", "again")
	if r.code != exitFailed || !strings.Contains(r.stderr, "409 Conflict: the item has finished (cancelled): nothing changed") {
		t.Fatalf("a second cancel: exit %d, stderr %q", r.code, r.stderr)
	}

	// run-now makes the other due at once, and the scheduler runs it (the handler is fixed).
	v = s.jsonOf(t, "items", "run-now", id)
	if v["result"] != "due" {
		t.Fatalf("items run-now --json: %v", v)
	}
	for deadline := time.Now().Add(20 * time.Second); ; {
		got, err := s.q.Item(ctx, later)
		if err != nil {
			t.Fatal(err)
		}
		if got.State == record.StateSucceeded {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the item run now is still %s", got.State)
		}
		time.Sleep(10 * time.Millisecond) // polling the item's state, with a deadline
	}
}

func testLetters(t *testing.T, s *server) {
	ctx := context.Background()
	v := s.jsonOf(t, "letters", "ls", "--source", "crm-sync")
	if v["total"] != 3.0 || len(v["dead_letters"].([]any)) != 3 {
		t.Fatalf("letters ls --json: %v", v)
	}
	first := fmt.Sprint(s.letters[0])
	v = s.jsonOf(t, "letters", "show", first)
	if d := v["dead_letter"].(map[string]any); d["key"] != "c1" || d["payload"].(map[string]any)["email"] != "bob@example" {
		t.Fatalf("letters show --json: %v", v)
	}
	r := s.cli(t, "letters", "inspect", first)
	if r.code != 0 || !strings.Contains(r.stdout, "invalid email bob@example") || !strings.Contains(r.stdout, "EVENT") {
		t.Fatalf("letters inspect: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}

	// A dry run counts and changes nothing.
	v = s.jsonOf(t, "letters", "replay", "--source", "crm-sync", "--error", "INVALID EMAIL", "--dry-run")
	if v["dry_run"] != true || v["matched"] != 3.0 || len(v["sample"].([]any)) != 3 {
		t.Fatalf("letters replay --dry-run --json: %v", v)
	}
	r = s.cli(t, "letters", "discard", "--source", "crm-sync", "--dry-run")
	if r.code != 0 || !strings.Contains(r.stdout, "dry run: 3 failed letters match; nothing was changed") {
		t.Fatalf("letters discard --dry-run: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	if st, err := s.q.Stats(ctx); err != nil || st.DeadLetters[record.DeadLetterFailed] != 3 {
		t.Fatalf("after the dry runs: %+v, %v", st, err)
	}
	if acts, err := s.q.BulkActions(ctx, 0, 0); err != nil || len(acts) != 0 {
		t.Fatalf("the dry runs stored actions: %+v, %v", acts, err)
	}

	// The replay by filter, followed to its end: the two letters with an email are replayed,
	// the one without fails again.
	s.fixed.Store(true)
	r = s.cli(t, "letters", "replay", "--source", "crm-sync", "--rate", "1000", "--poll", "20ms")
	if r.code != 0 || !strings.Contains(r.stdout, "replay of 3 letters") || !strings.Contains(r.stdout, "replayed 2, still failed 1") {
		t.Fatalf("letters replay: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	st, err := s.q.Stats(ctx)
	if err != nil || st.DeadLetters[record.DeadLetterReplayed] != 2 || st.DeadLetters[record.DeadLetterFailed] != 1 {
		t.Fatalf("after the replay: %+v, %v", st.DeadLetters, err)
	}
	v = s.jsonOf(t, "letters", "actions")
	a := v["actions"].([]any)[0].(map[string]any)
	totals := a["totals"].(map[string]any)
	if a["state"] != "done" || a["kind"] != "replay" || a["matched"] != 3.0 || a["settled"] != 3.0 ||
		totals["replayed"] != 2.0 || totals["still_failed"] != 1.0 || a["actor"] != "admin" {
		t.Fatalf("letters actions --json: %v", v)
	}
	if v = s.jsonOf(t, "letters", "actions", fmt.Sprint(a["id"])); v["action"].(map[string]any)["id"] != a["id"] {
		t.Fatalf("letters actions ID --json: %v", v)
	}

	// By id: the last letter, discarded.
	last := fmt.Sprint(s.letters[2])
	v = s.jsonOf(t, "letters", "discard", last, "--reason", "no email")
	if res := v["results"].([]any)[0].(map[string]any); res["resolution"] != "discarded" {
		t.Fatalf("letters discard ID --json: %v", v)
	}
	// Replaying it now is a conflict, reported per letter with exit status 1.
	r = s.cli(t, "letters", "replay", last)
	if r.code != exitFailed || !strings.Contains(r.stdout, "conflict") || !strings.Contains(r.stderr, "1 of 1 letters were not replayed") {
		t.Fatalf("letters replay of a discarded letter: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
}

func testPauses(t *testing.T, s *server) {
	ctx := context.Background()
	v := s.jsonOf(t, "pauses", "add", "--name", "crm.import-contact", "--reason", "provider migration", "--for", "1h")
	p := v["pause"].(map[string]any)
	if p["kind"] != "name" || p["target"] != "crm.import-contact" || p["actor"] != "admin" || p["until"] == nil {
		t.Fatalf("pauses add --json: %v", v)
	}
	ps, err := s.q.Pauses(ctx)
	if err != nil || len(ps) != 1 || ps[0].Target != "crm.import-contact" || ps[0].Reason != "provider migration" {
		t.Fatalf("the queue's pauses: %+v, %v", ps, err)
	}
	r := s.cli(t, "pauses", "ls")
	if r.code != 0 || !strings.Contains(r.stdout, "crm.import-contact") || !strings.Contains(r.stdout, "provider migration") {
		t.Fatalf("pauses ls: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	// The API's refusal is printed: a time in the past.
	r = s.cli(t, "pauses", "add", "--key", "payments", "--reason", "x", "--until", "2001-01-01T00:00:00Z")
	if r.code != exitFailed || !strings.Contains(r.stderr, `400 Bad Request: field "until" "2001-01-01T00:00:00Z" is not in the future`) {
		t.Fatalf("pauses add with a past --until: exit %d, stderr %q", r.code, r.stderr)
	}

	v = s.jsonOf(t, "pauses", "resume", "--name", "crm.import-contact")
	if v["resumed"] != true {
		t.Fatalf("pauses resume --json: %v", v)
	}
	r = s.cli(t, "pauses", "resume", "--name", "crm.import-contact")
	if r.code != 0 || !strings.Contains(r.stdout, "no pause of name crm.import-contact was in force") {
		t.Fatalf("a second resume: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	entries, err := s.q.Audit(ctx, durable.AuditFilter{TargetKind: record.AuditTargetName})
	if err != nil || len(entries) < 2 || entries[0].Actor != "admin" {
		t.Fatalf("the audit log of the name: %+v, %v", entries, err)
	}
}

func testBreakers(t *testing.T, s *server) {
	key := "https://billing.example/v1" // a key with a / and a ?-free URL: escaped as one segment
	v := s.jsonOf(t, "breakers", "trip", key)
	if v["key"] != key || v["state"] != "open" {
		t.Fatalf("breakers trip --json: %v", v)
	}
	if b, err := s.reg.Get(key); err != nil || b.State != breaker.StateOpen {
		t.Fatalf("the breaker after trip: %v, %v", b, err)
	}
	v = s.jsonOf(t, "breakers", "ls")
	states := map[string]any{}
	for _, b := range v["breakers"].([]any) {
		states[b.(map[string]any)["key"].(string)] = b.(map[string]any)["state"]
	}
	if states[key] != "open" || states["payments"] != "closed" {
		t.Fatalf("breakers ls --json: %v", v)
	}
	v = s.jsonOf(t, "breakers", "reset", key)
	if v["state"] != "closed" || v["failures"] != 0.0 {
		t.Fatalf("breakers reset --json: %v", v)
	}
	if b, _ := s.reg.Get(key); b.State != breaker.StateClosed {
		t.Fatalf("the breaker after reset: %v", b.State)
	}
	r := s.cli(t, "breakers", "trip", "nowhere")
	if r.code != exitFailed || !strings.Contains(r.stderr, "404 Not Found") {
		t.Fatalf("breakers trip of an unknown key: exit %d, stderr %q", r.code, r.stderr)
	}
}

func testSchedules(t *testing.T, s *server) {
	v := s.jsonOf(t, "schedules", "pause", "nightly", "--for", "2h")
	if sc := v["schedule"].(map[string]any); sc["paused"] != true || sc["paused_by"] != "admin" || sc["paused_until"] == nil {
		t.Fatalf("schedules pause --json: %v", v)
	}
	r := s.cli(t, "schedules", "ls")
	if r.code != 0 || !strings.Contains(r.stdout, "nightly") || !strings.Contains(r.stdout, "paused until") {
		t.Fatalf("schedules ls: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	v = s.jsonOf(t, "schedules", "resume", "nightly")
	if sc := v["schedule"].(map[string]any); sc["paused"] != false {
		t.Fatalf("schedules resume --json: %v", v)
	}
	r = s.cli(t, "schedules", "run-now", "nowhere")
	if r.code != exitFailed || !strings.Contains(r.stderr, `404 Not Found: unknown schedule "nowhere"`) {
		t.Fatalf("schedules run-now of an unknown schedule: exit %d, stderr %q", r.code, r.stderr)
	}
}

func testWatch(t *testing.T, s *server) {
	s.jsonOf(t, "breakers", "trip", "payments")
	r := s.cli(t, "watch", "--once")
	if r.code != 0 {
		t.Fatalf("watch --once: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	for _, want := range []string{"switchboard watch  " + s.url, "QUEUE", "BREAKERS", "payments  open", "PAUSES", "none"} {
		if !strings.Contains(r.stdout, want) {
			t.Errorf("watch --once lacks %q:\n%s", want, r.stdout)
		}
	}
	if strings.Contains(r.stdout, clearScreen) || strings.Contains(r.stdout, "billing.example") {
		t.Errorf("watch --once cleared the screen or listed a closed breaker:\n%q", r.stdout)
	}
}
