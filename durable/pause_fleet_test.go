package durable_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/switchboard-go/switchboard/durable"
	"github.com/switchboard-go/switchboard/durable/record"
)

// Two worker processes share a database; the operator pauses and resumes through a third
// queue, one that runs no scheduler. A paused name's items are claimed by neither process
// while they drain the items of another name enqueued after them; a paused key's items are
// parked by both, uncharged; each resume lets the other processes run the items.
func TestFleetPauseHoldsBackEveryProcess(t *testing.T) {
	eachBackend(t, func(t *testing.T, b backend) {
		ctx := context.Background()
		op := b.queue(t, durable.Config{Policy: fastPolicy})
		logPath := filepath.Join(t.TempDir(), "done.log")
		for range 2 {
			c := startChild(t, b, "run", childLeaseEnv+"=30s", childLogEnv+"="+logPath)
			c.line(t, "READY")
			t.Cleanup(func() { c.stop(t) })
		}
		logged := func() map[record.ItemID]bool {
			data, _ := os.ReadFile(logPath)
			out := map[record.ItemID]bool{}
			for _, f := range strings.Fields(string(data)) {
				n, _ := strconv.ParseInt(f, 10, 64)
				out[record.ItemID(n)] = true
			}
			return out
		}
		ran := func(ids []record.ItemID) bool {
			l := logged()
			for _, id := range ids {
				if !l[id] {
					return false
				}
			}
			return true
		}

		// A paused name: its items, enqueued first (so the claims, oldest first, meet them first),
		// stay pending and unattempted while the other name's are drained past them.
		must[record.Pause](t)(op.Pause(ctx, durable.NameTarget("test.work"), "ops", durable.PauseReason("fleet test")))
		var held, others []record.ItemID
		for i := range 10 {
			held = append(held, must[durable.Enqueued](t)(op.Enqueue(ctx, &Work{N: i})).ID)
		}
		for i := range 10 {
			others = append(others, must[durable.Enqueued](t)(op.Enqueue(ctx, &Keyed{Key: fmt.Sprint("k", i), Seq: i})).ID)
		}
		eventually(t, 30*time.Second, "the other name's items to run", func() bool { return ran(others) })
		for _, id := range held {
			if it := item(t, op, id); it.State != record.StatePending || it.Attempts != 0 || logged()[id] {
				t.Fatalf("item %d of the paused name: %+v", id, it)
			}
		}
		must[bool](t)(op.Resume(ctx, durable.NameTarget("test.work"), "ops"))
		eventually(t, 30*time.Second, "the resumed name's items to run on the worker processes", func() bool { return ran(held) })

		// A paused key: its items come due after the workers' next look at the pauses (at most a
		// second), and are parked on the key by whichever claims them, with no attempt.
		must[record.Pause](t)(op.Pause(ctx, durable.KeyTarget("host-a"), "ops"))
		due := time.Now().Add(2 * time.Second)
		var keyHeld, keyFree []record.ItemID
		for i := range 5 {
			keyHeld = append(keyHeld, must[durable.Enqueued](t)(op.Enqueue(ctx, &Work{N: 100 + i}, durable.WithBreakerKey("host-a"), durable.WithRunAt(due))).ID)
			keyFree = append(keyFree, must[durable.Enqueued](t)(op.Enqueue(ctx, &Work{N: 200 + i}, durable.WithBreakerKey("host-b"), durable.WithRunAt(due))).ID)
		}
		eventually(t, 30*time.Second, "the free key's items to run", func() bool { return ran(keyFree) })
		eventually(t, 30*time.Second, "the paused key's items to be parked on it", func() bool {
			for _, id := range keyHeld {
				if it := item(t, op, id); it.ParkedKey != "host-a" || it.State != record.StatePending {
					return false
				}
			}
			return true
		})
		for _, id := range keyHeld {
			if it := item(t, op, id); it.Attempts != 0 || len(attempts(t, op, id)) != 0 || logged()[id] {
				t.Fatalf("item %d of the paused key: %+v", id, it)
			}
		}
		must[bool](t)(op.Resume(ctx, durable.KeyTarget("host-a"), "ops"))
		eventually(t, 30*time.Second, "the resumed key's items to run on the worker processes", func() bool { return ran(keyHeld) })
		for _, id := range keyHeld {
			// The handler logs before its outcome is written: wait for the outcome.
			waitState(t, op, id, record.StateSucceeded)
			if as := attempts(t, op, id); outcomes(as) != "1:succeeded" {
				t.Fatalf("item %d after the resume: %s", id, outcomes(as))
			}
		}
	})
}
