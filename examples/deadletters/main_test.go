package main

import (
	"context"
	"maps"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"go.uber.org/goleak"

	"github.com/switchboard-go/switchboard/durable"
	"github.com/switchboard-go/switchboard/durable/record"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// The four GBP invoices use up their attempts and become dead letters; the USD one, whose one
// failure was its send, succeeds on the scheduler's first attempt. A replay before the fix stays failed and is counted; after it, the
// single and the bulk replay succeed, the discarded letter is a conflict in the bulk call, and
// every count adds up.
func TestRun(t *testing.T) {
	var out strings.Builder
	sum, err := run(context.Background(), &out, filepath.Join(t.TempDir(), "queue.db"))
	if err != nil {
		t.Fatalf("%v\n%s", err, out.String())
	}
	text := out.String()
	t.Log("\n" + text)

	if sum.sent != 10 || sum.bookedAtOnce != 5 || sum.deferred != 5 {
		t.Errorf("sent %d, booked at once %d, deferred %d; want 10, 5, 5", sum.sent, sum.bookedAtOnce, sum.deferred)
	}
	if sum.itemCounts[record.StateSucceeded] != 1 || sum.itemCounts[record.StateDead] != 4 || sum.itemCounts[record.StatePending] != 0 {
		t.Errorf("items by state %v, want 1 succeeded (USD) and 4 dead (GBP)", sum.itemCounts)
	}
	// Each GBP item failed maxAttempts times, the last one dead; the USD item succeeded.
	if want := map[record.Settled]int{record.SettledSucceeded: 1, record.SettledRetried: 4 * (maxAttempts - 1), record.SettledDead: 4}; !maps.Equal(sum.outcomes, want) {
		t.Errorf("the scheduler's outcomes %v, want %v", sum.outcomes, want)
	}
	if sum.letters != 4 {
		t.Errorf("%d dead letters, want 4", sum.letters)
	}
	for _, n := range []string{"INV-2", "INV-5", "INV-7", "INV-9"} {
		if sum.attempts[n] != maxAttempts {
			t.Errorf("%s: %d attempts, want %d", n, sum.attempts[n], maxAttempts)
		}
	}
	if !strings.Contains(sum.lastError, "no rate for GBP") {
		t.Errorf("a dead letter's error is %q", sum.lastError)
	}

	if sum.early != durable.StillFailed || sum.earlyRetryCount != 1 {
		t.Errorf("the replay before the fix: %s with retry count %d, want still_failed and 1", sum.early, sum.earlyRetryCount)
	}
	if sum.single != durable.Replayed || sum.discarded != durable.Discarded {
		t.Errorf("single replay %s, discard %s", sum.single, sum.discarded)
	}
	var got []durable.Resolution
	for _, r := range sum.bulk {
		got = append(got, r.Resolution)
	}
	if want := []durable.Resolution{durable.Replayed, durable.Conflict, durable.Replayed}; !slices.Equal(got, want) {
		t.Errorf("bulk replay %v, want %v", got, want)
	}

	// The twice-replayed letter's timeline: its attempts, the failed replay, the replay.
	var kinds []string
	for _, e := range sum.timeline {
		kinds = append(kinds, string(e.Kind)+":"+string(e.Outcome))
	}
	if len(kinds) != maxAttempts+2 || kinds[maxAttempts] != "replay:failed" || kinds[maxAttempts+1] != "replay:succeeded" {
		t.Errorf("timeline %v", kinds)
	}

	ls := sum.letterStatus
	if ls[record.DeadLetterReplayed] != 3 || ls[record.DeadLetterDiscarded] != 1 || ls[record.DeadLetterFailed] != 0 {
		t.Errorf("letters by status %v, want 3 replayed, 1 discarded, 0 failed", ls)
	}
	// Every invoice is booked once, except the discarded one.
	if sum.ledgerBooked != sum.sent-ls[record.DeadLetterDiscarded] {
		t.Errorf("the ledger booked %d invoices, want %d", sum.ledgerBooked, sum.sent-ls[record.DeadLetterDiscarded])
	}
	if sum.ledgerCalls != sum.sent+sum.schedulerAttempts+sum.replays || sum.replays != 4 {
		t.Errorf("the ledger was called %d times, want %d sends + %d attempts + %d replays (4)", sum.ledgerCalls, sum.sent, sum.schedulerAttempts, sum.replays)
	}
	for _, want := range []string{
		"INV-2  GBP deferred as item 1: rates service: no rate for GBP",
		"INV-3  USD deferred as item 2",
		"3 attempts: #1 failed, #2 failed, #3 failed",
		"the letter stays failed, retry count 1",
		"conflict (durable: dead letter",
		"sent 10 = 5 booked at once + 5 deferred",
		"deferred 5 = 1 booked by a retry of the scheduler + 4 dead letters",
		"dead letters 4 = 3 replayed + 1 discarded + 0 still failed",
		"the ledger booked 9 invoices = 10 sent - 1 discarded",
	} {
		if !strings.Contains(text, want) {
			t.Errorf("the output lacks %q", want)
		}
	}
}
